"""The compiler pipeline: MLIR text -> TIR -> dispatches -> buffers -> VM module bytes.

Phases (names as `--dump-after` takes them):
  import    MLIR text -> TIR (the front end)
  dispatch  generics -> fused dispatch regions, each one `kernel.Kernel` (dispatch.py)
  stream    buffer planning: output initialization, transient reuse (stream.py)
  vm        host lowering + VM codegen, with every target's executable (vm_codegen.py)
Each file compiles as one unit: a function that one phase cannot handle is compiled into the
module as a function failing at run time with that phase's located message, and the others
still work. Only a file in which no function compiles is a compile error. Errors a user can
cause surface as `irtk.Error` subclasses.
"""
from __future__ import annotations

import logging
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypedDict, Unpack

from irtk.compiler import consteval, cse, dce, dispatch, stream, target_backends, tir
from irtk.compiler.target_backends import TargetBackend
from irtk.compiler.tir_printer import print_program
from irtk.compiler.vm_codegen import (ExecutableVariant, generate_module, in_function,
                                      program_kernels)
from irtk.errors import CompileError, CompileWarning, Error, InputError, ParseError

PHASES = ("import", "const-eval", "dispatch", "stream", "vm")


log = logging.getLogger("irtk.compiler")
Progress = Callable[[str], None]


@contextmanager
def _phase(what: str, progress: Progress | None) -> Iterator[None]:
    """Tell `progress` a phase starts; log how long it took (INFO: `irtk -v`)."""
    if progress is not None:
        progress(what)
    start = time.perf_counter()
    yield
    log.info("%s: %.3f s", what, time.perf_counter() - start)


class CompileOptions(TypedDict, total=False):
    """The keyword options of `compile_str` that `compile_file` passes on."""

    vulkan_target: str
    module_name: str | None
    dump_after: str | Sequence[str] | None
    dump: Callable[[str], None] | None
    dump_spirv: str | None
    partial: bool
    progress: Progress | None
    demote_f64: bool
    const_eval: bool


def compile_file(path: str, target: str = "vulkan-spirv", **options: Unpack[CompileOptions]
                 ) -> bytes:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise InputError(f"cannot read '{path}': {e.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"'{path}' is not a UTF-8 text file") from None
    return compile_str(text, target=target, filename=str(path), **options)


def parse_dump_phases(spec: str | Sequence[str] | None) -> list[str]:
    """"dispatch,vm" / "all" -> phase names, rejecting unknown ones."""
    if not spec:
        return []
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for item in (i.strip() for i in items):
        if item == "all":
            out += PHASES
        elif item in PHASES:
            out.append(item)
        else:
            raise CompileError(f"unknown phase '{item}' for --dump-after; phases: "
                               f"{', '.join(PHASES)}, all")
    return list(dict.fromkeys(out))


def import_program(text: str, filename: str, demote_f64: bool = False) -> tir.Program:
    """MLIR text -> TIR, through the front end (f64 made f32 first with `demote_f64`)."""
    from irtk.compiler.frontend import parse_program
    return parse_program(text, filename, demote_f64=demote_f64)


def compile_str(text: str, target: str = "vulkan-spirv", filename: str = "<string>",
                vulkan_target: str = "default", module_name: str | None = None,
                dump_after: str | Sequence[str] | None = None,
                dump: Callable[[str], None] | None = None,
                dump_spirv: str | None = None, partial: bool = False,
                progress: Progress | None = None, demote_f64: bool = True,
                const_eval: bool = True) -> bytes:
    """MLIR text -> module bytes. A function that fails to compile is a CompileError (all
    such functions' messages); with `partial=True` it becomes a stub with its signature that
    fails when called, and the rest of the module is kept (`irtk check` runs files so).
    `demote_f64` (the default) computes in f32 what the program writes in f64, as IREE's
    `--iree-input-demote-f64-to-f32` does (frontend/demote.py); False keeps f64.
    `const_eval` (the default) computes what depends only on constants at compile time
    (consteval.py), as IREE's `--iree-opt-const-eval`."""
    from irtk.compiler.frontend.source_map import quote_source
    name = module_name or (Path(filename).stem if filename not in ("<string>", "<stdin>")
                           else "module")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CompileWarning)
            with _phase(f"parse and import {filename}", progress):
                program = import_program(text, filename, demote_f64)
            data = compile_program(program, target=target, vulkan_target=vulkan_target,
                                   module_name=name, dump_after=dump_after, dump=dump,
                                   dump_spirv=dump_spirv, partial=partial, progress=progress,
                                   const_eval=const_eval)
    except (ParseError, CompileError) as e:
        # Every located message shows its source line and a caret.
        raise type(e)(quote_source(str(e), filename, text)) from None
    for w in caught:
        if isinstance(w.message, CompileWarning):
            warnings.warn(CompileWarning(quote_source(str(w.message), filename, text),
                                         w.message.function), stacklevel=2)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return data


