"""Hand-built SPIR-V executables that really use what their requirements declare.

`typed_executable(name)`: dst[i] = src[i] * 3 + 1 computed in the type itself (f16, f64, i8,
i16, i64; integers wrap), one workgroup of 64 per 64 elements. `subgroup_executable(size)`:
dst[i] = SubgroupSize, compiled for subgroup `size`. Both are SPIR-V 1.5 for Vulkan 1.2 and pass
spirv-val; their requirements name exactly the features their code declares.
"""
from __future__ import annotations

import numpy as np

from spirv import tools
from spirv.builder import ModuleBuilder
from spirv.tables import (AddressingModel, BuiltIn, Capability, Decoration, ExecutionMode,
                          ExecutionModel, MemoryModel, Op, StorageClass)
from tests.hal_vulkan.kernels import pack_executable

WORKGROUP = 64

# name -> (numpy dtype, bit width, is float, capabilities, requirement flags)
TYPES: dict[str, tuple[type, int, bool, tuple[Capability, ...], dict[str, bool]]] = {
    "f16": (np.float16, 16, True, (Capability.Float16, Capability.StorageBuffer16BitAccess),
            {"float16": True, "storageBuffer16bit": True}),
    "f64": (np.float64, 64, True, (Capability.Float64,), {"float64": True}),
    "i8": (np.int8, 8, False, (Capability.Int8, Capability.StorageBuffer8BitAccess),
           {"int8": True, "storageBuffer8bit": True}),
    "i16": (np.int16, 16, False, (Capability.Int16, Capability.StorageBuffer16BitAccess),
            {"int16": True, "storageBuffer16bit": True}),
    "i64": (np.int64, 64, False, (Capability.Int64,), {"int64": True}),
}

_VULKAN_1_2 = (1 << 22) | (2 << 12)


def _buffers(b: ModuleBuilder, elem: int, stride: int) -> list[int]:
    array = b.type_runtime_array(elem, stride=stride)
    block = b.type_struct([array])
    b.decorate(block, Decoration.Block)
    b.member_decorate(block, 0, Decoration.Offset, 0)
    out = []
    for binding in (0, 1):
        var = b.variable(b.type_pointer(StorageClass.StorageBuffer, block),
                         StorageClass.StorageBuffer)
        b.decorate(var, Decoration.DescriptorSet, 0)
        b.decorate(var, Decoration.Binding, binding)
        out.append(var)
    return out


def _begin(b: ModuleBuilder, capabilities: tuple[Capability, ...]) -> None:
    b.capability(Capability.Shader)
    for cap in capabilities:
        b.capability(cap)
    b.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)


def typed_spirv(name: str) -> bytes:
    dtype, bits, is_float, caps, _ = TYPES[name]
    b = ModuleBuilder(version=(1, 5))
    _begin(b, caps)
    void, u32, i32 = b.type_void(), b.type_int(32, signed=False), b.type_int(32, signed=True)
    elem = b.type_float(bits) if is_float else b.type_int(bits, signed=True)
    src, dst = _buffers(b, elem, bits // 8)
    b.decorate(src, Decoration.NonWritable)
    v3u = b.type_vector(u32, 3)
    gid = b.variable(b.type_pointer(StorageClass.Input, v3u), StorageClass.Input)
    b.decorate(gid, Decoration.BuiltIn, BuiltIn.GlobalInvocationId)
    main = b.begin_function(void, b.type_function(void, []))
    b.entry_point(ExecutionModel.GLCompute, main, "main", [gid, src, dst])
    b.execution_mode(main, ExecutionMode.LocalSize, WORKGROUP, 1, 1)
    b.label()
    x = b.op(Op.CompositeExtract, u32, b.op(Op.Load, v3u, gid), 0)
    ptr = b.type_pointer(StorageClass.StorageBuffer, elem)
    zero = b.constant(i32, 0)
    value = b.op(Op.Load, elem, b.op(Op.AccessChain, ptr, src, zero, x))
    mul, add = (Op.FMul, Op.FAdd) if is_float else (Op.IMul, Op.IAdd)
    three = b.constant(elem, 3.0 if is_float else 3)
    one = b.constant(elem, 1.0 if is_float else 1)
    result = b.op(add, elem, b.op(mul, elem, value, three), one)
    b.op_void(Op.Store, b.op(Op.AccessChain, ptr, dst, zero, x), result)
    b.op_void(Op.Return)
    b.end_function()
    code = b.to_bytes()
    tools.validate(code, "vulkan1.2")
    return code


def typed_executable(name: str) -> bytes:
    return pack_executable(typed_spirv(name), workgroup_size=WORKGROUP,
                           entry_points=[("main", 2, 0)], spirvVersion=0x10500,
                           vulkanVersion=_VULKAN_1_2, **TYPES[name][4])


def typed_reference(name: str, src: np.ndarray) -> np.ndarray:
    """What the shader computes, in the same type (f16 from the exact f64 value, rounded)."""
    dtype, _, is_float, _, _ = TYPES[name]
    if is_float:
        return (src.astype(np.float64) * 3 + 1).astype(dtype)
    with np.errstate(over="ignore"):
        return (src * dtype(3) + dtype(1)).astype(dtype)


def subgroup_spirv() -> bytes:
    b = ModuleBuilder(version=(1, 5))
    _begin(b, (Capability.GroupNonUniform,))
    void, u32, i32 = b.type_void(), b.type_int(32, signed=False), b.type_int(32, signed=True)
    _, dst = _buffers(b, u32, 4)
    v3u = b.type_vector(u32, 3)
    gid = b.variable(b.type_pointer(StorageClass.Input, v3u), StorageClass.Input)
    b.decorate(gid, Decoration.BuiltIn, BuiltIn.GlobalInvocationId)
    size = b.variable(b.type_pointer(StorageClass.Input, u32), StorageClass.Input)
    b.decorate(size, Decoration.BuiltIn, BuiltIn.SubgroupSize)
    main = b.begin_function(void, b.type_function(void, []))
    b.entry_point(ExecutionModel.GLCompute, main, "main", [gid, size, dst])
    b.execution_mode(main, ExecutionMode.LocalSize, WORKGROUP, 1, 1)
    b.label()
    x = b.op(Op.CompositeExtract, u32, b.op(Op.Load, v3u, gid), 0)
    ptr = b.type_pointer(StorageClass.StorageBuffer, u32)
    b.op_void(Op.Store, b.op(Op.AccessChain, ptr, dst, b.constant(i32, 0), x),
              b.op(Op.Load, u32, size))
    b.op_void(Op.Return)
    b.end_function()
    code = b.to_bytes()
    tools.validate(code, "vulkan1.2")
    return code


def subgroup_executable(subgroup_size: int) -> bytes:
    """Binding 0 is unused (kept so both kernels share one interface shape)."""
    return pack_executable(subgroup_spirv(), workgroup_size=WORKGROUP,
                           entry_points=[("main", 2, 0)], spirvVersion=0x10500,
                           vulkanVersion=_VULKAN_1_2, subgroupSize=subgroup_size)
