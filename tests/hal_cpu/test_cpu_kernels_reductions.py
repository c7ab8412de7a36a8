"""Reduction kernels: contractions (einsum), associative combiners, the sequential fallback."""
from __future__ import annotations


import numpy as np
import pytest

from hal_cpu.executable import parse_kernels
from irtk import types
from irtk.hal import numerics

from .cpu_kernel_builder import executable, kernel, op, operand, run, workgroups_for


def _rows(*dims_per_row: int | None, nd: int) -> list[list[int]]:
    """A projection map: each row is one loop index (None: constant 0)."""
    return [[1 if j == d else 0 for j in range(nd)] + [0] for d in dims_per_row]


def _matmul(m: int, n: int, k: int, a_t: str, b_t: str, out_t: str, tile: int,
            cast: str | None = None, add_first: bool = False) -> bytes:
    ins = [operand(0, a_t, [m, k], 3, _rows(0, 2, nd=3)),
           operand(1, b_t, [k, n], 3, _rows(2, 1, nd=3))]
    outs = [operand(2, out_t, [m, n], 3, _rows(0, 1, nd=3))]
    mul, add = ("arith.mulf", "arith.addf") if types.is_float(out_t) else \
        ("arith.muli", "arith.addi")
    if cast:
        ops = [op(cast, 0, result_type=out_t), op(cast, 1, result_type=out_t),
               op(mul, 3, 4, result_type=out_t),
               op(add, *((5, 2) if add_first else (2, 5)), result_type=out_t)]
        yields = [6]
    else:
        ops = [op(mul, 0, 1, result_type=out_t),
               op(add, *((3, 2) if add_first else (2, 3)), result_type=out_t)]
        yields = [4]
    return executable(kernel("mm", [m, n, k], ins, outs, ops, yields, tile, iterators="ppr"))


def _plan(data: bytes) -> str:
    return parse_kernels(data)[0].plan.name


@pytest.mark.parametrize("m, n, k, tile", [(17, 13, 29, 7), (8, 40, 3, 40), (1, 1, 64, 1)])
def test_f32_matmul_accumulates_into_the_output(device, rng, m, n, k, tile):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    data = _matmul(m, n, k, "f32", "f32", "f32", tile, add_first=(m == 8))
    # A computed addend: linalg's sequential order, not einsum's (kernel.py, "Reassociation").
    assert _plan(data) == "combiner"
    out, = run(device, data, [a, b], [((m, n), "f32")], workgroups_for(m * n, tile),
               initial_outputs=[c])
    want = c + a.astype(np.float64) @ b
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    sequential = c.copy()
    for r in range(k):
        sequential = sequential + a[:, r:r + 1] * b[r:r + 1, :]
    np.testing.assert_array_equal(out, sequential)


def test_plain_f32_sum_of_inputs_is_reassociated(device):
    """40960 x 0.001 summed in order drifts to 40.949; the pairwise sum stays within 1e-4."""
    rows, n = 2, 40960
    x = np.full((rows, n), 0.001, np.float32)
    ins = [operand(0, "f32", [rows, n], 2, _rows(0, 1, nd=2))]
    outs = [operand(1, "f32", [rows], 2, _rows(0, nd=2))]
    data = executable(kernel("sum", [rows, n], ins, outs,
                             [op("arith.addf", 0, 1, result_type="f32")], [2], 1,
                             iterators="pr"))
    assert _plan(data) == "combiner"
    out, = run(device, data, [x], [((rows,), "f32")], workgroups_for(rows, 1),
               initial_outputs=[np.zeros(rows, np.float32)])
    np.testing.assert_allclose(out, 40.96, atol=1e-4)


