"""The compiler pipeline: MLIR text -> dispatches -> per-target executables -> VM module bytes.

Phases: frontend (parse, verify) -> flow (dispatch formation) -> codegen per target ->
vm codegen + serialization. Errors a user can cause surface as `irtk.Error` subclasses.
"""
from __future__ import annotations

from pathlib import Path

from irtk.compiler import flow
from irtk.compiler.codegen import cpu as cpu_codegen
from irtk.compiler.frontend import parse_mlir
from irtk.compiler.targets import parse_targets, vulkan_profile
from irtk.compiler.vm_codegen import ExecutableVariant, generate_module
from irtk.errors import Error, InputError


def compile_file(path: str, target: str = "vulkan-spirv", **options: object) -> bytes:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise InputError(f"cannot read '{path}': {e.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"'{path}' is not a UTF-8 text file") from None
    return compile_str(text, target=target, filename=str(path), **options)


def compile_str(text: str, target: str = "vulkan-spirv", filename: str = "<string>",
                vulkan_target: str = "default", module_name: str | None = None) -> bytes:
    targets = parse_targets(target)
    profile = vulkan_profile(vulkan_target)
    module, source = parse_mlir(text, filename)
    program = flow.form_dispatches(module, source)
    kernels = [d.kernel for f in program.functions for d in f.dispatches]
    variants = []
    for t in targets:
        if t == "vulkan-spirv":
            variants.append(_vulkan_variant(kernels, profile))
        else:
            data, plans = cpu_codegen.pack_executable(kernels)
            variants.append(ExecutableVariant("cpu", cpu_codegen.FORMAT, data,
                                              [p.workgroup_count for p in plans]))
    name = module_name or (Path(filename).stem if filename != "<string>" else "module")
    return generate_module(program, variants, name)


def _vulkan_variant(kernels, profile) -> ExecutableVariant:
    from irtk.compiler.codegen import spirv as spirv_codegen
    compiled = [spirv_codegen.compile_kernel(k, profile) for k in kernels]
    data = spirv_codegen.pack_executable(compiled, profile)
    return ExecutableVariant("vulkan-spirv", "vulkan-spirv-fb", data,
                             [c.workgroup_count for c in compiled])


__all__ = ["compile_file", "compile_str", "Error"]
