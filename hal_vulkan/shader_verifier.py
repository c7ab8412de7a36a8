"""Prove that an executable's declaration agrees with its SPIR-V before Vulkan sees either.

Drivers take the shader and the pipeline layout on trust: bad SPIR-V, a descriptor the layout
lacks, a texel buffer where the shader reads a storage buffer, a push-constant range shorter
than the shader's block, a LocalSize beyond the device's limits — the Vulkan spec calls each
undefined behaviour, and software drivers crash inside vkCreateComputePipelines or compute
wrong values without a word (the validation layer, when on, is too late: the driver dies in the
call it would have reported). A module file is untrusted input, so every shader module is first
validated with SPIRV-Tools for the device's Vulkan environment (the verdict cached by the
module's hash), then reflected (`spirv.reflect`), and each entry point's declaration must match
what its shader uses exactly. Any disagreement is a VerificationError naming the executable's
entry point and field; nothing has been created yet.
"""
from __future__ import annotations

import hashlib
import threading

from irtk.errors import DeviceError, VerificationError
from irtk.hal import DeviceInfo
from hal_vulkan.executable_def import BindingSpec, EntryPointSpec, ExecutableSpec
from spirv import reflect as spv
from spirv import tools
from spirv.errors import SpirvError, SpirvValidationError
from spirv.tables import TARGET_ENVS, AddressingModel, Capability, ExecutionModel

# SPIR-V capabilities the driver accepts, each with the requirement that must be declared for
# it (None: every Vulkan 1.1 device has it). A capability outside this table is refused: the
# driver enables no feature that would make it legal.
_CAPABILITY_NEEDS: dict[int, str | None] = {
    Capability.Shader: None,
    Capability.Matrix: None,
    Capability.SampledBuffer: None,
    Capability.Float16: "float16",
    Capability.Float64: "float64",
    Capability.Int8: "int8",
    Capability.Int16: "int16",
    Capability.Int64: "int64",
    Capability.StorageBuffer8BitAccess: "storage_buffer_8bit",
    Capability.UniformAndStorageBuffer8BitAccess: "storage_buffer_8bit",
    Capability.StorageBuffer16BitAccess: "storage_buffer_16bit",
    Capability.UniformAndStorageBuffer16BitAccess: "storage_buffer_16bit",
    Capability.UniformTexelBufferArrayDynamicIndexing: "texel_array_indexing",
    # irtk emits it only for f16 conversions (RoundingModeRTE 16), which need float16 anyway.
    Capability.RoundingModeRTE: "float16",
}
# Subgroup capabilities and the VkSubgroupFeatureFlagBits the device must report for them.
_SUBGROUP_OPERATIONS: dict[int, tuple[int, str]] = {
    Capability.GroupNonUniform: (0x1, "basic"),
    Capability.GroupNonUniformVote: (0x2, "vote"),
    Capability.GroupNonUniformArithmetic: (0x4, "arithmetic"),
    Capability.GroupNonUniformBallot: (0x8, "ballot"),
    Capability.GroupNonUniformShuffle: (0x10, "shuffle"),
    Capability.GroupNonUniformShuffleRelative: (0x20, "relative shuffle"),
    Capability.GroupNonUniformClustered: (0x40, "clustered"),
    Capability.GroupNonUniformQuad: (0x80, "quad"),
}
_COMPUTE_STAGE = 0x20  # VK_SHADER_STAGE_COMPUTE_BIT
# Extensions the shaders may declare: those whose features the driver checks or enables.
EXTENSIONS = frozenset({
    "SPV_KHR_storage_buffer_storage_class", "SPV_KHR_8bit_storage", "SPV_KHR_16bit_storage",
    "SPV_EXT_descriptor_indexing", "SPV_KHR_float_controls",
})

# (sha256 of the code, target env) -> None when valid, else the validator's message.
_verdicts: dict[tuple[bytes, str], str | None] = {}
_verdicts_lock = threading.Lock()