def test_i8_matmul_extends_to_i32_and_is_exact(device, rng):
    m, n, k = 9, 11, 300
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    c = rng.integers(-2 ** 31, 2 ** 31, (m, n)).astype(np.int32)
    data = _matmul(m, n, k, "i8", "i8", "i32", 5, cast="arith.extsi")
    assert _plan(data) == "contraction"
    out, = run(device, data, [a, b], [((m, n), "i32")], workgroups_for(m * n, 5),
               initial_outputs=[c], input_types=["i8", "i8"])
    want = (c.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(out, want)


def test_i32_matmul_wraps_like_the_sequential_loop(device, rng):
    m, n, k = 6, 5, 40
    a = rng.integers(-2 ** 31, 2 ** 31, (m, k)).astype(np.int32)
    b = rng.integers(-2 ** 31, 2 ** 31, (k, n)).astype(np.int32)
    c = rng.integers(-2 ** 31, 2 ** 31, (m, n)).astype(np.int32)
    out, = run(device, _matmul(m, n, k, "i32", "i32", "i32", 4), [a, b], [((m, n), "i32")],
               workgroups_for(m * n, 4), initial_outputs=[c])
    want = [[(int(c[i, j]) + sum(int(a[i, x]) * int(b[x, j]) for x in range(k)))
             for j in range(n)] for i in range(m)]
    want = (np.array(want, dtype=object) % 2 ** 32).astype(np.int64).astype(np.uint32)
    np.testing.assert_array_equal(out.view(np.uint32), want)


def test_f16_matmul_with_f32_accumulation(device, rng):
    m, n, k = 7, 9, 50
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    data = _matmul(m, n, k, "f16", "f16", "f32", 9, cast="arith.extf")
    out, = run(device, data, [a, b], [((m, n), "f32")], workgroups_for(m * n, 9),
               initial_outputs=[np.zeros((m, n), np.float32)], input_types=["f16", "f16"])
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5,
                               atol=1e-4)


def _row_reduce(name: str, t: str, rows: int, cols: int, tile: int, axis: int = 1) -> bytes:
    """out[i] = combine(out[i], x[i, j]) with j the reduction loop (axis 0: x[j, i])."""
    ins = [operand(0, t, [rows, cols] if axis == 1 else [cols, rows], 2,
                   _rows(0, 1, nd=2) if axis == 1 else _rows(1, 0, nd=2))]
    outs = [operand(1, t, [rows], 2, _rows(0, nd=2))]
    return executable(kernel("red", [rows, cols], ins, outs,
                             [op(name, 1, 0, result_type=t)], [2], tile, iterators="pr"))


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("axis", [0, 1])
def test_sum_reduction_against_float64(device, rng, t, axis):
    rows, cols = 37, 211
    dtype = np.float32 if t == "f32" else np.float64
    x = rng.standard_normal((rows, cols) if axis == 1 else (cols, rows)).astype(dtype)
    init = rng.standard_normal(rows).astype(dtype)
    data = _row_reduce("arith.addf", t, rows, cols, 8, axis)
    assert _plan(data) == "combiner"
    out, = run(device, data, [x], [((rows,), t)], workgroups_for(rows, 8),
               initial_outputs=[init], input_types=[t])
    want = init + x.astype(np.float64).sum(axis=axis)
    np.testing.assert_allclose(out, want, rtol=1e-5 if t == "f32" else 1e-12, atol=1e-4)


def test_maximumf_reduction_propagates_nan_and_orders_signed_zeros(device):
    x = np.array([[1.0, np.nan, 3.0], [-0.0, 0.0, -0.0], [-0.0, -0.0, -0.0],
                  [-np.inf, -5.0, -7.0]], dtype=np.float32)
    init = np.array([-np.inf, -np.inf, -np.inf, -np.inf], dtype=np.float32)
    mx, = run(device, _row_reduce("arith.maximumf", "f32", 4, 3, 1), [x], [((4,), "f32")],
              (4, 1, 1), initial_outputs=[init])
    assert np.isnan(mx[0]) and mx[1] == 0 and not np.signbit(mx[1])
    assert mx[2] == 0 and np.signbit(mx[2]) and mx[3] == -5.0
    nn, = run(device, _row_reduce("arith.maxnumf", "f32", 4, 3, 1), [x], [((4,), "f32")],
              (4, 1, 1), initial_outputs=[init])
    assert nn[0] == 3.0
    mn, = run(device, _row_reduce("arith.minimumf", "f32", 4, 3, 2), [x], [((4,), "f32")],
              (2, 1, 1), initial_outputs=[-init])
    assert np.isnan(mn[0]) and np.signbit(mn[1]) and mn[3] == -np.inf


@pytest.mark.parametrize("t, dtype", [("i8", np.int8), ("i16", np.int16), ("i32", np.int32),
                                      ("i64", np.int64)])
