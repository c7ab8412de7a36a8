"""Dispatches of kernel programs: tiling, affine maps, float bodies, on both drivers."""
from __future__ import annotations

import numpy as np
import pytest

import hal_cpu.kernel

from .cpu_kernel_builder import (
    binary,
    elementwise,
    executable,
    kernel,
    op,
    operand,
    run,
    unary,
    workgroups_for,
)

SIZES = [1, 63, 65, 1000, 4099]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op_name, ref", [("arith.addf", np.add), ("arith.mulf", np.multiply)])
def test_elementwise_binary_matches_float32_numpy(device, rng, n, op_name, ref):
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    out, = run(device, binary("k", op_name, "f32", "f32", n, tile_size=64), [a, b],
               [((n,), "f32")], workgroups_for(n, 64))
    np.testing.assert_array_equal(out, ref(a, b))


@pytest.mark.parametrize("n", SIZES)
def test_exp_is_accurate_against_float64(device, rng, n):
    a = rng.uniform(-20, 20, n).astype(np.float32)
    out, = run(device, unary("exp", "math.exp", "f32", "f32", n, tile_size=32), [a],
               [((n,), "f32")], workgroups_for(n, 32))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.exp(a.astype(np.float64)), rtol=2e-6)


def test_fused_body_of_several_ops(device, rng):
    # out = tanh(a * b + 0.5) - sqrt(|a|)
    n = 777
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    ops = [op("arith.mulf", 0, 1, result_type="f32"),
           op("arith.constant", result_type="f32", float_value=0.5),
           op("arith.addf", 3, 4, result_type="f32"),
           op("math.tanh", 5, result_type="f32"),
           op("math.absf", 0, result_type="f32"),
           op("math.sqrt", 7, result_type="f32"),
           op("arith.subf", 6, 8, result_type="f32")]
    data = elementwise("fused", [n], ["f32", "f32"], ["f32"], ops, [9], tile_size=100)
    out, = run(device, data, [a, b], [((n,), "f32")], workgroups_for(n, 100))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(out, np.tanh(a64 * b64 + 0.5) - np.sqrt(np.abs(a64)),
                               rtol=1e-5, atol=1e-6)


