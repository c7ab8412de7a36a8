"""Run a test program's functions and say which pass: what `irtk check` and the conformance
suite use.

A test file (IREE's end-to-end check tests) holds zero-argument functions that compute and call
`check.expect_*`; each is one test. The runner compiles the file, loads it with the `check`
module, calls each function and reads the module's recorded failures:
  PASS  the call returned and no check failed (a function without checks passes by running);
  FAIL  a check failed, the call raised, or the function did not compile (message says which);
  SKIP  the device refused the function's code for lack of a feature (named in the message).

One bad function must not hide the others, so problems are narrowed down to functions: when
the whole file does not compile and the error lies inside one function, or the module does not
load on the device, each function is compiled on its own (the file with the other public
functions blanked out, so line:col locations still point into the original file) and runs or
fails alone. Only an error outside every function (or an unreadable file) fails the whole file.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

import numpy as np

from irtk import hal
from irtk.errors import CompileWarning, Error, InputError
from irtk.hal.capabilities import CAPABILITIES
from irtk.modules.check import CheckModule

PASS = "pass"
FAIL = "fail"
SKIP = "skip"

DYNAMIC_DIM_SIZE = 4   # the size given to each '?' dimension of a random input


@dataclass(frozen=True)
class CheckResult:
    function: str
    status: str          # PASS, FAIL or SKIP
    message: str = ""    # FAIL: what went wrong; SKIP: the missing feature

    def line(self) -> str:
        """The one-line (first line) report `irtk check` prints."""
        tag = f"[{self.status.upper()}] {self.function}"
        return f"{tag}: {self.message}" if self.message else tag


# -- finding functions in MLIR text -------------------------------------------------------------

@dataclass(frozen=True)
class SourceFunction:
    """A top-level `func.func` of a test file, located by character offsets and lines."""

    name: str
    public: bool
    takes_args: bool
    start: int
    end: int
    first_line: int
    last_line: int
    references: frozenset[str]   # symbols it names (@callee, @global)


_FUNC = re.compile(r'func\.func\s+(?:(private|public|nested)\s+)?@("(?:[^"\\]|\\.)*"|[\w$.-]+)'
                   r'\s*\(\s*(\)?)')
_SYMBOL = re.compile(r'@("(?:[^"\\]|\\.)*"|[\w$.-]+)')


def _top_level_statements(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of each top-level statement: brackets balanced, strings and `//`
    comments skipped; a statement ends at a newline at depth 0 unless the next line continues
    it (starts with `{`, `->` or `attributes`)."""
    spans: list[tuple[int, int]] = []
    depth = 0
    start = -1
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if start < 0 and not c.isspace():
            start = i
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth = max(0, depth - 1)
        elif c == "\n" and depth == 0 and start >= 0:
            rest = text[i + 1:].lstrip()
            if not rest.startswith(("{", "->", "attributes")):
                spans.append((start, i))
                start = -1
        i += 1
    if start >= 0:
        spans.append((start, n))
    return spans


def find_functions(text: str) -> list[SourceFunction]:
    """Every top-level `func.func` in `text`, in order."""
    found = []
    # Offsets at which each line starts, to turn offsets into 1-based line numbers.
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(offset: int) -> int:
        lo, hi = 0, len(line_starts)
        while lo + 1 < hi:
            mid = (lo + hi) // 2
            if line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid
        return lo + 1

    for start, end in _top_level_statements(text):
        m = _FUNC.match(text, start)
        if m is None:
            continue
        name = m.group(2).strip('"')
        body = text[m.end():end]
        refs = frozenset(s.strip('"') for s in _SYMBOL.findall(body))
        found.append(SourceFunction(name, m.group(1) in (None, "public"), not m.group(3),
                                    start, end, line_of(start), line_of(end), refs))
    return found


