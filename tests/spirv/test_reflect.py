"""Reflection: what each entry point of a shader really uses."""
from __future__ import annotations

import pytest

from spirv import tools
from spirv.errors import SpirvParseError
from spirv.reflect import (STORAGE_BUFFER, UNIFORM_TEXEL_BUFFER, capability_name, reflect)
from spirv.tables import Capability, ExecutionModel

ENV = "vulkan1.3"  # LocalSizeId needs Vulkan 1.3 (maintenance4)
HEADER = """
OpCapability Shader
OpCapability SampledBuffer
OpMemoryModel Logical GLSL450
"""

# Two entry points sharing globals: `first` uses a (read-only), b (written) and push member 1
# through a helper function; `second` uses only the texel array t and workgroup memory.
SHADER = HEADER + """
OpEntryPoint GLCompute %first "first" %a %b %consts
OpEntryPoint GLCompute %second "second" %t %w
OpExecutionMode %first LocalSize 8 2 1
OpExecutionModeId %second LocalSizeId %c4 %c1 %c1
OpDecorate %arr ArrayStride 4
OpMemberDecorate %buf 0 Offset 0
OpDecorate %buf Block
OpDecorate %a DescriptorSet 0
OpDecorate %a Binding 0
OpDecorate %a NonWritable
OpDecorate %b DescriptorSet 0
OpDecorate %b Binding 3
OpDecorate %t DescriptorSet 0
OpDecorate %t Binding 5
OpMemberDecorate %pc 0 Offset 0
OpMemberDecorate %pc 1 Offset 8
OpMemberDecorate %pc 2 Offset 16
OpDecorate %pc Block
%void = OpTypeVoid
%fn = OpTypeFunction %void
%uint = OpTypeInt 32 0
%float = OpTypeFloat 32
%v4uint = OpTypeVector %uint 4
%c0 = OpConstant %uint 0
%c1 = OpConstant %uint 1
%c2 = OpConstant %uint 2
%c4 = OpConstant %uint 4
%c16 = OpConstant %uint 16
%arr = OpTypeRuntimeArray %float
%buf = OpTypeStruct %arr
%p_buf = OpTypePointer StorageBuffer %buf
%a = OpVariable %p_buf StorageBuffer
%b = OpVariable %p_buf StorageBuffer
%img = OpTypeImage %uint Buffer 0 0 0 1 Unknown
%imgs = OpTypeArray %img %c4
%p_imgs = OpTypePointer UniformConstant %imgs
%p_img = OpTypePointer UniformConstant %img
%t = OpVariable %p_imgs UniformConstant
%pc = OpTypeStruct %uint %uint %v4uint
%p_pc = OpTypePointer PushConstant %pc
%consts = OpVariable %p_pc PushConstant
%p_pc_u = OpTypePointer PushConstant %uint
%p_f = OpTypePointer StorageBuffer %float
%shared = OpTypeArray %float %c16
%p_shared = OpTypePointer Workgroup %shared
%p_wf = OpTypePointer Workgroup %float
%w = OpVariable %p_shared Workgroup

%helper = OpFunction %void None %fn
%h0 = OpLabel
%pn = OpAccessChain %p_pc_u %consts %c1
%n = OpLoad %uint %pn
%pa = OpAccessChain %p_f %a %c0 %n
%va = OpLoad %float %pa
%pb = OpAccessChain %p_f %b %c0 %n
OpStore %pb %va
OpReturn
OpFunctionEnd

%first = OpFunction %void None %fn
%f0 = OpLabel
%r = OpFunctionCall %void %helper
OpReturn
OpFunctionEnd

%second = OpFunction %void None %fn
%s0 = OpLabel
%pt = OpAccessChain %p_img %t %c2
%it = OpLoad %img %pt
%tx = OpImageFetch %v4uint %it %c0
%pw = OpAccessChain %p_wf %w %c0
%f = OpConvertUToF %float %c1
OpStore %pw %f
OpReturn
OpFunctionEnd
"""


@pytest.fixture(scope="module")
def interface():
    code = tools.assemble(SHADER, ENV)
    tools.validate(code, ENV)
    return reflect(code)


def test_entry_points_with_their_workgroup_sizes(interface):
    first, second = interface.entry_points
    assert (first.name, first.execution_model, first.local_size) == \
        ("first", ExecutionModel.GLCompute, (8, 2, 1))
    assert (second.name, second.local_size) == ("second", (4, 1, 1))  # LocalSizeId constants
    assert interface.entry_point("second") is second
    assert interface.entry_point("third") is None


def test_resources_used_through_called_functions(interface):
    first = interface.entry_point("first")
    assert [(r.set, r.binding, r.kind, r.count, r.writable) for r in first.resources] == [
        (0, 0, STORAGE_BUFFER, 1, False), (0, 3, STORAGE_BUFFER, 1, True)]
    assert first.workgroup_memory_bytes == 0


def test_texel_arrays_and_workgroup_memory(interface):
    second = interface.entry_point("second")
    assert [(r.binding, r.kind, r.count, r.writable) for r in second.resources] == [
        (5, UNIFORM_TEXEL_BUFFER, 4, False)]
    assert second.workgroup_memory_bytes == 64
    assert (second.push_constant_bytes, second.push_constant_blocks) == (0, 0)


def test_push_constants_read_up_to_the_last_member_used(interface):
    first = interface.entry_point("first")
    assert (first.push_constant_bytes, first.push_constant_blocks) == (12, 1)  # member 1 at 8


def test_a_whole_block_use_counts_the_whole_block():
    text = SHADER.replace("%pn = OpAccessChain %p_pc_u %consts %c1\n%n = OpLoad %uint %pn",
                          "%whole = OpLoad %pc %consts\n%n = OpCompositeExtract %uint %whole 1")
    assert reflect(tools.assemble(text, ENV)).entry_point("first") \
        .push_constant_bytes == 32


def test_workgroup_size_builtin_wins_over_local_size():
    text = SHADER.replace("OpDecorate %buf Block", "OpDecorate %buf Block\n"
                          "OpDecorate %wgsize BuiltIn WorkgroupSize").replace(
        "%c16 = OpConstant %uint 16", "%c16 = OpConstant %uint 16\n"
        "%v3uint = OpTypeVector %uint 3\n%wgsize = OpConstantComposite %v3uint %c16 %c2 %c1")
    code = tools.assemble(text, ENV)
    tools.validate(code, ENV)
    assert reflect(code).entry_point("first").local_size == (16, 2, 1)


def test_capabilities_are_named(interface):
    assert interface.capabilities == {Capability.Shader, Capability.SampledBuffer}
    assert interface.capability_names() == ["SampledBuffer", "Shader"]
    assert capability_name(999999) == "<capability 999999>"


def test_a_literal_equal_to_a_variable_id_is_not_a_use(interface):
    """A switch case whose value is the texel array's id is a literal, not a use of it."""
    texel_id = interface.entry_point("second").resources[0].variable
    text = SHADER.replace("%pb = OpAccessChain %p_f %b %c0 %n",
                          f"OpSelectionMerge %m None\nOpSwitch %n %m {texel_id} %m\n%m = OpLabel\n"
                          "%pb = OpAccessChain %p_f %b %c0 %n")
    code = tools.assemble(text, ENV)
    tools.validate(code, ENV)
    first = reflect(code).entry_point("first")
    assert [r.binding for r in first.resources] == [0, 3]


def test_malformed_input_is_a_parse_error():
    with pytest.raises(SpirvParseError):
        reflect(b"\x03\x02\x23\x07" + bytes(8))
