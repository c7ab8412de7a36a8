"""Device descriptions for users: what `irtk.devices()` and `irtk devices --json` show.

A `DeviceDescription` is the HAL's `DeviceInfo` in user terms: the URI to pass as `device=`,
the shader features as names, the limits code generation cares about, and (filled in by the
caller that knows the compiler's profiles) the `--vulkan-target` profile that suits it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from irtk.hal import registry
from irtk.hal.capabilities import CAPABILITIES
from irtk.hal.device import DeviceInfo


@dataclass(frozen=True)
class DeviceDescription:
    """One device: `uri` is what `irtk.load(..., device=uri)` and `--device` take."""

    uri: str
    driver: str
    name: str
    api_version: str
    driver_version: str
    features: dict[str, bool]
    limits: dict[str, Any]
    vulkan_target: str | None = None    # the profile to compile for (Vulkan devices only)
    properties: dict[str, str] = field(default_factory=dict)
    info: DeviceInfo | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The description as JSON-ready data (lists for tuples; no `info`)."""
        return {"uri": self.uri, "driver": self.driver, "name": self.name,
                "api_version": self.api_version, "driver_version": self.driver_version,
                "vulkan_target": self.vulkan_target, "features": dict(self.features),
                "limits": {k: list(v) if isinstance(v, tuple) else v
                           for k, v in self.limits.items()},
                "properties": dict(self.properties)}


def describe(info: DeviceInfo, vulkan_target: str | None = None) -> DeviceDescription:
    """`info` as a description; a CPU device's URI is its driver name."""
    uri = f"vulkan://{info.index}" if info.driver == "vulkan" else info.driver
    features = {c.name: bool(getattr(info, c.name)) for c in CAPABILITIES}
    features["push_descriptors"] = info.push_descriptors
    limits: dict[str, Any] = {
        "subgroup_size": info.subgroup_size,
        "max_workgroup_invocations": info.max_workgroup_invocations,
        "max_workgroup_size": info.max_workgroup_size,
        "max_workgroup_count": info.max_workgroup_count,
        "shared_memory_bytes": info.shared_memory_bytes,
        "binding_alignment": info.binding_alignment,
        "max_binding_bytes": info.max_binding_bytes,
        "worker_count": info.worker_count,
    }
    return DeviceDescription(uri, info.driver, info.name, info.api_version, info.driver_version,
                             features, limits, vulkan_target, dict(info.extra), info)


def list_device_descriptions(
        profile: Callable[[DeviceInfo], str] | None = None) -> list[DeviceDescription]:
    """Every usable device of every driver (a driver that is unavailable here is left out);
    `profile` names the Vulkan target profile for a Vulkan device."""
    return [describe(info, profile(info) if profile is not None and info.driver == "vulkan"
                     else None)
            for info in registry.list_devices()]
