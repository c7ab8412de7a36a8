"""ModuleBuilder writes modules that SPIRV-Tools accepts, encoded the way SPIRV-Tools would."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import pytest

from spirv import (
    AddressingModel,
    Capability,
    Decoration,
    MemoryModel,
    ModuleBuilder,
    Op,
    SpirvBuildError,
    SpirvError,
    StorageClass,
    disassemble,
    parse,
    tools,
)

if TYPE_CHECKING:
    from conftest import ComputeShader


def _kernel_free_module(*capabilities: Capability) -> ModuleBuilder:
    """A module with no entry point: legal for validation with the Linkage capability."""
    b = ModuleBuilder()
    for cap in (Capability.Shader, Capability.Linkage, *capabilities):
        b.capability(cap)
    b.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
    return b


def _without_generator(binary: bytes) -> list[int]:
    """Words of a module except the generator word, which each producer sets to its own id."""
    words = list(struct.unpack(f"<{len(binary) // 4}I", binary))
    return words[:2] + words[3:]


def test_compute_shader_passes_the_vulkan_validator(shader: ComputeShader) -> None:
    tools.validate(shader.binary, "vulkan1.1")
    tools.validate(shader.binary, "vulkan1.2")


def test_compute_shader_round_trips_through_spirv_tools_text(shader: ComputeShader) -> None:
    text = tools.disassemble(shader.binary)
    assert "OpExecutionMode %{} LocalSize 64 1 1".format(shader.main) in text
    assert _without_generator(tools.assemble(text)) == _without_generator(shader.binary)


def test_header_has_magic_version_bound_and_zero_schema() -> None:
    b = ModuleBuilder(version=(1, 5))
    b.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
    ids = [b.type_void(), b.type_bool()]
    data = b.to_bytes()
    assert data[:4] == bytes([0x03, 0x02, 0x23, 0x07])
    header = parse(data).header
    assert header.version == (1, 5)
    assert header.generator == 0
    assert header.bound == max(ids) + 1 == b.bound
    assert header.schema == 0


def test_sections_follow_the_logical_layout_whatever_the_call_order() -> None:
    b = ModuleBuilder()
    f32 = b.type_float(32)
    b.decorate(f32, Decoration.RelaxedPrecision)
    b.name(f32, "float")
    b.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
    b.extension("SPV_KHR_storage_buffer_storage_class")
    b.capability(Capability.Shader)
    b.capability(Capability.Linkage)
    ops = [inst.opcode for inst in parse(b.to_words()).instructions]
    assert ops == [
        Op.Capability, Op.Capability, Op.Extension, Op.MemoryModel, Op.Name, Op.Decorate, Op.TypeFloat
    ]


def test_scalar_types_constants_and_pointers_are_deduplicated() -> None:
    b = ModuleBuilder()
    u32 = b.type_int(32, signed=False)
    assert b.type_int(32, signed=False) == u32
    assert b.type_int(32, signed=True) != u32
    assert b.type_vector(u32, 4) == b.type_vector(u32, 4)
    assert b.type_pointer(StorageClass.Private, u32) == b.type_pointer(StorageClass.Private, u32)
    assert b.type_function(u32, [u32]) == b.type_function(u32, [u32])
    assert b.constant(u32, 7) == b.constant(u32, 7)
    assert b.constant_bool(True) == b.constant_bool(True) != b.constant_bool(False)
    assert b.type_array(u32, 4) == b.type_array(u32, 4)
    assert b.constant(u32, 4) == b.constant(u32, 4)  # also made as the array length
    assert b.type_struct([u32]) != b.type_struct([u32])
    assert b.ext_inst_import("GLSL.std.450") == b.ext_inst_import("GLSL.std.450")


def test_runtime_arrays_are_shared_per_stride_and_decorated_once() -> None:
    b = _kernel_free_module()
    f32 = b.type_float(32)
    a4 = b.type_runtime_array(f32, stride=4)
    assert b.type_runtime_array(f32, stride=4) == a4
    a8 = b.type_runtime_array(f32, stride=8)
    assert a8 != a4
    b.decorate(a4, Decoration.ArrayStride, 4)  # repeating the builder's decoration is harmless
    decorations = [i.operands for i in parse(b.to_words()).instructions if i.opcode == Op.Decorate]
    assert decorations == [(a4, Decoration.ArrayStride, 4), (a8, Decoration.ArrayStride, 8)]


def test_constants_are_encoded_like_the_spirv_tools_assembler() -> None:
    b = _kernel_free_module(
        Capability.Int64, Capability.Int16, Capability.Int8, Capability.Float64, Capability.Float16
    )
    cases = [
        (b.type_int(64, True), -1, [0xFFFFFFFF, 0xFFFFFFFF]),
        (b.type_int(64, False), 0x1_0000_0002, [2, 1]),
        (b.type_int(32, True), -2, [0xFFFFFFFE]),
        (b.type_int(16, True), -1, [0xFFFFFFFF]),  # sign-extended into the high bits
        (b.type_int(16, False), 0xFFFF, [0x0000FFFF]),
        (b.type_int(8, True), -128, [0xFFFFFF80]),
        (b.type_float(16), 1.0, [0x3C00]),
        (b.type_float(32), -2.5, [0xC0200000]),
        (b.type_float(64), 1.0, [0, 0x3FF00000]),
    ]
    ids = [b.constant(t, value) for t, value, _ in cases]
    data = b.to_bytes()
    found = {i.operands[1]: list(i.operands[2:]) for i in parse(data).instructions if i.opcode == Op.Constant}
    assert [found[i] for i in ids] == [words for _, _, words in cases]
    tools.validate(data, "spv1.3")
    # Our disassembler prints the values; SPIRV-Tools must assemble them back to the same words.
    assert _without_generator(tools.assemble(disassemble(data), "spv1.3")) == _without_generator(data)


@pytest.mark.parametrize(
    ("width", "signed", "value"), [(32, False, -1), (32, False, 1 << 32), (8, True, 128), (16, True, -32769)]
)
def test_integer_constants_out_of_range_are_rejected(width: int, signed: bool, value: int) -> None:
    b = ModuleBuilder()
    with pytest.raises(SpirvBuildError, match="out of range"):
        b.constant(b.type_int(width, signed), value)


def test_float_constant_too_large_for_its_width_is_rejected() -> None:
    b = ModuleBuilder()
    with pytest.raises(SpirvBuildError, match="float32"):
        b.constant(b.type_float(32), 1e300)


def test_spec_constants_are_never_shared_and_carry_their_spec_id() -> None:
    b = _kernel_free_module()
    u32 = b.type_int(32, False)
    first, second = b.spec_constant(u32, 64, spec_id=0), b.spec_constant(u32, 64, spec_id=1)
    flag = b.spec_constant(b.type_bool(), True)
    assert len({first, second, flag}) == 3
    module = parse(b.to_words())
    decorations = [i.operands for i in module.instructions if i.opcode == Op.Decorate]
    assert (first, Decoration.SpecId, 0) in decorations
    assert any(i.opcode == Op.SpecConstantTrue for i in module.instructions)
    tools.validate(b.to_bytes(), "spv1.3")


def test_local_variables_are_hoisted_to_the_first_block(shader: ComputeShader) -> None:
    ops = [i for i in parse(shader.binary).instructions]
    first_label = next(n for n, i in enumerate(ops) if i.opcode == Op.Label)
    assert ops[first_label + 1].opcode == Op.Variable
    assert ops[first_label + 1].operands[1] == shader.local


def test_types_made_inside_a_function_go_to_the_global_section() -> None:
    b = _kernel_free_module()
    void = b.type_void()
    b.begin_function(void, b.type_function(void))
    b.label()
    b.constant(b.type_float(32), 2.0)
    b.op_void(Op.Return)
    b.end_function()
    ops = [i.opcode for i in parse(b.to_words()).instructions]
    assert ops.index(Op.Constant) < ops.index(Op.Function)
    tools.validate(b.to_bytes(), "spv1.3")


def test_op_checks_whether_the_instruction_has_a_result() -> None:
    b = ModuleBuilder()
    with pytest.raises(SpirvBuildError, match="op_void"):
        b.op(Op.Store, None, 1, 2)
    with pytest.raises(SpirvBuildError, match="use op"):
        b.op_void(Op.TypeVoid)
    with pytest.raises(SpirvBuildError, match="needs a result type"):
        b.op(Op.FAdd, None, 1, 2)
    with pytest.raises(SpirvBuildError, match="takes no result type"):
        b.op(Op.TypeBool, 5)


def test_operands_must_be_words_or_strings() -> None:
    b = ModuleBuilder()
    f32 = b.type_float(32)
    with pytest.raises(SpirvBuildError, match="constant"):
        b.op(Op.FAdd, f32, 1.5, 2)
    with pytest.raises(SpirvBuildError, match="32-bit"):
        b.decorate(f32, Decoration.Offset, -4)
    with pytest.raises(SpirvError, match="NUL"):
        b.name(f32, "a\0b")


def test_block_structure_mistakes_are_reported_early() -> None:
    b = ModuleBuilder()
    b.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
    void = b.type_void()
    with pytest.raises(SpirvBuildError, match="begin_function"):
        b.label()
    with pytest.raises(SpirvBuildError, match="inside a function"):
        b.variable(b.type_pointer(StorageClass.Function, void), StorageClass.Function)
    b.begin_function(void, b.type_function(void))
    with pytest.raises(SpirvBuildError, match="first label"):
        b.op_void(Op.Return)
    with pytest.raises(SpirvBuildError, match="still open"):
        b.begin_function(void, b.type_function(void))
    b.label()
    with pytest.raises(SpirvBuildError, match="no terminator"):
        b.label()
    with pytest.raises(SpirvBuildError, match="no terminator"):
        b.end_function()
    with pytest.raises(SpirvBuildError, match="never ended"):
        b.to_words()
    b.op_void(Op.Return)
    with pytest.raises(SpirvBuildError, match="after a block terminator"):
        b.op_void(Op.Return)
    with pytest.raises(SpirvBuildError, match="after the first label"):
        b.function_parameter(void)
    b.end_function()
    b.to_words()


def test_variable_type_must_point_to_its_storage_class() -> None:
    b = ModuleBuilder()
    ptr = b.type_pointer(StorageClass.Private, b.type_float(32))
    with pytest.raises(SpirvBuildError, match="storage class"):
        b.variable(ptr, StorageClass.Workgroup)


def test_reserved_ids_must_come_from_new_id() -> None:
    b = ModuleBuilder()
    void = b.type_void()
    b.begin_function(void, b.type_function(void))
    with pytest.raises(SpirvBuildError, match="not reserved"):
        b.label(99)
    assert b.op(Op.Label, None, result_id=b.new_id()) == b.bound - 1  # op(Op.Label) is label()


def test_module_without_memory_model_is_refused() -> None:
    with pytest.raises(SpirvBuildError, match="memory_model"):
        ModuleBuilder().to_words()


def test_phi_can_define_a_reserved_result_id() -> None:
    """A loop counter: OpPhi names a value that is only computed later in the loop body."""
    b = _kernel_free_module()
    u32, void = b.type_int(32, False), b.type_void()
    fn = b.begin_function(void, b.type_function(void))
    b.name(fn, "count")
    entry = b.label()
    header, body, cont, done = b.new_id(), b.new_id(), b.new_id(), b.new_id()
    b.op_void(Op.Branch, header)
    b.label(header)
    nxt = b.new_id()
    i = b.op(Op.Phi, u32, b.constant(u32, 0), entry, nxt, cont)
    more = b.op(Op.ULessThan, b.type_bool(), i, b.constant(u32, 10))
    b.op_void(Op.LoopMerge, done, cont, 0)
    b.op_void(Op.BranchConditional, more, body, done)
    b.label(body)
    b.op_void(Op.Branch, cont)
    b.label(cont)
    assert b.op(Op.IAdd, u32, i, b.constant(u32, 1), result_id=nxt) == nxt
    b.op_void(Op.Branch, header)
    b.label(done)
    b.op_void(Op.Return)
    b.end_function()
    tools.validate(b.to_bytes(), "spv1.3")