@pytest.mark.parametrize("name", ["arith.addi", "arith.muli", "arith.maxui", "arith.xori"])
def test_integer_reductions_wrap_exactly(device, rng, t, dtype, name):
    rows, cols = 6, 45
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (rows, cols), endpoint=True, dtype=np.int64).astype(dtype)
    init = rng.integers(info.min, info.max, rows, endpoint=True, dtype=np.int64).astype(dtype)
    out, = run(device, _row_reduce(name, t, rows, cols, 4), [x], [((rows,), t)],
               workgroups_for(rows, 4), initial_outputs=[init], input_types=[t])
    bits = info.bits
    want = []
    for i in range(rows):
        acc = int(init[i])
        for v in x[i].tolist():
            if name == "arith.addi":
                acc += v
            elif name == "arith.muli":
                acc *= v
            elif name == "arith.xori":
                acc ^= v
            else:
                acc = max(acc % 2 ** bits, v % 2 ** bits)
            acc = (acc + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)
        want.append(acc)
    np.testing.assert_array_equal(out.astype(np.int64), want)


def test_argmax_runs_sequentially_and_keeps_the_first_maximum(device, rng):
    rows, cols = 23, 40
    x = rng.integers(0, 6, (rows, cols)).astype(np.float32)   # many ties
    k = kernel("argmax", [rows, cols], [operand(0, "f32", [rows, cols], 2)],
               [operand(1, "f32", [rows], 2, _rows(0, nd=2)),
                operand(2, "i32", [rows], 2, _rows(0, nd=2))],
               [op("linalg.index", int_value=1), op("arith.cmpf", 0, 1, predicate="ogt"),
                op("arith.select", 4, 0, 1, result_type="f32"),
                op("arith.select", 4, 3, 2, result_type="i32")], [5, 6], 5, iterators="pr")
    data = executable(k)
    assert _plan(data) == "sequential"
    mx, idx = run(device, data, [x], [((rows,), "f32"), ((rows,), "i32")],
                  workgroups_for(rows, 5),
                  initial_outputs=[np.full(rows, -np.inf, np.float32), np.zeros(rows, np.int32)])
    np.testing.assert_array_equal(idx, x.argmax(axis=1))
    np.testing.assert_array_equal(mx, x.max(axis=1))


def test_plain_f16_sum_is_reassociated_and_accurate(device, rng):
    """A sum of input elements as loaded may be reassociated (kernel.py): the pairwise result is
    within a few f16 ulps of the exact sum, where the in-order f16 sum drifts."""
    rows, cols = 5, 4096
    x = (rng.random((rows, cols)) * 0.01).astype(np.float16)
    data = _row_reduce("arith.addf", "f16", rows, cols, 2)
    assert _plan(data) == "combiner"
    out, = run(device, data, [x], [((rows,), "f16")], workgroups_for(rows, 2),
               initial_outputs=[np.zeros(rows)], input_types=["f16"])
    exact = x.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(out.astype(np.float64), exact, rtol=4e-3)


@pytest.mark.parametrize("t", ["f32", "f64", "bf16"])
def test_float_sums_keep_the_loop_order_exactly(device, rng, t):
    """No reassociation: the result is the sequential loop's, bit for bit (here a sum of
    squared differences over two reduction loops whose terms span six orders of magnitude)."""
    x = numerics.round_to(t, rng.standard_normal((3, 40, 7)) * 10.0 ** rng.integers(-3, 3,
                                                                                      (3, 40, 7)))
    x = x.astype(np.float64)
    k = kernel("ssd", [3, 40, 7], [operand(0, t, [3, 40, 7], 3)],
               [operand(1, t, [3], 3, _rows(0, nd=3))],
               [op("arith.constant", result_type=t, float_value=0.25),
                op("arith.subf", 0, 2, result_type=t), op("arith.mulf", 3, 3, result_type=t),
                op("arith.addf", 1, 4, result_type=t)],
               [5], 2, iterators="prr")
    assert _plan(executable(k)) == ("combiner" if t != "bf16" else "sequential")
    init = numerics.round_to(t, rng.standard_normal(3)).astype(np.float64)
    out, = run(device, executable(k), [x], [((3,), t)], (2, 1, 1), initial_outputs=[init],
               input_types=[t])
    acc = init.copy()
    for i in range(40):
        for j in range(7):
            d = numerics.round_to(t, x[:, i, j] - 0.25).astype(np.float64)
            acc = numerics.round_to(t, acc + numerics.round_to(t, d * d))
            acc = acc.astype(np.float64)
    np.testing.assert_array_equal(out, acc)


