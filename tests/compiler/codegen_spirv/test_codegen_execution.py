"""Generated shaders executed on SwiftShader and lavapipe, checked against the numpy reference.

Floats are compared within float32 rounding (rtol 1e-5, atol 1e-6) of a float64 reference,
integers exactly.
"""
from __future__ import annotations

import numpy as np
import pytest

from irtk.compiler.codegen.spirv import compile_kernel
from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand
from irtk.compiler.targets import VULKAN_PROFILES
from spirv import tools

from .kernels import (INT_MAX, INT_MIN, OP_CASES, case_id, elementwise, identity, projection,
                      random_input, single_op)
from .reference import run_reference

RTOL, ATOL = 1e-5, 1e-6


def _as_f32(values: np.ndarray) -> np.ndarray:
    """The float64 reference rounded to f32, so that overflow to inf matches too."""
    with np.errstate(over="ignore"):
        return np.asarray(values).astype(np.float32)


def _check(kernel: Kernel, got: list[np.ndarray], inputs: list[np.ndarray],
           initial: list[np.ndarray] | None = None) -> None:
    expected = run_reference(kernel, inputs, initial)
    for operand, g, e in zip(kernel.outputs, got, expected):
        if operand.element_type == "f32":
            np.testing.assert_allclose(g, _as_f32(e), rtol=RTOL, atol=ATOL, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, e)


def _random_inputs(rng, kernel: Kernel, kinds: list[str] | None = None) -> list[np.ndarray]:
    kinds = kinds or ["any"] * len(kernel.inputs)
    return [random_input(rng, o.element_type, o.shape, k) for o, k in zip(kernel.inputs, kinds)]


@pytest.mark.parametrize("case", OP_CASES, ids=case_id)
def test_op_matches_the_reference(vulkan, rng, case):
    name, ins, out, kinds, fields = case
    kernel = single_op(name, ins, out, shape=(1000,), **fields)
    inputs = _random_inputs(rng, kernel, kinds)
    _check(kernel, vulkan.run(kernel, inputs), inputs)


# A fused body: exp(x) * y + c, a compare and a select, a cast and integer arithmetic.
def _fused(shape: tuple[int, ...]) -> Kernel:
    ops = [Op("math.exp", (0,), "f32"),                                  # 4
           Op("arith.mulf", (4, 1), "f32"),                              # 5
           Op("arith.constant", (), "f32", float_value=0.25),            # 6
           Op("arith.addf", (5, 6), "f32"),                              # 7
           Op("arith.cmpf", (0, 1), "i1", predicate="olt"),              # 8
           Op("arith.select", (8, 7, 0), "f32"),                         # 9
           Op("arith.fptosi", (1,), "i32"),                              # 10
           Op("arith.muli", (10, 10), "i32")]                            # 11
    return elementwise("fused", shape, ["f32", "f32"], ["f32", "i32"], ops, [9, 11])


@pytest.mark.parametrize("size", [1, 63, 64, 65, 1000])
def test_every_iteration_is_computed_once_for_awkward_sizes(vulkan, rng, size):
    kernel = _fused((size,))
    inputs = [random_input(rng, "f32", (size,), "exp"), random_input(rng, "f32", (size,))]
    _check(kernel, vulkan.run(kernel, inputs), inputs)


def test_grids_beyond_the_workgroup_count_limit_go_2d(vulkan, rng):
    size = 128 * 21 + 5
    kernel = _fused((size,))
    compiled = vulkan.compile(kernel, max_workgroup_count=5)
    assert compiled.workgroup_count == (5, 5, 1)
    inputs = [random_input(rng, "f32", (size,), "exp"), random_input(rng, "f32", (size,))]
    _check(kernel, vulkan.run(kernel, inputs, compiled), inputs)


def test_large_kernels_with_several_iterations_per_invocation(vulkan, rng):
    size = 128 * 8 * 256 + 77
    kernel = _fused((size,))
    compiled = vulkan.compile(kernel)
    assert compiled.workgroup_count == (257, 1, 1)  # 8 iterations per invocation
    inputs = [random_input(rng, "f32", (size,), "exp"), random_input(rng, "f32", (size,))]
    _check(kernel, vulkan.run(kernel, inputs, compiled), inputs)


