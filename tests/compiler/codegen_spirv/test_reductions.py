"""The reduction strategy's accuracy and layouts, and split reductions.

Sums accumulate in blocks combined as trees (error of a pairwise sum, not of a serial one per
invocation), f16/bf16 sums accumulate in f32 and round once, lavapipe reads 8 floats per lane
load, and long reductions over few parallel points split into a partial and a final kernel
(irtk/compiler/split_reduction.py), each checked against numpy in float64.
"""
from __future__ import annotations

import numpy as np
import pytest

from irtk.compiler import split_reduction
from irtk.compiler.codegen.spirv.reduction import plan, reduction_terms
from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand
from irtk.compiler.targets import VULKAN_PROFILES

from .kernels import identity, projection, row_reduce
from .reference import round_float

F16_EPS = 2.0 ** -10   # relative spacing of f16 values (10 fraction bits)
BF16_EPS = 2.0 ** -7


def exact_sum(x: np.ndarray, init: np.ndarray) -> np.ndarray:
    return init.astype(np.float64) + x.astype(np.float64).sum(axis=1)


# --- accuracy of long sums ---------------------------------------------------------------------

def test_long_constant_sum_has_the_error_of_a_pairwise_sum(vulkan):
    """IREE's reduction_aligned_larger: 2 x 40960 values 0.001 (as f32) must give 40.96 within
    1e-4; a serial sum per invocation gave 40.959713 on both drivers."""
    kernel = row_reduce("arith.addf", "f32", "f32", 2, 40960)
    compiled = vulkan.compile(kernel)
    assert compiled.strategy == "reduction"
    x = np.full((2, 40960), np.float32(0.001))
    got = vulkan.run(kernel, [x], compiled, initial=[np.zeros(2)])[0]
    np.testing.assert_allclose(got, exact_sum(x, np.zeros(2)), rtol=0, atol=2e-5)


@pytest.mark.parametrize("cols", [100003, 65536])
def test_long_random_sums_stay_within_a_few_roundings(vulkan, rng, cols):
    """Odd and even lengths through the block accumulators (and the bounds-checked last trip)."""
    kernel = row_reduce("arith.addf", "f32", "f32", 3, cols)
    x = rng.uniform(0.0, 1.0, (3, cols)).astype(np.float32)
    init = rng.standard_normal(3).astype(np.float32)
    got = vulkan.run(kernel, [x], initial=[init])[0]
    np.testing.assert_allclose(got, exact_sum(x, init), rtol=1e-6)


