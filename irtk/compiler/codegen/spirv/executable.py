"""Compiled SPIR-V kernels and their packing into a "vulkan-spirv-fb" executable.

`SpirvKernel` is what codegen hands the compiler driver for one dispatch: the validated module,
its launch shape (which the host program records in its dispatch) and its interface.
`pack_executable` writes kernels into the FlatBuffers format that hal_vulkan loads
(schemas/vulkan_executable.fbs).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import flatbuffers
import numpy as np

from irtk.compiler.kernel import Grid
from irtk.compiler.targets import VulkanProfile
from irtk.errors import CompileError
from irtk.hal.capabilities import CAPABILITIES
from irtk.hal.executable import ExecutableRequirements
from schemas import VULKAN_EXECUTABLE_IDENTIFIER, object_api_name
from schemas import vulkan_executable as fb

_REQUIREMENT_KEYS = frozenset(f.name for f in fields(ExecutableRequirements))
# Capabilities a kernel may need beyond its profile's: strategy.py compiles f16 contractions too
# large to emulate with native f16 on any profile, and texel windows (texel_array_indexing)
# follow the profile's `texel_window`, not a capability flag.
_BEYOND_PROFILE = frozenset({"float16", "texel_array_indexing"})


@dataclass
class SpirvKernel:
    """One compute shader for one dispatch; `code` has passed spirv-val for its profile.

    `grid` is the launch rule (the host evaluates it once the loop ranges are known);
    `workgroup_count` is its value for a static kernel, and (0, 0, 0) for a dynamic one.
    `strategy` names the code generation strategy that produced it (docs/codegen_spirv.md).
    """

    code: bytes
    entry_point: str
    workgroup_size: tuple[int, int, int]
    workgroup_count: tuple[int, int, int]
    bindings: list[tuple[int, bool]]          # (binding number, read_only), set 0
    push_constant_count: int = 0              # 32-bit words, laid out as Kernel.param_offsets()
    requirements: dict[str, int | bool] = field(default_factory=dict)
    grid: Grid | None = None
    strategy: str = ""
    texel_bindings: tuple[int, ...] = ()      # read-only bindings read as uniform texel buffers
    # texel bindings read through an array of views: binding -> view count; each view holds
    # `texel_window` texels, view k starting at texel k * texel_window / 2
    texel_windows: dict[int, int] = field(default_factory=dict)
    texel_window: int = 0

    def __post_init__(self) -> None:
        unknown = set(self.requirements) - _REQUIREMENT_KEYS
        if unknown:
            raise ValueError(f"unknown executable requirements {sorted(unknown)}; "
                             f"known: {sorted(_REQUIREMENT_KEYS)}")


def validate(code: bytes, target_env: str, what: str) -> None:
    """spirv-val `code`; a rejected module is a code generator bug, reported as CompileError."""
    from spirv import tools  # SPIRV-Tools binding; imported here so codegen loads without it
    from spirv.errors import SpirvError

    try:
        tools.validate(code, target_env)
    except SpirvError as exc:
        detail = getattr(exc, "diagnostic", "") or str(exc)
        raise CompileError(f"vulkan-spirv: internal error: the SPIR-V generated for '{what}' "
                           f"fails validation for {target_env}: {detail}") from exc


def merged_requirements(kernels: list[SpirvKernel],
                        profile: VulkanProfile) -> ExecutableRequirements:
    """What the device must offer to run every kernel: the strictest of each need."""
    merged: dict[str, int | bool] = {}
    for kernel in kernels:
        needs = dict(kernel.requirements)
        if kernel.push_constant_count:
            needs["push_constant_bytes"] = max(int(needs.get("push_constant_bytes", 0)),
                                               4 * kernel.push_constant_count)
        for key, value in needs.items():
            if isinstance(value, bool):
                merged[key] = bool(merged.get(key, False)) or value
            elif key == "subgroup_size" and merged.get(key) not in (None, 0, value) and value:
                raise CompileError(f"vulkan-spirv: kernels of one executable need different "
                                   f"subgroup sizes ({merged[key]} and {value})")
            else:
                merged[key] = max(int(merged.get(key, 0)), int(value))
    for capability in CAPABILITIES:
        feature = capability.name
        if feature not in _BEYOND_PROFILE and merged.get(feature) \
                and not getattr(profile, feature):
            raise CompileError(f"vulkan-spirv: a kernel needs {feature}, which target profile "
                               f"'{profile.name}' does not offer")
    # Each key names its field (flags are bools, limits ints): beyond what a checker can see.
    return ExecutableRequirements(**merged)  # type: ignore[arg-type]


def pack_executable(kernels: list[SpirvKernel], profile: VulkanProfile) -> bytes:
    """A "vulkan-spirv-fb" executable (file identifier IRVK): one shader module per kernel."""
    names = [k.entry_point for k in kernels]
    if len(set(names)) != len(names):
        raise CompileError(f"vulkan-spirv: duplicate entry point names in one executable: {names}")
    req = merged_requirements(kernels, profile)
    modules, entry_points = [], []
    for index, kernel in enumerate(kernels):
        if len(kernel.code) % 4:
            raise CompileError(f"vulkan-spirv: SPIR-V of '{kernel.entry_point}' is not whole words")
        module = fb.ShaderModuleDefT()
        # flatc declares the field List[int]; its Pack writes an ndarray as one vector copy.
        module.code = np.frombuffer(kernel.code, dtype="<u4")  # type: ignore[assignment]
        modules.append(module)
        entry = fb.EntryPointDefT()
        entry.name = kernel.entry_point
        entry.shaderModule = index
        entry.workgroupSize = list(kernel.workgroup_size)
        entry.bindings = []
        for binding, read_only in kernel.bindings:
            b = fb.BindingDefT()
            b.binding, b.readOnly = binding, read_only
            if binding in kernel.texel_bindings:
                b.kind = fb.BindingKind.UniformTexelBuffer
                if binding in kernel.texel_windows:
                    b.windowCount = kernel.texel_windows[binding]
                    b.windowTexels = kernel.texel_window
            entry.bindings.append(b)
        entry.pushConstantCount = kernel.push_constant_count
        entry_points.append(entry)

    requirements = fb.RequirementsDefT()
    requirements.subgroupSize = req.subgroup_size
    for capability in CAPABILITIES:
        setattr(requirements, object_api_name(capability.name), getattr(req, capability.name))
    requirements.maxWorkgroupInvocations = req.max_workgroup_invocations
    requirements.sharedMemoryBytes = req.shared_memory_bytes
    requirements.pushConstantBytes = req.push_constant_bytes
    major, minor = profile.spirv_version
    requirements.spirvVersion = (major << 16) | (minor << 8)
    vk_major, vk_minor = profile.vulkan_version
    requirements.vulkanVersion = (vk_major << 22) | (vk_minor << 12)

    executable = fb.ExecutableDefT()
    executable.targetProfile = profile.name
    executable.shaderModules = modules
    executable.entryPoints = entry_points
    executable.requirements = requirements
    builder = flatbuffers.Builder(sum(len(k.code) for k in kernels) + 1024)
    builder.Finish(executable.Pack(builder), file_identifier=VULKAN_EXECUTABLE_IDENTIFIER)
    return bytes(builder.Output())