def text_for_function(text: str, functions: Sequence[SourceFunction], name: str) -> str:
    """`text` with every public function blanked out (spaces, newlines kept) except `name` and
    the public functions it calls, so that locations in errors stay those of the file."""
    by_name = {f.name: f for f in functions}
    keep = {name}
    todo = [name]
    while todo:
        for ref in by_name[todo.pop()].references:
            if ref in by_name and ref not in keep:
                keep.add(ref)
                todo.append(ref)
    chars = list(text)
    for f in functions:
        if f.public and f.name not in keep:
            for i in range(f.start, f.end):
                if chars[i] != "\n":
                    chars[i] = " "
    return "".join(chars)


_LOCATION = re.compile(r":(\d+):(\d+): error:")


def error_line(error: Exception) -> int | None:
    """The line an `irtk.Error` message points at (`file:line:col: error: ...`), if any."""
    m = _LOCATION.search(str(error).split("\n", 1)[0])
    return int(m.group(1)) if m else None


# -- compiling ----------------------------------------------------------------------------------

@dataclass
class CompiledFile:
    """A test file compiled for one target: the whole module when it compiled, else modules
    (or errors) per function, made on demand and kept."""

    path: str
    target: str
    functions: list[SourceFunction]
    module: bytes | None = None
    file_error: Exception | None = None        # why the whole file did not compile
    text: str = ""
    compile_options: dict[str, Any] = field(default_factory=dict)
    _per_function: dict[str, bytes | Exception] = field(default_factory=dict)
    # Functions the (partial) module holds only as stubs: their compile errors, by name.
    compile_failures: dict[str, str] = field(default_factory=dict)

    def tests(self, include_args: bool = False,
              only: Collection[str] | None = None) -> list[SourceFunction]:
        """The public functions that are tests: those without arguments (and, with
        `include_args`, the others, which pass by running on random inputs); with `only`,
        just those named."""
        return [f for f in self.functions if f.public and (include_args or not f.takes_args)
                and (only is None or f.name in only)]

    def function_module(self, name: str) -> bytes | Exception:
        """A module holding just `name` (and what it calls), or the error compiling it (an
        exception other than `irtk.Error` is a compiler bug, reported as such)."""
        if name not in self._per_function:
            if not self.text:   # a module file: nothing to compile
                self._per_function[name] = self.module or InputError(
                    f"'{name}' cannot be compiled on its own from a module file")
            else:
                import irtk
                try:
                    self._per_function[name] = irtk.compile_str(
                        text_for_function(self.text, self.functions, name),
                        target=self.target, filename=self.path, **self.compile_options)
                except Exception as e:  # noqa: BLE001 - a crash fails this function only
                    self._per_function[name] = e
        return self._per_function[name]


def compile_checks(path: str | Path, target: str = "vulkan-spirv",
                   **options: Any) -> CompiledFile:
    """Compile a test file for `target` (a .vmfb file is taken as it is). Raises an
    `irtk.Error` only for problems of the whole file: unreadable, or a compile error outside
    every function."""
    path = str(path)
    data = _read(path)
    if data[4:8] == b"IRTK":
        return _prebuilt(path, target, data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"'{path}' is neither MLIR text nor an irtk module (.vmfb)") from None
    import irtk
    functions = find_functions(text)
    compiled = CompiledFile(path, target, functions, text=text, compile_options=dict(options))
    try:
        # partial: a function that does not compile fails that test, not the file.
        with warnings.catch_warnings(record=True) as left_out:
            warnings.simplefilter("always", CompileWarning)
            compiled.module = irtk.compile_str(text, target=target, filename=path,
                                               partial=True, **options)
        for w in left_out:
            if isinstance(w.message, CompileWarning) and w.message.function is not None:
                compiled.compile_failures[w.message.function] = str(w.message)
    except Error as e:
        line = error_line(e)
        inside = line is not None and any(f.public and f.first_line <= line <= f.last_line
                                          for f in functions)
        if not inside:
            raise
        compiled.file_error = e
    except Exception as e:  # noqa: BLE001 - a compiler crash: find which functions it hits
        compiled.file_error = e
    return compiled


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"cannot read '{path}': {e.strerror}") from None