def test_full_reduction_to_a_scalar_and_empty_reductions(device, rng):
    x = rng.standard_normal((30, 20)).astype(np.float32)
    k = kernel("total", [30, 20], [operand(0, "f32", [30, 20], 2)],
               [operand(1, "f32", [], 2, [])], [op("arith.addf", 1, 0, result_type="f32")], [2],
               1, iterators="rr")
    out, = run(device, executable(k), [x], [((), "f32")], (1, 1, 1),
               initial_outputs=[np.float32(0.5)])
    # A plain sum of inputs may be reassociated (kernel.py): compare with the exact sum.
    np.testing.assert_allclose(out, 0.5 + x.astype(np.float64).sum(), rtol=1e-6, atol=1e-5)
    # A zero-length reduction evaluates no body point: the output keeps its initial value.
    empty = kernel("none", [4, 0], [operand(0, "f32", [4, 0], 2)],
                   [operand(1, "f32", [4], 2, _rows(0, nd=2))],
                   [op("arith.addf", 1, 0, result_type="f32")], [2], 4, iterators="pr")
    init = np.array([-0.0, 1.0, np.nan, 3.0], dtype=np.float32)
    out, = run(device, executable(empty), [np.zeros(1, np.float32)], [((4,), "f32")],
               (1, 1, 1), initial_outputs=[init])
    np.testing.assert_array_equal(out.view(np.uint32), init.view(np.uint32))


def test_kernels_run_with_the_plan_the_loader_chose(device, rng, monkeypatch):
    """The executable loader picks each kernel's plan and hands it over; the executor only
    cuts the dispatch into boxes and runs every box through that plan."""
    import hal_cpu.executable
    from hal_cpu import plans

    boxes: list[str] = []

    class Counting:
        def __init__(self, plan):
            self.plan, self.name = plan, "counting " + plan.name

        def block_points(self, bound):
            return self.plan.block_points(bound)

        def run_box(self, bound, box):
            boxes.append(self.plan.name)
            self.plan.run_box(bound, box)

        def run_range(self, bound, start, end):
            bound.kernel.run_boxes(self, bound, start, end)

        def min_chunk_points(self, bound):
            return self.plan.min_chunk_points(bound)

    monkeypatch.setattr(hal_cpu.executable, "choose_plan",
                        lambda k: Counting(plans.choose_plan(k)))
    monkeypatch.setenv("IRTK_CPU_EXECUTOR", "reference")   # the numpy plans themselves
    m, n, k = 5, 6, 7
    data = _matmul(m, n, k, "i32", "i32", "i32", 6)
    assert _plan(data) == "counting contraction"
    a = rng.integers(-9, 9, (m, k), dtype=np.int32)
    b = rng.integers(-9, 9, (k, n), dtype=np.int32)
    out, = run(device, data, [a, b], [((m, n), "i32")], workgroups_for(m * n, 6),
               initial_outputs=[np.zeros((m, n), np.int32)])
    np.testing.assert_array_equal(out, a @ b)
    assert boxes and set(boxes) == {"contraction"}


def test_large_slabs_split_the_reduction(device, rng, monkeypatch):
    monkeypatch.setattr("hal_cpu.kernel.SLAB_ELEMENTS", 64)
    x = rng.standard_normal((3, 1000)).astype(np.float32)
    out, = run(device, _row_reduce("arith.addf", "f32", 3, 1000, 1), [x], [((3,), "f32")],
               (3, 1, 1), initial_outputs=[np.zeros(3, np.float32)])
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)


@pytest.mark.slow
@pytest.mark.slow
def test_large_matmul_and_row_sum(task_device, rng):
    n = 512
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    data = _matmul(n, n, n, "f32", "f32", "f32", 8192)
    out, = run(task_device, data, [a, b], [((n, n), "f32")], workgroups_for(n * n, 8192),
               initial_outputs=[np.zeros((n, n), np.float32)])
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
    x = rng.standard_normal((1024, 1024)).astype(np.float32)
    out, = run(task_device, _row_reduce("arith.addf", "f32", 1024, 1024, 64), [x],
               [((1024,), "f32")], workgroups_for(1024, 64),
               initial_outputs=[np.zeros(1024, np.float32)])
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-3)