def test_unrolled_2d_grid_with_a_tail(vulkan, rng):
    size = 128 * 8 * 32 * 3 + 5
    kernel = _fused((size,))
    compiled = vulkan.compile(kernel, max_workgroup_count=50)
    assert compiled.workgroup_count == (50, 2, 1)  # full rows, as Grid(linear=True)
    inputs = [random_input(rng, "f32", (size,), "exp"), random_input(rng, "f32", (size,))]
    _check(kernel, vulkan.run(kernel, inputs, compiled), inputs)


def test_unrolled_2d_grid_without_a_tail(vulkan, rng):
    # Exact cover: no bounds check. Units of 4 iterations where the profile runs quads.
    quads = vulkan.profile.elementwise_quads
    size = 128 * 8 * 256 * (4 if quads else 1)
    kernel = single_op("arith.subf", ["f32", "f32"], "f32", shape=(size,))
    compiled = vulkan.compile(kernel, max_workgroup_count=128)
    assert compiled.workgroup_count == (128, 2, 1)
    assert ("ArrayStride 16" in tools.disassemble(compiled.code)) == quads
    inputs = _random_inputs(rng, kernel)
    _check(kernel, vulkan.run(kernel, inputs, compiled), inputs)


def _add_with_maps(shape, in_shapes, in_maps) -> Kernel:
    ops = [Op("arith.subf", (0, 1), "f32"), Op("linalg.index", (), "i32", int_value=len(shape) - 1),
           Op("arith.sitofp", (4,), "f32"), Op("arith.addf", (3, 5), "f32")]
    return elementwise("maps", shape, ["f32", "f32"], ["f32"], ops, [6], in_maps, in_shapes)


@pytest.mark.parametrize("shape, in_shapes, in_dims", [
    ((1,), [(1,), (1,)], [[0], [0]]),
    ((65,), [(65,), ()], [[0], []]),
    ((7, 9), [(9, 7), (9,)], [[1, 0], [1]]),
    ((4, 5, 6), [(6, 4), (5, 6)], [[2, 0], [1, 2]]),
    ((2, 3, 4, 5), [(2, 3, 4, 5), (5, 2)], [[0, 1, 2, 3], [3, 0]]),
    ((3, 1, 4, 2), [(2, 4, 1, 3), (1,)], [[3, 2, 1, 0], [1]]),
], ids=["rank1-size1", "rank1-scalar-broadcast", "rank2-transpose", "rank3-broadcast",
        "rank4", "rank4-unit-dims"])
def test_broadcast_and_transpose_maps(vulkan, rng, shape, in_shapes, in_dims):
    maps = [projection(len(shape), dims) for dims in in_dims]
    kernel = _add_with_maps(shape, in_shapes, maps)
    inputs = _random_inputs(rng, kernel)
    _check(kernel, vulkan.run(kernel, inputs), inputs)


def test_constant_terms_in_maps(vulkan, rng):
    shape = (4, 5, 6)
    # in0 is (7, 4) read at (d2 + 1, d0); in1 is (5, 1, 6) read at (d1, 0, d2).
    maps = [AffineMap(3, ((0, 0, 1, 1), (1, 0, 0, 0))),
            AffineMap(3, ((0, 1, 0, 0), (0, 0, 0, 0), (0, 0, 1, 0)))]
    kernel = _add_with_maps(shape, [(7, 4), (5, 1, 6)], maps)
    inputs = _random_inputs(rng, kernel)
    _check(kernel, vulkan.run(kernel, inputs), inputs)


def test_rank0_kernel(vulkan, rng):
    ops = [Op("arith.constant", (), "f32", float_value=-1.5), Op("arith.mulf", (0, 2), "f32")]
    kernel = elementwise("scalar", (), ["f32"], ["f32"], ops, [3])
    inputs = [np.array(3.0, np.float32)]
    got, = vulkan.run(kernel, inputs)
    assert got.shape == () and got == np.float32(-4.5)


def test_transposed_output(vulkan, rng):
    shape = (6, 10)
    inputs_ = [Operand(0, "f32", shape, identity(2))]
    outputs = [Operand(1, "f32", (10, 6), projection(2, [1, 0]))]
    kernel = Kernel("transpose", shape, inputs_, outputs, [Op("math.absf", (0,), "f32")], [2])
    inputs = _random_inputs(rng, kernel)
    got, = vulkan.run(kernel, inputs)
    np.testing.assert_array_equal(got, np.abs(inputs[0]).T)