def test_dynamic_long_rows_use_blocks_with_a_partial_last_one(vulkan, rng):
    kernel = row_reduce("arith.addf", "f32", "f32", 0, 0, dynamic=True)
    compiled = vulkan.compile(kernel)
    assert compiled.strategy == "reduction"
    for rows, cols in ((1, 1), (3, 4099), (2, 50001)):
        x = rng.uniform(-1.0, 2.0, (rows, cols)).astype(np.float32)
        init = rng.standard_normal(rows).astype(np.float32)
        got = vulkan.run(kernel, [x], compiled, initial=[init], params=[rows, cols])[0]
        np.testing.assert_allclose(got, exact_sum(x, init), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("combiner", ["arith.xori", "arith.maxsi", "arith.minui"])
def test_long_integer_reductions_are_exact(vulkan, rng, combiner):
    kernel = row_reduce(combiner, "i32", "i32", 3, 70001)
    x = rng.integers(-(1 << 31), 1 << 31, (3, 70001))
    init = rng.integers(-(1 << 31), 1 << 31, 3)
    got = vulkan.run(kernel, [x], initial=[init])[0]
    fold = {"arith.xori": np.bitwise_xor.reduce, "arith.maxsi": np.max,
            "arith.minui": lambda v, axis: (v & 0xFFFFFFFF).min(axis=axis)}[combiner]
    if combiner == "arith.minui":
        expected = np.minimum(init & 0xFFFFFFFF, fold(x, axis=1))
        expected = np.where(expected >= 1 << 31, expected - (1 << 32), expected)
    elif combiner == "arith.xori":
        expected = init ^ fold(x, axis=1)
    else:
        expected = np.maximum(init, fold(x, axis=1))
    np.testing.assert_array_equal(got, expected)


# --- f16 and bf16 ------------------------------------------------------------------------------

def test_half_sum_accumulates_in_f32_and_rounds_once(vulkan):
    """IREE's half_reduction_aligned: 4096 values 0.001 as f16 (0.0010004...) sum to
    4.09765625; an f16 accumulator stalls at 4.0 (4 + 0.001 rounds back to 4)."""
    kernel = row_reduce("arith.addf", "f16", "f16", 2, 4096)
    compiled = vulkan.compile(kernel)
    assert compiled.strategy == "reduction"
    x = np.full((2, 4096), np.float16(0.001))
    got = vulkan.run(kernel, [x], compiled, initial=[np.zeros(2)])[0]
    np.testing.assert_array_equal(got, [4.09765625, 4.09765625])


@pytest.mark.parametrize("kind, eps", [("f16", F16_EPS), ("bf16", BF16_EPS)])
@pytest.mark.parametrize("cols", [333, 5001])
def test_narrow_float_sums_are_the_exact_sum_rounded(vulkan, rng, kind, eps, cols):
    kernel = row_reduce("arith.addf", kind, kind, 5, cols)
    assert vulkan.compile(kernel).strategy == "reduction"
    x = round_float(kind, rng.uniform(0.0, 1.0, (5, cols)))
    init = round_float(kind, rng.uniform(-4.0, 4.0, 5))
    got = vulkan.run(kernel, [x], initial=[init])[0]
    expected = round_float(kind, exact_sum(x, init))
    # Within one rounding of the exact sum (f32 accumulation adds far less than that).
    np.testing.assert_allclose(got, expected, rtol=eps, atol=0)


@pytest.mark.parametrize("combiner, fold", [("arith.maximumf", np.max),
                                            ("arith.minnumf", np.min)])
def test_narrow_float_max_and_min_are_exact(vulkan, rng, combiner, fold):
    kernel = row_reduce(combiner, "f16", "f16", 4, 1001)
    assert vulkan.compile(kernel).strategy == "reduction"
    x = round_float("f16", rng.standard_normal((4, 1001)) * 100)
    init = round_float("f16", rng.standard_normal(4))
    got = vulkan.run(kernel, [x], initial=[init])[0]
    both = np.concatenate([x, init[:, None]], axis=1)
    np.testing.assert_array_equal(got, fold(both, axis=1))


def _float_extreme(combiner: str, values: np.ndarray) -> float:
    """The combiner folded over `values` by its rules: the *numf ops ignore NaN (NaN only when
    every value is), the *imumf ops give NaN when any value is; -0 orders below +0."""
    if np.isnan(values).any() and ("imum" in combiner or np.isnan(values).all()):
        return float("nan")
    kept = values[~np.isnan(values)]
    key = [(float(v), 0 if np.signbit(v) else 1) for v in kept]
    pick = max if "max" in combiner else min
    return float(kept[key.index(pick(key))])


@pytest.mark.parametrize("combiner", ["arith.maxnumf", "arith.minnumf", "arith.maximumf",
                                      "arith.minimumf"])
@pytest.mark.parametrize("profile", ["device", "default"])
def test_float_max_and_min_reduce_in_one_subgroup_with_their_nan_and_zero_rules(
        vulkan, rng, combiner, profile):
    """They have no subgroup reduce with their NaN and signed-zero rules: on profiles with
    subgroup shuffles the workgroup is still one subgroup (a butterfly of xor shuffles around
    the body's own combiner, no shared memory); the default profile meets partials in shared
    memory. Either way the results are those of the rules, bit for bit. Rows: random values
    with NaNs, only signed zeros, all NaN, and a mix."""
    from irtk.compiler.codegen.spirv import compile_kernel
    rows, cols = 6, 1024
    kernel = row_reduce(combiner, "f32", "f32", rows, cols)
    chosen = vulkan.profile if profile == "device" else VULKAN_PROFILES["default"]
    compiled = compile_kernel(kernel, chosen)
    assert compiled.strategy == "reduction"
    if chosen.subgroup_shuffle:
        assert compiled.workgroup_size == (chosen.subgroup_size, 1, 1)
        assert compiled.requirements["shared_memory_bytes"] == 0
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x[0, rng.choice(cols, 7, replace=False)] = np.nan
    x[1] = np.where(rng.random(cols) < 0.5, -0.0, 0.0)
    x[2] = np.nan
    x[3, rng.choice(cols, 100, replace=False)] = rng.choice([np.nan, -0.0, 0.0, np.inf, -np.inf],
                                                             100)
    x[4] = -0.0
    x[5, :] = -np.inf
    init = np.array([0.5, -0.0, np.nan, 0.0, 0.0, np.nan], np.float32)
    got = vulkan.run(kernel, [x], compiled, initial=[init])[0]
    expected = np.array([_float_extreme(combiner, np.append(x[r], init[r])) for r in range(rows)])
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


def test_a_computed_half_sum_is_not_reassociated():
    """x * x summed in f16 must keep the sequential, rounded order: not this strategy."""
    kernel = Kernel("squares", (3, 500), [Operand(0, "f16", (3, 500), identity(2))],
                    [Operand(1, "f16", (3,), projection(2, [0]))],
                    [Op("arith.mulf", (0, 0), "f16"), Op("arith.addf", (1, 2), "f16")], [3],
                    ("parallel", "reduction"))
    assert reduction_terms(kernel) is None


# --- load shapes per profile -------------------------------------------------------------------

def test_load_width_per_profile():
    """8 consecutive floats (u64vec4) per lane load on lavapipe, 4 on SwiftShader, 1 when the
    row is not a multiple of the width or not static."""
    ops = reduction_terms(row_reduce("arith.addf", "f32", "f32", 4, 1024))
    lavapipe, swiftshader = VULKAN_PROFILES["llvmpipe"], VULKAN_PROFILES["swiftshader"]
    opl = [t.op for t in ops]
    assert plan(row_reduce("arith.addf", "f32", "f32", 4, 1024), lavapipe, opl).group == 8
    assert plan(row_reduce("arith.addf", "f32", "f32", 4, 1028), lavapipe, opl).group == 4
    assert plan(row_reduce("arith.addf", "f32", "f32", 4, 1024), swiftshader, opl).group == 4
    assert plan(row_reduce("arith.addf", "f32", "f32", 4, 1030), swiftshader, opl).group == 1
    assert plan(row_reduce("arith.addf", "f16", "f16", 4, 1024), lavapipe, opl).group == 1
    dynamic = row_reduce("arith.addf", "f32", "f32", 0, 0, dynamic=True)
    assert plan(dynamic, lavapipe, opl).group == 1


@pytest.mark.parametrize("cols", [1024, 1028, 8 * 37])
def test_wide_loads_with_offset_rows(vulkan, rng, cols):
    """Rows read through a map with an offset of 8 elements: each width's alignment rule."""
    rows = 6
    shifted = AffineMap(2, ((1, 0, 0), (0, 1, 8)))
    kernel = Kernel("shifted_rows", (rows, cols),
                    [Operand(0, "f32", (rows, cols + 8), shifted)],
                    [Operand(1, "f32", (rows,), projection(2, [0]))],
                    [Op("arith.addf", (1, 0), "f32")], [2], ("parallel", "reduction"))
    x = rng.standard_normal((rows, cols + 8)).astype(np.float32)
    init = rng.standard_normal(rows).astype(np.float32)
    got = vulkan.run(kernel, [x], initial=[init])[0]
    np.testing.assert_allclose(got, exact_sum(x[:, 8:], init), rtol=1e-5, atol=1e-5)


# --- split reductions --------------------------------------------------------------------------

def test_which_kernels_split():
    parts = split_reduction.split(row_reduce("arith.addf", "f32", "f32", 2, 40960))
    assert parts is not None and parts.chunks == 20
    assert parts.partial.loop_ranges == (2, 20, 2048)
    assert parts.partial.iterator_types == ("parallel", "parallel", "reduction")
    assert parts.partial.inputs[0].map.rows == ((1, 0, 0, 0), (0, 2048, 1, 0))
    assert parts.final.loop_ranges == (2, 20) and parts.identities == [0.0]
    one = split_reduction.split(row_reduce("arith.maximumf", "f32", "f32", 1, 1 << 20))
    assert one is not None and one.chunks == 64 and one.identities == [-np.inf]
    # Many parallel points, short rows, a prime length, narrow floats, dynamic extents and a
    # computed float addend all stay one kernel.
    for kernel in (row_reduce("arith.addf", "f32", "f32", 1024, 1024),
                   row_reduce("arith.addf", "f32", "f32", 2, 8192),
                   row_reduce("arith.addf", "f32", "f32", 2, 65537),
                   row_reduce("arith.addf", "f16", "f16", 2, 40960),
                   row_reduce("arith.addf", "f32", "f32", 0, 0, dynamic=True)):
        assert split_reduction.split(kernel) is None, kernel.name
    squares = Kernel("squares", (2, 40960), [Operand(0, "f32", (2, 40960), identity(2))],
                     [Operand(1, "f32", (2,), projection(2, [0]))],
                     [Op("arith.mulf", (0, 0), "f32"), Op("arith.addf", (1, 2), "f32")], [3],
                     ("parallel", "reduction"))
    assert split_reduction.split(squares) is None


def _run_split(vulkan, kernel: Kernel, x: np.ndarray, init: np.ndarray) -> np.ndarray:
    parts = split_reduction.split(kernel)
    assert parts is not None
    shape = parts.partial_shape(0)
    partial = vulkan.run(parts.partial, [x],
                         initial=[np.full(shape, parts.identities[0])])[0]
    return vulkan.run(parts.final, [partial], initial=[init])[0]


def test_split_sum_matches_float64(vulkan, rng):
    kernel = row_reduce("arith.addf", "f32", "f32", 3, 3 * 65536)
    x = rng.uniform(-1.0, 1.0, (3, 3 * 65536)).astype(np.float32)
    init = rng.standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(_run_split(vulkan, kernel, x, init), exact_sum(x, init),
                               rtol=1e-6, atol=1e-4)


def test_split_integer_and_max_reductions_are_exact(vulkan, rng):
    kernel = row_reduce("arith.addi", "i32", "i32", 2, 40960)
    x = rng.integers(-(1 << 31), 1 << 31, (2, 40960))
    init = rng.integers(-(1 << 31), 1 << 31, 2)
    wrapped = (init + x.sum(axis=1) + (1 << 31)) % (1 << 32) - (1 << 31)
    np.testing.assert_array_equal(_run_split(vulkan, kernel, x, init), wrapped)
    kernel = row_reduce("arith.maximumf", "f32", "f32", 1, 1 << 17)
    xf = rng.standard_normal((1, 1 << 17)).astype(np.float32)
    np.testing.assert_array_equal(_run_split(vulkan, kernel, xf, np.array([-5.0])),
                                  xf.max(axis=1))


@pytest.mark.parametrize("profile", ["default", "swiftshader", "llvmpipe"])
@pytest.mark.parametrize("kind, combiner", [("f16", "arith.addf"), ("bf16", "arith.minimumf"),
                                            ("f32", "arith.mulf"), ("i32", "arith.maxui")])
def test_every_profile_compiles_valid_reductions(profile, kind, combiner):
    """spirv-val passes (compile_kernel validates) for static aligned, static odd and dynamic
    rows on every profile, the shared-memory path of `default` included."""
    from irtk.compiler.codegen.spirv import compile_kernel
    for rows, cols, dynamic in ((3, 4096, False), (5, 1001, False), (0, 0, True)):
        compiled = compile_kernel(row_reduce(combiner, kind, kind, rows, cols, dynamic),
                                  VULKAN_PROFILES[profile])
        assert compiled.strategy == "reduction"


def test_default_profile_half_sum_through_shared_memory(vulkan, rng):
    from irtk.compiler.codegen.spirv import compile_kernel
    kernel = row_reduce("arith.addf", "f16", "f16", 3, 2053)
    compiled = compile_kernel(kernel, VULKAN_PROFILES["default"])
    assert compiled.workgroup_size == (64, 1, 1)
    x = round_float("f16", rng.uniform(0.0, 1.0, (3, 2053)))
    init = round_float("f16", rng.uniform(-4.0, 4.0, 3))
    got = vulkan.run(kernel, [x], compiled, initial=[init])[0]
    np.testing.assert_allclose(got, round_float("f16", exact_sum(x, init)), rtol=F16_EPS)
