"""Does a device offer what an executable was compiled for? Decided before any Vulkan object
exists, from DeviceInfo alone, so a refusal says exactly what is missing instead of letting a
driver crash or a shader silently compute something else.
"""
from __future__ import annotations

from irtk.errors import DeviceError
from irtk.hal import DeviceInfo
from hal_vulkan.executable_def import ExecutableSpec

# Highest SPIR-V version each Vulkan version accepts, as (major << 16 | minor << 8).
_SPIRV_FOR_VULKAN = {(1, 0): 0x10000, (1, 1): 0x10300, (1, 2): 0x10500, (1, 3): 0x10600}


def _api(info: DeviceInfo) -> tuple[int, int]:
    parts = (info.api_version or "1.0").split(".")
    return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0


def subgroup_size_to_request(spec: ExecutableSpec, info: DeviceInfo) -> int:
    """The subgroup size to pin in the pipeline (0: the device's default is what was asked)."""
    want = spec.requirements.subgroup_size
    if not want or want == info.subgroup_size:
        return 0
    return want


def problems(spec: ExecutableSpec, info: DeviceInfo) -> list[str]:
    """Everything the device lacks for `spec`, one sentence each (empty: it can run it)."""
    req = spec.requirements
    device = f"device '{info.name}'"
    target = f" (target '{spec.target_profile}')" if spec.target_profile else ""
    out: list[str] = []
    for missing in req.missing_from(info):
        out.append(f"executable needs {missing.vulkan_feature}; {device} has no {missing.lacking}")
    if req.subgroup_size and req.subgroup_size != info.subgroup_size:
        lo = int(info.extra.get("minSubgroupSize", info.subgroup_size))
        hi = int(info.extra.get("maxSubgroupSize", info.subgroup_size))
        control = info.extra.get("subgroupSizeControl") == "true"
        if not (control and lo <= req.subgroup_size <= hi):
            out.append(f"executable was compiled for subgroup size {req.subgroup_size}{target}; "
                       f"{device} has subgroup size {info.subgroup_size}")
    limit = info.max_workgroup_invocations
    if req.max_workgroup_invocations > limit:
        out.append(f"executable needs {req.max_workgroup_invocations} invocations per "
                   f"workgroup{target}; {device} allows {limit} (maxComputeWorkGroupInvocations)")
    if req.shared_memory_bytes > info.shared_memory_bytes:
        out.append(f"executable needs {req.shared_memory_bytes} bytes of shared memory{target}; "
                   f"{device} allows {info.shared_memory_bytes} (maxComputeSharedMemorySize)")
    push_limit = int(info.extra.get("maxPushConstantsSize", 128))
    push_needed = max([req.push_constant_bytes]
                      + [4 * e.push_constant_count for e in spec.entry_points])
    if push_needed > push_limit:
        out.append(f"executable needs {push_needed} bytes of push constants; {device} allows "
                   f"{push_limit} (maxPushConstantsSize)")
    api = _api(info)
    if req.vulkan_version:
        need = ((req.vulkan_version >> 22) & 0x7F, (req.vulkan_version >> 12) & 0x3FF)
        if need > api:
            out.append(f"executable needs Vulkan {need[0]}.{need[1]}; {device} offers "
                       f"{api[0]}.{api[1]}")
    if req.spirv_version:
        allowed = _SPIRV_FOR_VULKAN.get(api, 0x10600 if api > (1, 3) else 0x10000)
        if req.spirv_version > allowed:
            out.append(f"executable needs SPIR-V {req.spirv_version >> 16}."
                       f"{(req.spirv_version >> 8) & 0xFF}; {device} (Vulkan {api[0]}.{api[1]}) "
                       f"accepts up to {allowed >> 16}.{(allowed >> 8) & 0xFF}")
    max_size = info.max_workgroup_size
    max_storage = int(info.extra.get("maxPerStageDescriptorStorageBuffers", 1 << 30))
    max_texel = int(info.extra.get("maxPerStageDescriptorSampledImages", 1 << 30))
    max_texels = int(info.extra.get("maxTexelBufferElements", 1 << 30))
    for e in spec.entry_points:
        invocations = e.workgroup_size[0] * e.workgroup_size[1] * e.workgroup_size[2]
        if invocations > limit:
            out.append(f"entry point '{e.name}' has workgroup size {e.workgroup_size} "
                       f"({invocations} invocations); {device} allows {limit} "
                       f"(maxComputeWorkGroupInvocations)")
        elif any(s > m for s, m in zip(e.workgroup_size, max_size)):
            out.append(f"entry point '{e.name}' has workgroup size {e.workgroup_size}; "
                       f"{device} allows at most {tuple(max_size)} (maxComputeWorkGroupSize)")
        storage = sum(not b.texel for b in e.bindings)
        if storage > max_storage:
            out.append(f"entry point '{e.name}' has {storage} storage buffers; "
                       f"{device} allows {max_storage} (maxPerStageDescriptorStorageBuffers)")
        texel = sum(b.descriptor_count for b in e.bindings if b.texel)
        if texel > max_texel:
            out.append(f"entry point '{e.name}' reads through {texel} texel buffer views; "
                       f"{device} allows {max_texel} (maxPerStageDescriptorSampledImages)")
        window = max((b.window_texels for b in e.bindings), default=0)
        if window > max_texels:
            out.append(f"entry point '{e.name}' reads through texel windows of {window} texels; "
                       f"{device} allows {max_texels} (maxTexelBufferElements)")
    return out


def check(spec: ExecutableSpec, info: DeviceInfo) -> None:
    """Raise DeviceError listing every requirement the device does not meet."""
    found = problems(spec, info)
    if found:
        raise DeviceError("; ".join(found))