def test_linalg_index_gives_each_loop_index(vulkan):
    shape = (3, 4, 5)
    ops = [Op("linalg.index", (), "i32", int_value=d) for d in range(3)]
    ops += [Op("arith.constant", (), "i32", int_value=100), Op("arith.constant", (), "i32",
                                                              int_value=10),
            Op("arith.muli", (1, 4), "i32"), Op("arith.muli", (2, 5), "i32"),
            Op("arith.addi", (6, 7), "i32"), Op("arith.addi", (8, 3), "i32")]
    kernel = elementwise("index", shape, [], ["i32"], ops, [9])
    got, = vulkan.run(kernel, [])
    i, j, k = np.indices(shape)
    np.testing.assert_array_equal(got, 100 * i + 10 * j + k)


def test_outputs_read_by_the_body_see_their_initial_value(vulkan, rng):
    ops = [Op("arith.addf", (0, 1), "f32")]
    kernel = elementwise("accumulate", (100,), ["f32"], ["f32"], ops, [2])
    x = random_input(rng, "f32", (100,))
    got, = vulkan.run(kernel, [x])  # the runner fills outputs with 0xCD bytes
    poison = np.frombuffer(b"\xcd" * 4, np.float32)[0]
    np.testing.assert_allclose(got, x.astype(np.float64) + poison, rtol=RTOL)


def test_several_outputs_and_unused_inputs(vulkan, rng):
    ops = [Op("arith.negf", (0,), "f32"), Op("arith.addi", (2, 2), "i32")]
    kernel = elementwise("multi", (50,), ["f32", "f32", "i32"], ["f32", "i32", "f32"], ops,
                         [6, 7, 0])
    inputs = _random_inputs(rng, kernel)
    _check(kernel, vulkan.run(kernel, inputs), inputs)


def test_constants_of_every_type(vulkan):
    ops = [Op("arith.constant", (), "i32", int_value=0xFFFFFFFF),      # 3: -1
           Op("arith.constant", (), "i32", int_value=INT_MIN),         # 4
           Op("arith.addi", (3, 4), "i32"),                            # 5: INT_MAX (wraps)
           Op("arith.constant", (), "i1", int_value=1),                # 6
           Op("arith.constant", (), "i1", int_value=0),                # 7
           Op("arith.select", (6, 5, 3), "i32"),                       # 8: INT_MAX
           Op("arith.select", (7, 3, 5), "i32"),                       # 9: INT_MAX
           Op("arith.addi", (8, 9), "i32"),                            # 10: -2
           Op("arith.constant", (), "f32", float_value=float("inf")),  # 11
           Op("arith.constant", (), "f32", float_value=0.1)]           # 12
    kernel = elementwise("consts", (3,), [], ["i32", "f32", "f32"], ops, [10, 11, 12])
    ints, infs, tenths = vulkan.run(kernel, [])
    np.testing.assert_array_equal(ints, [-2] * 3)
    assert np.all(np.isposinf(infs))
    np.testing.assert_array_equal(tenths, np.float32(0.1))


def test_i1_logic_inside_the_body(vulkan, rng):
    ops = [Op("arith.cmpf", (0, 1), "i1", predicate="ogt"),     # 3
           Op("arith.cmpf", (0, 1), "i1", predicate="ole"),     # 4
           Op("arith.xori", (3, 4), "i1"),                       # 5 (always true)
           Op("arith.andi", (3, 5), "i1"),                       # 6 (= 3)
           Op("arith.extsi", (6,), "i32"),                       # 7
           Op("arith.extui", (5,), "i32"),                       # 8
           Op("arith.addi", (7, 8), "i32")]                      # 9: 0 if a > b else 1
    kernel = elementwise("bools", (200,), ["f32", "f32"], ["i32"], ops, [9])
    a, b = _random_inputs(rng, kernel)
    got, = vulkan.run(kernel, [a, b])
    np.testing.assert_array_equal(got, np.where(a > b, 0, 1))


# --- edge cases: NaN, infinities, signed zeros, out-of-range conversions -----------------

_SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0,
                     -3.0, 2.5, -2.5, 1e30, -1e30, 7.25], np.float32)


def _pairs() -> tuple[np.ndarray, np.ndarray]:
    a, b = np.meshgrid(_SPECIAL, _SPECIAL)
    return a.ravel(), b.ravel()


@pytest.mark.parametrize("name", ["arith.maximumf", "arith.minimumf", "arith.maxnumf",
                                  "arith.minnumf"])