def _prebuilt(path: str, target: str, data: bytes) -> CompiledFile:
    from irtk.vm import load_module
    from irtk.vm.calling_convention import parse
    module = load_module(data)
    functions = []
    for e in module.exports:
        signature = parse(module.functions[e.function].calling_convention)
        functions.append(SourceFunction(e.name, True, bool(signature.arg_banks()), 0, 0, 0, 0,
                                        frozenset()))
    return CompiledFile(path, target, functions, module=data)


# -- running ------------------------------------------------------------------------------------

def describe(error: BaseException) -> str:
    """An error as a result message: an `irtk.Error` by its text, anything else (a bug in
    irtk) by its type too."""
    if isinstance(error, Error):
        return str(error)
    return f"internal error: {type(error).__name__}: {error}"


_MISSING_FEATURE = re.compile(r"executable needs (\w+); device '([^']*)' has no ([^;]+? support)")


_PROFILE_LACKS = re.compile(r"which needs [^(]*\((\w+)\); target profile '[^']*' lacks it")


def missing_feature(error: Exception) -> str | None:
    """"device 'X' has no 16-bit float support (shaderFloat16)" when `error` is a device
    refusing code for lack of a feature, else None."""
    found = _MISSING_FEATURE.findall(str(error))
    if not found:
        return None
    return "; ".join(f"device '{dev}' has no {words} ({feature})"
                     for feature, dev, words in dict.fromkeys(found))


def default_target(device: str) -> str:
    """The target a device runs: cpu for local-*, vulkan-spirv for Vulkan."""
    return "cpu" if device.startswith("local") else "vulkan-spirv"


def run_compiled(compiled: CompiledFile, device: str | hal.Device = "local-task",
                 include_args: bool = False, seed: int | None = None,
                 on_result: Callable[[CheckResult], None] | None = None,
                 only: Collection[str] | None = None,
                 on_start: Callable[[str, int, int], None] | None = None) -> list[CheckResult]:
    """Run every test function of `compiled` (or those named in `only`) on `device`; one
    result per function, in file order. `on_start(name, index, count)` is told before each
    function runs (a progress line), `on_result` sees each result as soon as it is known."""
    from irtk import runtime
    dev = hal.registry.get_device(device) if isinstance(device, str) else device
    rng = np.random.default_rng(seed)
    whole = None
    load_error: Exception | None = None
    if compiled.module is not None:
        check = CheckModule()
        try:
            whole = (runtime.load(compiled.module, device=dev, native_modules=[check]), check)
        except Exception as e:  # noqa: BLE001 - find out which functions the device refuses
            load_error = e
    results = []
    tests = compiled.tests(include_args, only)
    for index, f in enumerate(tests):
        if on_start is not None:
            on_start(f.name, index, len(tests))
        if f.name in compiled.compile_failures:
            result = _compile_failure(f.name, compiled.compile_failures[f.name], dev)
        elif whole is not None:
            result = _call(whole[0], whole[1], f, rng)
        elif load_error is not None and not compiled.text:   # a module file: cannot narrow
            result = _load_failure(f.name, load_error)
        else:
            result = _run_alone(compiled, f, dev, rng)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def _run_alone(compiled: CompiledFile, f: SourceFunction, dev: hal.Device,
               rng: np.random.Generator) -> CheckResult:
    from irtk import runtime
    module = compiled.function_module(f.name)
    if isinstance(module, Exception):
        return _compile_failure(f.name, describe(module), dev)
    check = CheckModule()
    try:
        loaded = runtime.load(module, device=dev, native_modules=[check])
    except Exception as e:  # noqa: BLE001 - reported as this function's failure
        return _load_failure(f.name, e)
    return _call(loaded, check, f, rng)


