"""Code generation without a device: valid modules, launch shapes, interfaces, errors, packing."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from irtk.compiler.codegen.spirv import (compile_kernel, pack_executable,
                                         plan_launch)
from irtk.compiler.codegen.spirv.elementwise import offset_terms
from irtk.compiler.kernel import AffineMap, Op, Operand
from irtk.compiler.targets import VULKAN_PROFILES, VulkanProfile
from irtk.errors import CompileError
from irtk.hal import CAPABILITIES
from schemas import VULKAN_EXECUTABLE_IDENTIFIER
from schemas import vulkan_executable as fb
from spirv import tools

from .kernels import OP_CASES, case_id, elementwise, identity, projection, single_op

DEFAULT = VULKAN_PROFILES["default"]
LLVMPIPE = VULKAN_PROFILES["llvmpipe"]
SPIRV_15 = VulkanProfile("spirv15", vulkan_env="vulkan1.2", spirv_version=(1, 5),
                         vulkan_version=(1, 2))


def _validate_everywhere(code: bytes) -> None:
    tools.validate(code, "vulkan1.1")
    tools.validate(code, LLVMPIPE.vulkan_env)


@pytest.mark.parametrize("case", OP_CASES, ids=case_id)
def test_every_op_compiles_to_a_valid_module(case):
    name, ins, out, _, fields = case
    kernel = single_op(name, ins, out, **fields)
    for profile in (DEFAULT, LLVMPIPE, SPIRV_15):
        compiled = compile_kernel(kernel, profile)
        tools.validate(compiled.code, profile.vulkan_env)
    _validate_everywhere(compile_kernel(kernel, DEFAULT).code)


@pytest.mark.parametrize("size, workgroup, per_invocation, count", [
    (1, 1, 1, 1), (63, 64, 1, 1), (64, 64, 1, 1), (65, 128, 1, 1), (128, 128, 1, 1),
    (1000, 128, 1, 8), (8191, 128, 1, 64), (8192, 128, 2, 32), (32768, 128, 8, 32),
    (140000, 128, 8, 137)])
def test_launch_shape_follows_the_iteration_count(size, workgroup, per_invocation, count):
    plan = plan_launch(size, 3, DEFAULT)
    assert plan.workgroup_size == workgroup
    assert plan.per_invocation == per_invocation
    assert plan.grid == (count, 1, 1)
    assert plan.grid[0] * plan.per_workgroup >= size
    assert (plan.grid[0] - 1) * plan.per_workgroup < size


def test_large_bodies_are_unrolled_less():
    assert plan_launch(1 << 20, 3, DEFAULT).per_invocation == 8
    assert plan_launch(1 << 20, 200, DEFAULT).per_invocation == 4
    assert plan_launch(1 << 20, 1000, DEFAULT).per_invocation == 1
    assert plan_launch(1 << 20, 5000, DEFAULT).per_invocation == 1


def test_workgroup_size_respects_the_profile_limit():
    small = VulkanProfile("tiny", max_workgroup_invocations=32)
    assert plan_launch(1000, 1, small).workgroup_size == 32


def test_bounds_check_is_emitted_only_when_the_grid_overshoots():
    assert not plan_launch(128 * 8, 1, DEFAULT).bounds_check
    assert plan_launch(1000, 1, DEFAULT).bounds_check
    assert plan_launch(1, 1, DEFAULT).workgroup_size == 1
    assert not plan_launch(1, 1, DEFAULT).bounds_check


def test_more_workgroups_than_one_dimension_allows_use_a_2d_grid():
    plan = plan_launch(128 * 20 + 3, 1, DEFAULT, max_workgroup_count=7)
    assert plan.grid == (7, 3, 1)
    assert plan.bounds_check
    full = plan_launch((1 << 31) - 1, 1, DEFAULT)
    assert full.grid[0] <= 65535 and full.grid[1] > 1
    # Full rows of 65535, as the host launches a Grid(linear=True); the surplus is less than a row.
    assert full.grid[0] == 65535
    assert full.grid[0] * full.grid[1] - -(-full.iterations // full.per_workgroup) < full.grid[0]
    with pytest.raises(CompileError, match="32-bit"):
        plan_launch(1 << 31, 1, DEFAULT)
    with pytest.raises(CompileError, match="grid"):
        plan_launch(10_000, 1, DEFAULT, max_workgroup_count=3)


def test_a_2d_grid_kernel_reads_the_workgroup_count():
    kernel = single_op("arith.negf", ["f32"], "f32", shape=(128 * 20 + 3,))
    compiled = compile_kernel(kernel, DEFAULT, max_workgroup_count=7)
    assert compiled.workgroup_count == (7, 3, 1)
    assert "NumWorkgroups" in tools.disassemble(compiled.code)
    assert "NumWorkgroups" not in tools.disassemble(compile_kernel(kernel, DEFAULT).code)


def test_identity_operands_index_with_the_linear_iteration_directly():
    operand = Operand(0, "f32", (3, 4, 5), identity(3))
    terms, const = offset_terms((3, 4, 5), operand)
    assert [(t.divisor, t.modulus, t.coefficient) for t in terms] == [(1, 0, 1)] and const == 0


def test_broadcast_and_transpose_offsets_are_divisions_and_remainders():
    row = Operand(0, "f32", (5,), projection(3, [2]))
    terms, _ = offset_terms((3, 4, 5), row)
    assert [(t.divisor, t.modulus, t.coefficient) for t in terms] == [(1, 5, 1)]
    lead = Operand(0, "f32", (3,), projection(3, [0]))
    terms, _ = offset_terms((3, 4, 5), lead)
    assert [(t.divisor, t.modulus, t.coefficient) for t in terms] == [(20, 0, 1)]
    transposed = Operand(0, "f32", (5, 4, 3), projection(3, [2, 1, 0]))
    terms, _ = offset_terms((3, 4, 5), transposed)
    assert {(t.divisor, t.modulus, t.coefficient) for t in terms} == {
        (20, 0, 1), (5, 4, 3), (1, 5, 12)}


def test_unit_loops_do_not_split_contiguous_runs():
    operand = Operand(0, "f32", (4, 1, 5), identity(3))
    terms, _ = offset_terms((4, 1, 5), operand)
    assert [(t.divisor, t.modulus, t.coefficient) for t in terms] == [(1, 0, 1)]


def test_offsets_match_the_affine_maps_for_every_iteration(rng):
    ranges = (3, 1, 4, 2)
    maps = [AffineMap(4, ((0, 0, 1, 0, 1), (2, 0, 0, 1, 0))),  # (d2 + 1, 2 * d0 + d3)
            projection(4, [3, 0]), identity(4)]
    shapes = [(5, 6), (2, 3), ranges]
    loops = np.indices(ranges).reshape(4, -1)
    for shape, amap in zip(shapes, maps):
        terms, const = offset_terms(ranges, Operand(0, "f32", shape, amap))
        linear = np.arange(loops.shape[1])
        got = sum((t.coefficient * ((linear // t.divisor) % (t.modulus or 1 << 40))
                   for t in terms), np.zeros_like(linear)) + const
        idx = [sum(row[j] * loops[j] for j in range(4)) + row[-1] for row in amap.rows]
        np.testing.assert_array_equal(got, np.ravel_multi_index(idx, shape))


def test_interface_lists_bindings_with_read_only_inputs():
    kernel = single_op("math.fma", ["f32", "f32", "f32"], "f32", shape=(64,))
    compiled = compile_kernel(kernel, DEFAULT)
    assert compiled.bindings == [(0, True), (1, True), (2, True), (3, False)]
    assert compiled.entry_point == "math_fma"
    assert compiled.push_constant_count == 0
    assert compiled.requirements == {"max_workgroup_invocations": 64}
    assert compiled.workgroup_size == (64, 1, 1)
    text = tools.disassemble(compiled.code)
    assert text.count("NonWritable") == 3 and text.count("NonReadable") == 1
    assert "subgroup" not in text.lower()


def test_outputs_read_by_the_body_are_not_marked_non_readable():
    ops = [Op("arith.addf", (0, 1), "f32")]
    kernel = elementwise("accumulate", (10,), ["f32"], ["f32"], ops, [2])
    text = tools.disassemble(compile_kernel(kernel, DEFAULT).code)
    assert "NonReadable" not in text and text.count("NonWritable") == 1


def test_rank_zero_kernels_run_one_invocation():
    ops = [Op("arith.constant", (), "f32", float_value=2.5), Op("arith.mulf", (0, 2), "f32")]
    kernel = elementwise("scalar", (), ["f32"], ["f32"], ops, [3])
    compiled = compile_kernel(kernel, DEFAULT)
    assert compiled.workgroup_size == (1, 1, 1) and compiled.workgroup_count == (1, 1, 1)


def test_kernels_without_iterations_dispatch_no_workgroups():
    kernel = single_op("arith.negf", ["f32"], "f32", shape=(4, 0))
    assert compile_kernel(kernel, DEFAULT).workgroup_count == (0, 1, 1)


def test_i1_tensors_go_to_the_general_strategy():
    ops = [Op("arith.cmpf", (0, 0), "i1", predicate="oeq")]
    kernel = elementwise("mask", (8,), ["f32"], ["i1"], ops, [2])
    assert compile_kernel(kernel, DEFAULT).strategy == "fallback"
    kernel = elementwise("mask_in", (8,), ["i1"], ["f32"],
                         [Op("arith.uitofp", (0,), "f32")], [2])
    assert compile_kernel(kernel, DEFAULT).strategy == "fallback"


def test_unknown_ops_are_named():
    kernel = single_op("math.acos", ["f32"], "f32")
    with pytest.raises(CompileError, match="unknown body op math.acos"):
        compile_kernel(kernel, DEFAULT)


def test_ops_on_the_wrong_types_are_rejected():
    with pytest.raises(CompileError, match=r"arith.addf.*\(i32, i32\) are not one float type"):
        compile_kernel(single_op("arith.addf", ["i32", "i32"], "i32"), DEFAULT)
    with pytest.raises(CompileError, match="predicate 'bogus'"):
        compile_kernel(single_op("arith.cmpf", ["f32", "f32"], "i1", predicate="bogus"), DEFAULT)


def test_malformed_kernels_are_rejected():
    kernel = elementwise("bad", (4,), ["f32"], ["i32"], [], [0])
    with pytest.raises(CompileError, match="output 0 is i32 but yields a f32"):
        compile_kernel(kernel, DEFAULT)
    kernel = elementwise("bad", (4,), ["f32"], ["f32"], [Op("arith.negf", (7,), "f32")], [2])
    with pytest.raises(CompileError, match=r"op 0 \(arith.negf\) uses value 7"):
        compile_kernel(kernel, DEFAULT)
    kernel = elementwise("bad", (4,), ["f32"], ["f32"],
                         [Op("linalg.index", (), "i32", int_value=3)], [0])
    with pytest.raises(CompileError, match="linalg.index 3"):
        compile_kernel(kernel, DEFAULT)


def test_pack_executable_writes_every_kernel_and_the_requirements():
    kernels = [compile_kernel(single_op("arith.negf", ["f32"], "f32", shape=(n,)), LLVMPIPE)
               for n in (10, 1000)]
    kernels[1].entry_point = "second"
    data = pack_executable(kernels, LLVMPIPE)
    assert data[4:8] == VULKAN_EXECUTABLE_IDENTIFIER
    root = fb.ExecutableDefT.InitFromPackedBuf(data, 0)
    assert root.targetProfile == b"llvmpipe"
    assert len(root.shaderModules) == 2
    assert np.asarray(root.shaderModules[1].code, "<u4").tobytes() == kernels[1].code
    names = [e.name for e in root.entryPoints]
    assert names == [b"arith_negf", b"second"]
    second = root.entryPoints[1]
    assert second.shaderModule == 1 and list(second.workgroupSize) == [128, 1, 1]
    assert [(b.binding, b.readOnly) for b in second.bindings] == [(0, True), (1, False)]
    req = root.requirements
    assert req.maxWorkgroupInvocations == 128 and req.subgroupSize == 0
    assert not (req.float16 or req.float64 or req.int8 or req.int16 or req.int64)
    assert req.spirvVersion == 0x10300 and req.vulkanVersion == (1 << 22) | (2 << 12)


def test_pack_executable_rejects_duplicate_entry_points():
    kernel = compile_kernel(single_op("arith.negf", ["f32"], "f32"), DEFAULT)
    with pytest.raises(CompileError, match="duplicate"):
        pack_executable([kernel, kernel], DEFAULT)


# Needs a kernel may have whatever its profile says: native f16 for contractions too large to
# emulate, texel windows (chosen by the profile's texel_window).
_BEYOND_PROFILE = ("float16", "texel_array_indexing")


@pytest.mark.parametrize("capability", [c for c in CAPABILITIES if c.name not in _BEYOND_PROFILE],
                         ids=lambda c: c.name)
def test_packing_refuses_a_capability_the_profile_does_not_offer(capability):
    kernel = dataclasses.replace(compile_kernel(single_op("arith.negf", ["f32"], "f32"), DEFAULT),
                                 requirements={capability.name: True})
    with pytest.raises(CompileError, match=f"a kernel needs {capability.name}, which target "
                                           f"profile 'default' does not offer"):
        pack_executable([kernel], DEFAULT)
    pack_executable([kernel], dataclasses.replace(DEFAULT, **{capability.name: True}))


def test_hal_vulkan_accepts_the_packed_format():
    executable_def = pytest.importorskip("hal_vulkan.executable_def")
    kernel = compile_kernel(single_op("arith.negf", ["f32"], "f32"), DEFAULT)
    spec = executable_def.parse_executable(pack_executable([kernel], DEFAULT))
    assert spec.shader_modules[0] == kernel.code
    assert spec.entry_points[0].name == kernel.entry_point