def test_min_max_nan_and_signed_zero_rules(vulkan, name):
    a, b = _pairs()
    kernel = single_op(name, ["f32", "f32"], "f32", shape=(a.size,))
    got, = vulkan.run(kernel, [a, b])
    expected, = run_reference(kernel, [a, b])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    ok = ~np.isnan(expected)
    np.testing.assert_array_equal(got[ok], expected[ok])
    zeros = (a == 0) & (b == 0)
    want_negative = name in ("arith.minimumf", "arith.minnumf")
    np.testing.assert_array_equal(np.signbit(got[zeros]),
                                  np.signbit(a[zeros]) | np.signbit(b[zeros]) if want_negative
                                  else np.signbit(a[zeros]) & np.signbit(b[zeros]))


@pytest.mark.parametrize("predicate", ["oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq",
                                       "ugt", "uge", "ult", "ule", "une", "uno"])
def test_cmpf_on_nan_and_infinities(vulkan, predicate):
    a, b = _pairs()
    kernel = single_op("arith.cmpf", ["f32", "f32"], "i1", shape=(a.size,), predicate=predicate)
    _check(kernel, vulkan.run(kernel, [a, b]), [a, b])


def test_float_to_int_conversions_saturate(vulkan):
    x = np.array([1.9, -1.9, 0.5, -0.5, 3e9, -3e9, 5e9, np.inf, -np.inf, np.nan,
                  2147483520.0, -2147483648.0, 4294967040.0, 2147483648.0], np.float32)
    for name in ("arith.fptosi", "arith.fptoui"):
        kernel = single_op(name, ["f32"], "i32", shape=(x.size,))
        _check(kernel, vulkan.run(kernel, [x]), [x])
    kernel = single_op("arith.fptosi", ["f32"], "i32", shape=(x.size,))
    got, = vulkan.run(kernel, [x])
    assert list(got[:10]) == [1, -1, 0, 0, INT_MAX, INT_MIN, INT_MAX, INT_MAX, INT_MIN, 0]


def test_integer_division_edge_cases(vulkan):
    a = np.array([INT_MIN, INT_MIN, 7, -7, 7, -7, 0, INT_MAX, -1], np.int32)
    b = np.array([-1, 0, 2, 2, -2, 0, 0, -1, INT_MIN], np.int32)
    results = {}
    for name in ("arith.divsi", "arith.remsi", "arith.divui", "arith.remui"):
        kernel = single_op(name, ["i32", "i32"], "i32", shape=(a.size,))
        results[name], = vulkan.run(kernel, [a, b])
        _check(kernel, [results[name]], [a, b])
    assert list(results["arith.divsi"]) == [INT_MIN, 0, 3, -3, -3, 0, 0, -INT_MAX, 0]
    assert list(results["arith.remsi"]) == [0, 0, 1, -1, 1, 0, 0, 0, -1]


