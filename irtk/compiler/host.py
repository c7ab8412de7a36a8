"""Host lowering: one TIR function (after dispatch formation and buffer planning) -> VM code.

A tensor lives in registers as a !hal.buffer plus one i64 register per dynamic dim; a scalar in
the bank of its type (host_arith). Device work (fills, copies, dispatches) is collected into a
segment; a barrier goes in only before a command that touches a storage an earlier command of
the segment wrote (or writes one it read). The segment is submitted when the block ends, chained
on the previous submission's fence, and the host waits only when it needs data: tensor.extract,
checks, calls and returns. A segment
of static dispatches only is recorded once by __init and re-submitted with a binding table
(the buffers of this call); any other is recorded into a new command buffer per call. Structured control flow becomes VM blocks; the values a region
carries (iter_args, results) get fixed registers that the branches move into.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from irtk.compiler import host_arith
from irtk.compiler import kernel as K
from irtk.compiler import tir
from irtk.compiler.constants import fill_pattern
from irtk.compiler.host_control import ControlFlowLowering
from irtk.compiler.host_values import TensorVal
from irtk.compiler.stream import StreamPlan
from irtk.errors import CompileError
from irtk.hal import numerics
from irtk.hal.element_type import ElementType
from irtk.types import SCALAR_TYPES, SMALL_FLOAT_TYPES, storage_bytes
from irtk.vm.writer import FunctionBuilder, Label, Reg

if TYPE_CHECKING:
    from irtk.compiler.vm_codegen import ModuleGen

DENSE_ROW_MAJOR = 1
# Outputs filled with a constant of at most this many bytes start as a copy of rodata when
# their buffer is allocated, instead of a fill command on the device: their dispatch can then
# be a recorded segment re-submitted with a binding table (see `allocate_filled`).
HOST_FILL_BYTES = 16 << 10
INVALID_ARGUMENT = 3
FAILED_PRECONDITION = 9
CHECK_SIGNATURES = {"check.expect_true": "0i_v", "check.expect_false": "0i_v",
                    "check.expect_all_true": "0rr_v", "check.expect_eq": "0rrr_v",
                    "check.expect_almost_eq": "0rrrff_v"}
DEFAULT_ATOL, DEFAULT_RTOL = 1e-4, 0.0


def element_type_code(name: str) -> int:
    name = "i32" if name == "index" else name
    try:
        return int(ElementType.from_name(name))
    except ValueError:
        raise CompileError(f"tensors of element type {name} cannot cross the host boundary "
                           "yet: buffer views have no element type code for it") from None


@dataclass
class Command:
    """One device command of the open segment: the operands of its direct call (after the
    command buffer), and for a dispatch what recording it once needs."""

    kind: str                                   # barrier | fill | copy | dispatch
    regs: list[Reg] = field(default_factory=list)
    segments: list[int] = field(default_factory=list)
    ordinal: int = -1
    bindings: list[tuple[int, Reg, int]] = field(default_factory=list)  # (binding, buffer, bytes)
    reusable: bool = False


def cconv(arg_types: list[tir.Type], result_types: list[tir.Type]) -> str:
    def char(t: tir.Type) -> str:
        if isinstance(t, tir.TensorType):
            return "r"
        return {"i32": "i", "i64": "I", "f32": "f", "f64": "F"}[SCALAR_TYPES[t.name].vm_bank]
    return "0" + ("".join(char(t) for t in arg_types) or "v") + "_" + \
        ("".join(char(t) for t in result_types) or "v")


class FunctionGen(ControlFlowLowering):
    def __init__(self, module: "ModuleGen", function: tir.Function, plan: StreamPlan) -> None:
        self.m = module
        self.f = function
        self.plan = plan
        self.b = FunctionBuilder()
        self.counts = {"i32": 0, "i64": 0, "f32": 0, "f64": 0, "ref": 0}
        self.consts: dict[tuple[str, object], Reg] = {}
        self.values: dict[int, TensorVal | Reg] = {}
        self.const_ints: dict[int, int] = {}
        self.storage_buffers: dict[int, Reg] = {}
        self.pending: list[Command] = []
        # The fence of the last submission not yet waited on (null when none), in a fixed
        # register so that it crosses blocks; `chain_idle` is True where it is known null.
        self.chain: Reg | None = None
        self.chain_idle = True
        self.written: set[int] = set()
        self.read: set[int] = set()
        self.terminated = False

    # -- registers, constants, blocks -----------------------------------------------------
    def new(self, bank: str) -> Reg:
        r = Reg(bank, self.counts[bank])
        self.counts[bank] += 1
        return r

    def const(self, bank: str, value: int | float) -> Reg:
        key = (bank, value if bank not in ("f32", "f64") else float(value).hex())
        if key not in self.consts:
            r = self.new(bank)
            self.b.emit(f"const.{bank}", r.index, value)
            self.consts[key] = r
        return self.consts[key]

    def string(self, text: str) -> Reg:
        r = self.new("ref")
        self.b.emit("const.ref.rodata", r.index, self.m.string(text))
        return r

    def bind(self, label: Label) -> None:
        """Start a block: constants of other blocks do not dominate it."""
        if not self.terminated:
            self.flush()
            self.b.emit("br", label)
        self.b.bind(label)
        self.consts.clear()
        self.terminated = False
        self.chain_idle = False   # a predecessor may have left a submission in flight

    def br(self, label: Label) -> None:
        self.flush()
        self.b.emit("br", label)
        self.terminated = True

    def call(self, name: str, args: list[Reg], results: list[Reg]) -> None:
        self.b.emit("call.import", self.m.import_(name), args, results)

    def call_variadic(self, name: str, segments: list[int], args: list[Reg],
                      results: list[Reg]) -> None:
        self.b.emit("call.import.variadic", self.m.import_(name), segments, args, results)

    def error(self, op: tir.Op, message: str) -> CompileError:
        return CompileError(f"{op.location or self.f.location}: error: {message}")

    def fail_unless(self, cond: Reg, message: str, status: int = INVALID_ARGUMENT) -> None:
        """Continue when `cond` (i32) is nonzero, else fail with `message`."""
        ok, bad = Label(), Label()
        self.b.emit("cond_br", cond.index, ok, bad)
        self.b.bind(bad)
        self.b.emit("fail", self.const_in_block("i32", status).index, message)
        self.b.bind(ok)
        self.consts.clear()

    def const_in_block(self, bank: str, value: int) -> Reg:
        r = self.new(bank)
        self.b.emit(f"const.{bank}", r.index, value)
        return r

    # -- dims and sizes ------------------------------------------------------------------
    def dim_reg(self, d: int | Reg) -> Reg:
        return self.const("i64", d) if isinstance(d, int) else d

    def element_count(self, tv: TensorVal) -> int | Reg:
        static = math.prod(d for d in tv.dims if isinstance(d, int))
        dyn = [d for d in tv.dims if not isinstance(d, int)]
        if not dyn:
            return static
        acc = self.const("i64", static)
        for d in dyn:
            r = self.new("i64")
            self.b.emit("mul.i64", r.index, acc.index, d.index)
            acc = r
        return acc

    def byte_length(self, tv: TensorVal) -> Reg:
        n = self.element_count(tv)
        bits = SCALAR_TYPES[tv.type.element_type].storage_bits
        if isinstance(n, int):
            return self.const("i64", storage_bytes(tv.type.element_type, n))
        r = self.new("i64")
        if bits % 8 == 0:
            self.b.emit("mul.i64", r.index, n.index, self.const("i64", bits // 8).index)
        else:  # packed: ceil(n * bits / 8)
            self.b.emit("mul.i64", r.index, n.index, self.const("i64", bits).index)
            self.b.emit("add.i64", r.index, r.index, self.const("i64", 7).index)
            self.b.emit("div.s.i64", r.index, r.index, self.const("i64", 8).index)
        return r

    def word_length(self, tv: TensorVal) -> Reg:
        """`byte_length` rounded up to whole 32-bit words: what the host allocates for `tv`.
        Shaders read and write sub-word elements through the 32-bit words that hold them,
        and robust buffer access hides a word the bound range only partly covers (the last
        elements of an odd-length i8/i16 tensor would read 0 and drop their writes); the
        Vulkan HAL binds such a range rounded up to words, which needs the word allocated.
        Bindings keep the exact `byte_length`, which is valid for any buffer."""
        n = self.element_count(tv)
        if isinstance(n, int):
            return self.const("i64", -(-storage_bytes(tv.type.element_type, n) // 4) * 4)
        if SCALAR_TYPES[tv.type.element_type].storage_bits % 32 == 0:
            return self.byte_length(tv)
        r = self.new("i64")
        self.b.emit("add.i64", r.index, self.byte_length(tv).index, self.const("i64", 3).index)
        self.b.emit("div.s.i64", r.index, r.index, self.const("i64", 4).index)
        self.b.emit("mul.i64", r.index, r.index, self.const("i64", 4).index)
        return r

    # -- device work ----------------------------------------------------------------------
    # Commands are collected per segment and emitted at `flush`: a segment of static
    # dispatches only is recorded once in __init and re-submitted with a binding table.
    def hazard(self, reads: set[int], writes: set[int]) -> None:
        """A barrier before a command that touches what earlier commands wrote (or writes
        what they read); then record its accesses."""
        if (reads | writes) & self.written or writes & self.read:
            self.pending.append(Command("barrier"))
            self.written.clear()
            self.read.clear()
        self.read |= reads
        self.written |= writes

    def flush(self) -> None:
        """Submit the segment's commands without waiting: each submission waits on the one
        before it (the fence chain), so the device keeps program order while the host moves
        on to the next block."""
        if not self.pending:
            return
        commands, self.pending = self.pending, []
        self.written.clear()
        self.read.clear()
        dev = self.m.device(self)
        fence = self.new("ref")
        self.call("hal.fence.create", [dev, self.const("i32", 0)], [fence])
        if all(c.kind == "barrier" or c.reusable for c in commands):
            self.submit_recorded(commands, dev, self.chain, fence)  # type: ignore[arg-type]
        else:
            cmd = self.new("ref")
            zero, one = self.const("i32", 0), self.const("i32", 1)
            self.call("hal.command_buffer.create", [dev, one, one, zero], [cmd])
            for c in commands:
                if c.kind == "barrier":
                    self.call("hal.command_buffer.execution_barrier", [cmd, zero, zero, zero],
                              [])
                elif c.kind == "dispatch":
                    self.call_variadic("hal.command_buffer.dispatch", c.segments, [cmd, *c.regs],
                                       [])
                else:
                    self.call(f"hal.command_buffer.{c.kind}_buffer", [cmd, *c.regs], [])
            self.call("hal.command_buffer.finalize", [cmd], [])
            self.call_variadic("hal.device.queue.execute", [1],
                               [dev, self.const("i64", -1), self.chain, fence, cmd], [])
        self.b.emit("mov.ref", self.chain.index, fence.index)
        self.chain_idle = False

    def sync(self) -> None:
        """Submit what is pending and wait for every submission: the host needs data."""
        self.flush()
        if self.chain_idle:
            return
        status = self.new("i32")
        self.call_variadic("hal.fence.await", [1], [self.const("i32", -1), self.chain], [status])
        self.b.emit("const.ref.null", self.chain.index)
        self.chain_idle = True

    def submit_recorded(self, commands: list["Command"], dev: Reg, wait: Reg,
                        fence: Reg) -> None:
        slots: list[Reg] = []
        recording: list[tuple] = []
        for c in commands:
            if c.kind == "barrier":
                recording.append(("barrier",))
                continue
            bindings = []
            for binding, buf, length in c.bindings:
                if buf not in slots:
                    slots.append(buf)
                bindings.append((binding, slots.index(buf), length))
            recording.append(("dispatch", c.ordinal, bindings))
        cmd = self.new("ref")
        self.b.emit("global.load.ref", cmd.index, self.m.record_segment(recording, len(slots)))
        table: list[Reg] = []
        for buf in slots:
            table += [buf, self.const("i64", 0), self.const("i64", -1)]
        self.call_variadic("hal.device.queue.execute.indirect", [len(slots)],
                           [dev, self.const("i64", -1), wait, fence, cmd, *table], [])

    def allocate(self, length: Reg) -> Reg:
        buf = self.new("ref")
        zero = self.const("i32", 0)
        self.call("hal.allocator.allocate", [self.m.allocator(self), zero, zero, length], [buf])
        return buf

    def host_fillable(self, tv: TensorVal) -> bool:
        """Whether a new buffer for `tv` starts filled from rodata: static and at most
        HOST_FILL_BYTES (the module holds the pattern at full length)."""
        n = self.element_count(tv)
        return isinstance(n, int) and \
            0 < storage_bytes(tv.type.element_type, n) <= HOST_FILL_BYTES

    def allocate_filled(self, tv: TensorVal, pattern: int, pattern_length: int) -> Reg:
        """A new buffer for `tv` holding `pattern` repeated, written by the host as it is
        allocated (`hal.allocator.allocate.initialized` from rodata). The buffer is new, so no
        queued work can touch it; a segment without a fill can be a recorded one."""
        size = -(-storage_bytes(tv.type.element_type, self.element_count(tv)) // 4) * 4
        data = pattern.to_bytes(pattern_length, "little") * (size // pattern_length)
        src = self.new("ref")
        self.b.emit("const.ref.rodata", src.index, self.m.blob(f"fill{pattern_length}", data))
        buf = self.new("ref")
        zero, zero64 = self.const("i32", 0), self.const("i64", 0)
        self.call("hal.allocator.allocate.initialized",
                  [self.m.allocator(self), self.const("i64", -1), zero, zero, src, zero64,
                   self.const("i64", size)], [buf])
        return buf

    def fill(self, tv: TensorVal, pattern: int, pattern_length: int) -> None:
        length = self.byte_length(tv)
        self.hazard(set(), {tv.storage})
        self.pending.append(Command("fill", [
            tv.buffer, self.const("i64", 0), length,  # type: ignore[list-item]
            self.const("i32", pattern if pattern < 2**31 else pattern - 2**32),
            self.const("i32", pattern_length)]))

    def buffer_of(self, tv: TensorVal) -> Reg:
        """The buffer of `tv`, materializing an empty tensor as zeros."""
        if tv.buffer is None:
            tv.buffer = self.allocate(self.word_length(tv))
            self.storage_buffers[tv.storage] = tv.buffer
            self.fill(tv, 0, 1)
        return tv.buffer

    def view(self, tv: TensorVal) -> Reg:
        buf = self.buffer_of(tv)
        bv = self.new("ref")
        et = self.const("i32", element_type_code(tv.type.element_type))
        dims = [self.dim_reg(d) for d in tv.dims]
        self.call_variadic("hal.buffer_view.create", [len(dims)],
                           [buf, self.const("i64", 0), self.byte_length(tv), et,
                            self.const("i32", DENSE_ROW_MAJOR), *dims], [bv])
        return bv

    def from_view(self, view: Reg, t: tir.TensorType, storage: int) -> TensorVal:
        buf = self.new("ref")
        self.call("hal.buffer_view.buffer", [view], [buf])
        dims: list[int | Reg] = []
        for i, d in enumerate(t.shape):
            if d is None:
                r = self.new("i64")
                self.call("hal.buffer_view.dim", [view, self.const("i32", i)], [r])
                dims.append(r)
            else:
                dims.append(d)
        return TensorVal(t, buf, dims, storage)

    # -- the function ----------------------------------------------------------------------
    def generate(self) -> FunctionBuilder:
        self.b.location(self.f.location)
        # Arguments arrive in the first registers of each bank, in order.
        regs = [self.new("ref" if isinstance(a.type, tir.TensorType)
                         else SCALAR_TYPES[a.type.name].vm_bank) for a in self.f.args]
        self.chain = self.new("ref")
        self.b.emit("const.ref.null", self.chain.index)
        for i, (a, r) in enumerate(zip(self.f.args, regs)):
            if isinstance(a.type, tir.TensorType):
                self.values[a.id] = self.argument(i, a, r)
            else:
                self.values[a.id] = r
        self.region(self.f.body)
        if not self.terminated:
            self.sync()
            self.b.emit("return", [])
        self.b.set_register_counts(**self.counts)
        return self.b

    def argument(self, i: int, a: tir.Value, view: Reg) -> TensorVal:
        t: tir.TensorType = a.type  # type: ignore[assignment]
        where = f"{self.f.name}: argument {i}"
        et = self.const("i32", element_type_code(t.element_type))
        if not t.is_static:
            rank = self.new("i32")
            self.call("hal.buffer_view.rank", [view], [rank])
            ok = self.new("i32")
            self.b.emit("cmp.eq.i32", ok.index, rank.index, self.const("i32", len(t.shape)).index)
            self.fail_unless(ok, f"{where}: expected {_spell(t)}, got a tensor of another rank")
        tv = self.from_view(view, t, self.plan.storage.get(a.id, -1 - i))
        msg = self.string(where)
        self.call_variadic("hal.buffer_view.assert", [len(t.shape)],
                           [view, msg, et, self.const("i32", DENSE_ROW_MAJOR),
                            *[self.dim_reg(d) for d in tv.dims]], [])
        return tv

    def region(self, region: tir.Region) -> None:
        for op in region.ops:
            if self.terminated:
                raise self.error(op, "op after the end of its block")
            self.b.location(op.location) if op.location else None
            handler = getattr(self, "op_" + op.kind.replace(".", "_"), None)
            if handler is None:
                if op.kind.startswith(("arith.", "math.")):
                    handler = self.op_scalar
                else:
                    raise self.error(op, f"'{op.kind}' cannot be lowered to the host yet")
            try:
                handler(op)
            except CompileError as e:
                if ": error: " in str(e):
                    raise
                raise self.error(op, str(e)) from None

    def get(self, v: tir.Value) -> TensorVal | Reg:
        return self.values[v.id]

    def tensor(self, v: tir.Value) -> TensorVal:
        tv = self.values[v.id]
        assert isinstance(tv, TensorVal), v
        return tv

    def scalar(self, v: tir.Value) -> Reg:
        r = self.values[v.id]
        assert isinstance(r, Reg), v
        return r

    # -- tensors -------------------------------------------------------------------------
    def op_constant(self, op: tir.Op) -> None:
        t = op.result.type
        if isinstance(t, tir.TensorType):
            buf = self.new("ref")
            self.b.emit("global.load.ref", buf.index, self.m.constant_global(op))
            shape = np.shape(op.attrs["value"])
            dims = [v if d is None else d for d, v in zip(t.shape, shape)] \
                if len(shape) == len(t.shape) else list(t.shape)
            self.values[op.result.id] = TensorVal(t, buf, dims,  # type: ignore[arg-type]
                                                  self.plan.storage[op.result.id])
        else:
            self.values[op.result.id] = self.scalar_const(t.name, op.attrs["value"])
            if t.name in ("index", "i32", "i64"):
                self.const_ints[op.result.id] = int(op.attrs["value"])

    op_arith_constant = op_constant

    def scalar_const(self, type_name: str, value: object) -> Reg:
        bank = SCALAR_TYPES[type_name].vm_bank
        if bank in ("f32", "f64"):
            return self.const(bank, float(value))  # type: ignore[arg-type]
        v = int(value)  # type: ignore[call-overload]
        if type_name == "i1":
            v = 1 if v else 0
        return self.const(bank, v)

    def op_empty(self, op: tir.Op) -> None:
        t: tir.TensorType = op.result.type  # type: ignore[assignment]
        dyn = iter(op.operands)
        dims = [d if d is not None else self.scalar(next(dyn)) for d in t.shape]
        self.values[op.result.id] = TensorVal(t, None, dims, self.plan.storage[op.result.id])

    def alias(self, op: tir.Op, src: TensorVal, dims: list[int | Reg]) -> None:
        if src.buffer is None:
            self.buffer_of(src)
        self.values[op.result.id] = TensorVal(op.result.type, src.buffer, dims,  # type: ignore
                                              src.storage)

    def op_reshape(self, op: tir.Op) -> None:
        t: tir.TensorType = op.result.type  # type: ignore[assignment]
        dyn = iter(op.operands[1:])
        self.alias(op, self.tensor(op.operands[0]),
                   [d if d is not None else self.scalar(next(dyn)) for d in t.shape])

    def op_barrier(self, op: tir.Op) -> None:
        for v, r in zip(op.operands, op.results):
            self.values[r.id] = self.values[v.id]

    def op_tie_shape(self, op: tir.Op) -> None:
        src = self.tensor(op.operands[0])
        dyn = iter(op.operands[1:])
        self.alias(op, src, [d if d is not None else self.scalar(next(dyn))
                             for d in op.result.type.shape])  # type: ignore[union-attr]

    def op_cast(self, op: tir.Op) -> None:
        src = self.tensor(op.operands[0])
        t: tir.TensorType = op.result.type  # type: ignore[assignment]
        dims: list[int | Reg] = []
        for i, (want, have) in enumerate(zip(t.shape, src.dims)):
            if want is not None and not isinstance(have, int):
                ok = self.new("i32")
                self.b.emit("cmp.eq.i64", ok.index, have.index, self.const("i64", want).index)
                self.fail_unless(ok, f"{op.location}: error: tensor.cast to {t.spelling()}: "
                                     f"dimension {i} is not {want}")
                dims.append(want)
            else:
                dims.append(have)
        self.alias(op, src, dims)

    def op_tensor_dim(self, op: tir.Op) -> None:
        tv = self.tensor(op.operands[0])
        index_def = self.constant_index(op.operands[1])
        if index_def is not None:
            self.values[op.result.id] = self.dim_reg(tv.dims[index_def])
            return
        idx = self.scalar(op.operands[1])
        r = self.new("i64")
        self.b.emit("mov.i64", r.index, self.dim_reg(tv.dims[0]).index)
        for i, d in enumerate(tv.dims[1:], 1):
            is_i = self.new("i32")
            self.b.emit("cmp.eq.i64", is_i.index, idx.index, self.const("i64", i).index)
            self.b.emit("select.i64", r.index, is_i.index, self.dim_reg(d).index, r.index)
        self.values[op.result.id] = r

    def constant_index(self, v: tir.Value) -> int | None:
        return self.const_ints.get(v.id)

    def op_tensor_extract(self, op: tir.Op) -> None:
        """Read one element on the host, decoded into its register bank: narrow integers
        sign-extended into i32, f16/bf16 and the f8/f4 small floats as their f32 value (as
        IREE's VM holds an extracted f16), i1 as 0/1."""
        tv = self.tensor(op.operands[0])
        buf = self.buffer_of(tv)
        self.sync()
        et = tv.type.element_type
        t = SCALAR_TYPES[et]
        offset = self.const("i64", 0)
        for i, idx in enumerate(op.operands[1:]):
            stride = self.new("i64")
            self.b.emit("mul.i64", stride.index, offset.index, self.dim_reg(tv.dims[i]).index)
            r = self.new("i64")
            self.b.emit("add.i64", r.index, stride.index, self.scalar(idx).index)
            offset = r
        bits, bank = t.storage_bits, t.vm_bank
        out = self.new(bank)
        if t.packed:
            code = self.load_packed(buf, offset, bits)
            if t.is_float:
                self.decode_small_float(out, code, et)
            else:
                host_arith.narrow(self.b, self.new, code, et)
                self.b.emit("mov.i32", out.index, code.index)
            self.values[op.result.id] = out
            return
        size = bits // 8
        byte = self.new("i64")
        self.b.emit("mul.i64", byte.index, offset.index, self.const("i64", size).index)
        words = []
        for w in range(max(1, size // 4)):
            at = byte
            if w:
                at = self.new("i64")
                self.b.emit("add.i64", at.index, byte.index, self.const("i64", 4 * w).index)
            word = self.new("i32")
            self.call("hal.buffer.load", [buf, at, self.const("i32", min(size, 4))], [word])
            words.append(word)
        if size == 8:
            lo, hi = self.new("i64"), self.new("i64")
            self.b.emit("ext.i32.i64.u", lo.index, words[0].index)
            self.b.emit("ext.i32.i64.u", hi.index, words[1].index)
            self.b.emit("shl.i64", hi.index, hi.index, self.const("i64", 32).index)
            bits64 = self.new("i64")
            self.b.emit("or.i64", bits64.index, lo.index, hi.index)
            if bank == "f64":
                self.b.emit("bitcast.i64.f64", out.index, bits64.index)
            else:
                self.b.emit("mov.i64", out.index, bits64.index)
        elif et == "f16":
            self.decode_f16(out, words[0])
        elif et == "bf16":
            shifted = self.new("i32")
            self.b.emit("shl.i32", shifted.index, words[0].index, self.const("i32", 16).index)
            self.b.emit("bitcast.i32.f32", out.index, shifted.index)
        elif et in SMALL_FLOAT_TYPES:
            self.decode_small_float(out, words[0], et)
        elif bank == "f32":
            self.b.emit("bitcast.i32.f32", out.index, words[0].index)
        elif et == "index":
            self.b.emit("ext.i32.i64.s", out.index, words[0].index)
        else:
            self.b.emit("mov.i32", out.index, words[0].index)
            if et == "i8":
                self.b.emit("ext.i8.i32.s", out.index, out.index)
            elif et == "i16":
                self.b.emit("ext.i16.i32.s", out.index, out.index)
        self.values[op.result.id] = out

    def load_packed(self, buf: Reg, index: Reg, bits: int) -> Reg:
        """The `bits`-wide code of packed element `index` (an i64 register), zero-extended in
        an i32 register: element (8 // bits) * k + j sits in bits [j * bits, ...) of byte k."""
        per_byte = 8 // bits
        byte = self.new("i64")
        self.b.emit("div.s.i64", byte.index, index.index, self.const("i64", per_byte).index)
        lane = self.new("i64")
        self.b.emit("rem.s.i64", lane.index, index.index, self.const("i64", per_byte).index)
        self.b.emit("mul.i64", lane.index, lane.index, self.const("i64", bits).index)
        shift = self.new("i32")
        self.b.emit("trunc.i64.i32", shift.index, lane.index)
        code = self.new("i32")
        self.call("hal.buffer.load", [buf, byte, self.const("i32", 1)], [code])
        self.b.emit("shr.u.i32", code.index, code.index, shift.index)
        self.b.emit("and.i32", code.index, code.index, self.const("i32", (1 << bits) - 1).index)
        return code

    def decode_f16(self, out: Reg, half: Reg) -> None:
        """f32 value of the f16 bits in `half` (zero-extended): the magnitude's bits shifted
        into f32's exponent and mantissa fields and scaled by 2**112 (exact for normal and
        subnormal values), inf and NaN built directly, then the sign bit."""
        c = self.const
        mag = self.new("i32")
        self.b.emit("and.i32", mag.index, half.index, c("i32", 0x7FFF).index)
        shifted = self.new("i32")
        self.b.emit("shl.i32", shifted.index, mag.index, c("i32", 13).index)
        scaled = self.new("f32")
        self.b.emit("bitcast.i32.f32", scaled.index, shifted.index)
        self.b.emit("mul.f32", scaled.index, scaled.index, c("f32", 2.0 ** 112).index)
        finite_bits = self.new("i32")
        self.b.emit("bitcast.f32.i32", finite_bits.index, scaled.index)
        special_bits = self.new("i32")   # exponent all ones: inf, or NaN with its payload
        self.b.emit("or.i32", special_bits.index, shifted.index, c("i32", 0x7F800000).index)
        special = self.new("i32")
        self.b.emit("cmp.lte.s.i32", special.index, c("i32", 0x7C00).index, mag.index)
        magnitude = self.new("i32")
        self.b.emit("select.i32", magnitude.index, special.index, special_bits.index,
                    finite_bits.index)
        sign = self.new("i32")
        self.b.emit("and.i32", sign.index, half.index, c("i32", 0x8000).index)
        self.b.emit("shl.i32", sign.index, sign.index, c("i32", 16).index)
        self.b.emit("or.i32", magnitude.index, magnitude.index, sign.index)
        self.b.emit("bitcast.i32.f32", out.index, magnitude.index)

    def decode_small_float(self, out: Reg, code: Reg, et: str) -> None:
        """f32 value of an f8/f4 code, looked up in a table of every code's value (rodata,
        built by the numerics every driver shares, so the host agrees with the devices)."""
        codes = np.arange(1 << SCALAR_TYPES[et].storage_bits, dtype=np.uint8)
        table = numerics.from_bits(et, codes).astype("<f4").tobytes()
        data = self.new("ref")
        self.b.emit("const.ref.rodata", data.index, self.m.blob(f"{et}_values", table))
        at = self.new("i32")
        self.b.emit("shl.i32", at.index, code.index, self.const("i32", 2).index)
        at64 = self.new("i64")
        self.b.emit("ext.i32.i64.u", at64.index, at.index)
        self.b.emit("buffer.load.f32", out.index, data.index, at64.index)

    # -- dispatches ------------------------------------------------------------------------
    def op_dispatch(self, op: tir.Op) -> None:
        kern: K.Kernel = op.attrs["kernel"]
        n_in, n_out = op.attrs["num_inputs"], op.attrs["num_outputs"]
        inputs = [self.tensor(v) for v in op.operands[:n_in]]
        inits = [self.tensor(v) for v in op.operands[n_in:n_in + n_out]]
        params = [self.scalar(v) for v in op.operands[n_in + n_out:]]
        param_values = {p.name: r for p, r in zip(kern.params, params)}
        for tv in inputs:
            self.buffer_of(tv)
        self.check_extents(op, kern, inputs + inits, param_values)
        outputs: list[TensorVal] = []
        for k, (init, result) in enumerate(zip(inits, op.results)):
            plan = self.plan.output(op, k)
            storage = self.plan.storage[result.id]
            out = TensorVal(result.type, None, list(init.dims), storage)  # type: ignore[arg-type]
            if plan.mode == "inplace":
                out.buffer = self.buffer_of(init)
            else:
                pattern = None
                if plan.mode == "zero":
                    pattern = (0, 1)
                elif plan.mode == "fill":
                    pattern = fill_pattern(result.type.element_type,  # type: ignore[union-attr]
                                           op.attrs["fills"][k])
                    assert pattern is not None
                if plan.reuse is not None and plan.reuse in self.storage_buffers:
                    out.buffer = self.storage_buffers[plan.reuse]
                elif pattern is not None and self.host_fillable(out):
                    out.buffer = self.allocate_filled(out, *pattern)
                    pattern = None  # filled on the host: no device fill in the segment
                else:
                    out.buffer = self.allocate(self.word_length(out))
                self.storage_buffers[storage] = out.buffer
                if pattern is not None:
                    self.fill(out, *pattern)
                elif plan.mode == "copy":
                    src = self.buffer_of(init)
                    self.hazard({init.storage}, {storage})
                    zero = self.const("i64", 0)
                    self.pending.append(Command("copy", [src, zero, out.buffer, zero,
                                                         self.byte_length(out)]))
            outputs.append(out)
            self.values[result.id] = out
        if kern.is_static and kern.iteration_count == 0:
            return
        self.hazard({tv.storage for tv in inputs}, {tv.storage for tv in outputs})
        ordinal = self.m.kernel_ordinal(kern)
        grid = self.m.workgroups(self, ordinal, kern, param_values)
        words = self.push_constants(kern, params)
        bindings: list[Reg] = []
        static: list[tuple[int, Reg, int]] = []
        for operand, tv in zip(kern.inputs + kern.outputs, inputs + outputs):
            bindings += [self.const("i32", operand.binding), tv.buffer,  # type: ignore[list-item]
                         self.const("i64", 0), self.byte_length(tv)]
            if operand.is_static:
                static.append((operand.binding, tv.buffer, operand.byte_size))  # type: ignore
        reusable = kern.is_static and not words and len(static) == kern.binding_count
        self.pending.append(Command(
            "dispatch", [self.m.executable(self), self.const("i32", ordinal), *grid,
                         self.const("i64", 0), *words, *bindings],
            [len(words), len(bindings) // 4], ordinal, static, reusable))

    def check_extents(self, op: tir.Op, kern: K.Kernel, tensors: list[TensorVal],
                      params: dict[str, Reg]) -> None:
        """Operands whose dims index a dynamic loop directly must match its extent at run time
        (a shorter operand would be read out of bounds)."""
        for operand, tv in zip(kern.inputs + kern.outputs, tensors):
            if operand.map is None:
                continue
            for r, j in enumerate(operand.map.row_loops()):
                if j is None:
                    continue
                extent = kern.loop_ranges[j]
                have = tv.dims[r]
                if isinstance(extent, int) and isinstance(have, int):
                    continue
                want = self.const("i64", extent) if isinstance(extent, int) else params[extent]
                if want is have:
                    continue
                ok = self.new("i32")
                self.b.emit("cmp.eq.i64", ok.index, self.dim_reg(have).index, want.index)
                self.fail_unless(ok, f"{op.location}: error: operand {operand.binding} of "
                                     f"dispatch {kern.name}: dimension {r} does not match the "
                                     "extent of the loop it indexes")

    def push_constants(self, kern: K.Kernel, params: list[Reg]) -> list[Reg]:
        words: list[Reg] = []
        for p, offset, r in zip(kern.params, kern.param_offsets(), params):
            while len(words) * 4 < offset:
                words.append(self.const("i32", 0))
            if r.bank == "i64":
                lo, hi = self.new("i32"), self.new("i32")
                self.b.emit("trunc.i64.i32", lo.index, r.index)
                if p.byte_size == 8:
                    shifted = self.new("i64")
                    self.b.emit("shr.u.i64", shifted.index, r.index, self.const("i64", 32).index)
                    self.b.emit("trunc.i64.i32", hi.index, shifted.index)
                    words += [lo, hi]
                else:
                    words.append(lo)
            elif r.bank == "f32":
                w = self.new("i32")
                self.b.emit("bitcast.f32.i32", w.index, r.index)
                words.append(w)
            elif r.bank == "f64":
                bits = self.new("i64")
                self.b.emit("bitcast.f64.i64", bits.index, r.index)
                lo, hi, shifted = self.new("i32"), self.new("i32"), self.new("i64")
                self.b.emit("trunc.i64.i32", lo.index, bits.index)
                self.b.emit("shr.u.i64", shifted.index, bits.index, self.const("i64", 32).index)
                self.b.emit("trunc.i64.i32", hi.index, shifted.index)
                words += [lo, hi]
            else:
                words.append(r)
        return words

    # -- scalars ---------------------------------------------------------------------------
    def op_scalar(self, op: tir.Op) -> None:
        args = [self.scalar(v) for v in op.operands]
        self.values[op.result.id] = host_arith.lower(
            self.b, self.new, op, args, lambda msg: self.error(op, msg))

    # -- globals, calls, checks, return ------------------------------------------------------
    def op_global_load(self, op: tir.Op) -> None:
        g = self.m.global_(op.attrs["name"], op)
        t = op.result.type
        if isinstance(t, tir.TensorType):
            view = self.new("ref")
            self.b.emit("global.load.ref", view.index, g)
            self.values[op.result.id] = self.from_view(view, t, self.plan.storage[op.result.id])
        else:
            bank = SCALAR_TYPES[t.name].vm_bank
            r = self.new(bank)
            self.b.emit(f"global.load.{bank}", r.index, g)
            self.values[op.result.id] = r

    def op_global_store(self, op: tir.Op) -> None:
        g = self.m.global_(op.attrs["name"], op)
        v = self.get(op.operands[0])
        if isinstance(v, TensorVal):
            self.b.emit("global.store.ref", g, self.view(v).index)
        else:
            self.b.emit(f"global.store.{v.bank}", g, v.index)

    def pass_values(self, values: list[tir.Value]) -> list[Reg]:
        out = []
        for v in values:
            x = self.get(v)
            out.append(self.view(x) if isinstance(x, TensorVal) else x)
        return out

    def receive(self, regs: list[Reg], values: list[tir.Value]) -> None:
        for r, v in zip(regs, values):
            if isinstance(v.type, tir.TensorType):
                self.values[v.id] = self.from_view(r, v.type, self.plan.storage[v.id])
            else:
                self.values[v.id] = r

    def op_call(self, op: tir.Op) -> None:
        ordinal = self.m.function_ordinal(op.attrs["callee"], op)
        args = self.pass_values(op.operands)
        self.sync()
        results = [self.new("ref" if isinstance(v.type, tir.TensorType)
                            else SCALAR_TYPES[v.type.name].vm_bank) for v in op.results]
        self.b.emit("call", ordinal, args, results)
        self.receive(results, op.results)

    def op_return(self, op: tir.Op) -> None:
        regs = self.pass_values(op.operands)
        self.sync()
        self.b.emit("return", regs)
        self.terminated = True

    def op_check_expect_true(self, op: tir.Op, name: str = "check.expect_true") -> None:
        v = self.get(op.operands[0])
        if isinstance(v, TensorVal):  # a 0-d tensor of i1
            raise self.error(op, f"{name} takes a scalar")
        self.sync()
        self.b.emit("call.import", self.m.import_(name, CHECK_SIGNATURES[name]), [v], [])

    def op_check_expect_false(self, op: tir.Op) -> None:
        self.op_check_expect_true(op, "check.expect_false")

    def op_check_expect_all_true(self, op: tir.Op) -> None:
        (view,) = self.pass_values(op.operands[:1])
        self.sync()
        name = "check.expect_all_true"
        self.b.emit("call.import", self.m.import_(name, CHECK_SIGNATURES[name]),
                    [self.m.device(self), view], [])

    def op_check_expect_eq(self, op: tir.Op) -> None:
        lhs, rhs = self.pass_values(op.operands[:2])
        self.sync()
        name = "check.expect_eq"
        self.b.emit("call.import", self.m.import_(name, CHECK_SIGNATURES[name]),
                    [self.m.device(self), lhs, rhs], [])

    def op_check_expect_almost_eq(self, op: tir.Op) -> None:
        lhs, rhs = self.pass_values(op.operands[:2])
        self.sync()
        name = "check.expect_almost_eq"
        atol = op.attrs.get("atol")
        rtol = op.attrs.get("rtol")
        self.b.emit("call.import", self.m.import_(name, CHECK_SIGNATURES[name]),
                    [self.m.device(self), lhs, rhs,
                     self.const("f32", DEFAULT_ATOL if atol is None else atol),
                     self.const("f32", DEFAULT_RTOL if rtol is None else rtol)], [])

def _spell(t: tir.TensorType) -> str:
    return "x".join(["?" if d is None else str(d) for d in t.shape] + [t.element_type])
