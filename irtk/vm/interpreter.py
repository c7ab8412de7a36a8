"""The VM interpreter: a `Context` instantiates a verified module and runs its functions.

Each function is decoded once, at instantiation, into a list of closures (one per instruction;
see `ops.py`). A frame's registers are one Python list (banks laid out i32, i64, f32, f64, ref),
so every closure reads and writes `regs[k]` with k fixed at decode time. A closure returns None
to fall through, an int to branch (an instruction index), or a `_Call` / `_Return` record that
the loop below turns into a frame push or pop. Frames live on an explicit stack, so VM recursion
never becomes Python recursion and the depth limit is a clean RuntimeFailure.

A yieldable import may return an `irtk.vm.yielding.Wait`: the loop then returns the whole
invocation state (`_Suspended`) instead of results, and an `Invocation` (the future that
`Context.start` returns) resumes it once the wait is over. A blocking `Context.call` is the same
machinery driven to completion, so it pays nothing for this unless something actually waits.

Threads: a context may be called from several threads at once (a server). VM code of a context
runs only under its lock (`Context._lock`), taken once per start or resumption, not per
instruction; waiting (`Wait.block`) happens without it. So the code of one call between two
waits runs as a unit with respect to every other call of the context: globals, the in-flight
set and each invocation's state are only touched under the lock, and any thread may drive any
invocation (`result()` also advances the others that are ready, whichever thread started them)
without two threads ever resuming the same one. A simpler rule than "a thread resumes only its
own invocations", and it keeps the one-thread guarantee that waiting on one call never stalls
another call's progress.
"""
from __future__ import annotations

import dataclasses
import operator
import threading
import time
import weakref
from typing import Any, Callable, Sequence

from irtk import tracing
from irtk.errors import Error, InputError, RuntimeFailure
from irtk.vm import fusion, isa, limits as vm_limits, numerics, ref_types
from irtk.vm.calling_convention import Segment, Signature
from irtk.vm.encoding import Instr
from irtk.vm.limits import Budget, Limits, Meter
from irtk.vm.module import BytecodeModule, FunctionDef
from irtk.vm.native_module import LinkedImport, NativeModule, link_imports
from irtk.vm.ops import FACTORIES
from irtk.vm.refs import VMBuffer
from irtk.vm.yielding import Wait

MAX_FRAMES = 256
_POLL_SLICE = 0.002   # seconds a waiting `Invocation.result` blocks before polling the others


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


class _Yield:
    """A yieldable import returned a Wait: where its results go once it is over."""

    __slots__ = ("wait", "results", "where", "name")

    def __init__(self, wait: Wait, results: tuple[int, ...], where: str, name: str) -> None:
        self.wait = wait
        self.results = results
        self.where = where
        self.name = name


class _Suspended:
    """The whole state of a suspended invocation: current frame, saved frames, its budget."""

    __slots__ = ("fn", "code", "regs", "pc", "stack", "budget", "pending")

    def __init__(self, fn: "_Function", code: list, regs: list, pc: int, stack: list,
                 budget: Budget, pending: _Yield) -> None:
        self.fn, self.code, self.regs, self.pc = fn, code, regs, pc
        self.stack, self.budget, self.pending = stack, budget, pending


