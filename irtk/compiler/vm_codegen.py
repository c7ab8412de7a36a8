"""VM codegen: the host program -> VM bytecode that drives the HAL through `hal.*` imports.

The module's `__init` picks the executable variant the device supports (or fails with a message
naming the targets the module has), creates it once and keeps it, the device and the allocator in
globals. Each exported function checks its arguments' shapes, allocates its result buffers,
records one command buffer (barriers only between dependent dispatches), submits it and waits on
a fence, then wraps the results in buffer views.
"""
from __future__ import annotations

from dataclasses import dataclass

from irtk.compiler.flow import Dispatch, HostFunction, Program, Value
from irtk.hal.element_type import ElementType
from irtk.vm.writer import FunctionBuilder, ModuleWriter, Reg

DENSE_ROW_MAJOR = 1
FAILED_PRECONDITION = 9  # IREE's status code for "the device cannot run this module"

# Ref types the generated code holds in registers (recorded in the module for tools).
REF_TYPES = ("!vm.buffer", "!hal.device", "!hal.allocator", "!hal.buffer", "!hal.buffer_view",
             "!hal.command_buffer", "!hal.executable", "!hal.fence")

# The hal imports this codegen uses, with their calling conventions (irtk/modules/hal.py).
HAL_IMPORTS = {
    "hal.device.default": "0v_r",
    "hal.device.allocator": "0r_r",
    "hal.device.query.i64": "0rrr_iI",
    "hal.executable.create": "0rrrr_r",
    "hal.allocator.allocate": "0riiI_r",
    "hal.buffer_view.create": "0rIIiiCID_r",
    "hal.buffer_view.assert": "0rriiCID_v",
    "hal.buffer_view.buffer": "0r_r",
    "hal.command_buffer.create": "0riii_r",
    "hal.command_buffer.finalize": "0r_v",
    "hal.command_buffer.execution_barrier": "0riii_v",
    "hal.command_buffer.fill_buffer": "0rrIIii_v",
    "hal.command_buffer.dispatch": "0rriiiiICiDCirIID_v",
    "hal.fence.create": "0ri_r",
    "hal.fence.await": "0iCrD_i",
    "hal.device.queue.execute": "0rIrrCrD_v",
}


@dataclass
class ExecutableVariant:
    """One target's executable for the whole module: kernels in dispatch order."""

    target: str                                  # "vulkan-spirv", "cpu"
    format: str                                  # "vulkan-spirv-fb", "cpu-kernel-fb"
    data: bytes
    workgroup_counts: list[tuple[int, int, int]]  # per dispatch, in program order


class _Registers:
    """Per-bank register allocation for one function (no reuse: functions are short), and the
    constants already materialized in the current block, so each is loaded once."""

    def __init__(self) -> None:
        self.counts = {"i32": 0, "i64": 0, "f32": 0, "f64": 0, "ref": 0}
        self.constants: dict[tuple[str, int], Reg] = {}

    def new(self, bank: str) -> int:
        n = self.counts[bank]
        self.counts[bank] += 1
        return n

    def new_block(self) -> None:
        """Constants of another block do not dominate this one."""
        self.constants.clear()


