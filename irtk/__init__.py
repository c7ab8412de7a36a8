"""irtk: compile linalg-on-tensors MLIR to SPIR-V and VM bytecode; run it on Vulkan or the CPU.

`compile_file`/`compile_str` need the compiler (xDSL); `load` needs only the runtime, so the
compiler is imported lazily and `import irtk` stays light.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from irtk.errors import (CompileError, CompileWarning, DependencyError, DeviceError, Error,
                         InputError, ParseError, RuntimeFailure, VerificationError)

__version__ = "0.1.0"

if TYPE_CHECKING:
    from irtk.runtime import Limits
    from irtk.runtime.devices import DeviceDescription


def __getattr__(name: str) -> Any:
    """`irtk.Limits` on first use: importing it would pull in the runtime (the HAL and the
    native modules), and `import irtk.vm` must stay free of those."""
    if name == "Limits":
        from irtk.runtime import Limits
        return Limits
    raise AttributeError(f"module 'irtk' has no attribute '{name}'")


__all__ = ["Error", "ParseError", "CompileError", "VerificationError", "DeviceError",
           "InputError", "RuntimeFailure", "DependencyError", "CompileWarning", "Limits",
           "compile_file", "compile_str", "load", "devices"]


def compile_file(path: str, target: str = "vulkan-spirv", **options: Any) -> bytes:
    """Compile an MLIR file, or an ONNX model (`.onnx`, with the `onnx` extra), into module
    bytes (.vmfb) for `target` ("vulkan-spirv", "cpu", or a comma-separated list)."""
    if str(path).endswith(".onnx"):
        from irtk.importers import import_onnx
        return import_onnx(path).compile(target, **options)
    from irtk.compiler import driver
    return driver.compile_file(path, target=target, **options)


def compile_str(text: str, target: str = "vulkan-spirv", **options: Any) -> bytes:
    """Compile MLIR text into module bytes (.vmfb)."""
    from irtk.compiler import driver
    return driver.compile_str(text, target=target, **options)


def load(module: bytes | str, device: str | None = None, *,
         limits: Limits | None = None) -> Any:
    """Load a module (bytes or a .vmfb path) on `device` (default: one that runs the module's
    executables, local-task for CPU ones, else the first Vulkan device); its exports become
    callables that take and return numpy arrays. `limits` bounds each call's steps, time and
    memory."""
    from irtk.runtime import load as _load
    return _load(module, device=device, limits=limits)


def devices() -> list[DeviceDescription]:
    """The devices irtk can use here, as `DeviceDescription`s: the `uri` to pass as `device=`,
    name, driver, shader `features`, `limits`, and for a Vulkan device the `vulkan_target`
    profile to compile for (`irtk.compile_str(..., vulkan_target=d.vulkan_target)`)."""
    from irtk.compiler.targets import suited_profile
    from irtk.runtime.devices import list_device_descriptions
    return list_device_descriptions(suited_profile)