def target_env(info: DeviceInfo) -> str:
    """SPIRV-Tools' environment for the device's Vulkan version (the newest it knows)."""
    parts = (info.api_version or "1.0").split(".")
    major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    for m in range(minor if major == 1 else 9, -1, -1):
        if f"vulkan1.{m}" in TARGET_ENVS:
            return f"vulkan1.{m}"
    return "vulkan1.0"


def validation_problem(code: bytes, env: str) -> str | None:
    """The validator's complaint about `code` for `env` (None: valid), remembered by hash."""
    key = (hashlib.sha256(code).digest(), env)
    with _verdicts_lock:
        if key in _verdicts:
            return _verdicts[key]
    try:
        tools.validate(code, env)
        verdict = None
    except SpirvValidationError as exc:
        verdict = exc.diagnostic or str(exc)
    except SpirvError as exc:  # SPIRV-Tools itself is missing or broken: not the module's fault
        raise DeviceError(f"cannot validate SPIR-V: {exc}") from None
    with _verdicts_lock:
        _verdicts[key] = verdict
    return verdict


def verify(spec: ExecutableSpec, info: DeviceInfo) -> None:
    """Raise VerificationError unless every shader is valid SPIR-V for the device and every
    entry point's declaration matches its shader's interface."""
    env = target_env(info)
    target = f" (target '{spec.target_profile}')" if spec.target_profile else ""
    interfaces: list[spv.ShaderInterface] = []
    for i, code in enumerate(spec.shader_modules):
        where = f"vulkan-spirv-fb executable{target}: shader_modules[{i}]"
        problem = validation_problem(code, env)
        if problem is not None:
            raise VerificationError(f"{where} is not valid SPIR-V for {env}: {problem}")
        try:
            interface = spv.reflect(code)
        except SpirvError as exc:
            raise VerificationError(f"{where} cannot be reflected: {exc}") from None
        _check_module(interface, spec, info, where)
        interfaces.append(interface)
    for i, entry in enumerate(spec.entry_points):
        where = f"vulkan-spirv-fb executable{target}: entry point '{entry.name}' " \
                f"(entry_points[{i}])"
        _check_entry(interfaces[entry.shader_module], entry, spec, where)


def _check_module(interface: spv.ShaderInterface, spec: ExecutableSpec, info: DeviceInfo,
                  where: str) -> None:
    if interface.addressing_model != AddressingModel.Logical:
        raise VerificationError(
            f"{where} uses addressing model {_name(AddressingModel, interface.addressing_model)}"
            f"; the Vulkan driver enables only Logical (no buffer device addresses)")
    unknown = sorted(set(interface.extensions) - EXTENSIONS)
    if unknown:
        raise VerificationError(f"{where} declares extension {unknown[0]}, which the Vulkan "
                                f"driver does not enable (it accepts {sorted(EXTENSIONS)})")
    req = spec.requirements
    operations = int(info.extra.get("subgroupSupportedOperations", "0"))
    stages = int(info.extra.get("subgroupSupportedStages", str(_COMPUTE_STAGE)))
    for cap in sorted(interface.capabilities):
        name = spv.capability_name(cap)
        if cap in _SUBGROUP_OPERATIONS:
            bit, what = _SUBGROUP_OPERATIONS[cap]
            if not operations & bit or not stages & _COMPUTE_STAGE:
                raise VerificationError(
                    f"{where} declares capability {name}; device '{info.name}' has no {what} "
                    f"subgroup operations in compute shaders (subgroupSupportedOperations)")
            continue
        if cap not in _CAPABILITY_NEEDS:
            raise VerificationError(f"{where} declares capability {name}, which the Vulkan "
                                    f"driver does not enable")
        needed = _CAPABILITY_NEEDS[cap]
        if needed is not None and not getattr(req, needed):
            raise VerificationError(f"{where} declares capability {name}, but the executable's "
                                    f"requirements do not declare {needed}")


