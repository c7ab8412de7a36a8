"""Every strategy executed on SwiftShader and lavapipe against the numpy reference: matmul
(edges, mixed precision, batches, transposes, dynamic sizes), reductions (every combiner,
accumulating outputs, dynamic sizes), the general fallback (multi-output selects, gathers,
params, linalg.index), with fresh random data per test."""
from __future__ import annotations

import numpy as np
import pytest

from irtk.compiler.codegen.spirv import compile_kernel
from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand, Param
from irtk.compiler.targets import VULKAN_PROFILES

from .kernels import identity, multiply_accumulate, projection, row_reduce
from .reference import run_reference

F32_TOL = dict(rtol=2e-5, atol=2e-5)


def _check(kernel: Kernel, got: list[np.ndarray], expected: list[np.ndarray],
           rtol: float = 2e-5, atol: float = 2e-5) -> None:
    for operand, g, e in zip(kernel.outputs, got, expected):
        if operand.element_type in ("f32", "f16", "bf16", "f64"):
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, e)


def matmul(m, n, k, in_type="f32", acc="f32", batch: int | None = None,
           transpose_b: bool = False, dynamic: bool = False) -> Kernel:
    """C (+)= A x B, as a generic over (b?, m, n, k)."""
    dims = 4 if batch else 3
    o = 1 if batch else 0
    mm, nn, kk = o, o + 1, o + 2
    params: tuple[Param, ...] = ()
    if dynamic:
        params = (Param("M", "index"), Param("N", "index"), Param("K", "index"))
        m, n, k = "M", "N", "K"
    lead = [0] if batch else []
    bshape = (batch,) if batch else ()
    a = Operand(0, in_type, bshape + (m, k), projection(dims, lead + [mm, kk]))
    b_dims = lead + ([nn, kk] if transpose_b else [kk, nn])
    b = Operand(1, in_type, bshape + ((n, k) if transpose_b else (k, n)),
                projection(dims, b_dims))
    c = Operand(2, acc, bshape + (m, n), projection(dims, lead + [mm, nn]))
    ops = multiply_accumulate(in_type, acc)
    ranges = bshape + (m, n, k)
    kinds = ("parallel",) * (dims - 1) + ("reduction",)
    return Kernel("matmul", ranges, [a, b], [c], ops, [2 + len(ops)], kinds, params)


def _data(rng, kind: str, shape) -> np.ndarray:
    if kind == "i8":
        return rng.integers(-128, 128, shape)
    if kind == "i32":
        return rng.integers(-1000, 1000, shape)
    values = rng.standard_normal(shape)
    if kind == "f16":
        return values.astype(np.float16).astype(np.float64)
    return values


@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (8, 8, 8), (13, 31, 17), (64, 64, 64),
                                     (67, 5, 129), (9, 130, 8), (40, 72, 12)])
def test_matmul_f32_edges(vulkan, rng, m, n, k):
    kernel = matmul(m, n, k)
    a, b, c = _data(rng, "f32", (m, k)), _data(rng, "f32", (k, n)), _data(rng, "f32", (m, n))
    got = vulkan.run(kernel, [a, b], initial=[c])
    _check(kernel, got, [c + a @ b], rtol=1e-4, atol=1e-4)


def test_matmul_strategy_is_chosen_for_large_contractions(vulkan):
    assert vulkan.compile(matmul(64, 64, 64)).strategy == "matmul"
    # Few rows (a batch-1 linear layer) still take it on these CPU-based drivers (one block of
    # m rows per workgroup), not on GPU profiles; few columns never do.
    assert vulkan.compile(matmul(1, 64, 64)).strategy == "matmul"
    assert vulkan.compile(matmul(64, 4, 64)).strategy != "matmul"
    assert compile_kernel(matmul(1, 64, 64), VULKAN_PROFILES["default"]).strategy != "matmul"


