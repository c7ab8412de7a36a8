"""The SPIRV-Tools binding: validation errors carry the diagnostic, envs map correctly."""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

import pytest

from spirv import (
    AddressingModel,
    Capability,
    Decoration,
    ExecutionModel,
    MemoryModel,
    ModuleBuilder,
    Op,
    SpirvError,
    SpirvValidationError,
    StorageClass,
    entry_points,
    tables,
    tools,
)

if TYPE_CHECKING:
    from conftest import ComputeShader


def _module_with_bad_fadd() -> bytes:
    """OpFAdd on integers: structurally fine, semantically invalid."""
    b = ModuleBuilder()
    b.capability(Capability.Shader)
    b.capability(Capability.Linkage)
    b.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
    void, u32 = b.type_void(), b.type_int(32, False)
    b.begin_function(void, b.type_function(void))
    b.label()
    b.op(Op.FAdd, u32, b.constant(u32, 1), b.constant(u32, 2))
    b.op_void(Op.Return)
    b.end_function()
    return b.to_bytes()


def _buffer_with_vec3_at(offset: int, version: tuple[int, int] = (1, 3)) -> bytes:
    """A compute shader whose storage buffer puts a vec3 at ``offset``."""
    b = ModuleBuilder(version=version)
    b.capability(Capability.Shader)
    if version < (1, 3):
        b.extension("SPV_KHR_storage_buffer_storage_class")
    b.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
    void, f32 = b.type_void(), b.type_float(32)
    block = b.type_struct([f32, b.type_vector(f32, 3)])
    b.decorate(block, Decoration.Block)
    b.member_decorate(block, 0, Decoration.Offset, 0)
    b.member_decorate(block, 1, Decoration.Offset, offset)
    var = b.variable(b.type_pointer(StorageClass.StorageBuffer, block), StorageClass.StorageBuffer)
    b.decorate(var, Decoration.DescriptorSet, 0)
    b.decorate(var, Decoration.Binding, 0)
    main = b.begin_function(void, b.type_function(void))
    b.label()
    b.op_void(Op.Return)
    b.end_function()
    b.entry_point(ExecutionModel.GLCompute, main, "main")
    b.execution_mode(main, tables.ExecutionMode.LocalSize, 1, 1, 1)
    return b.to_bytes()


def test_invalid_module_raises_with_the_validator_diagnostic() -> None:
    with pytest.raises(SpirvValidationError) as info:
        tools.validate(_module_with_bad_fadd(), "spv1.3")
    assert isinstance(info.value, SpirvError)
    assert "FAdd" in str(info.value) and "spv1.3" in str(info.value)
    assert "OpFAdd" in info.value.diagnostic


def test_vulkan_rules_apply_only_for_vulkan_targets(shader: ComputeShader) -> None:
    with pytest.raises(SpirvValidationError, match="vulkan1.0"):
        tools.validate(shader.binary, "vulkan1.0")  # SPIR-V 1.3 is newer than Vulkan 1.0 allows
    tools.validate(shader.binary, "vulkan1.3")
    tools.validate(shader.binary, "spv1.3")


def test_block_layout_flags_relax_the_offset_rules() -> None:
    straddling = _buffer_with_vec3_at(8)  # a vec3 across a 16-byte boundary
    with pytest.raises(SpirvValidationError, match="layout"):
        tools.validate(straddling, "vulkan1.1")
    tools.validate(straddling, "vulkan1.1", scalar_block_layout=True)
    tools.validate(_buffer_with_vec3_at(4), "vulkan1.1")  # relaxed layout is core in Vulkan 1.1
    vulkan10 = _buffer_with_vec3_at(4, version=(1, 0))
    with pytest.raises(SpirvValidationError, match="layout"):
        tools.validate(vulkan10, "vulkan1.0")
    tools.validate(vulkan10, "vulkan1.0", relax_block_layout=True)


def test_target_env_table_agrees_with_spirv_tools() -> None:
    parse_env = tools._lib().spvParseTargetEnv
    for name in [f"vulkan1.{m}" for m in range(4)] + [f"spv1.{m}" for m in range(7)]:
        value = ctypes.c_int(-1)
        assert parse_env(name.encode(), ctypes.byref(value)), name
        assert tools.target_env_value(name) == value.value, name


def test_unknown_target_env_is_rejected(shader: ComputeShader) -> None:
    with pytest.raises(SpirvError, match="unknown target environment 'vulkan9'"):
        tools.validate(shader.binary, "vulkan9")


def test_assembler_errors_name_the_line() -> None:
    with pytest.raises(SpirvError, match="line 2"):
        tools.assemble("OpCapability Shader\nOpBogus %1\n")


def test_assemble_then_validate_text() -> None:
    text = """
        OpCapability Shader
        OpCapability Linkage
        OpMemoryModel Logical GLSL450
   %1 = OpTypeVoid
    """
    binary = tools.assemble(text, "spv1.0")
    tools.validate(binary, "spv1.0")
    assert binary[:4] == bytes([0x03, 0x02, 0x23, 0x07])


def test_spirv_tools_disassembly_can_use_friendly_names(shader: ComputeShader) -> None:
    assert "%main = OpFunction" in tools.disassemble(shader.binary, friendly_names=True)


def test_optimizer_keeps_the_entry_point_and_validity(shader: ComputeShader) -> None:
    optimized = tools.optimize(shader.binary, ["-O"])
    tools.validate(optimized, "vulkan1.1")
    assert [(e.name, e.local_size) for e in entry_points(optimized)] == [("main", (64, 1, 1))]


def test_optimizer_failure_is_a_spirv_error(shader: ComputeShader) -> None:
    with pytest.raises(SpirvError, match="spirv-opt"):
        tools.optimize(shader.binary, ["--no-such-pass"])


def test_repeated_calls_do_not_leak_or_crash(shader: ComputeShader) -> None:
    bad = _module_with_bad_fadd()
    for _ in range(200):
        tools.validate(shader.binary)
        with pytest.raises(SpirvValidationError):
            tools.validate(bad, "spv1.3")
        tools.assemble(tools.disassemble(shader.binary))
