"""The VM interpreter: a `Context` instantiates a verified module and runs its functions.

Each function is decoded once, at instantiation, into a list of closures (one per instruction;
see `ops.py`). A frame's registers are one Python list (banks laid out i32, i64, f32, f64, ref),
so every closure reads and writes `regs[k]` with k fixed at decode time. A closure returns None
to fall through, an int to branch (an instruction index), or a `_Call` / `_Return` record that
the loop below turns into a frame push or pop. Frames live on an explicit stack, so VM recursion
never becomes Python recursion and the depth limit is a clean RuntimeFailure.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from irtk.errors import Error, InputError, RuntimeFailure
from irtk.vm import isa, numerics
from irtk.vm.calling_convention import Segment, Signature
from irtk.vm.encoding import Instr
from irtk.vm.module import BytecodeModule, FunctionDef
from irtk.vm.native_module import LinkedImport, NativeModule, link_imports
from irtk.vm.ops import FACTORIES
from irtk.vm.refs import VMBuffer

MAX_FRAMES = 256
_ZERO = {"i32": 0, "i64": 0, "f32": 0.0, "f64": 0.0, "ref": None}


class _Call:
    __slots__ = ("callee", "moves", "results")

    def __init__(self, callee: "_Function", moves: list[tuple[int, int]],
                 results: tuple[int, ...]) -> None:
        self.callee = callee
        self.moves = moves
        self.results = results


class _Return:
    __slots__ = ("sources",)

    def __init__(self, sources: tuple[int, ...]) -> None:
        self.sources = sources


def _layout(counts: dict[str, int]) -> tuple[dict[str, int], list[Any]]:
    """Base slot of each bank and the zeroed register (or global) list."""
    bases, template = {}, []
    for bank in isa.BANKS:
        bases[bank] = len(template)
        template.extend([_ZERO[bank]] * counts[bank])
    return bases, template


class _Function:
    """A decoded function: its closures, their byte offsets and its frame layout."""

    def __init__(self, index: int, fn: FunctionDef) -> None:
        self.index = index
        self.name = fn.name
        self.signature: Signature = fn.signature
        self.bases, self.template = _layout(fn.register_counts)
        used = {bank: 0 for bank in isa.BANKS}
        self.arg_slots = []
        for bank in self.signature.arg_banks():
            self.arg_slots.append(self.bases[bank] + used[bank])
            used[bank] += 1
        self.code: list[Callable[[list], Any]] = []
        self.offsets: list[int] = []


def _convert_arg(value: Any, bank: str) -> Any:
    if bank in ("i32", "i64"):
        if isinstance(value, float) or not hasattr(value, "__index__"):
            raise TypeError(f"expected an integer ({bank}), got {type(value).__name__}")
        return numerics.w32(int(value)) if bank == "i32" else numerics.w64(int(value))
    if bank in ("f32", "f64"):
        if not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
            raise TypeError(f"expected a float ({bank}), got {type(value).__name__}")
        return numerics.f32(float(value)) if bank == "f32" else float(value)
    return value


class Context:
    """One instance of a module: linked imports, globals, decoded functions.

    Creating it runs the module's init function (`__init`), which fills the globals.
    """

    def __init__(self, module: BytecodeModule, native_modules: Sequence[NativeModule] = (),
                 *, run_init: bool = True) -> None:
        self.module = module
        self.native_modules = list(native_modules)
        self.imports: list[LinkedImport] = link_imports(module, self.native_modules)
        self.global_bases, self.globals = _layout(module.global_counts)
        self.rodata = [VMBuffer(seg.data, readonly=True) for seg in module.rodata]
        self.functions = [_Function(i, fn) for i, fn in enumerate(module.functions)]
        for fn, definition in zip(self.functions, module.functions):
            self._decode(fn, definition.instructions)
        self.exports = {e.name: e.function for e in module.exports}
        if run_init and module.init_function >= 0:
            init = self.functions[module.init_function]
            self._run(init, list(init.template))

    # -- calling from Python ---------------------------------------------------------------------

    @property
    def export_names(self) -> list[str]:
        return [e.name for e in self.module.exports]

    def signature(self, function: str | int) -> Signature:
        return self._resolve(function).signature

    def call(self, function: str | int, args: Sequence[Any] = ()) -> list[Any]:
        """Run an export (by name) or an internal function (by ordinal) with raw VM values."""
        fn = self._resolve(function)
        banks = fn.signature.arg_banks()
        if len(args) != len(banks):
            noun = "argument" if len(banks) == 1 else "arguments"
            raise InputError(f"{fn.name}: expected {len(banks)} {noun}, got {len(args)}")
        regs = list(fn.template)
        for i, (value, bank, slot) in enumerate(zip(args, banks, fn.arg_slots)):
            try:
                regs[slot] = _convert_arg(value, bank)
            except TypeError as e:
                raise InputError(f"{fn.name}: argument {i}: {e}") from None
        return self._run(fn, regs)

    def _resolve(self, function: str | int) -> _Function:
        if isinstance(function, str):
            if function not in self.exports:
                raise InputError(f"module '{self.module.name}' has no function '{function}'; "
                                 f"exports: {', '.join(self.exports) or 'none'}")
            return self.functions[self.exports[function]]
        if not 0 <= function < len(self.functions):
            raise InputError(f"function ordinal {function} out of range")
        return self.functions[function]

    # -- the loop --------------------------------------------------------------------------------

    def _run(self, fn: _Function, regs: list[Any]) -> list[Any]:
        code = fn.code
        pc = 0
        stack: list[tuple[_Function, list, list, int, tuple[int, ...]]] = []
        try:
            while True:
                x = code[pc](regs)
                if x is None:
                    pc += 1
                elif x.__class__ is int:
                    pc = x
                elif x.__class__ is _Call:
                    if len(stack) >= MAX_FRAMES - 1:
                        raise RuntimeFailure(f"stack overflow: more than {MAX_FRAMES} frames "
                                             f"(calling '{x.callee.name}' from '{fn.name}')")
                    callee = x.callee
                    frame = list(callee.template)
                    for src, dst in x.moves:
                        frame[dst] = regs[src]
                    stack.append((fn, code, regs, pc + 1, x.results))
                    fn, code, regs, pc = callee, callee.code, frame, 0
                else:
                    values = [regs[s] for s in x.sources]
                    if not stack:
                        return values
                    fn, code, regs, pc, targets = stack.pop()
                    for dst, value in zip(targets, values):
                        regs[dst] = value
        except Error:
            stack.clear()
            regs = []
            raise
        except Exception as e:  # a Trap or a Python-level fault inside an op
            offset = fn.offsets[pc] if pc < len(fn.offsets) else -1
            where = self._where(fn, offset)
            stack.clear()
            regs = []
            raise RuntimeFailure(f"{where}: {e}") from None

    def _where(self, fn: _Function, offset: int) -> str:
        loc = self.module.location(fn.index, offset)
        return f"function '{fn.name}' at offset {offset}" + (f" ({loc})" if loc else "")

    # -- decoding --------------------------------------------------------------------------------

    def _decode(self, fn: _Function, instrs: list[Instr]) -> None:
        index_of = {instr.offset: i for i, instr in enumerate(instrs)}
        for instr in instrs:
            fn.offsets.append(instr.offset)
            fn.code.append(self._build(fn, instr, index_of))

    def _build(self, fn: _Function, instr: Instr, index_of: dict[int, int]) -> Callable:
        op = instr.op
        args: list[Any] = []
        for kind, value in zip(op.operands, instr.operands):
            bank = kind.rstrip(">")
            if bank in isa.BANKS:
                args.append(fn.bases[bank] + value)
            elif kind == "regs":
                args.append(tuple(fn.bases[b] + i for b, i in value))
            elif kind == "block":
                args.append(index_of[value])
            elif kind == "global":
                args.append(self.global_bases[op.bank] + value)
            else:
                args.append(value)
        factory = FACTORIES.get(op.name)
        if factory is not None:
            return factory(*args)
        return _CONTROL[op.name](self, fn, instr, *args)

    def _op_const_ref_rodata(self, fn: _Function, instr: Instr, d: int, segment: int) -> Callable:
        value = self.rodata[segment]

        def run(r: list) -> None:
            r[d] = value
        return run

    def _op_global_load(self, fn: _Function, instr: Instr, d: int, g: int) -> Callable:
        store = self.globals

        def run(r: list) -> None:
            r[d] = store[g]
        return run

    def _op_global_store(self, fn: _Function, instr: Instr, g: int, s: int) -> Callable:
        store = self.globals

        def run(r: list) -> None:
            store[g] = r[s]
        return run

    def _op_br(self, fn: _Function, instr: Instr, target: int) -> Callable:
        return lambda r: target

    def _op_cond_br(self, fn: _Function, instr: Instr, c: int, t: int, f: int) -> Callable:
        return lambda r: t if r[c] else f

    def _op_return(self, fn: _Function, instr: Instr, sources: tuple[int, ...]) -> Callable:
        record = _Return(sources)
        return lambda r: record

    def _op_fail(self, fn: _Function, instr: Instr, status: int, message: str) -> Callable:
        loc = self.module.location(fn.index, instr.offset)
        text = f"{message} (in function '{fn.name}'" + (f" at {loc})" if loc else ")")
        name = fn.name

        def run(r: list) -> None:
            error = RuntimeFailure(text)
            error.status = r[status]
            error.function = name
            raise error
        return run

    def _op_call(self, fn: _Function, instr: Instr, callee_index: int,
                 args: tuple[int, ...], results: tuple[int, ...]) -> Callable:
        callee = self.functions[callee_index]
        record = _Call(callee, list(zip(args, callee.arg_slots)), results)
        return lambda r: record

    def _op_call_import(self, fn: _Function, instr: Instr, ordinal: int,
                        args: tuple[int, ...], results: tuple[int, ...]) -> Callable:
        return _native_call(self.imports[ordinal], lambda r: [r[a] for a in args], results,
                            self._where(fn, instr.offset))

    def _op_call_import_variadic(self, fn: _Function, instr: Instr, ordinal: int,
                                 sizes: tuple[int, ...], args: tuple[int, ...],
                                 results: tuple[int, ...]) -> Callable:
        linked = self.imports[ordinal]
        plan: list[Any] = []   # per argument: a slot, or (tuple width, slots) for a segment
        pos = 0
        segment_sizes = iter(sizes)
        for arg in self.module.imports[ordinal].signature.args:
            if isinstance(arg, Segment):
                width = len(arg.banks)
                count = next(segment_sizes)
                plan.append((width, args[pos:pos + width * count]))
                pos += width * count
            else:
                plan.append(args[pos])
                pos += 1

        def gather(r: list) -> list[Any]:
            out = []
            for item in plan:
                if item.__class__ is int:
                    out.append(r[item])
                else:
                    width, slots = item
                    if width == 1:
                        out.append([r[s] for s in slots])
                    else:
                        out.append([tuple(r[s] for s in slots[i:i + width])
                                    for i in range(0, len(slots), width)])
            return out
        return _native_call(linked, gather, results, self._where(fn, instr.offset))


def _native_call(linked: LinkedImport, gather: Callable[[list], list[Any]],
                 results: tuple[int, ...], where: str) -> Callable:
    """Call a native function; its RuntimeFailures and Python errors get the call site added
    (other irtk errors, such as InputError from `hal.buffer_view.assert`, pass unchanged)."""
    target = linked.target
    name = linked.full_name
    count = len(results)

    def run(r: list) -> None:
        try:
            value = target(*gather(r))
        except RuntimeFailure as e:
            raise RuntimeFailure(f"{e} (in {where})") from e
        except Error:
            raise
        except Exception as e:
            raise RuntimeFailure(f"{name}: {e} (in {where})") from e
        if count == 1:
            r[results[0]] = value
        elif count:
            for dst, v in zip(results, value):
                r[dst] = v
    return run


_CONTROL: dict[str, Callable[..., Callable]] = {
    "const.ref.rodata": Context._op_const_ref_rodata,
    "br": Context._op_br,
    "cond_br": Context._op_cond_br,
    "return": Context._op_return,
    "fail": Context._op_fail,
    "call": Context._op_call,
    "call.import": Context._op_call_import,
    "call.import.variadic": Context._op_call_import_variadic,
    **{f"global.load.{b}": Context._op_global_load for b in isa.BANKS},
    **{f"global.store.{b}": Context._op_global_store for b in isa.BANKS},
}