def test_broadcast_and_transpose_maps(device, rng):
    # out[i, j] = x[j, i] + bias[j] over a 37x29 loop nest (loops d0=i, d1=j).
    m, n = 37, 29
    x = rng.standard_normal((n, m)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    transposed = [[0, 1, 0], [1, 0, 0]]
    broadcast = [[0, 1, 0]]
    k = kernel("bt", [m, n],
               [operand(0, "f32", [n, m], 2, transposed), operand(1, "f32", [n], 2, broadcast)],
               [operand(2, "f32", [m, n], 2)],
               [op("arith.addf", 0, 1, result_type="f32")], [3], tile_size=50)
    out, = run(device, executable(k), [x, bias], [((m, n), "f32")], workgroups_for(m * n, 50))
    np.testing.assert_array_equal(out, x.T + bias[None, :])


def test_map_with_constant_offset_and_stride(device, rng):
    # out[i] = x[2*i + 3]
    n = 100
    x = rng.standard_normal(2 * n + 3).astype(np.float32)
    k = kernel("strided", [n], [operand(0, "f32", [2 * n + 3], 1, [[2, 3]])],
               [operand(1, "f32", [n], 1)], [], [0], tile_size=16)
    out, = run(device, executable(k), [x], [((n,), "f32")], workgroups_for(n, 16))
    np.testing.assert_array_equal(out, x[3::2][:n])


def test_scalar_operand_and_constant_yield(device, rng):
    n = 130
    s = rng.standard_normal(1).astype(np.float32).reshape(())
    k = kernel("scalar", [n], [operand(0, "f32", [], 1, [])],
               [operand(1, "f32", [n], 1), operand(2, "f32", [n], 1)],
               [op("arith.constant", result_type="f32", float_value=-2.5)], [0, 3], tile_size=8)
    out, const = run(device, executable(k), [s], [((n,), "f32"), ((n,), "f32")],
                     workgroups_for(n, 8))
    np.testing.assert_array_equal(out, np.full(n, s))
    np.testing.assert_array_equal(const, np.full(n, -2.5, np.float32))


def test_output_current_value_is_a_body_value(device, rng):
    # In-place accumulate: out = out + a (value 1 is the output's current element).
    n = 300
    a = rng.standard_normal(n).astype(np.float32)
    init = rng.standard_normal(n).astype(np.float32)
    data = elementwise("acc", [n], ["f32"], ["f32"], [op("arith.addf", 1, 0)], [2])
    out, = run(device, data, [a], [((n,), "f32")], workgroups_for(n, 64), initial_outputs=[init])
    np.testing.assert_array_equal(out, init + a)


def test_compare_and_select(device, rng):
    n = 513
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    a[::7] = np.nan
    ops = [op("arith.cmpf", 0, 1, predicate="ogt", result_type="i1"),
           op("arith.select", 4, 0, 1, result_type="f32")]  # values 2, 3 are the outputs
    data = elementwise("sel", [n], ["f32", "f32"], ["f32", "i1"], ops, [5, 4], tile_size=40)
    out, mask = run(device, data, [a, b], [((n,), "f32"), ((n,), "i1")], workgroups_for(n, 40))
    np.testing.assert_array_equal(mask, (a > b).astype(np.uint8))
    np.testing.assert_array_equal(out, np.where(a > b, a, b))


def test_i1_inputs_are_read_as_nonzero_bytes(device):
    mask = np.array([0, 1, 1, 0, 7], dtype=np.uint8)
    x = np.arange(5, dtype=np.float32)
    ops = [op("arith.constant", result_type="f32", float_value=0.0),
           op("arith.select", 0, 1, 3, result_type="f32")]
    data = elementwise("mask", [5], ["i1", "f32"], ["f32"], ops, [4])
    out, = run(device, data, [mask, x], [((5,), "f32")], (1, 1, 1))
    np.testing.assert_array_equal(out, [0, 1, 2, 0, 4])


@pytest.mark.parametrize("predicate", ["oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq",
                                       "ugt", "uge", "ult", "ule", "une", "uno", "true", "false"])
def test_cmpf_predicates_with_nan(device, predicate):
    vals = np.array([0.0, 1.0, -1.0, np.nan, np.inf], dtype=np.float32)
    a, b = (g.ravel() for g in np.meshgrid(vals, vals))
    out, = run(device, binary("cmp", "arith.cmpf", "f32", "i1", a.size, predicate=predicate),
               [a, b], [((a.size,), "i1")], (1, 1, 1))
    unordered = np.isnan(a) | np.isnan(b)
    expected = {"oeq": a == b, "ogt": a > b, "oge": a >= b, "olt": a < b, "ole": a <= b,
                "one": (a != b) & ~unordered, "ord": ~unordered, "ueq": (a == b) | unordered,
                "ugt": (a > b) | unordered, "uge": (a >= b) | unordered,
                "ult": (a < b) | unordered, "ule": (a <= b) | unordered,
                "une": (a != b) | unordered, "uno": unordered,
                "true": np.ones(a.size, bool), "false": np.zeros(a.size, bool)}[predicate]
    np.testing.assert_array_equal(out, expected.astype(np.uint8))


def test_min_max_nan_and_signed_zero_rules(device):
    a = np.array([1.0, np.nan, 2.0, np.nan, -0.0, 0.0, -0.0], dtype=np.float32)
    b = np.array([np.nan, 1.0, 3.0, np.nan, 0.0, -0.0, -0.0], dtype=np.float32)
    got = {}
    for name in ["maximumf", "minimumf", "maxnumf", "minnumf"]:
        got[name], = run(device, binary("m", f"arith.{name}", "f32", "f32", a.size),
                         [a, b], [((a.size,), "f32")], (1, 1, 1))
    nan = np.nan
    np.testing.assert_array_equal(got["maximumf"], [nan, nan, 3, nan, 0, 0, -0.0])
    np.testing.assert_array_equal(got["minimumf"], [nan, nan, 2, nan, -0.0, -0.0, -0.0])
    np.testing.assert_array_equal(got["maxnumf"], [1, 1, 3, nan, 0, 0, -0.0])
    np.testing.assert_array_equal(got["minnumf"], [1, 1, 2, nan, -0.0, -0.0, -0.0])
    assert not np.signbit(got["maximumf"][4]) and not np.signbit(got["maximumf"][5])
    assert np.signbit(got["minimumf"][4]) and np.signbit(got["minimumf"][5])


def test_float_special_values(device):
    a = np.array([1.0, -1.0, 0.0, np.inf, 5.5, -5.5, 7.0], dtype=np.float32)
    b = np.array([0.0, 0.0, 0.0, 2.0, 2.0, 2.0, -3.0], dtype=np.float32)
    div, = run(device, binary("d", "arith.divf", "f32", "f32", 7), [a, b], [((7,), "f32")],
               (1, 1, 1))
    rem, = run(device, binary("r", "arith.remf", "f32", "f32", 7), [a, b], [((7,), "f32")],
               (1, 1, 1))
    np.testing.assert_array_equal(
        div, np.array([np.inf, -np.inf, np.nan, np.inf, 2.75, -2.75, -7 / 3.0], np.float32))
    np.testing.assert_array_equal(rem[3:], [np.nan, 1.5, -1.5, 1.0])  # sign of the dividend
    assert np.isnan(rem[:3]).all()


@pytest.mark.parametrize("op_name, ref", [
    ("math.log", np.log), ("math.sqrt", np.sqrt), ("math.rsqrt", lambda x: 1 / np.sqrt(x)),
    ("math.floor", np.floor), ("math.ceil", np.ceil), ("math.absf", np.abs),
    ("arith.negf", np.negative), ("math.tanh", np.tanh)])
def test_unary_math_against_float64(device, rng, op_name, ref):
    n = 257
    a = (rng.standard_normal(n) * 10).astype(np.float32)
    out, = run(device, unary("u", op_name, "f32", "f32", n), [a], [((n,), "f32")],
               workgroups_for(n, 64))
    with np.errstate(all="ignore"):
        expected = ref(a.astype(np.float64))
    np.testing.assert_allclose(out, expected, rtol=2e-6, atol=1e-7, equal_nan=True)


def test_powf_against_float64(device, rng):
    n = 200
    a = rng.uniform(0.1, 10, n).astype(np.float32)
    b = rng.uniform(-3, 3, n).astype(np.float32)
    out, = run(device, binary("p", "math.powf", "f32", "f32", n), [a, b], [((n,), "f32")],
               workgroups_for(n, 64))
    np.testing.assert_allclose(out, np.power(a.astype(np.float64), b), rtol=1e-5)


def test_linalg_index_gives_loop_indices(device):
    # out[i, j] = float(i * 10 + j)
    m, n = 13, 7
    ops = [op("linalg.index", int_value=0, result_type="index"),
           op("linalg.index", int_value=1, result_type="index"),
           op("arith.constant", result_type="i32", int_value=10),
           op("arith.muli", 1, 3, result_type="i32"),  # value 0 is the output
           op("arith.addi", 4, 2, result_type="i32"),
           op("arith.sitofp", 5, result_type="f32")]
    k = kernel("iota", [m, n], [], [operand(0, "f32", [m, n], 2)], ops, [6], tile_size=9)
    out, = run(device, executable(k), [], [((m, n), "f32")], workgroups_for(m * n, 9))
    i, j = np.indices((m, n))
    np.testing.assert_array_equal(out, (i * 10 + j).astype(np.float32))


def test_workgroup_grid_is_linearized_and_extra_workgroups_do_nothing(device, rng):
    n = 1000
    a = rng.standard_normal(n).astype(np.float32)
    data = unary("neg", "arith.negf", "f32", "f32", n, tile_size=10)
    # 3 x 4 x 10 = 120 workgroups of 10 iterations: more than the 100 needed.
    out, = run(device, data, [a], [((n,), "f32")], (3, 4, 10))
    np.testing.assert_array_equal(out, -a)
    # 7 workgroups cover only the first 70 iterations; the rest keeps its initial value.
    init = np.full(n, 42, np.float32)
    out, = run(device, data, [a], [((n,), "f32")], (7, 1, 1), initial_outputs=[init])
    np.testing.assert_array_equal(out[:70], -a[:70])
    np.testing.assert_array_equal(out[70:], init[70:])
    out, = run(device, data, [a], [((n,), "f32")], (0, 5, 5), initial_outputs=[init])
    np.testing.assert_array_equal(out, init)


def test_large_dispatch_split_in_blocks_and_chunks(device, rng, monkeypatch):
    monkeypatch.setattr(hal_cpu.kernel, "BLOCK_ITERATIONS", 1000)
    m, n = 97, 103
    x = rng.standard_normal((n, m)).astype(np.float32)
    k = kernel("t", [m, n], [operand(0, "f32", [n, m], 2, [[0, 1, 0], [1, 0, 0]])],
               [operand(1, "f32", [m, n], 2)], [op("math.exp", 0, result_type="f32")], [2],
               tile_size=128)
    out, = run(device, executable(k), [x], [((m, n), "f32")], workgroups_for(m * n, 128))
    np.testing.assert_array_max_ulp(out, np.exp(x.T), maxulp=2)


def test_two_kernels_in_one_executable(device, rng):
    n = 50
    a = rng.standard_normal(n).astype(np.float32)
    ka = kernel("double", [n], [operand(0, "f32", [n], 1)], [operand(1, "f32", [n], 1)],
                [op("arith.addf", 0, 0, result_type="f32")], [2])
    kb = kernel("square", [n], [operand(0, "f32", [n], 1)], [operand(1, "f32", [n], 1)],
                [op("arith.mulf", 0, 0, result_type="f32")], [2])
    data = executable(ka, kb)
    out, = run(device, data, [a], [((n,), "f32")], (1, 1, 1), ordinal=1)
    np.testing.assert_array_equal(out, a * a)
    exe = device.create_executable("cpu-kernel-fb", data)
    assert exe.lookup("double") == 0 and exe.lookup("square") == 1


@pytest.mark.parametrize("op_name, ref", [
    ("math.exp2", np.exp2), ("math.expm1", np.expm1), ("math.log2", np.log2),
    ("math.log10", np.log10), ("math.log1p", np.log1p), ("math.sin", np.sin),
    ("math.cos", np.cos), ("math.tan", np.tan), ("math.atan", np.arctan),
    ("math.trunc", np.trunc), ("math.roundeven", np.rint)])
def test_more_unary_math_against_float64(device, rng, op_name, ref):
    a = rng.uniform(-0.99, 0.99, 100).astype(np.float32)
    out, = run(device, unary("u", op_name, "f32", "f32", 100), [a], [((100,), "f32")], (2, 1, 1))
    with np.errstate(invalid="ignore"):  # log of a negative is NaN on both sides
        expected = ref(a.astype(np.float64))
    np.testing.assert_allclose(out, expected, rtol=4e-6, atol=1e-7)


def test_round_is_half_away_from_zero(device):
    a = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, 2.4, -2.6, np.inf, np.nan], np.float32)
    out, = run(device, unary("r", "math.round", "f32", "f32", a.size), [a], [((a.size,), "f32")],
               (1, 1, 1))
    np.testing.assert_array_equal(out, [1, 2, 3, -1, -3, 0, 2, -3, np.inf, np.nan])


def test_atan2_copysign_and_fma(device, rng):
    n = 100
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    for name, ref in [("math.atan2", np.arctan2), ("math.copysign", np.copysign)]:
        out, = run(device, binary("b", name, "f32", "f32", n), [a, b], [((n,), "f32")], (2, 1, 1))
        np.testing.assert_allclose(out, ref(a.astype(np.float64), b), rtol=2e-6)
    data = elementwise("fma", [n], ["f32"] * 3, ["f32"], [op("math.fma", 0, 1, 2)], [4])
    out, = run(device, data, [a, b, c], [((n,), "f32")], (2, 1, 1))
    np.testing.assert_array_equal(out, (a.astype(np.float64) * b + c).astype(np.float32))
