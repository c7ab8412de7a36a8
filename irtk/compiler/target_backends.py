"""Target backends: the names `--target` takes, each producing one executable format.

A backend declares its name, the executable format it produces (the module's rodata segment
is tagged with it, and at load the runtime creates the variant whose format the device lists),
its profiles and the compile option that picks one, and where its code generator is. The code
generator module is imported only when its target is compiled, so compiling for cpu never loads
the SPIR-V generator and the reverse. The compiler driver loops over the backends a compile
selects; adding a target is registering one more (docs/compiler.md, "Adding a target").
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from irtk.compiler.codegen import Codegen
from irtk.compiler.targets import vulkan_profile
from irtk.errors import CompileError
from schemas import CPU_EXECUTABLE_FORMAT, VULKAN_EXECUTABLE_FORMAT


@dataclass(frozen=True)
class TargetBackend:
    name: str                  # what --target says: "vulkan-spirv"
    executable_format: str     # what it produces: "vulkan-spirv-fb"
    codegen: str               # "module:attribute" of its Codegen, imported when first used
    # The compile option (keyword of compile_str, --vulkan-target for irtk compile) that names
    # the profile to compile for, and the profile of a name (raising CompileError listing the
    # names there are); a target without profiles compiles with profile None.
    profile_option: str = ""
    profile_named: Callable[[str], Any] | None = None

    def load_codegen(self) -> Codegen:
        module, _, attribute = self.codegen.partition(":")
        codegen = getattr(importlib.import_module(module), attribute)
        if not isinstance(codegen, Codegen):
            raise TypeError(f"target '{self.name}': {self.codegen} is not a Codegen")
        return codegen

    def profile(self, options: Mapping[str, str]) -> Any:
        """The profile `options` name for this target (None without profiles)."""
        if self.profile_named is None or self.profile_option not in options:
            return None
        return self.profile_named(options[self.profile_option])


_BACKENDS: dict[str, TargetBackend] = {}


def register(backend: TargetBackend) -> None:
    if backend.name in _BACKENDS:
        raise ValueError(f"target '{backend.name}' is registered already")
    _BACKENDS[backend.name] = backend


def unregister(name: str) -> None:
    """Remove a target registered with `register` (tests and plug-ins clean up with it)."""
    del _BACKENDS[name]


def target_names() -> list[str]:
    return list(_BACKENDS)


def parse_targets(spec: str) -> list[TargetBackend]:
    """`vulkan-spirv,cpu` -> those backends in that order, rejecting unknown names."""
    names = [t.strip() for t in spec.split(",") if t.strip()]
    if not names:
        raise CompileError("no target given; targets: " + ", ".join(_BACKENDS))
    for name in names:
        if name not in _BACKENDS:
            raise CompileError(f"unknown target '{name}'; targets: {', '.join(_BACKENDS)}")
    return [_BACKENDS[name] for name in dict.fromkeys(names)]


def select(spec: str, options: Mapping[str, str]) -> list[tuple[TargetBackend, Any]]:
    """The targets `spec` names, each with the profile `options` pick for it. Every profile
    option given is checked, also one whose target is not among them."""
    chosen = parse_targets(spec)
    profiles = {b.name: b.profile(options) for b in _BACKENDS.values()}
    return [(b, profiles[b.name]) for b in chosen]


def for_formats(formats: Iterable[str]) -> TargetBackend | None:
    """The first target whose executables are of one of `formats` (a device's
    `executable_formats`): what to compile for that device."""
    offered = set(formats)
    return next((b for b in _BACKENDS.values() if b.executable_format in offered), None)


register(TargetBackend("vulkan-spirv", VULKAN_EXECUTABLE_FORMAT,
                       "irtk.compiler.codegen.spirv.target:CODEGEN",
                       profile_option="vulkan_target", profile_named=vulkan_profile))
register(TargetBackend("cpu", CPU_EXECUTABLE_FORMAT, "irtk.compiler.codegen.cpu:CODEGEN"))
