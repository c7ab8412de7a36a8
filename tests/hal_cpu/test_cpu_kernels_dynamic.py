"""Gathers, push-constant params and dynamic extents, and kernels made by the CPU code generator."""
from __future__ import annotations

import numpy as np
import pytest

from hal_cpu.executable import parse_kernels
from irtk.compiler.codegen import cpu as cpu_codegen
from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand, Param
from irtk.errors import CompileError, RuntimeFailure
from irtk.hal import numerics

from .cpu_kernel_builder import NO_MAP, executable, kernel, op, operand, run, words


def _gather_kernel(n: int, table_n: int, t: str = "f32") -> bytes:
    """out[i] = table[idx[i]] + i."""
    return executable(kernel(
        "gather", [n], [operand(0, "i32", [n], 1), operand(1, t, [table_n], 1, NO_MAP)],
        [operand(2, t, [n], 1)],
        [op("tensor.extract", 0, result_type=t, int_value=1),
         op("linalg.index", int_value=0),
         op("arith.sitofp", 4, result_type=t),
         op("arith.addf", 3, 5, result_type=t)], [6], tile_size=8))


@pytest.mark.parametrize("t", ["f32", "bf16", "f8E4M3FN"])
def test_gather_reads_the_indexed_element(device, rng, t):
    n, table_n = 50, 13
    table = numerics.round_to(t, rng.standard_normal(table_n)).astype(np.float64)
    idx = rng.integers(0, table_n, n)
    out, = run(device, _gather_kernel(n, table_n, t), [idx, table], [((n,), t)],
               (-(-n // 8), 1, 1), input_types=["i32", t])
    want = numerics.round_to(t, table[idx] + numerics.round_to(t, np.arange(n, dtype=np.float64)))
    np.testing.assert_array_equal(out, want)


def test_out_of_range_gather_indices_are_clamped(device):
    table = np.array([10.0, 11.0, 12.0], dtype=np.float32)
    idx = np.array([-5, 0, 2, 3, 2 ** 31 - 1, -2 ** 31], dtype=np.int32)
    out, = run(device, _gather_kernel(6, 3), [idx, table], [((6,), "f32")], (1, 1, 1))
    np.testing.assert_array_equal(out, [10.0, 11.0, 14.0, 15.0, 16.0, 15.0])


def test_two_dimensional_gather_with_computed_indices(device, rng):
    """out[i, j] = table[idx[i], (j + 1) % 4] (a transposed embedding lookup)."""
    table = rng.standard_normal((7, 4)).astype(np.float32)
    idx = rng.integers(0, 7, 5).astype(np.int32)
    k = kernel("embed", [5, 4], [operand(0, "i32", [5], 2, [[1, 0, 0]]),
                                 operand(1, "f32", [7, 4], 2, NO_MAP)],
               [operand(2, "f32", [5, 4], 2)],
               [op("linalg.index", int_value=1),
                op("arith.constant", result_type="index", int_value=1),
                op("arith.addi", 3, 4, result_type="index"),
                op("arith.constant", result_type="index", int_value=4),
                op("arith.remui", 5, 6, result_type="index"),
                op("tensor.extract", 0, 7, result_type="f32", int_value=1)], [8], tile_size=3)
    out, = run(device, executable(k), [idx, table], [((5, 4), "f32")], (7, 1, 1))
    np.testing.assert_array_equal(out, table[idx][:, [1, 2, 3, 0]])


def _scaled_rows(dynamic_cols: bool) -> bytes:
    """out[i] += scale * sum_j x[i, j], rows n, cols 6 or dynamic m; `bias` is bound through a
    map with the symbol offset `off` (checked at each dispatch) that the body does not read."""
    params = [("n", "index"), ("scale", "f32"), ("off", "index")]
    dyn = 3 if dynamic_cols else -1
    if dynamic_cols:
        params.append(("m", "index"))
    ins = [operand(0, "f32", [0, 6], 2, dynamic_dims=[0, dyn]),
           operand(1, "f32", [16], 2, [[1, 0] + [0, 0, 1] + ([0] if dynamic_cols else []) + [0]],
                   num_symbols=len(params))]
    outs = [operand(2, "f32", [0], 2, [[1, 0, 0]], dynamic_dims=[0])]
    ops = [op("kernel.param", result_type="f32", int_value=1),
           op("arith.mulf", 0, 3, result_type="f32"),
           op("arith.addf", 2, 4, result_type="f32")]
    return executable(kernel("rows", [0, 6], ins, outs, ops, [5], tile_size=4, iterators="pr",
                             params=params, dynamic_loops=[0, dyn]))


def test_dynamic_extents_and_float_params(device, rng):
    n, m = 9, 6
    x = rng.standard_normal((n, m)).astype(np.float32)
    bias = rng.standard_normal(16).astype(np.float32)
    data = _scaled_rows(dynamic_cols=False)
    (k,) = parse_kernels(data)
    assert not k.is_static and k.plan.name == "combiner"
    init = rng.standard_normal(n).astype(np.float32)
    out, = run(device, data, [x, bias], [((n,), "f32")], (-(-n // 4), 1, 1),
               initial_outputs=[init], constants=words(("index", n), ("f32", 0.5),
                                                       ("index", 2)))
    np.testing.assert_allclose(out, init + 0.5 * x.astype(np.float64).sum(1), rtol=1e-5)


def test_fully_dynamic_shape_with_a_symbol_offset(device, rng):
    n, m = 5, 11
    x = rng.standard_normal((n, m)).astype(np.float32)
    bias = rng.standard_normal(16).astype(np.float32)
    out, = run(device, _scaled_rows(dynamic_cols=True), [x, bias], [((n,), "f32")],
               (2, 1, 1), initial_outputs=[np.zeros(n, np.float32)],
               constants=words(("index", n), ("f32", -2.0), ("index", 3), ("index", m)))
    np.testing.assert_allclose(out, -2.0 * x.astype(np.float64).sum(1), rtol=1e-5)


def test_dynamic_extent_checks_at_dispatch(device, rng):
    data = _scaled_rows(dynamic_cols=False)
    x = np.zeros((4, 6), np.float32)
    bias = np.zeros(16, np.float32)
    with pytest.raises(RuntimeFailure, match=r"input 0 \(5x6xf32, 120 bytes\) does not fit"):
        run(device, data, [x, bias], [((5,), "f32")], (2, 1, 1),
            constants=words(("index", 5), ("f32", 1.0), ("index", 0)))
    with pytest.raises(RuntimeFailure, match=r"input 1 map row 0 reaches indices \[13, 16\]"):
        run(device, data, [x, bias], [((4,), "f32")], (1, 1, 1),
            constants=words(("index", 4), ("f32", 1.0), ("index", 13)))
    with pytest.raises(RuntimeFailure, match="extent n = -1 is negative"):
        run(device, data, [x, bias], [((4,), "f32")], (1, 1, 1),
            constants=words(("index", -1), ("f32", 1.0), ("index", 0)))
    with pytest.raises(RuntimeFailure, match="needs 12 bytes of push constants"):
        run(device, data, [x, bias], [((4,), "f32")], (1, 1, 1), constants=[4])


def test_i64_param_is_aligned_to_eight_bytes(device):
    k = kernel("fill", [3], [], [operand(0, "i64", [3], 1)],
               [op("kernel.param", result_type="i64", int_value=1)], [1], tile_size=2,
               params=[("pad", "i32"), ("value", "i64")])
    (parsed,) = parse_kernels(executable(k))
    assert parsed.params[1][2] == 8 and parsed.push_constant_bytes == 16
    out, = run(device, executable(k), [], [((3,), "i64")], (2, 1, 1),
               constants=words(("i32", 7), ("i64", -2 ** 40 - 3)))
    np.testing.assert_array_equal(out, [-2 ** 40 - 3] * 3)


# --- kernels from the code generator ---------------------------------------------------------

def _proj(num_dims: int, *dims: int | None, num_symbols: int = 0) -> AffineMap:
    return AffineMap(num_dims, tuple(
        tuple(1 if (d is not None and j == d) else 0 for j in range(num_dims + num_symbols + 1))
        for d in dims), num_symbols)


def test_codegen_plans_whole_rows_and_a_grid(device, rng):
    m, n, k = 33, 20, 16
    mm = Kernel("mm", (m, n, k),
                [Operand(0, "f32", (m, k), _proj(3, 0, 2)),
                 Operand(1, "f32", (k, n), _proj(3, 2, 1))],
                [Operand(2, "f32", (m, n), _proj(3, 0, 1))],
                [Op("arith.mulf", (0, 1), "f32"), Op("arith.addf", (2, 3), "f32")], [4],
                ("parallel", "parallel", "reduction"))
    mm.validate()
    data, (plan,) = cpu_codegen.pack_executable([mm])
    assert plan.tile_size % n == 0 and plan.grid.x.dims == (0, 1)
    assert plan.workgroup_count == plan.grid.counts((m, n, k))
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    out, = run(device, data, [a, b], [((m, n), "f32")], plan.workgroup_count,
               initial_outputs=[np.zeros((m, n), np.float32)])
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_codegen_dynamic_kernel_runs_with_its_push_constants(device, rng):
    """out[i] = max_j x[i, j] * s * table[2], with both extents dynamic."""
    params = (Param("n", "index"), Param("m", "index"), Param("s", "f32"))
    kern = Kernel("rowmax", ("n", "m"),
                  [Operand(0, "f32", ("n", "m"), _proj(2, 0, 1)),
                   Operand(1, "f16", (3,), None)],
                  [Operand(2, "f32", ("n",), _proj(2, 0))],
                  [Op("kernel.param", (), "f32", int_value=2),
                   Op("arith.constant", (), "index", int_value=2),
                   Op("tensor.extract", (4,), "f16", int_value=1),
                   Op("arith.extf", (5,), "f32"),
                   Op("arith.mulf", (0, 3), "f32"),
                   Op("arith.mulf", (7, 6), "f32"),
                   Op("arith.maximumf", (2, 8), "f32")], [9],
                  ("parallel", "reduction"), params)
    kern.validate()
    data, (plan,) = cpu_codegen.pack_executable([kern])
    with pytest.raises(ValueError, match="dynamic extents"):
        plan.workgroup_count
    n, m = 70, 9
    x = rng.standard_normal((n, m)).astype(np.float32)
    table = np.array([1.0, 2.0, 4.0], np.float16)
    out, = run(device, data, [x, table], [((n,), "f32")], plan.grid.counts((n, m)),
               initial_outputs=[np.full(n, -np.inf, np.float32)],
               constants=words(("index", n), ("index", m), ("f32", 3.0)))
    np.testing.assert_array_equal(out, (x * np.float32(3.0) * np.float32(4.0)).max(axis=1))


def test_codegen_refuses_a_kernel_that_breaks_the_ir_rules():
    bad = Kernel("bad", (4, 3), [Operand(0, "f32", (4, 3), _proj(2, 0, 1))],
                 [Operand(1, "f32", (4, 3), _proj(2, 0, 1))], [], [0],
                 ("parallel", "reduction"))
    with pytest.raises(CompileError, match="kernel bad: output 0 map uses a reduction loop"):
        cpu_codegen.pack_executable([bad])
