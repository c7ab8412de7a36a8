"""Shared fixtures for the spirv package tests: a seeded RNG and a real compute shader."""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from spirv import (
    AddressingModel,
    BuiltIn,
    Capability,
    Decoration,
    ExecutionMode,
    ExecutionModel,
    GLSLstd450,
    MemoryModel,
    ModuleBuilder,
    Op,
    SelectionControl,
    StorageClass,
)


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    """A generator seeded from the test's id: reproducible, and different per test."""
    return random.Random(zlib.crc32(request.node.nodeid.encode()))


@dataclass
class ComputeShader:
    """The ids a test may want to look up in the shader built by ``build_compute_shader``."""

    binary: bytes
    main: int
    gid: int
    local: int
    src: int
    dst: int


def build_compute_shader(local_size: tuple[int, int, int] = (64, 1, 1)) -> ComputeShader:
    """dst[i] = exp(src[i] + 1.5) for i < len(src): buffers, builtins, GLSL.std.450, a branch."""
    b = ModuleBuilder()
    b.capability(Capability.Shader)
    glsl = b.ext_inst_import("GLSL.std.450")
    b.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)

    void, f32 = b.type_void(), b.type_float(32)
    u32, i32 = b.type_int(32, signed=False), b.type_int(32, signed=True)
    v3u, boolean = b.type_vector(u32, 3), b.type_bool()
    floats = b.type_runtime_array(f32, stride=4)
    buffers = []
    for binding in (0, 1):
        block = b.type_struct([floats])
        b.decorate(block, Decoration.Block)
        b.member_decorate(block, 0, Decoration.Offset, 0)
        var = b.variable(b.type_pointer(StorageClass.StorageBuffer, block), StorageClass.StorageBuffer)
        b.decorate(var, Decoration.DescriptorSet, 0)
        b.decorate(var, Decoration.Binding, binding)
        buffers.append(var)
    src, dst = buffers
    b.decorate(src, Decoration.NonWritable)
    b.name(src, "src")
    b.name(dst, "dst")
    gid = b.variable(b.type_pointer(StorageClass.Input, v3u), StorageClass.Input)
    b.decorate(gid, Decoration.BuiltIn, BuiltIn.GlobalInvocationId)

    main = b.begin_function(void, b.type_function(void, []))
    b.entry_point(ExecutionModel.GLCompute, main, "main", [gid])
    b.execution_mode(main, ExecutionMode.LocalSize, *local_size)
    b.name(main, "main")
    b.label()
    x = b.op(Op.CompositeExtract, u32, b.op(Op.Load, v3u, gid), 0)
    in_bounds = b.op(Op.ULessThan, boolean, x, b.op(Op.ArrayLength, u32, src, 0))
    then, merge = b.new_id(), b.new_id()
    b.op_void(Op.SelectionMerge, merge, SelectionControl.None_)
    b.op_void(Op.BranchConditional, in_bounds, then, merge)

    b.label(then)
    ptr_f32 = b.type_pointer(StorageClass.StorageBuffer, f32)
    local = b.variable(b.type_pointer(StorageClass.Function, f32), StorageClass.Function)
    zero = b.constant(i32, 0)
    value = b.op(Op.Load, f32, b.op(Op.AccessChain, ptr_f32, src, zero, x))
    total = b.op(Op.FAdd, f32, value, b.constant(f32, 1.5))
    b.op_void(Op.Store, local, b.ext_inst(f32, glsl, GLSLstd450.Exp, total))
    b.op_void(Op.Store, b.op(Op.AccessChain, ptr_f32, dst, zero, x), b.op(Op.Load, f32, local))
    b.op_void(Op.Branch, merge)

    b.label(merge)
    b.op_void(Op.Return)
    b.end_function()
    return ComputeShader(b.to_bytes(), main, gid, local, src, dst)


@pytest.fixture
def shader() -> ComputeShader:
    return build_compute_shader()


@pytest.fixture
def make_shader() -> Callable[..., ComputeShader]:
    """``build_compute_shader`` itself, for tests that vary its parameters."""
    return build_compute_shader
