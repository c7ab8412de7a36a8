"""The VM function under construction, and what every host lowering emits with it.

`HostFunction` holds one function's builder, its registers (virtual: a fresh one per value, per
bank; regalloc.py maps them onto the VM's register file when the function is done),
the constants of the current block (reused within it: constants of one block do not dominate
another), the values of the TIR function (a tensor as a `TensorVal`, a scalar as a register in
the bank of its type) and the calls into imports that every lowering makes. The host_*.py
modules add one concern each on top of it; host.FunctionGen combines them.
"""
from __future__ import annotations

from irtk.compiler import tir
from irtk.compiler.host_values import TensorVal
from irtk.compiler.module_context import ModuleContext
from irtk.compiler.stream import StreamPlan
from irtk.errors import CompileError
from irtk.types import SCALAR_TYPES
from irtk.vm import isa
from irtk.compiler.regalloc import VirtualBuilder
from irtk.vm.writer import Label, Reg

INVALID_ARGUMENT = 3   # IREE's status code for a failed argument or shape check


class HostFunction:
    def __init__(self, module: ModuleContext, function: tir.Function, plan: StreamPlan) -> None:
        self.m = module
        self.f = function
        self.plan = plan
        self.b = VirtualBuilder()   # virtual registers; regalloc assigns the VM's
        self.counts = dict.fromkeys(isa.BANKS, 0)
        self.consts: dict[tuple[str, object], Reg] = {}
        self.values: dict[int, TensorVal | Reg] = {}
        # The registers holding a constant tensor's buffer, and the global it was loaded from:
        # a recorded segment binds such a buffer itself, not through a binding-table slot.
        self.constant_buffers: dict[Reg, int] = {}
        # Tensor constants by value id: a small one that starts an output is written into the
        # output's new buffer from its rodata (host_dispatch.py).
        self.constant_ops: dict[int, tir.Op] = {}
        self.terminated = False

    def region(self, region: tir.Region) -> None:
        """Lower the ops of `region` (host.FunctionGen, which knows every op kind)."""
        raise NotImplementedError

    # -- registers and constants -----------------------------------------------------------
    def new(self, bank: str) -> Reg:
        r = Reg(bank, self.counts[bank])
        self.counts[bank] += 1
        return r

    def const(self, bank: str, value: int | float) -> Reg:
        """A register holding `value`, shared within the current block."""
        key = (bank, value if bank not in ("f32", "f64") else float(value).hex())
        if key not in self.consts:
            r = self.new(bank)
            self.b.emit(f"const.{bank}", r, value)
            self.consts[key] = r
        return self.consts[key]

    def const_in_block(self, bank: str, value: int) -> Reg:
        """A register holding `value`, not shared (for a block of its own)."""
        r = self.new(bank)
        self.b.emit(f"const.{bank}", r, value)
        return r

    def scalar_const(self, type_name: str, value: float | int) -> Reg:
        """A host scalar of type `type_name` in the register bank of that type."""
        bank = SCALAR_TYPES[type_name].vm_bank
        if bank in ("f32", "f64"):
            return self.const(bank, float(value))
        v = int(value)
        if type_name == "i1":
            v = 1 if v else 0
        return self.const(bank, v)

    def string(self, text: str) -> Reg:
        r = self.new("ref")
        self.b.emit("const.ref.rodata", r, self.m.string(text))
        return r

    def global_ref(self, global_: int, key: str) -> Reg:
        """The ref in `global_`, loaded once per block."""
        cache_key = ("global", key)
        if cache_key not in self.consts:
            r = self.new("ref")
            self.b.emit("global.load.ref", r, global_)
            self.consts[cache_key] = r
        return self.consts[cache_key]

    def device(self) -> Reg:
        return self.global_ref(self.m.device_global, "device")

    def allocator(self) -> Reg:
        return self.global_ref(self.m.allocator_global, "allocator")

    def executable(self) -> Reg:
        return self.global_ref(self.m.executable_global, "executable")

    # -- calls and failures ----------------------------------------------------------------
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
        self.b.emit("cond_br", cond, ok, bad)
        self.b.bind(bad)
        self.b.emit("fail", self.const_in_block("i32", status), message)
        self.b.bind(ok)
        self.consts.clear()

    # -- values ------------------------------------------------------------------------------
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

    def dim_reg(self, d: int | Reg) -> Reg:
        """An i64 register holding dim `d`."""
        return self.const("i64", d) if isinstance(d, int) else d