def compile_program(program: tir.Program, target: str = "vulkan-spirv",
                    vulkan_target: str = "default", module_name: str = "module",
                    dump_after: str | Sequence[str] | None = None,
                    dump: Callable[[str], None] | None = None,
                    dump_spirv: str | None = None, partial: bool = False,
                    progress: Progress | None = None, const_eval: bool = True) -> bytes:
    """TIR (as the importer produces it, or built by hand) -> module bytes. Rewrites
    `program` in place. `partial` and `const_eval` as for `compile_str`; `progress` is told
    each phase (and each function whose kernels are compiled) as it starts."""
    targets = target_backends.select(target, {"vulkan_target": vulkan_target})
    phases = parse_dump_phases(dump_after)
    emit = dump or (lambda text: print(text, end="", file=sys.stdout))

    def show(phase: str, body: str) -> None:
        if phase in phases:
            emit(f"// ----- IR after {phase} -----\n{body}")

    show("import", print_program(program))
    with _phase("constant evaluation", progress):
        consteval.evaluate_constants(program, _compile_for_const_eval, fold=const_eval)
    show("const-eval", print_program(program))
    with _phase("dispatch formation", progress):
        cse.eliminate_common_subexpressions(program)
        dce.eliminate_dead_ops(program)
        dispatch.form_dispatches(program)
    show("dispatch", print_program(program))
    with _phase("stream planning", progress):
        plans = stream.plan_program(program)
    show("stream", print_program(program, plans))
    with _phase("kernel code generation", progress):
        variants = _executables(program, targets, dump_spirv, progress)
    log.info("%d functions, %d kernels, %d failed", len(program.functions),
             len(program_kernels(program)), len(program.unsupported))
    failures = {name: in_function(message, name)
                for name, message in program.unsupported.items()}
    if failures and (not partial or not program.functions):
        raise CompileError("\n".join(failures.values()))
    for name, message in failures.items():
        warnings.warn(CompileWarning(message, name), stacklevel=3)
    metadata = {"producer": f"irtk {_version()}", "targets": target,
                "vulkan_target": vulkan_target, "partial": "true" if partial else "false"}
    if program.filename not in ("", "<string>", "<stdin>"):
        metadata["source"] = Path(program.filename).name
    with _phase("host code generation", progress):
        data = generate_module(program, plans, variants, module_name, partial=partial,
                               metadata=metadata)
    log.info("module '%s': %d bytes", module_name, len(data))
    if "vm" in phases:
        from irtk.vm.disassembler import disassemble_module
        show("vm", disassemble_module(data, rodata_limit=64))
    return data


def _compile_for_const_eval(program: tir.Program) -> bytes:
    """A constant-evaluation program -> a CPU module (with no constant evaluation of its own)."""
    return compile_program(program, target="cpu", module_name="consteval", const_eval=False)


def _version() -> str:
    """irtk's installed version (the package metadata, so the compiler need not import the
    top-level package)."""
    from importlib import metadata
    try:
        return metadata.version("irtk")
    except metadata.PackageNotFoundError:
        return "unknown"


def _executables(program: tir.Program, targets: list[tuple[TargetBackend, Any]],
                 dump_folder: str | None, progress: Progress | None = None
                 ) -> list[ExecutableVariant]:
    """Every target's executable. A function whose kernels a target cannot compile moves to
    `program.unsupported` with the code generator's message."""
    compiled: dict[str, dict[int, object]] = {backend.name: {} for backend, _ in targets}
    functions = list(program.functions)
    for i, f in enumerate(functions):
        kernels = [op.attrs["kernel"] for op in tir.walk(f.body) if op.kind == "dispatch"]
        if progress is not None and len(functions) > 1:
            progress(f"kernel code generation: function {i + 1} of {len(functions)} "
                     f"({f.name}, {len(kernels)} kernels)")
        try:
            for backend, profile in targets:
                codegen = backend.load_codegen()
                for k in kernels:
                    compiled[backend.name][id(k)] = codegen.compile_kernel(k, profile)
        except Error as e:
            text = str(e)
            if ": error: " not in text:
                text = f"{f.location}: error: {text}"
            program.unsupported[f.name] = text
            program.failed[f.name] = f
            program.functions.remove(f)
    kernels = program_kernels(program)
    if not kernels:
        return []
    variants = []
    for backend, profile in targets:
        codegen = backend.load_codegen()
        objs = [compiled[backend.name][id(k)] for k in kernels]
        data, launches = codegen.pack_executable(kernels, objs, profile)
        if dump_folder:
            codegen.dump(dump_folder, kernels, objs)
        variants.append(ExecutableVariant(backend.name, backend.executable_format, data,
                                          launches))
    return variants


__all__ = ["compile_file", "compile_program", "compile_str", "Error", "PHASES"]