class _ModuleGen:
    def __init__(self, program: Program, variants: list[ExecutableVariant], name: str) -> None:
        self.program = program
        self.variants = variants
        self.w = ModuleWriter(name)
        self.imports = {n: self.w.add_import(n, cc) for n, cc in HAL_IMPORTS.items()}
        self.w.add_requirement("i64")  # sizes and shapes are 64-bit
        for t in REF_TYPES:
            self.w.add_type(t)
        self.strings: dict[str, int] = {}
        self.g_device = self.w.add_global("ref")
        self.g_allocator = self.w.add_global("ref")
        self.g_executable = self.w.add_global("ref")
        self.dispatches = [d for f in program.functions for d in f.dispatches]
        self.dispatch_ordinal = {id(d): i for i, d in enumerate(self.dispatches)}
        self.g_workgroups = [tuple(self.w.add_global("i32") for _ in range(3))
                             for _ in self.dispatches]

    def string(self, text: str) -> int:
        if text not in self.strings:
            self.strings[text] = self.w.add_rodata(f"str{len(self.strings)}", "text/plain",
                                                   text.encode())
        return self.strings[text]

    def generate(self) -> bytes:
        init = self.init_function()
        self.w.set_init_function(self.w.add_function("__init", "0v_v", init))
        for f in self.program.functions:
            ordinal = self.w.add_function(f.name, _cconv(f), self.function(f))
            self.w.add_export(f.name, ordinal, {
                "abi.args": ";".join(a.type.spelling() for a in f.args),
                "abi.results": ";".join(r.type.spelling() for r in f.results),
            })
        return self.w.to_bytes()

    # -- helpers emitting common sequences ------------------------------------------------
    def call(self, b: FunctionBuilder, name: str, args: list[Reg], results: list[Reg]) -> None:
        b.emit("call.import", self.imports[name], args, results)

    def call_variadic(self, b: FunctionBuilder, name: str, segments: list[int], args: list[Reg],
                      results: list[Reg]) -> None:
        b.emit("call.import.variadic", self.imports[name], segments, args, results)

    @staticmethod
    def const(b: FunctionBuilder, regs: _Registers, bank: str, value: int) -> Reg:
        key = (bank, value)
        if key not in regs.constants:
            r = regs.new(bank)
            b.emit(f"const.{bank}", r, value)
            regs.constants[key] = Reg(bank, r)
        return regs.constants[key]

    def ref_string(self, b: FunctionBuilder, regs: _Registers, text: str) -> Reg:
        r = regs.new("ref")
        b.emit("const.ref.rodata", r, self.string(text))
        return Reg("ref", r)

    # -- __init -----------------------------------------------------------------------
    def init_function(self) -> FunctionBuilder:
        b, regs = FunctionBuilder(), _Registers()
        dev = Reg("ref", regs.new("ref"))
        self.call(b, "hal.device.default", [], [dev])
        b.emit("global.store.ref", self.g_device, dev.index)
        alloc = Reg("ref", regs.new("ref"))
        self.call(b, "hal.device.allocator", [dev], [alloc])
        b.emit("global.store.ref", self.g_allocator, alloc.index)
        category = self.ref_string(b, regs, "hal.executable.format")
        fail = b.new_label()
        for i, v in enumerate(self.variants):
            create, next_try = b.new_label(), (b.new_label() if i + 1 < len(self.variants) else fail)
            fmt = self.ref_string(b, regs, v.format)
            ok, value = Reg("i32", regs.new("i32")), Reg("i64", regs.new("i64"))
            self.call(b, "hal.device.query.i64", [dev, category, fmt], [ok, value])
            supported = regs.new("i32")
            b.emit("trunc.i64.i32", supported, value.index)
            b.emit("cond_br", supported, create, next_try)
            b.bind(create)
            regs.new_block()
            data = regs.new("ref")
            b.emit("const.ref.rodata", data, self.w.add_rodata(
                f"executable_{v.target}", v.format, v.data))
            null = regs.new("ref")
            b.emit("const.ref.null", null)
            exe = Reg("ref", regs.new("ref"))
            self.call(b, "hal.executable.create", [dev, fmt, Reg("ref", data), Reg("ref", null)],
                      [exe])
            b.emit("global.store.ref", self.g_executable, exe.index)
            for globals_, count in zip(self.g_workgroups, v.workgroup_counts):
                for g, n in zip(globals_, count):
                    r = self.const(b, regs, "i32", n)
                    b.emit("global.store.i32", g, r.index)
            b.emit("return", [])
            if next_try is not fail:
                b.bind(next_try)
                regs.new_block()
        b.bind(fail)
        regs.new_block()
        targets = ", ".join(f"{v.target} (format {v.format})" for v in self.variants)
        status = self.const(b, regs, "i32", FAILED_PRECONDITION)
        b.emit("fail", status.index, f"no executable in this module can run on the device: the module "
                          f"holds targets {targets}")
        return b

    # -- exported functions -----------------------------------------------------------
    def function(self, f: HostFunction) -> FunctionBuilder:
        b, regs = FunctionBuilder(), _Registers()
        buffers: dict[int, Reg] = {}
        arg_regs = [Reg("ref", regs.new("ref")) for _ in f.args]
        dev = Reg("ref", regs.new("ref"))
        b.emit("global.load.ref", dev.index, self.g_device)
        alloc = Reg("ref", regs.new("ref"))
        b.emit("global.load.ref", alloc.index, self.g_allocator)
        exe = Reg("ref", regs.new("ref"))
        b.emit("global.load.ref", exe.index, self.g_executable)
        for i, (a, r) in enumerate(zip(f.args, arg_regs)):
            msg = self.ref_string(b, regs, f"{f.name}: argument {i}")
            et = self.const(b, regs, "i32", int(ElementType.from_name(a.type.element_type)))
            enc = self.const(b, regs, "i32", DENSE_ROW_MAJOR)
            dims = [self.const(b, regs, "i64", d) for d in a.type.shape]
            self.call_variadic(b, "hal.buffer_view.assert", [len(dims)], [r, msg, et, enc, *dims], [])
            buf = Reg("ref", regs.new("ref"))
            self.call(b, "hal.buffer_view.buffer", [r], [buf])
            buffers[a.id] = buf
        zero_i32 = self.const(b, regs, "i32", 0)
        # Allocate every buffer a dispatch writes, and the empty tensors dispatches read.
        empties: list[Value] = []
        for d in f.dispatches:
            for v in d.inputs + d.outputs:
                if v.id not in buffers:
                    size = self.const(b, regs, "i64", v.type.byte_size)
                    buf = Reg("ref", regs.new("ref"))
                    self.call(b, "hal.allocator.allocate", [alloc, zero_i32, zero_i32, size], [buf])
                    buffers[v.id] = buf
                    if v.kind == "empty":
                        empties.append(v)
        one = self.const(b, regs, "i32", 1)
        cmd = Reg("ref", regs.new("ref"))
        self.call(b, "hal.command_buffer.create", [dev, one, one, zero_i32], [cmd])
        dirty: set[int] = set()
        for v in empties:  # tensor.empty contents are undefined; make them zero, deterministically
            if v.type.byte_size:
                off, length = self.const(b, regs, "i64", 0), self.const(b, regs, "i64", v.type.byte_size)
                self.call(b, "hal.command_buffer.fill_buffer",
                          [cmd, buffers[v.id], off, length, zero_i32, self.const(b, regs, "i32", 4)], [])
                dirty.add(v.id)
        for d in f.dispatches:
            if d.kernel.iteration_count == 0:
                continue
            touched = {v.id for v in d.inputs + d.outputs}
            if touched & dirty:
                self.call(b, "hal.command_buffer.execution_barrier", [cmd, zero_i32, zero_i32, zero_i32], [])
                dirty.clear()
            self.dispatch(b, regs, d, cmd, exe, buffers)
            dirty |= {v.id for v in d.outputs}
        self.call(b, "hal.command_buffer.finalize", [cmd], [])
        fence = Reg("ref", regs.new("ref"))
        self.call(b, "hal.fence.create", [dev, zero_i32], [fence])
        null = Reg("ref", regs.new("ref"))
        b.emit("const.ref.null", null.index)
        affinity = self.const(b, regs, "i64", -1)
        self.call_variadic(b, "hal.device.queue.execute", [1], [dev, affinity, null, fence, cmd], [])
        timeout = self.const(b, regs, "i32", -1)
        status = Reg("i32", regs.new("i32"))
        self.call_variadic(b, "hal.fence.await", [1], [timeout, fence], [status])
        results = []
        for v in f.results:
            if v.kind == "arg":
                results.append(arg_regs[v.index])
                continue
            et = self.const(b, regs, "i32", int(ElementType.from_name(v.type.element_type)))
            enc = self.const(b, regs, "i32", DENSE_ROW_MAJOR)
            dims = [self.const(b, regs, "i64", d) for d in v.type.shape]
            off, length = self.const(b, regs, "i64", 0), self.const(b, regs, "i64", v.type.byte_size)
            bv = Reg("ref", regs.new("ref"))
            self.call_variadic(b, "hal.buffer_view.create", [len(dims)],
                               [buffers[v.id], off, length, et, enc, *dims], [bv])
            results.append(bv)
        b.emit("return", results)
        return b

    def dispatch(self, b: FunctionBuilder, regs: _Registers, d: Dispatch, cmd: Reg, exe: Reg,
                 buffers: dict[int, Reg]) -> None:
        ordinal = self.dispatch_ordinal[id(d)]
        entry = self.const(b, regs, "i32", ordinal)
        grid = []
        for g in self.g_workgroups[ordinal]:
            r = regs.new("i32")
            b.emit("global.load.i32", r, g)
            grid.append(Reg("i32", r))
        flags = self.const(b, regs, "i64", 0)
        bindings: list[Reg] = []
        operands = d.kernel.inputs + d.kernel.outputs
        values = d.inputs + d.outputs
        for operand, value in zip(operands, values):
            bindings += [self.const(b, regs, "i32", operand.binding), buffers[value.id],
                         self.const(b, regs, "i64", 0), self.const(b, regs, "i64", value.type.byte_size)]
        self.call_variadic(b, "hal.command_buffer.dispatch", [0, len(operands)],
                           [cmd, exe, entry, *grid, flags, *bindings], [])


def _cconv(f: HostFunction) -> str:
    return "0" + "r" * len(f.args) + "_" + ("r" * len(f.results) or "v")


def generate_module(program: Program, variants: list[ExecutableVariant], name: str) -> bytes:
    return _ModuleGen(program, variants, name).generate()
