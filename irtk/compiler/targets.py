"""Named target profiles: the device class a Vulkan executable is compiled for (the profiles
of the vulkan-spirv target, irtk/compiler/target_backends.py; `--vulkan-target` names one).

Codegen reads its limits (workgroup size, subgroup size, shared memory, 16/64-bit types) from a
profile, and the executable records what it then requires, so the driver can refuse a device
that cannot run it. `default` must run on any Vulkan 1.1+ device with SwiftShader's limits.
"""
from __future__ import annotations

from dataclasses import dataclass

from irtk.errors import CompileError
from irtk.hal.capabilities import ShaderCapabilities
from irtk.hal.device import DeviceInfo


@dataclass(frozen=True)
class VulkanProfile(ShaderCapabilities):
    """A device class. Its shader capabilities (irtk.hal.capabilities) are what code generation
    may use natively there, e.g. i64 arithmetic instead of its 32-bit emulation."""

    name: str
    vulkan_env: str = "vulkan1.1"          # SPIRV-Tools target environment for validation
    spirv_version: tuple[int, int] = (1, 3)
    vulkan_version: tuple[int, int] = (1, 1)
    subgroup_size: int = 0                 # 0: code must not depend on the subgroup size
    subgroup_arithmetic: bool = False      # OpGroupNonUniform* arithmetic in compute shaders
    subgroup_ballot: bool = False          # OpGroupNonUniformBroadcast and friends
    subgroup_shuffle: bool = False         # OpGroupNonUniformShuffleXor and friends
    cpu_device: bool = False               # shaders run on CPU cores (software rasterizers)
    max_workgroup_invocations: int = 256
    shared_memory_bytes: int = 32768
    # Read-only bindings as uniform texel buffers (OpImageFetch of 16-byte texels): llvmpipe
    # fetches texels with straight-line SIMD code but loads storage buffers lane by lane with
    # a branch per lane (docs/codegen_spirv.md, "Texel-buffer loads").
    texel_buffer_loads: bool = False
    # Texels one view may hold (a power of two: the device's maxTexelBufferElements), where
    # inputs are storage buffers but texel fetches pay: SwiftShader fetches a texel with one
    # 16-byte load per lane and gathers storage-buffer words lane by lane. Reductions read
    # each input row through an array of such views overlapping by half, picked once per row;
    # matmul and elementwise inputs of at most one view are single views (docs/codegen_spirv.md,
    # "Texel windows"). 0: storage buffers.
    texel_window: int = 0
    # Elementwise kernels in quads of 4 iterations with 16-byte loads and stores (CPU drivers,
    # which pay per load and store instruction, not per byte; elementwise.py).
    elementwise_quads: bool = False


VULKAN_PROFILES: dict[str, VulkanProfile] = {
    "default": VulkanProfile("default"),
    "swiftshader": VulkanProfile("swiftshader", subgroup_size=4, subgroup_arithmetic=True,
                                 subgroup_ballot=True, subgroup_shuffle=True, cpu_device=True,
                                 texel_window=65536,
                                 elementwise_quads=True),
    "llvmpipe": VulkanProfile("llvmpipe", vulkan_env="vulkan1.2", vulkan_version=(1, 2),
                              subgroup_size=8, subgroup_arithmetic=True,
                              subgroup_ballot=True, subgroup_shuffle=True, cpu_device=True,
                              max_workgroup_invocations=1024, float16=True,
                              float64=True, int8=True, int16=True, int64=True,
                              texel_buffer_loads=True, elementwise_quads=True),
}


def vulkan_profile(name: str) -> VulkanProfile:
    try:
        return VULKAN_PROFILES[name]
    except KeyError:
        raise CompileError(f"unknown Vulkan target '{name}'; targets: "
                           f"{', '.join(VULKAN_PROFILES)}") from None


def suited_profile(info: DeviceInfo) -> str:
    """The `--vulkan-target` profile tuned for a Vulkan device: the first named profile whose
    executables it runs as compiled (every feature, the same subgroup size, enough invocations,
    shared memory, texel elements and Vulkan version) and whose kind (CPU or GPU) it is;
    `default` when none is."""
    api = tuple(int(p) for p in (info.api_version or "1.0").split(".")[:2])
    is_cpu = info.extra.get("device_type") == "cpu"
    texels = int(info.extra.get("maxTexelBufferElements", 0))
    for name, p in VULKAN_PROFILES.items():
        if name == "default" or p.missing_from(info) or p.cpu_device != is_cpu:
            continue
        if p.subgroup_size and p.subgroup_size != info.subgroup_size:
            continue
        if p.max_workgroup_invocations > info.max_workgroup_invocations or \
                p.shared_memory_bytes > info.shared_memory_bytes or \
                p.texel_window > texels or p.vulkan_version > api:
            continue
        return name
    return "default"