def test_shifts_by_32_or_more(vulkan):
    a = np.array([1, -1, INT_MIN, 0x1234, -8, 5, -5, 3], np.int32)
    b = np.array([31, 31, 1, 32, 33, -1, 40, 0], np.int32)
    expected = {"arith.shli": [INT_MIN, INT_MIN, 0, 0, 0, 0, 0, 3],
                "arith.shrui": [0, 1, 0x40000000, 0, 0, 0, 0, 3],
                "arith.shrsi": [0, -1, INT_MIN // 2, 0, -1, 0, -1, 3]}
    for name, want in expected.items():
        got, = vulkan.run(single_op(name, ["i32", "i32"], "i32", shape=(a.size,)), [a, b])
        assert list(got) == want, name


@pytest.mark.parametrize("amount", [0, 1, 23, 31, 40])
def test_shifts_left_by_a_constant_are_multiplies_with_the_same_bits(vulkan, rng, amount):
    """A left shift of a 32-bit value by a constant is emitted as a multiply by the power of
    two (SwiftShader takes vector shifts lane by lane: emitter.py): no OpShiftLeftLogical is
    left, and every value wraps as the shift would, the extremes included. A constant amount
    of 32 or more folds to 0, as a variable one gives (test_shifts_by_32_or_more)."""
    import irtk
    n = 4096
    mlir = f"""func.func @main(%x: tensor<{n}xi32>) -> tensor<{n}xi32> {{
  %c = arith.constant {amount} : i32
  %e = tensor.empty() : tensor<{n}xi32>
  %r = linalg.generic {{indexing_maps = [affine_map<(a) -> (a)>, affine_map<(a) -> (a)>],
       iterator_types = ["parallel"]}} ins(%x : tensor<{n}xi32>) outs(%e : tensor<{n}xi32>) {{
  ^bb0(%v: i32, %o: i32):
    %s = arith.shli %v, %c : i32
    linalg.yield %s : i32
  }} -> tensor<{n}xi32>
  return %r : tensor<{n}xi32>
}}"""
    x = rng.integers(INT_MIN, INT_MAX, n, dtype=np.int64, endpoint=True).astype(np.int32)
    x[:6] = [0, 1, -1, INT_MIN, INT_MAX, 0x40000000]
    data = irtk.compile_str(mlir, target="vulkan-spirv", vulkan_target=vulkan.profile.name)
    m = irtk.load(data, device=f"vulkan://{vulkan.name}")
    wrapped = (x.astype(np.int64) << min(amount, 32)) & 0xFFFFFFFF
    np.testing.assert_array_equal(m.main(x), wrapped.astype(np.uint32).view(np.int32))
    text = tools.disassemble(_constant_shift_kernel(vulkan.profile, amount).code)
    assert "OpShiftLeftLogical" not in text


def _constant_shift_kernel(profile, amount: int):
    """x << amount with the amount a constant of the body."""
    kernel = Kernel("shl", (8,), [Operand(0, "i32", (8,), identity(1))],
                    [Operand(1, "i32", (8,), identity(1))],
                    [Op("arith.constant", (), "i32", int_value=amount),
                     Op("arith.shli", (0, 2), "i32")], [3], ("parallel",))
    return compile_kernel(kernel, profile)


def test_absi_wraps_at_int_min(vulkan):
    x = np.array([5, -5, 0, INT_MIN, INT_MAX], np.int32)
    got, = vulkan.run(single_op("math.absi", ["i32"], "i32", shape=(5,)), [x])
    assert list(got) == [5, 5, 0, INT_MIN, INT_MAX]


def test_powf_over_its_whole_domain(vulkan):
    base, exponent = np.meshgrid(
        np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0],
                 np.float32),
        np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5,
                  -0.5, 2.5], np.float32))
    x, y = base.ravel(), exponent.ravel()
    kernel = single_op("math.powf", ["f32", "f32"], "f32", shape=(x.size,))
    got, = vulkan.run(kernel, [x, y])
    with np.errstate(all="ignore"):
        expected = np.power(x.astype(np.float64), y.astype(np.float64))
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=0, equal_nan=True)
    zeros = expected == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(expected[zeros]))


def test_tanh_is_finite_for_huge_arguments(vulkan):
    x = np.array([0.0, 1e-4, -1e-4, 0.5, 9.0, 20.0, -20.0, 100.0, -1e30, 1e30, np.inf, -np.inf,
                  np.nan], np.float32)
    kernel = single_op("math.tanh", ["f32"], "f32", shape=(x.size,))
    _check(kernel, vulkan.run(kernel, [x]), [x])


def test_remf_takes_the_sign_of_the_dividend(vulkan):
    a = np.array([5.5, -5.5, 5.5, -5.5, 0.0, -0.0, 1.0, np.inf, 1.0], np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, np.inf, 2.0, 0.0], np.float32)
    kernel = single_op("arith.remf", ["f32", "f32"], "f32", shape=(a.size,))
    got, = vulkan.run(kernel, [a, b])
    np.testing.assert_array_equal(got[:4], [1.5, -1.5, 1.5, -1.5])
    assert got[6] == 1.0  # a finite x modulo an infinite y is x
    assert np.isnan(got[7]) and np.isnan(got[8])


def test_remf_near_integral_quotients(vulkan, rng):
    """x / y just below an integer must not round the remainder past 0 or |y|."""
    y = rng.uniform(0.1, 3.0, 1000).astype(np.float32)
    n = rng.integers(1, 1000, 1000).astype(np.float32)
    x = (y * n * np.float32(1 - 2 ** -23)).astype(np.float32)  # just below n * y
    x = np.where(rng.random(1000) < 0.5, -x, x).astype(np.float32)
    kernel = single_op("arith.remf", ["f32", "f32"], "f32", shape=(1000,))
    got, = vulkan.run(kernel, [x, y])
    expected = np.fmod(x, y)
    assert np.all((np.signbit(got) == np.signbit(x)) | (got == 0))
    assert np.all(np.abs(got) < np.abs(y))
    np.testing.assert_allclose(got, expected, rtol=0, atol=4 * np.spacing(np.abs(x)).max())