@pytest.mark.parametrize("m, n, k", [(1, 256, 784), (2, 250, 77), (3, 10, 256), (1, 33, 9)])
def test_matmuls_of_few_rows_give_the_sequential_result(vulkan, rng, m, n, k):
    """Matrix-vector products and other contractions of fewer than 4 rows: one block of m rows
    (8 columns per lane where n gives every lane 8, partial blocks otherwise), each output's
    products added in k order, every step rounded to float32 (bit for bit)."""
    from irtk.compiler.codegen.spirv.matmul import matmul_tiling
    kernel = matmul(m, n, k)
    t = matmul_tiling(kernel, vulkan.profile)
    assert t is not None and t.rm == m and vulkan.compile(kernel).strategy == "matmul"
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    init = rng.standard_normal((m, n)).astype(np.float32)
    got = vulkan.run(kernel, [a, b], initial=[init])[0].astype(np.float32)
    acc = init.copy()
    for kk in range(k):
        acc = (acc + (a[:, kk:kk + 1] * b[kk:kk + 1, :]).astype(np.float32)).astype(np.float32)
    np.testing.assert_array_equal(got, acc)


@pytest.mark.parametrize("in_type, acc", [("i8", "i32"), ("f16", "f32"), ("i32", "i32")])
def test_matmul_mixed_precision(vulkan, rng, in_type, acc):
    m, n, k = 37, 45, 70
    kernel = matmul(m, n, k, in_type, acc)
    a, b = _data(rng, in_type, (m, k)), _data(rng, in_type, (k, n))
    c = _data(rng, acc, (m, n))
    got = vulkan.run(kernel, [a, b], initial=[c])
    assert vulkan.compile(kernel).strategy == "matmul"
    _check(kernel, got, [c + a @ b], rtol=1e-4, atol=1e-4)


def test_batch_matmul_with_transposed_b(vulkan, rng):
    kernel = matmul(19, 24, 33, batch=3, transpose_b=True)
    a, b = rng.standard_normal((3, 19, 33)), rng.standard_normal((3, 24, 33))
    c = rng.standard_normal((3, 19, 24))
    got = vulkan.run(kernel, [a, b], initial=[c])
    _check(kernel, got, [c + a @ b.transpose(0, 2, 1)], rtol=1e-4, atol=1e-4)


def test_matmul_with_dynamic_sizes(vulkan, rng):
    kernel = matmul(0, 0, 0, dynamic=True)
    compiled = vulkan.compile(kernel)
    assert compiled.strategy == "matmul" and compiled.workgroup_count == (0, 0, 0)
    for m, n, k in ((23, 41, 11), (70, 9, 65)):
        a, b, c = (rng.standard_normal(s) for s in ((m, k), (k, n), (m, n)))
        got = vulkan.run(kernel, [a, b], compiled, initial=[c], params=[m, n, k])
        _check(kernel, got, [c + a @ b], rtol=1e-4, atol=1e-4)


