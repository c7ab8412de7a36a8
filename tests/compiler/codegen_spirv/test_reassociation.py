"""The reassociation rule (kernel.py, "Reassociation"): only a float add/mul of input elements
as loaded may be reordered; a float reduction of values the body computes (a squared
difference, a matmul's products) keeps the sequential order, each step rounded in f32. Results
are compared bit for bit with a sequential float32 loop."""
from __future__ import annotations

import numpy as np
import pytest

from irtk.compiler.codegen.spirv import compile_kernel
from irtk.compiler.codegen.spirv.reduction import combiners
from irtk.compiler.kernel import Kernel, Op, Operand
from irtk.compiler.targets import VULKAN_PROFILES, VulkanProfile

from spirv import tools

from .kernels import identity, projection
from .test_strategies import matmul, reduce_rows


def _sequential_rows(init: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """init[r] + terms[r, 0] + terms[r, 1] + ..., every step rounded to float32."""
    acc = init.astype(np.float32).copy()
    for j in range(terms.shape[1]):
        acc = (acc + terms[:, j].astype(np.float32)).astype(np.float32)
    return acc


def squared_deviation_sum(rows: int, cols: int) -> Kernel:
    """out[r] = addf(mulf(subf(x, b), subf(x, b)), out): the body computes the addend."""
    return Kernel("sq_dev", (rows, cols),
                  [Operand(0, "f32", (rows, cols), identity(2)),
                   Operand(1, "f32", (rows,), projection(2, [0]))],
                  [Operand(2, "f32", (rows,), projection(2, [0]))],
                  [Op("arith.subf", (0, 1), "f32"), Op("arith.mulf", (3, 3), "f32"),
                   Op("arith.addf", (4, 2), "f32")], [5], ("parallel", "reduction"))


def test_computed_float_addends_are_not_reassociated():
    assert combiners(squared_deviation_sum(8, 512)) is None
    # The plain sum of an input as loaded, an integer sum of a computed value and a float max
    # of one may all be reordered.
    assert combiners(reduce_rows("arith.addf", "f32", 8, 512)) is not None
    assert combiners(reduce_rows("arith.mulf", "f32", 8, 512)) is not None
    int_body = Kernel("isq", (8, 512), [Operand(0, "i32", (8, 512), identity(2))],
                      [Operand(1, "i32", (8,), projection(2, [0]))],
                      [Op("arith.muli", (0, 0), "i32"), Op("arith.addi", (2, 1), "i32")], [3],
                      ("parallel", "reduction"))
    assert combiners(int_body) is not None
    max_body = Kernel("fmax", (8, 512), [Operand(0, "f32", (8, 512), identity(2))],
                      [Operand(1, "f32", (8,), projection(2, [0]))],
                      [Op("math.absf", (0,), "f32"), Op("arith.maximumf", (1, 2), "f32")],
                      [3], ("parallel", "reduction"))
    assert combiners(max_body) is not None


def test_squared_deviation_sum_keeps_the_sequential_order(vulkan, rng):
    rows, cols = 6, 700
    kernel = squared_deviation_sum(rows, cols)
    assert vulkan.compile(kernel).strategy == "fallback"
    # Mixed magnitudes make reordering visible in the last bits.
    x = (rng.standard_normal((rows, cols)) * rng.choice([1e-3, 1.0, 1e3], (rows, cols)))
    x = x.astype(np.float32)
    b = rng.standard_normal(rows).astype(np.float32)
    init = rng.standard_normal(rows).astype(np.float32)
    d = (x - b[:, None]).astype(np.float32)
    expected = _sequential_rows(init, (d * d).astype(np.float32))
    got = vulkan.run(kernel, [x, b], initial=[init])[0]
    np.testing.assert_array_equal(got.astype(np.float32), expected)


def test_matmul_of_ones_and_point_four_is_the_in_order_sum(vulkan):
    """The conformance case: 1024 products 1.0 x 0.4 summed in k order give 409.596 in f32."""
    m, n, k = 16, 16, 1024
    kernel = matmul(m, n, k)
    assert vulkan.compile(kernel).strategy == "matmul"
    a = np.ones((m, k), np.float32)
    b = np.full((k, n), 0.4, np.float32)
    got = vulkan.run(kernel, [a, b], initial=[np.zeros((m, n), np.float32)])[0]
    expected = _sequential_rows(np.zeros(1, np.float32), np.full((1, k), 0.4, np.float32))[0]
    assert abs(float(expected) - 409.596) < 1e-3 and float(expected) != float(
        np.float32(np.float64(0.4) * k))
    np.testing.assert_array_equal(got.astype(np.float32), np.full((m, n), expected))


# The device's own profile (direct variant, subgroup broadcasts), a CPU profile without a
# fixed subgroup size (direct, 16-byte loads) and the GPU default (tiles in shared memory).
PROFILES = [None, "cpu", "default"]


def compiled_for(kernel, profile):
    """The kernel compiled for `profile` ("cpu": a CPU-device profile without subgroups), or
    None for the device's own profile (the `vulkan` fixture compiles it)."""
    if profile == "cpu":
        return compile_kernel(kernel, VulkanProfile("cpu", cpu_device=True))
    if profile == "default":
        return compile_kernel(kernel, VULKAN_PROFILES["default"])
    return None


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("m, n, k", [(24, 40, 96), (13, 37, 61)])
def test_matmul_accumulates_from_the_initial_value_in_k_order(vulkan, rng, m, n, k, profile):
    """C starts nonzero and large: adding it first or last gives different f32 results."""
    kernel = matmul(m, n, k)
    compiled = compiled_for(kernel, profile)
    assert (compiled or vulkan.compile(kernel)).strategy == "matmul"
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    init = (rng.standard_normal((m, n)) * 1e3).astype(np.float32)
    got = vulkan.run(kernel, [a, b], compiled, initial=[init])[0].astype(np.float32)
    acc = init.copy()
    for kk in range(k):
        acc = (acc + (a[:, kk:kk + 1] * b[kk:kk + 1, :]).astype(np.float32)).astype(np.float32)
    np.testing.assert_array_equal(got, acc)


# --- several parallel points per reduction workgroup -------------------------------------------

@pytest.mark.parametrize("rows, cols", [(1000, 96), (4099, 64)])
def test_reductions_with_several_rows_per_workgroup(vulkan, rng, rows, cols):
    """Row counts that leave a partial last workgroup; a sum and an exact integer max."""
    from irtk.compiler.codegen.spirv.reduction import rows_per_workgroup
    kernel = reduce_rows("arith.addf", "f32", rows, cols)
    assert rows_per_workgroup(kernel) > 1 and rows % rows_per_workgroup(kernel)
    x, init = rng.standard_normal((rows, cols)), rng.standard_normal(rows)
    compiled = vulkan.compile(kernel)
    assert compiled.strategy == "reduction"
    got = vulkan.run(kernel, [x], compiled, initial=[init])[0]
    np.testing.assert_allclose(got, init + x.sum(axis=1), rtol=1e-4, atol=1e-4)
    kernel = reduce_rows("arith.maxsi", "i32", rows, cols)
    xi, initi = rng.integers(-10**6, 10**6, (rows, cols)), rng.integers(-10**6, 10**6, rows)
    got = vulkan.run(kernel, [xi], initial=[initi])[0]
    np.testing.assert_array_equal(got, np.maximum(initi, xi.max(axis=1)))


@pytest.mark.slow
@pytest.mark.parametrize("device, n, k, rm, wide, texel", [
    ("llvmpipe", 250, 523, 32, (), (0, 1)), ("llvmpipe", 264, 523, 32, ("B",), (0, 1)),
    ("llvmpipe", 264, 522, 32, ("A", "B"), (0, 1)),
    ("swiftshader", 264, 522, 16, ("A", "B"), (0, 1)),
    ("swiftshader", 264, 500, 16, ("A", "B"), (0, 1))])
def test_large_matmul_blocks_on_software_drivers(rng, device, n, k, rm, wide, texel):
    """The larger blocks of large static problems (32 x 8 on lavapipe, 16 x 8 on SwiftShader;
    a lane's 8 columns of B from two texel fetches where N is a multiple of 8, and A's k values
    2 per lane and fetch where K is even, on lavapipe and on SwiftShader (A is one texel view
    at k = 500, 1.04 MB, and read through texel windows at 522, 1.09 MB): partial blocks on
    every edge, leftover k values, and still the sequential float32 result."""
    from irtk.compiler.codegen.spirv.matmul import matmul_tiling, tiling_for

    from .conftest import _runner
    runner = _runner(device)
    m = 520
    tiling = tiling_for(runner.profile, m, n, k)
    assert (tiling.rm, tiling.rn) == (rm, 8)
    rounded = tiling_for(runner.profile, m, n, k, rounded=True)   # an f16 C: rounding-bound
    assert (rounded.rm, rounded.rn) == (16, 4)
    kernel = matmul(m, n, k)
    compiled = runner.compile(kernel)
    text = tools.disassemble(compiled.code)
    t = matmul_tiling(kernel, runner.profile)
    assert (t.a_wide, t.b_wide) == ("A" in wide, "B" in wide)
    # Texel buffers instead of 64-bit storage views: no Int64 needed.
    assert compiled.texel_bindings == texel
    assert "OpImageFetch" in text and "ArrayStride 32" not in text
    assert not compiled.requirements.get("int64", False)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    init = rng.standard_normal((m, n)).astype(np.float32)
    got = runner.run(kernel, [a, b], compiled, initial=[init])[0].astype(np.float32)
    acc = init.copy()
    for kk in range(k):
        acc = (acc + (a[:, kk:kk + 1] * b[kk:kk + 1, :]).astype(np.float32)).astype(np.float32)
    np.testing.assert_array_equal(got, acc)


@pytest.mark.parametrize("profile", PROFILES)
def test_matmul_with_an_f16_accumulator_rounds_every_step_to_f16(vulkan, rng, profile):
    """f16 x f16 -> f16 (linalg.matmul on f16 tensors): each product and each sum rounded to
    f16 in k order, the sequential float16 result bit for bit; an f32 accumulator rounded once
    at the end would differ."""
    m, n, k = 24, 40, 200
    kernel = matmul(m, n, k, "f16", "f16")
    compiled = compiled_for(kernel, profile)
    assert (compiled or vulkan.compile(kernel)).strategy == "matmul"
    a = rng.uniform(0.5, 1.5, (m, k)).astype(np.float16)
    b = rng.uniform(0.0, 0.1, (k, n)).astype(np.float16)
    init = rng.standard_normal((m, n)).astype(np.float16)
    got = vulkan.run(kernel, [a.astype(np.float64), b.astype(np.float64)], compiled,
                     initial=[init.astype(np.float64)])[0]
    acc = init.copy()
    for kk in range(k):
        acc = (acc + a[:, kk:kk + 1] * b[kk:kk + 1, :]).astype(np.float16)
    once = init.astype(np.float32) + a.astype(np.float32) @ b.astype(np.float32)
    assert np.any(once.astype(np.float16) != acc)
    np.testing.assert_array_equal(got.astype(np.float16), acc)


def test_matmul_with_an_i8_accumulator_wraps(vulkan, rng):
    """i8 x i8 -> i8: products and sums wrap to 8 bits (two's complement)."""
    m, n, k = 20, 36, 40
    kernel = matmul(m, n, k, "i8", "i8")
    assert vulkan.compile(kernel).strategy == "matmul"
    a, b = rng.integers(-128, 128, (m, k)), rng.integers(-128, 128, (k, n))
    init = rng.integers(-128, 128, (m, n))
    got = vulkan.run(kernel, [a, b], initial=[init])[0]
    np.testing.assert_array_equal(got, ((init + a @ b + 128) % 256) - 128)
