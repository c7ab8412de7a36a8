"""Shader capabilities: the optional device features an executable may need.

Each capability is declared once, as a field of `ShaderCapabilities` with the Vulkan feature
that offers it and the words a refusal uses for its absence. What an executable needs
(`ExecutableRequirements`), what a device has (`DeviceInfo`) and what a compiler target profile
lets code generation use (`VulkanProfile`) inherit these fields; the Vulkan driver queries,
reports and checks them by iterating `CAPABILITIES`. A capability's name is also its field in
the Vulkan executable's `RequirementsDef` (schemas/vulkan_executable.fbs).

Adding one is a field here, its field in that schema, and the code generator's use of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


def _capability(vulkan_feature: str, lacking: str) -> Any:
    """A capability field (absent by default) with what `Capability` says of it."""
    return field(default=False, metadata={"vulkan_feature": vulkan_feature, "lacking": lacking})


@dataclass(frozen=True, kw_only=True)
class ShaderCapabilities:
    """One flag per optional shader feature; what it means (needed, present, allowed) is the
    inheriting class's business."""

    float16: bool = _capability("shaderFloat16", "16-bit float support")
    float64: bool = _capability("shaderFloat64", "64-bit float support")
    int8: bool = _capability("shaderInt8", "8-bit integer support")
    int16: bool = _capability("shaderInt16", "16-bit integer support")
    int64: bool = _capability("shaderInt64", "64-bit integer support")
    # 8- and 16-bit values loaded from and stored to storage buffers
    storage_buffer_8bit: bool = _capability("storageBuffer8BitAccess",
                                            "8-bit storage buffer access")
    storage_buffer_16bit: bool = _capability("storageBuffer16BitAccess",
                                             "16-bit storage buffer access")
    # arrays of texel-buffer views indexed in shaders (texel windows)
    texel_array_indexing: bool = _capability("shaderUniformTexelBufferArrayDynamicIndexing",
                                             "dynamic indexing of texel buffer arrays")

    def missing_from(self, other: ShaderCapabilities) -> list[Capability]:
        """The capabilities set here and not in `other`, in declaration order."""
        return [c for c in CAPABILITIES if getattr(self, c.name) and not getattr(other, c.name)]


@dataclass(frozen=True)
class Capability:
    """One row of the table: a `ShaderCapabilities` field and what it stands for."""

    name: str            # the field, here and in RequirementsDef
    vulkan_feature: str  # the VkPhysicalDevice*Features member that offers it
    lacking: str         # a device without it "has no <lacking>"


CAPABILITIES: tuple[Capability, ...] = tuple(
    Capability(f.name, f.metadata["vulkan_feature"], f.metadata["lacking"])
    for f in fields(ShaderCapabilities))
