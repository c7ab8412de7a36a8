"""VM codegen: a TIR program of dispatches -> a VM bytecode module driving the HAL.

The module's `__init` picks the executable variant the device supports (or fails with a message
naming the targets the module has), creates it once, keeps it, the device and the allocator in
globals, uploads the constants the host uses into device buffers, gives every `util.global` its
initial value and sets the workgroup counts of static dispatches for the chosen variant. Each
function is lowered by `host.FunctionGen`; a function that cannot be compiled becomes one that
fails at run time with the located message, so the rest of the file still works.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from irtk.compiler import kernel as K
from irtk.compiler import tir
from irtk.compiler.host import FunctionGen, cconv
from irtk.compiler.host_buffers import element_type_code
from irtk.compiler.module_context import Launch
from irtk.compiler.stream import StreamPlan
from irtk.errors import CompileError, CompileWarning
from irtk.hal import numerics
from irtk.hal.buffer_view import DENSE_ROW_MAJOR
from irtk.modules import hal_types
from irtk.modules.check import CheckModule
from irtk.modules.hal import HalModule
from irtk.types import SCALAR_TYPES
from irtk.vm.refs import VM_BUFFER
from irtk.vm.writer import FunctionBuilder, Label, ModuleWriter, Reg

FAILED_PRECONDITION = 9   # IREE's status code for "the device cannot run this module"
UNIMPLEMENTED = 12        # a function the compiler could not lower

# The ref types the host code handles, as the module's `types` table lists them (the order is
# part of the module's bytes); their names come from the VM and the `hal` module that register them.
REF_TYPES = (VM_BUFFER, hal_types.DEVICE, hal_types.ALLOCATOR, hal_types.BUFFER,
             hal_types.BUFFER_VIEW, hal_types.COMMAND_BUFFER, hal_types.EXECUTABLE, hal_types.FENCE)

# The calling convention of every import the host code may make, as the native modules that
# implement them declare it (checked again at link time).
IMPORT_SIGNATURES = {f"{m.name}.{f.name}": f.calling_convention
                     for m in (HalModule, CheckModule) for f in m.EXPORTS}

@dataclass
class ExecutableVariant:
    """One target's executable for the whole module: kernels in `kernels` order, and how many
    workgroups each launches (a static count, or a grid rule for dynamic extents)."""

    target: str                  # "vulkan-spirv", "cpu"
    format: str                  # "vulkan-spirv-fb", "cpu-kernel-fb"
    data: bytes
    launches: list[Launch]


def program_kernels(program: tir.Program) -> list[K.Kernel]:
    """Every dispatch's kernel, in program order (the executables' entry point order)."""
    return [op.attrs["kernel"] for f in program.functions for op in tir.walk(f.body)
            if op.kind == "dispatch"]


class ModuleGen:
    """The module being generated: what its functions share (module_context.ModuleContext),
    and `__init`."""

    def __init__(self, program: tir.Program, plans: dict[str, StreamPlan],
                 variants: list[ExecutableVariant], name: str, partial: bool = False) -> None:
        self.program = program
        self.partial = partial
        self.plans = plans
        self.variants = variants
        self.w = ModuleWriter(name)
        self.imports: dict[str, int] = {}
        for n in ("hal.device.default", "hal.device.allocator", "hal.device.query.i64",
                  "hal.executable.create"):
            self.import_(n)
        self.w.add_requirement("i64")  # sizes and shapes are 64-bit
        for t in REF_TYPES:
            self.w.add_type(t.name)
        self.strings: dict[str, int] = {}
        self.blobs: dict[bytes, int] = {}
        self.device_global = self.w.add_global("ref")
        self.allocator_global = self.w.add_global("ref")
        self.executable_global = self.w.add_global("ref")
        self.variant_global = self.w.add_global("i32")
        self.kernels = program_kernels(program)
        self.kernel_ordinals = {id(k): i for i, k in enumerate(self.kernels)}
        self.g_workgroups: dict[int, tuple[int, int, int]] = {}
        for i, k in enumerate(self.kernels):
            if k.is_static:
                self.g_workgroups[i] = (self.w.add_global("i32"), self.w.add_global("i32"),
                                        self.w.add_global("i32"))
        self.constants: dict[bytes, tuple[int, tir.Op]] = {}
        self.globals: dict[str, tuple[int, tir.Global]] = {}
        self.bad_globals: dict[str, str] = {}   # globals that cannot be stored: why
        for g in program.globals:
            try:
                if isinstance(g.type, tir.TensorType):
                    self.global_contents(g)
                    bank = "ref"
                elif g.type.name in SCALAR_TYPES:
                    bank = SCALAR_TYPES[g.type.name].vm_bank
                else:
                    raise CompileError(f"{g.location}: error: globals of type {g.type.name} "
                                       "are not supported")
            except CompileError as e:
                self.bad_globals[g.name] = str(e)
                continue
            self.globals[g.name] = (self.w.add_global(bank), g)
        self.functions: dict[str, tuple[int, tir.Function | None]] = {}
        self.segments: list[tuple[int, list[tuple], int]] = []  # (global, commands, slots)

    # -- module-level resources -----------------------------------------------------------
    def import_(self, name: str) -> int:
        if name not in self.imports:
            self.imports[name] = self.w.add_import(name, IMPORT_SIGNATURES[name])
        return self.imports[name]

    def string(self, text: str) -> int:
        if text not in self.strings:
            self.strings[text] = self.w.add_rodata(f"str{len(self.strings)}", "text/plain",
                                                   text.encode())
        return self.strings[text]

    def blob(self, name: str, data: bytes) -> int:
        """A rodata segment holding `data` (e.g. a decoding table), one per distinct content."""
        if data not in self.blobs:
            self.blobs[data] = self.w.add_rodata(name, "application/octet-stream", data)
        return self.blobs[data]

    def constant_global(self, op: tir.Op) -> int:
        t = op.result.tensor_type
        data = tensor_bytes(np.asarray(op.attrs["value"]), t, op.location)
        key = t.spelling().encode() + b"\0" + data
        if key not in self.constants:
            self.constants[key] = (self.w.add_global("ref"), op)
        return self.constants[key][0]

    def constant_rodata(self, op: tir.Op) -> tuple[int, int]:
        data = tensor_bytes(np.asarray(op.attrs["value"]), op.result.tensor_type, op.location)
        return self._constant_blob(data), len(data)

    def _constant_blob(self, data: bytes) -> int:
        """The rodata segment of a constant's or a global's initial bytes (one per content)."""
        return self.blob(f"constant{len(self.w._rodata)}", data)

    def global_(self, name: str, op: tir.Op) -> int:
        if name in self.bad_globals:
            raise CompileError(self.bad_globals[name])
        if name not in self.globals:
            raise CompileError(f"{op.location}: error: unknown global '@{name}'")
        return self.globals[name][0]

    def function_ordinal(self, name: str, op: tir.Op) -> int:
        if name not in self.functions:
            raise CompileError(f"{op.location}: error: call to unknown function '@{name}'")
        return self.functions[name][0]

    def record_segment(self, commands: list[tuple], slots: int) -> int:
        """The global holding a command buffer that __init records once: barriers, static
        dispatches, fills and copies whose buffers come from binding-table slots or from
        constants' globals."""
        for global_, recorded, n in self.segments:
            if recorded == commands and n == slots:
                return global_
        global_ = self.w.add_global("ref")
        self.segments.append((global_, commands, slots))
        return global_

    def record_segments(self, fg: FunctionGen) -> None:
        b = fg.b
        zero = fg.const("i32", 0)
        zero64 = fg.const("i64", 0)
        null = fg.new("ref")
        b.emit("const.ref.null", null)

        def buffer(source: tuple[str, int]) -> tuple[Reg, Reg]:
            """The (slot, buffer) operands naming `source`: a binding-table slot with a null
            buffer, or a constant's global buffer itself (uploaded above)."""
            kind, index = source
            if kind == "slot":
                return fg.const("i32", index), null
            return zero, fg.global_ref(index, f"constant {index}")

        for global_, commands, slots in self.segments:
            cmd = fg.new("ref")
            fg.call("hal.command_buffer.create",
                    [fg.device(), zero, fg.const("i32", 1), fg.const("i32", slots)], [cmd])
            for c in commands:
                if c[0] == "barrier":
                    fg.call("hal.command_buffer.execution_barrier", [cmd, zero, zero, zero], [])
                    continue
                if c[0] == "fill":
                    _, target, length, pattern, pattern_length = c
                    slot, buf = buffer(target)
                    fg.call("hal.command_buffer.fill_buffer",
                            [cmd, buf, zero64, fg.const("i64", length), slot,
                             fg.const("i64", pattern), fg.const("i32", pattern_length), zero64],
                            [])
                    continue
                if c[0] == "copy":
                    _, source, target, length = c
                    (source_slot, source_buf), (target_slot, target_buf) = \
                        buffer(source), buffer(target)
                    fg.call("hal.command_buffer.copy_buffer",
                            [cmd, source_slot, target_slot, source_buf, zero64, target_buf,
                             zero64, fg.const("i64", length), zero64], [])
                    continue
                _, ordinal, bindings = c
                grid = []
                for g in self.g_workgroups[ordinal]:
                    r = fg.new("i32")
                    b.emit("global.load.i32", r, g)
                    grid.append(r)
                # Bindings in binding order, each (slot, buffer, offset, length).
                regs: list[Reg] = []
                for binding, source, length in sorted(bindings):
                    slot, buf = buffer(source)
                    regs += [slot, buf, zero64, fg.const("i64", length)]
                fg.call_variadic("hal.command_buffer.dispatch", [0, len(bindings)],
                                 [cmd, fg.executable(), fg.const("i32", ordinal), *grid,
                                  zero64, *regs], [])
            fg.call("hal.command_buffer.finalize", [cmd], [])
            b.emit("global.store.ref", global_, cmd)

    def kernel_ordinal(self, kernel: K.Kernel) -> int:
        return self.kernel_ordinals[id(kernel)]

    def workgroup_globals(self, ordinal: int) -> tuple[int, int, int] | None:
        return self.g_workgroups.get(ordinal)

    def launches(self, ordinal: int) -> list[Launch]:
        return [v.launches[ordinal] for v in self.variants]

    # -- the module ----------------------------------------------------------------------
    def generate(self) -> bytes:
        functions = list(self.program.functions)
        for f in functions:
            self.functions[f.name] = (self.w.declare_function(
                f.name, cconv([a.type for a in f.args], f.result_types)), f)
        for name in self.program.unsupported:
            failed = self.program.failed.get(name)
            convention = "0v_v" if failed is None else \
                cconv([a.type for a in failed.args], failed.result_types)
            self.functions[name] = (self.w.declare_function(name, convention), failed)
        failures: list[str] = []
        for f in functions:
            ordinal = self.functions[f.name][0]
            try:
                builder = FunctionGen(self, f, self.plans[f.name]).generate()
            except CompileError as e:
                message = in_function(str(e), f.name)
                if not self.partial:
                    raise CompileError(message) from None
                warnings.warn(CompileWarning(message, f.name), stacklevel=2)
                failures.append(message)
                builder = failing_function(self, str(e))
            self.w.define_function(ordinal, builder)
            if f.public:
                self.w.add_export(f.name, ordinal, reflection(f))
        if functions and len(failures) == len(functions):  # as driver.py: nothing compiles
            raise CompileError("\n".join([in_function(m, n) for n, m in
                                          self.program.unsupported.items()] + failures))
        for name, message in self.program.unsupported.items():
            ordinal, failed = self.functions[name]
            self.w.define_function(ordinal, failing_function(self, message))
            if failed is None:
                self.w.add_export(name, ordinal, {"abi.args": "", "abi.results": ""})
            elif failed.public:
                self.w.add_export(name, ordinal, reflection(failed))
        # __init last: it uploads the constants the functions above turned out to use.
        self.w.set_init_function(self.w.add_function("__init", "0v_v", self.init_function()))
        return self.w.to_bytes()

    def init_function(self) -> FunctionBuilder:
        fg = FunctionGen(self, tir.Function("__init", [], [], tir.Region()), StreamPlan())
        b = fg.b
        dev = fg.new("ref")
        fg.call("hal.device.default", [], [dev])
        b.emit("global.store.ref", self.device_global, dev)
        alloc = fg.new("ref")
        fg.call("hal.device.allocator", [dev], [alloc])
        b.emit("global.store.ref", self.allocator_global, alloc)
        ready, fail = Label(), Label()
        if not self.variants:  # nothing to dispatch: no executable to pick
            fg.br(ready)
        else:
            self.select_variant(fg, dev, ready, fail)
        fg.bind(ready)
        for global_, op in self.constants.values():
            data = tensor_bytes(np.asarray(op.attrs["value"]), op.result.tensor_type, op.location)
            b.emit("global.store.ref", global_, self.upload(fg, data, in_place=True))
        for global_, g in self.globals.values():
            self.init_global(fg, global_, g)
        self.record_segments(fg)
        b.emit("return", [])
        fg.terminated = True
        return b.allocate([], "__init")

    def select_variant(self, fg: FunctionGen, dev: Reg, ready: Label, fail: Label) -> None:
        b = fg.b
        category = fg.string("hal.executable.format")
        for i, v in enumerate(self.variants):
            create = Label()
            next_try = Label() if i + 1 < len(self.variants) else fail
            fmt = fg.string(v.format)
            ok, value = fg.new("i32"), fg.new("i64")
            fg.call("hal.device.query.i64", [dev, category, fmt], [ok, value])
            supported = fg.new("i32")
            b.emit("trunc.i64.i32", supported, value)
            b.emit("cond_br", supported, create, next_try)
            fg.terminated = True
            fg.bind(create)
            data = fg.new("ref")
            b.emit("const.ref.rodata", data, self.w.add_rodata(
                f"executable_{v.target}", v.format, v.data))
            null = fg.new("ref")
            b.emit("const.ref.null", null)
            exe = fg.new("ref")
            fg.call("hal.executable.create", [dev, fmt, data, null], [exe])
            b.emit("global.store.ref", self.executable_global, exe)
            b.emit("global.store.i32", self.variant_global, fg.const("i32", i))
            for ordinal, globals_ in self.g_workgroups.items():
                launch = v.launches[ordinal]
                kern = self.kernels[ordinal]
                # Static dispatches only have workgroup globals.
                counts = launch.counts(kern.static_ranges) if isinstance(launch, K.Grid) \
                    else launch
                for g, n in zip(globals_, counts):
                    b.emit("global.store.i32", g, fg.const("i32", n))
            fg.br(ready)
            if next_try is not fail:
                fg.bind(next_try)
        fg.bind(fail)
        targets = ", ".join(f"{v.target} (format {v.format})" for v in self.variants)
        b.emit("fail", fg.const("i32", FAILED_PRECONDITION),
               f"no executable in this module can run on the device: the module holds "
               f"targets {targets}")
        fg.terminated = True

    def upload(self, fg: FunctionGen, data: bytes, in_place: bool = False) -> Reg:
        """A device buffer holding `data` (a rodata segment). `in_place` (constants, which
        nothing writes): the device uses the mapped module's bytes where it can
        (`hal.allocator.import`, the CPU drivers), and copies them where it cannot (Vulkan),
        as IREE's constant upload does."""
        src = fg.new("ref")
        # One segment per content: an output that starts as this constant reads it too.
        fg.b.emit("const.ref.rodata", src, self._constant_blob(data))
        buf = fg.new("ref")
        zero = fg.const("i32", 0)
        args = [fg.allocator(), fg.const("i64", -1), zero, zero, src, fg.const("i64", 0),
                fg.const("i64", len(data))]
        if not in_place:
            fg.call("hal.allocator.allocate.initialized", args, [buf])
            return buf
        fg.call("hal.allocator.import", [args[0], fg.const("i32", 1), *args[1:]], [buf])
        imported = fg.new("i32")
        fg.b.emit("cmp.nz.ref", imported, buf)
        copy, done = Label(), Label()
        fg.b.emit("cond_br", imported, done, copy)
        fg.terminated = True
        fg.bind(copy)
        fg.call("hal.allocator.allocate.initialized", args, [buf])
        fg.br(done)
        fg.bind(done)
        return buf

    def global_contents(self, g: tir.Global) -> tuple[bytes, list[int]]:
        """A tensor global's initial bytes and dims (a dynamic dim takes the initial value's
        size, as a dynamic constant does); CompileError when it cannot be stored."""
        t = g.tensor_type
        element_type_code(t.element_type)
        if g.initial is None:
            if not t.is_static:
                raise CompileError(f"{g.location}: error: global '@{g.name}' has a dynamic "
                                   "shape and no initial value")
            is_float = SCALAR_TYPES[t.element_type].is_float
            value = np.zeros(t.static_shape, np.float64 if is_float else np.int64)
        else:
            value = np.asarray(g.initial)
        return tensor_bytes(value, t, g.location), list(t.shape_for(value.shape))

    def init_global(self, fg: FunctionGen, global_: int, g: tir.Global) -> None:
        b = fg.b
        if isinstance(g.type, tir.TensorType):
            data, shape = self.global_contents(g)
            buf = self.upload(fg, data)
            view = fg.new("ref")
            dims = [fg.const("i64", d) for d in shape]
            fg.call_variadic("hal.buffer_view.create", [len(dims)],
                             [buf, fg.const("i64", 0), fg.const("i64", len(data)),
                              fg.const("i32", element_type_code(g.type.element_type)),
                              fg.const("i32", DENSE_ROW_MAJOR), *dims], [view])
            b.emit("global.store.ref", global_, view)
        else:
            r = fg.scalar_const(g.type.name, 0 if g.initial is None else g.initial)
            b.emit(f"global.store.{r.bank}", global_, r)