@pytest.mark.parametrize("name", ["math.exp", "math.exp2", "math.log", "math.log2",
                                  "math.sqrt", "math.rsqrt", "math.floor", "math.ceil",
                                  "math.trunc", "math.roundeven", "math.absf"])
def test_math_special_values(vulkan, name):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, 1.0, 100.0, -100.0, 2.5, -2.5, 0.5,
                  1e30, -1e30], np.float32)
    kernel = single_op(name, ["f32"], "f32", shape=(x.size,))
    got, = vulkan.run(kernel, [x])
    expected, = run_reference(kernel, [x])
    np.testing.assert_allclose(got, _as_f32(expected), rtol=RTOL, atol=ATOL, equal_nan=True)


def test_bitcast_round_trip_keeps_every_bit(vulkan, rng):
    x = rng.standard_normal(100).astype(np.float32)
    x[:3] = [np.inf, -0.0, np.nan]
    ops = [Op("arith.bitcast", (0,), "i32"), Op("arith.bitcast", (2,), "f32"),
           Op("arith.bitcast", (3,), "i32")]
    kernel = elementwise("bits", (100,), ["f32"], ["i32"], ops, [4])
    got, = vulkan.run(kernel, [x])
    np.testing.assert_array_equal(got, x.view(np.int32))


def test_default_profile_kernels_run_on_every_device(vulkan, rng):
    kernel = _fused((300,))
    compiled = compile_kernel(kernel, VULKAN_PROFILES["default"])
    inputs = [random_input(rng, "f32", (300,), "exp"), random_input(rng, "f32", (300,))]
    _check(kernel, vulkan.run(kernel, inputs, compiled), inputs)


def test_quads_read_each_operand_by_its_kind(vulkan, rng):
    """Quads (4 iterations a unit, profiles with `elementwise_quads`): a row-major input and a
    broadcast row vector read 4 elements at once, a per-row value once per quad, a transposed
    input element by element; an i32 output and linalg.index ride along; the reference result
    everywhere."""
    from irtk.compiler.codegen.spirv.elementwise import (CONTIGUOUS, SCATTERED, UNIFORM,
                                                         quad_kinds)
    rows, cols = 6, 8
    maps = [identity(2), projection(2, [0]), projection(2, [1, 0]), projection(2, [1])]
    ops = [Op("arith.addf", (0, 1), "f32"), Op("arith.mulf", (6, 2), "f32"),   # 6, 7
           Op("arith.addf", (7, 3), "f32"),                                   # 8
           Op("linalg.index", (), "i32", int_value=1), Op("arith.fptosi", (8,), "i32"),
           Op("arith.addi", (9, 10), "i32")]                                  # 9, 10, 11
    kernel = elementwise("quads", (rows, cols), ["f32"] * 4, ["f32", "i32"], ops, [8, 11],
                         maps, [(rows, cols), (rows,), (cols, rows), (cols,)])
    kinds = quad_kinds(kernel, vulkan.profile)
    if vulkan.profile.elementwise_quads:
        assert kinds == [CONTIGUOUS, UNIFORM, SCATTERED, CONTIGUOUS, CONTIGUOUS, CONTIGUOUS]
    else:
        assert kinds is None
    inputs = _random_inputs(rng, kernel)
    inputs = [x * 4 for x in inputs]   # fptosi of values well inside the i32 range
    _check(kernel, vulkan.run(kernel, inputs), inputs)


def test_quad_kinds_follow_the_offsets():
    """Quad kinds from the offset terms alone: a row of 6 is not a multiple of 4, so a
    broadcast row vector wraps inside a quad, and a per-row value changes inside one."""
    from irtk.compiler.codegen.spirv.elementwise import (CONTIGUOUS, SCATTERED, UNIFORM,
                                                         offset_terms, quad_kind)
    ranges = (4, 6)
    row = Operand(0, "f32", (6,), projection(2, [1]))
    per_row = Operand(0, "f32", (4,), projection(2, [0]))
    whole = Operand(0, "f32", (4, 6), identity(2))
    assert quad_kind(*offset_terms(ranges, whole)) == CONTIGUOUS
    assert quad_kind(*offset_terms(ranges, row)) == SCATTERED
    assert quad_kind(*offset_terms(ranges, per_row)) == SCATTERED
    assert quad_kind(*offset_terms((4, 8), Operand(0, "f32", (8,), projection(2, [1])))) == \
        CONTIGUOUS
    assert quad_kind(*offset_terms((4, 8), Operand(0, "f32", (4,), projection(2, [0])))) == \
        UNIFORM