def test_matmul_matches_the_fallback(vulkan, rng):
    kernel = matmul(33, 20, 50)
    a, b, c = rng.standard_normal((33, 50)), rng.standard_normal((50, 20)), np.zeros((33, 20))
    fast = vulkan.run(kernel, [a, b], initial=[c])
    slow = vulkan.run(kernel, [a, b], initial=[c], strategy="fallback")
    np.testing.assert_allclose(fast[0], slow[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m, n, k", [(64, 64, 64), (13, 40, 30)])
def test_matmul_direct_variants_without_subgroup_operations(swiftshader, rng, m, n, k):
    """A CPU profile that fixes no subgroup size: direct reads, 16-byte where aligned."""
    from irtk.compiler.codegen.spirv import compile_kernel
    from irtk.compiler.targets import VulkanProfile
    kernel = matmul(m, n, k)
    compiled = compile_kernel(kernel, VulkanProfile("cpu", cpu_device=True))
    assert compiled.strategy == "matmul" and "subgroup_size" not in compiled.requirements
    a, b, c = rng.standard_normal((m, k)), rng.standard_normal((k, n)), np.zeros((m, n))
    got = swiftshader.run(kernel, [a, b], compiled, initial=[c])
    _check(kernel, got, [a @ b], rtol=1e-4, atol=1e-4)


# --- reductions --------------------------------------------------------------------------------

def reduce_rows(combiner: str, kind: str, rows, cols, dynamic: bool = False) -> Kernel:
    return row_reduce(combiner, kind, kind, rows, cols, dynamic)


_NUMPY_REDUCE = {
    "arith.addf": np.sum, "arith.mulf": np.prod, "arith.maximumf": np.max,
    "arith.minimumf": np.min, "arith.maxnumf": np.max, "arith.minnumf": np.min,
}


@pytest.mark.parametrize("combiner", ["arith.addf", "arith.maximumf", "arith.minimumf",
                                      "arith.maxnumf", "arith.minnumf", "arith.mulf"])
def test_float_reductions(vulkan, rng, combiner):
    rows, cols = 7, 301
    kernel = reduce_rows(combiner, "f32", rows, cols)
    assert vulkan.compile(kernel).strategy == "reduction"
    x = rng.uniform(0.9, 1.1, (rows, cols)) if combiner == "arith.mulf" else \
        rng.standard_normal((rows, cols))
    init = rng.standard_normal(rows)
    got = vulkan.run(kernel, [x], initial=[init])
    expected = run_reference(kernel, [x], [init])
    assert np.allclose(expected[0], _combine(combiner, init, _NUMPY_REDUCE[combiner](x, axis=1)))
    _check(kernel, got, expected, rtol=1e-4, atol=1e-4)


def _combine(combiner: str, a, b):
    return {"arith.addf": a + b, "arith.mulf": a * b}.get(
        combiner, np.maximum(a, b) if "max" in combiner else np.minimum(a, b))


@pytest.mark.parametrize("combiner", ["arith.addi", "arith.muli", "arith.andi", "arith.ori",
                                      "arith.xori", "arith.maxsi", "arith.minsi",
                                      "arith.maxui", "arith.minui"])
def test_integer_reductions_are_exact(vulkan, rng, combiner):
    rows, cols = 5, 257
    kernel = reduce_rows(combiner, "i32", rows, cols)
    assert vulkan.compile(kernel).strategy == "reduction"
    x = rng.integers(-(1 << 31), 1 << 31, (rows, cols))
    if combiner == "arith.muli":
        x = rng.integers(-3, 4, (rows, cols))
    init = rng.integers(-(1 << 31), 1 << 31, rows)
    got = vulkan.run(kernel, [x], initial=[init])
    _check(kernel, got, run_reference(kernel, [x], [init]))


@pytest.mark.parametrize("cols", [64, 97, 1000, 4099])
def test_sum_reduction_lengths(vulkan, rng, cols):
    kernel = reduce_rows("arith.addf", "f32", 3, cols)
    x, init = rng.standard_normal((3, cols)), rng.standard_normal(3)
    got = vulkan.run(kernel, [x], initial=[init])
    _check(kernel, got, [init + x.sum(axis=1)], rtol=1e-4, atol=1e-4)


def test_dynamic_reduction(vulkan, rng):
    kernel = reduce_rows("arith.addf", "f32", 0, 0, dynamic=True)
    compiled = vulkan.compile(kernel)
    assert compiled.strategy == "reduction"
    for rows, cols in ((1, 1), (5, 130), (33, 7)):
        x, init = rng.standard_normal((rows, cols)), rng.standard_normal(rows)
        got = vulkan.run(kernel, [x], compiled, initial=[init], params=[rows, cols])
        _check(kernel, got, [init + x.sum(axis=1)], rtol=1e-4, atol=1e-4)


def test_short_reductions_use_the_fallback(vulkan, rng):
    kernel = reduce_rows("arith.addf", "f32", 40, 9)
    assert vulkan.compile(kernel).strategy == "fallback"
    x, init = rng.standard_normal((40, 9)), rng.standard_normal(40)
    _check(kernel, vulkan.run(kernel, [x], initial=[init]), [init + x.sum(axis=1)])


def test_reduction_over_the_outer_dimension_and_a_body(vulkan, rng):
    """out[j] += exp(x[i, j]) * w[i]: columns reduced, with a body before the combiner."""
    rows, cols = 200, 6
    kernel = Kernel("colsum", (cols, rows),
                    [Operand(0, "f32", (rows, cols), projection(2, [1, 0])),
                     Operand(1, "f32", (rows,), projection(2, [1]))],
                    [Operand(2, "f32", (cols,), projection(2, [0]))],
                    [Op("math.exp", (0,), "f32"), Op("arith.mulf", (3, 1), "f32"),
                     Op("arith.addf", (2, 4), "f32")], [5], ("parallel", "reduction"))
    x, w = rng.uniform(-2, 2, (rows, cols)), rng.standard_normal(rows)
    init = rng.standard_normal(cols)
    got = vulkan.run(kernel, [x, w], initial=[init])
    _check(kernel, got, [init + (np.exp(x) * w[:, None]).sum(axis=0)], rtol=1e-4, atol=1e-4)


# --- the general fallback ----------------------------------------------------------------------

def argmax_kernel(rows: int, cols: int) -> Kernel:
    """Two outputs updated together by selects: (max value, its index) per row."""
    ops = [Op("linalg.index", (), "index", int_value=1),                 # 3
           Op("arith.cmpf", (0, 1), "i1", predicate="ogt"),              # 4
           Op("arith.select", (4, 0, 1), "f32"),                         # 5
           Op("arith.select", (4, 3, 2), "index")]                       # 6
    return Kernel("argmax", (rows, cols), [Operand(0, "f32", (rows, cols), identity(2))],
                  [Operand(1, "f32", (rows,), projection(2, [0])),
                   Operand(2, "index", (rows,), projection(2, [0]))],
                  ops, [5, 6], ("parallel", "reduction"))


def test_argmax_selects_stay_exact(vulkan, rng):
    kernel = argmax_kernel(11, 300)
    assert vulkan.compile(kernel).strategy == "fallback"
    x = rng.standard_normal((11, 300))
    got = vulkan.run(kernel, [x], initial=[np.full(11, -np.inf), np.zeros(11)])
    np.testing.assert_array_equal(got[1], x.argmax(axis=1))
    np.testing.assert_allclose(got[0], x.max(axis=1).astype(np.float32))


def test_gathers_clamp_and_read_any_element(vulkan, rng):
    """out[i] = table[clamp(idx[i])] * scale + offset param: a gather with params."""
    n, size = 300, 50
    ops = [Op("arith.index_cast", (0,), "index"),                        # 3
           Op("tensor.extract", (3,), "f32", int_value=1),               # 4
           Op("kernel.param", (), "f32", int_value=0),                   # 5
           Op("arith.mulf", (4, 5), "f32")]                              # 6
    kernel = Kernel("gather", (n,), [Operand(0, "i32", (n,), identity(1)),
                                     Operand(1, "f32", (size,), None)],
                    [Operand(2, "f32", (n,), identity(1))], ops, [6], ("parallel",),
                    (Param("scale", "f32"),))
    idx = rng.integers(-5, size + 5, n)
    table = rng.standard_normal(size)
    got = vulkan.run(kernel, [idx, table], params=[1.5])
    np.testing.assert_allclose(got[0], table[np.clip(idx, 0, size - 1)] * np.float32(1.5),
                               **F32_TOL)


def test_dynamic_elementwise_with_linalg_index(vulkan, rng):
    ops = [Op("linalg.index", (), "index", int_value=1),
           Op("arith.index_cast", (2,), "i32"),
           Op("arith.sitofp", (3,), "f32"),
           Op("arith.addf", (0, 4), "f32")]
    kernel = Kernel("iota_add", ("R", "C"), [Operand(0, "f32", ("R", "C"), identity(2))],
                    [Operand(1, "f32", ("R", "C"), identity(2))], ops, [5],
                    ("parallel", "parallel"), (Param("R", "index"), Param("C", "index")))
    compiled = vulkan.compile(kernel)
    assert compiled.push_constant_count == 2
    for r, c in ((1, 1), (3, 97), (130, 2)):
        x = rng.standard_normal((r, c))
        got = vulkan.run(kernel, [x], compiled, params=[r, c])
        _check(kernel, got, [x + np.arange(c)[None, :]])


def test_accumulating_fallback_reads_the_initial_output(vulkan, rng):
    """A reduction whose combiner is not recognized (sub) runs sequentially from the output."""
    rows, cols = 6, 40
    kernel = Kernel("sub_rows", (rows, cols), [Operand(0, "f32", (rows, cols), identity(2))],
                    [Operand(1, "f32", (rows,), projection(2, [0]))],
                    [Op("arith.subf", (1, 0), "f32")], [2], ("parallel", "reduction"))
    x, init = rng.standard_normal((rows, cols)), rng.standard_normal(rows)
    got = vulkan.run(kernel, [x], initial=[init])
    _check(kernel, got, [init - x.sum(axis=1)], rtol=1e-4, atol=1e-4)


def test_symbols_in_maps_offset_reads(vulkan, rng):
    """out[i] = x[i + shift], shift an index param used as a map symbol."""
    n = 50
    shifted = AffineMap(1, ((1, 1, 0),), num_symbols=1)
    kernel = Kernel("shift", (n,), [Operand(0, "f32", (n + 10,), shifted)],
                    [Operand(1, "f32", (n,), AffineMap(1, ((1, 0, 0),), num_symbols=1))],
                    [Op("arith.negf", (0,), "f32")], [2], ("parallel",),
                    (Param("shift", "index"),))
    x = rng.standard_normal(n + 10)
    got = vulkan.run(kernel, [x], params=[7])
    _check(kernel, got, [-x[7:7 + n]])


@pytest.mark.slow
def test_large_matmul_and_reduction(vulkan, rng):
    kernel = matmul(256, 192, 320)
    a, b = rng.standard_normal((256, 320)), rng.standard_normal((320, 192))
    got = vulkan.run(kernel, [a, b], initial=[np.zeros((256, 192))])
    _check(kernel, got, [a @ b], rtol=1e-4, atol=1e-4)
    kernel = reduce_rows("arith.addf", "f32", 512, 2048)
    x = rng.standard_normal((512, 2048))
    got = vulkan.run(kernel, [x], initial=[np.zeros(512)])
    _check(kernel, got, [x.sum(axis=1)], rtol=1e-4, atol=1e-4)


# --- convolution -------------------------------------------------------------------------------

def conv2d(n, h, w, c, kh, kw, f, stride=1, in_type="f32", acc="f32") -> Kernel:
    """NHWC input x HWCF filter -> NHWF output, loops (n, oh, ow, f, kh, kw, c)."""
    oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
    def row(coeffs: dict[int, int]) -> tuple[int, ...]:
        return tuple(coeffs.get(j, 0) for j in range(7)) + (0,)
    image = AffineMap(7, (row({0: 1}), row({1: stride, 4: 1}), row({2: stride, 5: 1}),
                          row({6: 1})))
    ops = multiply_accumulate(in_type, acc)
    return Kernel("conv", (n, oh, ow, f, kh, kw, c),
                  [Operand(0, in_type, (n, h, w, c), image),
                   Operand(1, in_type, (kh, kw, c, f), projection(7, [4, 5, 6, 3]))],
                  [Operand(2, acc, (n, oh, ow, f), projection(7, [0, 1, 2, 3]))],
                  ops, [2 + len(ops)], ("parallel",) * 4 + ("reduction",) * 3)


def _conv_reference(x, k, stride):
    n, h, w, c = x.shape
    kh, kw, _, f = k.shape
    oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
    out = np.zeros((n, oh, ow, f))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :]
            out += patch @ k[i, j]
    return out


@pytest.mark.parametrize("shape", [(1, 9, 9, 3, 3, 3, 8, 1), (2, 12, 11, 5, 3, 2, 13, 2),
                                   (1, 5, 5, 1, 1, 1, 1, 1)])
def test_convolution_strategy(vulkan, rng, shape):
    n, h, w, c, kh, kw, f, stride = shape
    kernel = conv2d(n, h, w, c, kh, kw, f, stride)
    assert vulkan.compile(kernel).strategy == "convolution"
    x, k = rng.standard_normal((n, h, w, c)), rng.standard_normal((kh, kw, c, f))
    init = rng.standard_normal(kernel.outputs[0].shape)
    got = vulkan.run(kernel, [x, k], initial=[init])
    _check(kernel, got, [init + _conv_reference(x, k, stride)], rtol=1e-4, atol=1e-4)


def test_quantized_convolution_is_exact(vulkan, rng):
    kernel = conv2d(1, 8, 8, 4, 3, 3, 6, 1, in_type="i8", acc="i32")
    x, k = rng.integers(-128, 128, (1, 8, 8, 4)), rng.integers(-128, 128, (3, 3, 4, 6))
    got = vulkan.run(kernel, [x, k], initial=[np.zeros((1, 6, 6, 6), np.int64)])
    np.testing.assert_array_equal(got[0], _conv_reference(x, k, 1).astype(np.int64))


# --- the GPU-oriented variants of the default profile, executed on both devices ----------------

@pytest.mark.parametrize("m, n, k", [(67, 45, 33), (64, 64, 16), (9, 130, 70)])
def test_default_profile_matmul_tiles_in_shared_memory(vulkan, rng, m, n, k):
    from irtk.compiler.codegen.spirv import compile_kernel
    from irtk.compiler.targets import VULKAN_PROFILES
    kernel = matmul(m, n, k)
    compiled = compile_kernel(kernel, VULKAN_PROFILES["default"])
    assert compiled.requirements["shared_memory_bytes"] > 0
    a, b, c = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
    got = vulkan.run(kernel, [a, b], compiled, initial=[c])
    _check(kernel, got, [c + a @ b], rtol=1e-4, atol=1e-4)


def test_default_profile_quantized_batch_matmul(vulkan, rng):
    from irtk.compiler.codegen.spirv import compile_kernel
    from irtk.compiler.targets import VULKAN_PROFILES
    kernel = matmul(20, 36, 40, "i8", "i32", batch=2)
    compiled = compile_kernel(kernel, VULKAN_PROFILES["default"])
    a, b = rng.integers(-128, 128, (2, 20, 40)), rng.integers(-128, 128, (2, 40, 36))
    got = vulkan.run(kernel, [a, b], compiled, initial=[np.zeros((2, 20, 36), np.int64)])
    np.testing.assert_array_equal(got[0], a @ b)


@pytest.mark.parametrize("combiner, kind", [("arith.addf", "f32"), ("arith.maxui", "i32"),
                                            ("arith.minimumf", "f32")])
def test_default_profile_reduction_uses_shared_memory(vulkan, rng, combiner, kind):
    from irtk.compiler.codegen.spirv import compile_kernel
    from irtk.compiler.targets import VULKAN_PROFILES
    kernel = reduce_rows(combiner, kind, 5, 333)
    compiled = compile_kernel(kernel, VULKAN_PROFILES["default"])
    assert compiled.workgroup_size == (64, 1, 1) and "subgroup_size" not in compiled.requirements
    if kind == "f32":
        x, init = rng.standard_normal((5, 333)), rng.standard_normal(5)
    else:
        x, init = rng.integers(-(1 << 31), 1 << 31, (5, 333)), rng.integers(0, 1 << 20, 5)
    got = vulkan.run(kernel, [x], compiled, initial=[init])
    _check(kernel, got, run_reference(kernel, [x], [init]), rtol=1e-4, atol=1e-4)
