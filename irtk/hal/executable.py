"""Executables: compiled device code with functions looked up by name or ordinal.

An executable declares what it needs from the device; a driver compares that with the device
before creating it and refuses, naming the missing feature, rather than run something wrong.
"""
from __future__ import annotations

from abc import ABC
from dataclasses import dataclass

from irtk.hal.capabilities import ShaderCapabilities


@dataclass(frozen=True)
class ExecutableRequirements(ShaderCapabilities):
    """What an executable needs beyond the baseline: the shader capabilities it uses, and
    limits; with each export's workgroup size, bindings and push constants (ExportInfo) this is
    everything a driver checks at load."""

    subgroup_size: int = 0  # 0: any
    max_workgroup_invocations: int = 0
    shared_memory_bytes: int = 0
    push_constant_bytes: int = 0
    spirv_version: int = 0       # (major << 16) | (minor << 8); 0: not SPIR-V
    vulkan_version: int = 0      # (major << 22) | (minor << 12); 0: not Vulkan


@dataclass(frozen=True)
class ExportInfo:
    """One dispatchable function of an executable: its interface as the host program uses it."""

    name: str
    binding_count: int
    push_constant_count: int  # 32-bit words
    workgroup_size: tuple[int, int, int]


class Executable(ABC):
    def __init__(self, exports: list[ExportInfo]) -> None:
        self.exports = exports

    def lookup(self, name: str) -> int:
        for i, e in enumerate(self.exports):
            if e.name == name:
                return i
        raise KeyError(name)

    def release(self) -> None:
        """Destroy device objects now; idempotent."""