def _compile_failure(name: str, message: str, dev: hal.Device) -> CheckResult:
    """FAIL "does not compile: ...", or SKIP when the code needs a feature that the target
    profile lacks and so does the device (compiling for another profile would not help)."""
    needed = _PROFILE_LACKS.search(message)
    if needed is not None:
        lacking = [c for c in CAPABILITIES
                   if c.vulkan_feature == needed[1] and not getattr(dev.info, c.name)]
        if lacking:
            return CheckResult(name, SKIP, f"device '{dev.info.name}' has no "
                                           f"{lacking[0].lacking} ({needed[1]})")
    return CheckResult(name, FAIL, f"does not compile: {message}")


def _load_failure(name: str, error: Exception) -> CheckResult:
    feature = missing_feature(error) if isinstance(error, Error) else None
    if feature is not None:
        return CheckResult(name, SKIP, feature)
    return CheckResult(name, FAIL, f"does not load: {describe(error)}")


def _call(loaded: Any, check: CheckModule, f: SourceFunction,
          rng: np.random.Generator) -> CheckResult:
    check.take_failures()
    if f.name not in loaded.function_names:
        return CheckResult(f.name, FAIL, f"the compiled module does not export '{f.name}'")
    try:
        function = loaded[f.name]
        if f.takes_args:
            function(*random_inputs(function, rng))
        else:
            loaded.call_raw(f.name)
    except Error as e:
        feature = missing_feature(e)   # a dispatch refused at run time
        if feature is not None:
            return CheckResult(f.name, SKIP, feature)
        failures = check.take_failures()
        prefix = "".join(m + "\n" for m in failures)
        return CheckResult(f.name, FAIL, prefix + f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 - a runtime bug fails this function only
        return CheckResult(f.name, FAIL, describe(e))
    failures = check.take_failures()
    if failures:
        return CheckResult(f.name, FAIL, "\n".join(failures))
    return CheckResult(f.name, PASS)


def random_inputs(function: Any, rng: np.random.Generator) -> list[Any]:
    """Fresh random arguments for an export, from its reflected argument types: normal floats,
    small integers, random booleans; each '?' dimension is DYNAMIC_DIM_SIZE."""
    banks = function.signature.arg_banks()
    values: list[Any] = []
    for i, (bank, expected) in enumerate(zip(banks, function.arg_types)):
        if expected is None:
            if bank == "ref":
                raise InputError(f"{function.name}: the type of argument {i} is not recorded "
                                 "in the module, so no input can be made for it")
            values.append(float(rng.standard_normal()) if bank in ("f32", "f64")
                          else int(rng.integers(-8, 9)))
            continue
        shape = tuple(DYNAMIC_DIM_SIZE if d is None else d for d in expected.shape)
        try:
            dtype = expected.element_type.numpy_dtype()
        except ValueError:
            raise InputError(f"{function.name}: no random input of type {expected} for "
                             f"argument {i}") from None
        if dtype.kind == "f":
            array = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            array = rng.integers(0, 2, shape).astype(dtype)
        else:
            array = rng.integers(-8, 9, shape).astype(dtype)
        values.append(array if bank == "ref" else array.reshape(()).item())
    return values


def run_checks(path: str | Path, target: str | None = None, device: str = "local-task",
               include_args: bool = False, seed: int | None = None,
               on_result: Callable[[CheckResult], None] | None = None,
               **options: Any) -> list[CheckResult]:
    """Compile `path` for `target` (default: the one `device` runs) and run its test
    functions on `device`. Raises an `irtk.Error` for a problem of the whole file."""
    compiled = compile_checks(path, target or default_target(device), **options)
    return run_compiled(compiled, device, include_args=include_args, seed=seed,
                        on_result=on_result)


def summary(results: Sequence[CheckResult]) -> str:
    counts = {s: sum(r.status == s for r in results) for s in (PASS, FAIL, SKIP)}
    return f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped"