def in_function(message: str, name: str) -> str:
    """A compile error with its function named on the first line (the one a source line and
    caret may follow)."""
    first, sep, rest = message.partition("\n")
    return f"{first} (in function '{name}'){sep}{rest}"


def failing_function(m: ModuleGen, message: str) -> FunctionBuilder:
    b = FunctionBuilder()
    status = Reg("i32", 0)
    b.emit("const.i32", status, UNIMPLEMENTED)
    b.emit("fail", status, message)
    return b


def reflection(f: tir.Function) -> dict[str, str]:
    def spell(t: tir.Type) -> str:
        if isinstance(t, tir.TensorType):
            return "x".join(["?" if d is None else str(d) for d in t.shape]
                            + ["i32" if t.element_type == "index" else t.element_type])
        return {"index": "i64"}.get(t.name, t.name)
    return {"abi.args": ";".join(spell(a.type) for a in f.args),
            "abi.results": ";".join(spell(t) for t in f.result_types)}


def tensor_bytes(value: np.ndarray, t: tir.TensorType, location: str) -> bytes:
    """A tensor's contents in its storage form (kernel.py's docstring)."""
    et = t.element_type
    shape = t.shape_for(value.shape)
    value = np.broadcast_to(value, shape) if value.shape != shape else value
    try:
        return numerics.encode(et, np.asarray(value))
    except ValueError as e:
        raise CompileError(f"{location}: error: constant of element type {et}: {e}") from None


def generate_module(program: tir.Program, plans: dict[str, StreamPlan],
                    variants: list[ExecutableVariant], name: str, partial: bool = False,
                    metadata: dict[str, str] | None = None) -> bytes:
    """The module; a function whose host code fails to generate is a CompileError, or with
    `partial` a stub that fails when called. `metadata` (who built it, how) goes in as it is."""
    gen = ModuleGen(program, plans, variants, name, partial)
    gen.w.metadata.update(metadata or {})
    return gen.generate()