class Invocation:
    """A function call in flight: a future that any thread may drive to completion.

    `Context.start` runs the call until it finishes or a yieldable import waits. `poll()`
    resumes it if its wait is over (without blocking), `done()` says whether it has finished,
    `result(timeout)` drives it — and every other invocation of the same context that is
    ready — until it finishes, then returns its raw results or raises its error. The methods
    whose names start with an underscore need the context's lock held (see the module doc).
    """

    __slots__ = ("context", "name", "_state", "_values", "_error", "__weakref__")

    def __init__(self, context: "Context", name: str) -> None:
        self.context = context
        self.name = name
        self._state: _Suspended | None = None
        self._values: list[Any] | None = None
        self._error: BaseException | None = None

    def _settle(self, outcome: "list[Any] | _Suspended") -> None:
        if isinstance(outcome, _Suspended):
            self._state = outcome
            self.context._in_flight.add(self)
        else:
            self._state = None
            self._values = outcome
            self.context._in_flight.discard(self)

    def _advance(self, state: _Suspended) -> None:
        try:
            self._settle(self.context._resume(state))
        except Error as e:
            self._state = None
            self._error = e
            self.context._in_flight.discard(self)

    def done(self) -> bool:
        return self._state is None

    def poll(self) -> bool:
        """Resume if the awaited thing is ready; True once the call has finished."""
        if self._state is None:
            return True
        with self.context._lock:
            finished = self._poll()
            state = self._state
        if not finished and state is not None:   # back to the caller: nothing may wait for it
            state.pending.wait.flush()
        return finished

    def _poll(self) -> bool:
        while True:
            state = self._state
            if state is None:
                return True
            try:
                ready = state.pending.wait.ready()
            except Error as e:
                self._fail_wait(state, e)
                return True
            if not ready:
                if state.budget.out_of_time():
                    self._fail_wait(state, RuntimeFailure(
                        f"'{self.name}' ran past its time limit of {state.budget.seconds:g} s "
                        f"(Limits.seconds) while waiting"))
                    return True
                return False
            self._advance(state)

    def _fail_wait(self, state: _Suspended, error: Error) -> None:
        if self._state is not state:
            return   # another thread resumed it meanwhile; this wait is over
        self._state = None
        self._error = self.context._wrap_wait_error(state.pending, error)
        self.context._in_flight.discard(self)

    def result(self, timeout: float | None = None) -> list[Any]:
        """The raw results; raises the call's error, or TimeoutError if `timeout` passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        lock = self.context._lock
        while True:
            with lock:
                if self._poll():
                    break
                others = [o for o in self.context._in_flight if o is not self]
                for other in others:
                    other._poll()
                state = self._state
                if state is None:
                    break
                waiting = any(o._state is not None for o in others)
            # Block outside the lock, so the other threads' calls go on meanwhile.
            slice_ = _POLL_SLICE if waiting else None
            limit_left = state.budget.time_left()
            if limit_left is not None:   # wake up when the call's own time limit is over
                slice_ = max(limit_left, 0.0) if slice_ is None else min(slice_, limit_left)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"'{self.name}' did not finish within {timeout} s")
                slice_ = left if slice_ is None else min(slice_, left)
            started = time.monotonic()
            try:
                ready = state.pending.wait.block(slice_)
            except Error as e:
                with lock:
                    self._fail_wait(state, e)
                continue
            if not ready and time.monotonic() - started < 0.0005:
                time.sleep(0.0005)   # a wait that cannot block must not make us spin
        if self._error is not None:
            raise self._error
        assert self._values is not None
        return self._values

    def __repr__(self) -> str:
        status = "running" if self._state is not None else (
            "failed" if self._error is not None else "done")
        return f"<irtk invocation of '{self.name}': {status}>"


def _layout(counts: dict[str, int]) -> tuple[dict[str, int], list[Any]]:
    """Base slot of each bank and the zeroed register (or global) list."""
    bases: dict[str, int] = {}
    template: list[Any] = []
    for bank in isa.BANKS:
        bases[bank] = len(template)
        template.extend([isa.BANK_ZERO[bank]] * counts[bank])
    return bases, template


class _Function:
    """A decoded function: its closures, their byte offsets and its frame layout."""

    def __init__(self, index: int, fn: FunctionDef) -> None:
        self.index = index
        self.name = fn.name
        assert fn.signature is not None, "a verified module's signatures are parsed"
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
    """One instance of a module: linked imports and ref types, globals, decoded functions.

    Creating it runs the module's init function (`__init`), which fills the globals.
    """

    def __init__(self, module: BytecodeModule, native_modules: Sequence[NativeModule] = (),
                 *, run_init: bool = True, step_limit: int | None = None,
                 limits: Limits | None = None, fuse: bool = True) -> None:
        """`limits` bounds what each invocation (`__init` included) and the context may use:
        steps, wall time, VM heap and device memory (`irtk.vm.limits`); a RuntimeFailure
        says which ran out. `step_limit` is a shorthand for `Limits(steps=...)`.
        `fuse=False` keeps one closure per instruction (tests compare both ways)."""
        self.module = module
        self.fuse = fuse
        if step_limit is not None:
            limits = dataclasses.replace(limits or Limits(), steps=step_limit)
        self.limits = (limits or Limits()).resolved()
        self.step_limit: float = float("inf") if self.limits.steps is None else self.limits.steps
        assert self.limits.heap_bytes is not None and self.limits.device_bytes is not None
        self._heap = Meter(f"module '{module.name}'", self.limits.heap_bytes, "heap_bytes")
        self._device = Meter(f"module '{module.name}'", self.limits.device_bytes,
                             "device_bytes")
        # Held while VM code of this context runs and while invocations change state.
        self._lock = threading.RLock()
        self._in_flight: weakref.WeakSet[Invocation] = weakref.WeakSet()
        self.native_modules = list(native_modules)
        self.imports: list[LinkedImport] = link_imports(module, self.native_modules)
        self.types: list[ref_types.RefType] = ref_types.REGISTRY.resolve(module.types)
        self.global_bases, self.globals = _layout(module.global_counts)
        self.rodata = [VMBuffer(seg.data, readonly=True) for seg in module.rodata]
        self.functions = [_Function(i, fn) for i, fn in enumerate(module.functions)]
        for fn, definition in zip(self.functions, module.functions):
            assert definition.instructions is not None, "a verified module's code is decoded"
            self._decode(fn, definition.instructions)
        self.exports = {e.name: e.function for e in module.exports}
        if run_init and module.init_function >= 0:
            init = self.functions[module.init_function]
            tracer = tracing.active
            if tracer is not None:
                with tracer.span("call __init", "call", module=module.name):
                    self._run_init(init)
            else:
                self._run_init(init)

    def _run_init(self, init: "_Function") -> None:
        self._finish(init, self._loop(init, init.code, list(init.template), 0, [],
                                      self._budget(init)))

    # -- calling from Python ---------------------------------------------------------------------

    @property
    def export_names(self) -> list[str]:
        return [e.name for e in self.module.exports]

    def signature(self, function: str | int) -> Signature:
        return self._resolve(function).signature

    def call(self, function: str | int, args: Sequence[Any] = ()) -> list[Any]:
        """Run an export (by name) or an internal function (by ordinal) with raw VM values;
        blocks while it waits (other in-flight invocations still advance meanwhile)."""
        tracer = tracing.active
        if tracer is not None:
            with tracer.span(f"call {function}", "call", module=self.module.name):
                return self._call(function, args)
        return self._call(function, args)

    def _call(self, function: str | int, args: Sequence[Any]) -> list[Any]:
        fn = self._resolve(function)
        regs = self._frame(fn, args)
        with self._lock:
            outcome = self._loop(fn, fn.code, regs, 0, [], self._budget(fn))
        # A wait the device lets this thread finish itself (local-task runs the work here)
        # needs no Invocation: settle it outside the lock, as a blocking wait would, then go
        # on. A call with a time limit must not start work that may outlast it.
        while isinstance(outcome, _Suspended) and outcome.budget.seconds is None:
            try:
                settled = outcome.pending.wait.settle_here()
            except Error as e:
                outcome.stack.clear()
                raise self._wrap_wait_error(outcome.pending, e) from None
            if not settled:
                break
            with self._lock:
                outcome = self._resume(outcome)
        if not isinstance(outcome, _Suspended):
            return outcome
        with self._lock:
            invocation = Invocation(self, fn.name)
            invocation._settle(outcome)
        return invocation.result()

    def start(self, function: str | int, args: Sequence[Any] = ()) -> Invocation:
        """Begin a call and return it as an `Invocation` once it finishes or first waits."""
        fn = self._resolve(function)
        invocation = Invocation(self, fn.name)
        with self._lock:
            try:
                invocation._settle(self._loop(fn, fn.code, self._frame(fn, args), 0, [],
                                              self._budget(fn)))
            except Error as e:
                invocation._error = e
            state = invocation._state
        if state is not None:   # handed back unfinished: what it waits for must not wait for it
            state.pending.wait.flush()
        return invocation

    def _finish(self, fn: "_Function", outcome: "list[Any] | _Suspended") -> list[Any]:
        if not isinstance(outcome, _Suspended):
            return outcome
        invocation = Invocation(self, fn.name)
        with self._lock:
            invocation._settle(outcome)
        return invocation.result()

    def _budget(self, fn: "_Function") -> Budget:
        return Budget(self.limits, fn.name, self._heap, self._device)

    def memory_in_use(self) -> dict[str, int]:
        """Live bytes this context's code has allocated: VM heap and device memory."""
        return {"heap": self._heap.used, "device": self._device.used}

    def _frame(self, fn: "_Function", args: Sequence[Any]) -> list[Any]:
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
        return regs

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

    def _loop(self, fn: _Function, code: list, regs: list[Any], pc: int, stack: list,
              budget: Budget) -> "list[Any] | _Suspended":
        """Run from `pc` until the outermost frame returns (its values) or a call waits."""
        previous = vm_limits.enter(budget)
        fuel = budget.fuel
        try:
            while True:
                x = code[pc](regs)
                if x is None:
                    pc += 1
                elif x.__class__ is int:
                    pc = x
                    fuel -= 1
                    if fuel < 0:
                        fuel = self._checkpoint(budget, fn, pc)
                elif x.__class__ is _Call:
                    if len(stack) >= MAX_FRAMES - 1:
                        raise RuntimeFailure(f"stack overflow: more than {MAX_FRAMES} frames "
                                             f"(calling '{x.callee.name}' from '{fn.name}')")
                    fuel -= 1
                    if fuel < 0:
                        fuel = self._checkpoint(budget, fn, pc)
                    callee = x.callee
                    frame = list(callee.template)
                    for src, dst in x.moves:
                        frame[dst] = regs[src]
                    stack.append((fn, code, regs, pc + 1, x.results))
                    fn, code, regs, pc = callee, callee.code, frame, 0
                elif x.__class__ is _Return:
                    values = [regs[s] for s in x.sources]
                    if not stack:
                        return values
                    fn, code, regs, pc, targets = stack.pop()
                    for dst, value in zip(targets, values):
                        regs[dst] = value
                else:   # _Yield: park the whole invocation
                    budget.fuel = fuel
                    return _Suspended(fn, code, regs, pc, stack, budget, x)
        except Error:
            stack.clear()
            regs = []
            raise
        except Exception as e:  # a Trap or a Python-level fault inside an op
            offset = fn.offsets[pc] if pc < len(fn.offsets) else -1
            where = self._where(fn, offset)
            stack.clear()
            regs = []
            raise RuntimeFailure(f"{where}: {_reason(e)}") from None
        finally:
            vm_limits.leave(previous)

    def _checkpoint(self, budget: Budget, fn: _Function, pc: int) -> float:
        """A grant of steps is spent: check the step total and the clock, grant the next."""
        budget.steps_left -= budget.granted
        if budget.steps_left <= 0 or budget.out_of_time():
            where = self._where(fn, fn.offsets[pc] if pc < len(fn.offsets) else -1)
            if budget.steps_left <= 0:
                raise RuntimeFailure(f"{where}: step limit of {self.step_limit:.0f} branches "
                                     f"and calls exceeded (Limits.steps)")
            raise RuntimeFailure(f"{where}: time limit of {budget.seconds:g} s exceeded "
                                 f"(Limits.seconds)")
        budget.granted = min(vm_limits.CHECK_EVERY, budget.steps_left)
        return budget.granted - 1

    def _resume(self, s: _Suspended) -> "list[Any] | _Suspended":
        """Continue a suspended invocation whose wait is over."""
        pending = s.pending
        try:
            value = pending.wait.results()
        except Error as e:
            s.stack.clear()
            raise self._wrap_wait_error(pending, e) from None
        except Exception as e:
            s.stack.clear()
            raise RuntimeFailure(f"{pending.name}: {e} (in {pending.where})") from e
        try:
            _store(s.regs, pending.results, value)
        except Exception as e:
            s.stack.clear()
            raise RuntimeFailure(f"{pending.name}: bad results {value!r}: {e} "
                                 f"(in {pending.where})") from None
        return self._loop(s.fn, s.code, s.regs, s.pc + 1, s.stack, s.budget)

    @staticmethod
    def _wrap_wait_error(pending: _Yield, error: Error) -> Error:
        """A failure that surfaced while waiting names the import and its call site."""
        if isinstance(error, RuntimeFailure):
            text = str(error)
            if not text.startswith(pending.name):
                text = f"{pending.name}: {text}"
            return RuntimeFailure(f"{text} (in {pending.where})")
        return error

    def _where(self, fn: _Function, offset: int) -> str:
        loc = self.module.location(fn.index, offset)
        return f"function '{fn.name}' at offset {offset}" + (f" ({loc})" if loc else "")

    # -- decoding --------------------------------------------------------------------------------

    def _decode(self, fn: _Function, instrs: list[Instr]) -> None:
        index_of = {instr.offset: i for i, instr in enumerate(instrs)}
        all_args = [self._args(fn, instr, index_of) for instr in instrs]
        for instr, args in zip(instrs, all_args):
            fn.offsets.append(instr.offset)
            factory = FACTORIES.get(instr.op.name)
            fn.code.append(factory(*args) if factory is not None
                           else _CONTROL[instr.op.name](self, fn, instr, *args))
        if self.fuse:
            self._fuse(fn, instrs, all_args)

    def _args(self, fn: _Function, instr: Instr, index_of: dict[int, int]) -> list[Any]:
        """The operands with registers as absolute frame slots and blocks as indices."""
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
            elif kind == "blocks":
                args.append(tuple(index_of[v] for v in value))
            elif kind == "global":
                assert op.bank is not None, "an op with a global operand has a register operand"
                args.append(self.global_bases[op.bank] + value)
            else:
                args.append(value)
        return args

    def _fuse(self, fn: _Function, instrs: list[Instr], all_args: list[list[Any]]) -> None:
        """Replace straight-line runs of fusible ops (see `fusion`) by one function each."""
        targets: set[int] = set()
        for args, instr in zip(all_args, instrs):
            if instr.op.name == "br":
                targets.add(args[0])
            elif instr.op.name == "cond_br":
                targets.update(args[1:])
            elif instr.op.name == "br_table":
                targets.add(args[1])
                targets.update(args[2])
        runs: list[tuple[list[Any], Any]] = []
        starts: list[int] = []
        count = len(instrs)
        i = 0
        while i < count:
            if not fusion.fusible(instrs[i].op.name):
                i += 1
                continue
            statements = []
            j = i
            while j < count and fusion.fusible(instrs[j].op.name) and (j == i or j not in targets):
                kinds = instrs[j].op.operands
                statements.append((instrs[j].op.name, tuple(
                    ("slot" if k.rstrip(">") in isa.BANKS else "imm", v)
                    for k, v in zip(kinds, all_args[j]))))
                j += 1
            ending: Any = ("next", j)
            if j < count and j not in targets and instrs[j].op.name in ("br", "cond_br"):
                ending = (instrs[j].op.name, *all_args[j])
                j += 1
            if j - i >= 2:
                runs.append((statements, ending))
                starts.append(i)
            i = j
        if runs:
            for start, run in zip(starts, fusion.compile_runs(runs)):
                fn.code[start] = run

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

    def _op_br_table(self, fn: _Function, instr: Instr, index: int, default: int,
                     targets: tuple[int, ...]) -> Callable:
        count = len(targets)

        def run(r: list) -> int:
            i = r[index]
            return targets[i] if 0 <= i < count else default
        return run

    def _op_cmp_type_ref(self, fn: _Function, instr: Instr, d: int, a: int,
                         type_index: int) -> Callable:
        ref_type = self.types[type_index]
        type_of = ref_types.REGISTRY.type_of

        def run(r: list) -> None:
            value = r[a]
            r[d] = 1 if value is not None and type_of(value) is ref_type else 0
        return run

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
        return _native_call(self.imports[ordinal], _getter(args), results,
                            self._where(fn, instr.offset))


    def _op_call_import_variadic(self, fn: _Function, instr: Instr, ordinal: int,
                                 sizes: tuple[int, ...], args: tuple[int, ...],
                                 results: tuple[int, ...]) -> Callable:
        linked = self.imports[ordinal]
        plan: list[Any] = []   # per argument: a slot, or (tuple width, slots) for a segment
        pos = 0
        segment_sizes = iter(sizes)
        signature = self.module.imports[ordinal].signature
        assert signature is not None, "a verified module's signatures are parsed"
        for arg in signature.args:
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