def _check_entry(interface: spv.ShaderInterface, entry: EntryPointSpec, spec: ExecutableSpec,
                 where: str) -> None:
    found = interface.entry_point(entry.name)
    if found is None:
        names = [e.name for e in interface.entry_points
                 if e.execution_model == ExecutionModel.GLCompute]
        raise VerificationError(f"{where}.name: shader module {entry.shader_module} has no "
                                f"GLCompute entry point of that name (it has {names})")
    if found.local_size is None:
        raise VerificationError(f"{where}.workgroup_size: the shader declares no constant "
                                f"LocalSize")
    if found.local_size != entry.workgroup_size:
        raise VerificationError(f"{where}.workgroup_size: declared {entry.workgroup_size}, "
                                f"the shader's LocalSize is {found.local_size}")
    _check_bindings(found, entry, where)
    if found.push_constant_blocks > 1:
        raise VerificationError(f"{where}: the shader uses {found.push_constant_blocks} "
                                f"push-constant blocks; Vulkan allows one")
    if found.push_constant_bytes > 4 * entry.push_constant_count:
        raise VerificationError(f"{where}.push_constant_count: declared "
                                f"{entry.push_constant_count} words, the shader reads "
                                f"{found.push_constant_bytes} bytes of push constants")
    shared = spec.requirements.shared_memory_bytes
    if found.workgroup_memory_bytes > shared:
        raise VerificationError(f"{where}: the shader uses {found.workgroup_memory_bytes} bytes "
                                f"of workgroup memory, the executable declares "
                                f"{shared} (requirements.shared_memory_bytes)")


def _check_bindings(found: spv.EntryPointInterface, entry: EntryPointSpec, where: str) -> None:
    """Every resource the shader uses is declared, as what the shader reads it as.

    A declared binding the shader never touches is allowed: the host binds a buffer that is
    not read (a kernel may ignore an operand), which no driver mishandles."""
    declared: dict[int, tuple[int, BindingSpec]] = {
        b.binding: (j, b) for j, b in enumerate(entry.bindings)}
    used: dict[int, spv.Resource] = {}
    for r in found.resources:
        what = f"{where}: the shader's {r.kind} %{r.variable}"
        if r.set is None or r.binding is None:
            raise VerificationError(f"{what} has no descriptor set and binding")
        what = f"{where}: the shader's {r.kind} at set {r.set}, binding {r.binding}"
        if r.set != 0:
            raise VerificationError(f"{what}: executables bind set 0 only")
        if r.kind not in (spv.STORAGE_BUFFER, spv.UNIFORM_TEXEL_BUFFER):
            raise VerificationError(f"{what}: executables bind storage buffers and uniform "
                                    f"texel buffers only")
        if r.binding not in declared:
            raise VerificationError(f"{what} is not declared (declared bindings: "
                                    f"{sorted(declared)})")
        j, b = declared[r.binding]
        field = f"{where}.bindings[{j}]"
        kind = spv.UNIFORM_TEXEL_BUFFER if b.texel else spv.STORAGE_BUFFER
        if r.kind != kind:
            raise VerificationError(f"{field}.kind: declared a {kind}, the shader reads "
                                    f"binding {r.binding} as a {r.kind}")
        if r.count != b.descriptor_count:
            size = "a runtime-sized array" if r.count == 0 else \
                f"{r.count} descriptor(s)" if r.count != 1 else "one descriptor"
            raise VerificationError(f"{field}.window_count: declared {b.descriptor_count} "
                                    f"descriptor(s), the shader's binding {r.binding} is {size}")
        if r.writable and b.read_only:
            raise VerificationError(f"{field}.read_only: declared read-only, the shader may "
                                    f"write binding {r.binding} (it is not NonWritable)")
        previous = used.get(r.binding)
        if previous is not None and (previous.kind, previous.count) != (r.kind, r.count):
            raise VerificationError(f"{what}: two variables at one binding disagree on its "
                                    f"kind or size")
        used[r.binding] = r


def _name(enum: type, value: int) -> str:
    try:
        return str(enum(value).name)
    except ValueError:
        return str(value)