def _getter(slots: tuple[int, ...]) -> Callable[[list], Sequence[Any]]:
    """The values of `slots` from the registers, as a sequence (`operator.itemgetter` for
    two or more: it runs in C, and an import is called on every step of a program)."""
    if len(slots) >= 2:
        return operator.itemgetter(*slots)
    if slots:
        slot = slots[0]
        return lambda r: (r[slot],)
    return lambda r: ()


def _reason(error: Exception) -> str:
    """An op's exception as a message; MemoryError says nothing by itself."""
    if isinstance(error, MemoryError):
        return f"out of host memory{': ' + str(error) if str(error) else ''}"
    return str(error) or type(error).__name__


def _store(r: list, results: tuple[int, ...], value: Any) -> None:
    count = len(results)
    if count == 1:
        r[results[0]] = value
    elif count:
        values = tuple(value)
        if len(values) != count:
            raise ValueError(f"expected {count} results, got {len(values)}")
        for dst, v in zip(results, values):
            r[dst] = v


def _native_call(linked: LinkedImport, gather: Callable[[list], Sequence[Any]],
                 results: tuple[int, ...], where: str) -> Callable:
    """Call a native function; its RuntimeFailures and Python errors get the call site added
    (other irtk errors, such as InputError from `hal.buffer_view.assert`, pass unchanged).
    A yieldable function may return a `Wait`, which suspends the invocation (`_Yield`)."""
    target = linked.target
    name = linked.full_name
    yieldable = linked.function.yieldable

    def run(r: list) -> Any:
        try:
            tracer = tracing.active
            if tracer is None:
                value = target(*gather(r))
            else:
                with tracer.span(name, "hal"):
                    value = target(*gather(r))
        except RuntimeFailure as e:
            raise RuntimeFailure(f"{e} (in {where})") from e
        except Error:
            raise
        except Exception as e:
            raise RuntimeFailure(f"{name}: {e} (in {where})") from e
        if yieldable and isinstance(value, Wait):
            return _Yield(value, results, where, name)
        try:
            _store(r, results, value)
        except (TypeError, ValueError) as e:
            raise RuntimeFailure(f"{name}: bad results {value!r}: {e} (in {where})") from None
        return None
    return run


_CONTROL: dict[str, Callable[..., Callable]] = {
    "const.ref.rodata": Context._op_const_ref_rodata,
    "br": Context._op_br,
    "cond_br": Context._op_cond_br,
    "br_table": Context._op_br_table,
    "cmp.type.ref": Context._op_cmp_type_ref,
    "return": Context._op_return,
    "fail": Context._op_fail,
    "call": Context._op_call,
    "call.import": Context._op_call_import,
    "call.import.variadic": Context._op_call_import_variadic,
    **{f"global.load.{b}": Context._op_global_load for b in isa.BANKS},
    **{f"global.store.{b}": Context._op_global_store for b in isa.BANKS},
}
