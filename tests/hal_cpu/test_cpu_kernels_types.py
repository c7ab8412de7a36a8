"""Every scalar type through elementwise kernels: storage, per-op rounding, wrap-around, casts."""
from __future__ import annotations

import math

import numpy as np
import pytest

from irtk import types
from irtk.hal import numerics

from .cpu_kernel_builder import elementwise, op, run, workgroups_for

FLOATS = list(types.FLOAT_TYPES)
INTS = {t: types.scalar_type(t).bits for t in ("i4", "i8", "i16", "i32", "i64")}


def _float_values(t: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """Values of `t` (as float64): random, plus the type's edge values."""
    scale = {"f8E4M3FNUZ": 8.0, "f8E4M3FN": 8.0, "f4E2M1FN": 2.0}.get(t, 30.0)
    x = rng.standard_normal(n) * scale
    edges = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-30]
    return numerics.round_to(t, np.concatenate([edges, x])).astype(np.float64)


def _run(device, name: str, in_types: list[str], out_type: str, inputs: list[np.ndarray],
         **attrs) -> np.ndarray:
    n = inputs[0].size
    ops = [op(name, *range(len(inputs)), result_type=out_type, **attrs)]
    data = elementwise("k", [n], in_types, [out_type], ops, [len(inputs) + 1], tile_size=16)
    out, = run(device, data, inputs, [((n,), out_type)], workgroups_for(n, 16),
               input_types=in_types)
    return out


def _same(got: np.ndarray, want: np.ndarray) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(got, want)
    ok = np.isnan(want) | (np.signbit(got) == np.signbit(want))
    assert ok.all(), (got[~ok], want[~ok])


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("name, ref", [("arith.addf", np.add), ("arith.subf", np.subtract),
                                       ("arith.mulf", np.multiply), ("arith.divf", np.divide)])
def test_float_arithmetic_rounds_once_to_the_type(device, rng, t, name, ref):
    a, b = _float_values(t, rng, 120), _float_values(t, rng, 120)[::-1].copy()
    got = _run(device, name, [t, t], t, [a, b])
    with np.errstate(all="ignore"):
        want = numerics.round_to(t, ref(a, b)) if t != "f64" else ref(a, b)
    _same(got, want)


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("name, ref", [("math.exp", np.exp), ("math.sqrt", np.sqrt),
                                       ("math.tanh", np.tanh), ("math.erf", None)])
def test_float_math_is_within_one_unit_of_the_type(device, rng, t, name, ref):
    a = _float_values(t, rng, 100)
    a = a[np.isfinite(a)]
    a = np.where(np.abs(a) > 8, a / 64, a) if name == "math.exp" else a
    if name == "math.sqrt":
        a = np.abs(a)
    a = numerics.round_to(t, a).astype(np.float64)
    got = _run(device, name, [t], t, [a]).astype(np.float64)
    with np.errstate(all="ignore"):
        exact = np.vectorize(math.erf)(a) if ref is None else ref(a)
    bits = 1 + types.FLOAT_FORMATS[t].mantissa_bits
    # The result is the exact value rounded to the type, or one of that value's neighbours
    # (two units of f32 for the types computed in f32 registers).
    eps = 2.0 ** (2 - min(bits, 23))
    candidates = [numerics.round_to(t, exact * f).astype(np.float64)
                  for f in (1 - eps, 1.0, 1 + eps)]
    ok = np.zeros(a.shape, dtype=bool)
    for c in candidates:
        lo, hi = np.minimum(c, candidates[1]), np.maximum(c, candidates[1])
        ok |= (got >= lo) & (got <= hi)
    ok |= np.isnan(got) & np.isnan(candidates[1])
    assert ok.all(), list(zip(a[~ok], got[~ok], exact[~ok]))


@pytest.mark.parametrize("t", [t for t in FLOATS if t not in ("f8E8M0FNU", "f4E2M1FN")])
def test_max_min_nan_rules_on_every_float_type(device, t):
    nan = np.nan
    a = np.array([1.0, nan, -0.0, 2.0, nan])
    b = np.array([nan, 3.0, 0.0, 2.0, nan])
    mx = _run(device, "arith.maximumf", [t, t], t, [a, b])
    assert np.isnan(mx[:2]).all() and mx[2] == 0 and (not np.signbit(mx[2]) or t.endswith("UZ"))
    mn = _run(device, "arith.minnumf", [t, t], t, [a, b])
    _same(mn[:2], numerics.round_to(t, np.array([1.0, 3.0])))
    assert np.isnan(mn[4])


def _wrap(v: int, bits: int) -> int:
    return (v + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)


def _int_values(t: str, rng: np.random.Generator, n: int) -> np.ndarray:
    bits = INTS[t]
    lo, hi = -2 ** (bits - 1), 2 ** (bits - 1) - 1
    edges = [0, 1, -1, 2, lo, hi, lo + 1, bits, bits - 1, bits + 1]
    x = rng.integers(lo, hi, n, endpoint=True, dtype=np.int64)
    return np.array([_wrap(e, bits) for e in edges] + x.tolist(), dtype=np.int64)


def _int_ref(name: str, a: int, b: int, bits: int) -> int:
    ua, ub = a % 2 ** bits, b % 2 ** bits
    if name in ("arith.divsi", "arith.remsi", "arith.ceildivsi", "arith.floordivsi",
                "arith.divui", "arith.remui", "arith.ceildivui") and b == 0:
        return 0
    trunc = (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1) if b else 0
    r = {"arith.addi": lambda: a + b, "arith.subi": lambda: a - b, "arith.muli": lambda: a * b,
         "arith.divsi": lambda: trunc, "arith.remsi": lambda: a - trunc * b,
         "arith.floordivsi": lambda: a // b, "arith.ceildivsi": lambda: -((-a) // b),
         "arith.divui": lambda: ua // ub, "arith.remui": lambda: ua % ub,
         "arith.ceildivui": lambda: -((-ua) // ub),
         "arith.maxui": lambda: max(ua, ub), "arith.minsi": lambda: min(a, b),
         "arith.shli": lambda: ua << ub if ub < bits else 0,
         "arith.shrui": lambda: ua >> ub if ub < bits else 0,
         "arith.shrsi": lambda: a >> min(ub, bits - 1)}[name]()
    return _wrap(r, bits)


@pytest.mark.parametrize("t", list(INTS))
@pytest.mark.parametrize("name", ["arith.addi", "arith.subi", "arith.muli", "arith.divsi",
                                  "arith.remsi", "arith.floordivsi", "arith.ceildivsi",
                                  "arith.divui", "arith.remui", "arith.ceildivui",
                                  "arith.maxui", "arith.minsi", "arith.shli", "arith.shrui",
                                  "arith.shrsi"])
def test_integer_ops_wrap_at_every_width(device, rng, t, name):
    bits = INTS[t]
    a = _int_values(t, rng, 60)
    b = _int_values(t, rng, 60)
    a, b = (g.ravel() for g in np.meshgrid(a[:10], b[:10]))
    a = np.concatenate([a, _int_values(t, rng, 60)[10:]])
    b = np.concatenate([b, _int_values(t, rng, 60)[10:]])
    if name.startswith("arith.sh"):
        b = np.where(rng.random(b.size) < 0.8, np.abs(b) % (bits + 3), b)
    got = _run(device, name, [t, t], t, [a, b]).astype(np.int64)
    want = [_int_ref(name, int(x), int(y), bits) for x, y in zip(a, b)]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("t", list(INTS))
def test_bit_counting_ops(device, rng, t):
    bits = INTS[t]
    a = _int_values(t, rng, 40)
    u = [int(x) % 2 ** bits for x in a]
    for name, ref in (("math.ctpop", lambda v: bin(v).count("1")),
                      ("math.ctlz", lambda v: bits - v.bit_length()),
                      ("math.cttz", lambda v: bits if v == 0 else (v & -v).bit_length() - 1)):
        got = _run(device, name, [t], t, [a]).astype(np.int64)
        np.testing.assert_array_equal(got, [_wrap(ref(v), bits) for v in u], err_msg=name)


def test_ipowi_wraps_and_handles_negative_exponents(device, rng):
    a = np.array([3, -3, 2, 1, -1, -1, 0, 5, 7], dtype=np.int64)
    b = np.array([5, 3, 31, -4, -3, -2, 0, -1, 40], dtype=np.int64)
    got = _run(device, "math.ipowi", ["i32", "i32"], "i32", [a, b]).astype(np.int64)
    want = [_wrap(x ** y, 32) if y >= 0 else (1 if x == 1 else (-1) ** (-y) if x == -1 else 0)
            for x, y in zip(a.tolist(), b.tolist())]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("src, dst", [("i64", "f32"), ("i8", "bf16"), ("i16", "f16"),
                                      ("i32", "f8E4M3FN"), ("i4", "f64")])
def test_sitofp_rounds_once(device, rng, src, dst):
    a = _int_values(src, rng, 80)
    got = _run(device, "arith.sitofp", [src], dst, [a]).astype(np.float64)
    want = numerics.round_to(dst, a.astype(np.float32) if dst == "f32" else a.astype(np.float64))
    np.testing.assert_array_equal(got, want.astype(np.float64))


@pytest.mark.parametrize("src, dst", [("f32", "i8"), ("f64", "i64"), ("bf16", "i16"),
                                      ("f16", "i4"), ("f32", "i32")])
def test_fptosi_and_fptoui_truncate_and_saturate(device, rng, src, dst):
    bits = INTS[dst]
    a = numerics.round_to(src, np.concatenate([rng.standard_normal(60) * 2.0 ** (bits - 1),
                                               [np.nan, np.inf, -np.inf, -0.7, 0.7]]))
    a = a.astype(np.float64)
    got = _run(device, "arith.fptosi", [src], dst, [a]).astype(np.int64)
    lo, hi = -2 ** (bits - 1), 2 ** (bits - 1) - 1
    want = [0 if np.isnan(x) else int(min(max(np.trunc(x), lo), hi)) for x in a]
    np.testing.assert_array_equal(got, want)
    got = _run(device, "arith.fptoui", [src], dst, [a]).astype(np.int64)
    want = [0 if np.isnan(x) else _wrap(int(min(max(np.trunc(x), 0), 2 ** bits - 1)), bits)
            for x in a]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("src, dst", [("f32", "bf16"), ("f32", "f16"), ("f64", "f32"),
                                      ("f64", "f16"), ("f64", "bf16"),
                                      ("f32", "f8E4M3FN"), ("f16", "f8E5M2"),
                                      ("f32", "f4E2M1FN"), ("bf16", "f8E8M0FNU")])
def test_truncf_and_extf(device, rng, src, dst):
    a = _float_values(src, rng, 100)
    if src == "f64":
        # Just past a midpoint of the narrow type, where rounding through f32 first would land
        # on the midpoint and round to even: the conversion must round once.
        ulp = 2.0 ** -types.FLOAT_FORMATS[dst].mantissa_bits      # of 1.0
        a = np.concatenate([a, [1 + ulp / 2 + 2.0 ** -40, -(3 + ulp + 2.0 ** -38),
                                2.5 * 2.0 ** -24 + 2.0 ** -60]])   # the last: an f16 subnormal
    got = _run(device, "arith.truncf", [src], dst, [a])
    _same(got, numerics.round_to(dst, a))
    back = _run(device, "arith.extf", [dst], src, [got.astype(np.float64)])
    _same(back, got)


@pytest.mark.parametrize("a_t, b_t", [("f16", "i16"), ("bf16", "i16"), ("f32", "i32"),
                                      ("f64", "i64"), ("f8E5M2", "i8"), ("f4E2M1FN", "i4")])
def test_bitcast_round_trips(device, rng, a_t, b_t):
    a = _float_values(a_t, rng, 50)
    a = a[~np.isnan(a)]
    as_int = _run(device, "arith.bitcast", [a_t], b_t, [a]).astype(np.int64)
    bits = INTS[b_t]
    codes = numerics.to_bits(a_t, numerics.round_to(a_t, a)).astype(np.int64)
    np.testing.assert_array_equal(as_int, [_wrap(int(c), bits) for c in codes])
    back = _run(device, "arith.bitcast", [b_t], a_t, [as_int])
    _same(back, numerics.round_to(a_t, a))


@pytest.mark.parametrize("src, dst, kind", [("i4", "i32", "extsi"), ("i4", "i8", "extui"),
                                            ("i64", "i16", "trunci"), ("i1", "i64", "extsi"),
                                            ("i8", "i32", "index_cast"),
                                            ("i32", "i64", "index_castui"),
                                            ("i32", "i4", "index_cast")])
def test_integer_width_casts(device, rng, src, dst, kind):
    if src == "i1":
        a = np.array([0, 1, 1, 0])
        want = [0, -1, -1, 0]
    else:
        a = _int_values(src, rng, 50)
        sbits, dbits = INTS[src], INTS[dst]
        if kind in ("extui", "index_castui"):
            want = [_wrap(int(x) % 2 ** sbits, dbits) for x in a]
        else:
            want = [_wrap(int(x), dbits) for x in a]
    got = _run(device, f"arith.{kind}", [src], dst, [a]).astype(np.int64)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("t", ["i4", "f4E2M1FN"])
def test_packed_types_read_and_write_odd_counts_across_tiles(device, rng, t):
    n = 37                                   # odd: the last byte holds one element
    is_float = types.is_float(t)
    a = _float_values(t, rng, n)[:n] if is_float else _int_values(t, rng, n)[:n]
    a = np.where(np.isnan(a), 0, a) if is_float else a
    name = "arith.negf" if is_float else "arith.subi"
    ins = [t] if is_float else [t, t]
    inputs = [a] if is_float else [np.zeros(n, np.int64), a]
    got = _run(device, name, ins, t, inputs)
    want = numerics.round_to(t, -a.astype(np.float64) if is_float else -a)
    _same(got, want)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("name, ref", [
    ("arith.negf", np.negative), ("math.absf", np.abs), ("math.floor", np.floor),
    ("math.ceil", np.ceil), ("math.trunc", np.trunc), ("math.roundeven", np.rint),
    ("math.round", _round_half_away)])
def test_exact_unary_float_ops(device, rng, t, name, ref):
    a = _float_values(t, rng, 100)
    _same(_run(device, name, [t], t, [a]), numerics.round_to(t, ref(a)))


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("name, ref", [
    ("arith.remf", np.fmod), ("math.copysign", np.copysign), ("arith.maximumf", None),
    ("arith.minnumf", np.fmin), ("math.powf", np.power), ("math.atan2", np.arctan2)])
def test_binary_float_ops_against_float64(device, rng, t, name, ref):
    a = _float_values(t, rng, 80)
    b = _float_values(t, rng, 80)[::-1].copy()
    if name == "math.powf":
        a, b = np.abs(a), numerics.round_to(t, np.clip(b, -3, 3)).astype(np.float64)
    got = _run(device, name, [t, t], t, [a, b]).astype(np.float64)
    with np.errstate(all="ignore"):
        if ref is None:   # maximumf: NaN wins, +0 is above -0
            zeros = (a == 0) & (b == 0)
            exact = np.where(zeros, np.where(np.signbit(a) & np.signbit(b), -0.0, 0.0),
                             np.maximum(a, b))
            exact = np.where(np.isnan(a) | np.isnan(b), np.nan, exact)
        else:
            exact = ref(a, b)
    want = numerics.round_to(t, exact).astype(np.float64)
    if name in ("math.powf", "math.atan2") and t in ("f32", "f64"):
        np.testing.assert_allclose(got, want, rtol=4e-7 if t == "f32" else 1e-15)
    elif name in ("math.powf", "math.atan2"):
        bits = 1 + types.FLOAT_FORMATS[t].mantissa_bits
        finite = np.isfinite(want) & np.isfinite(got)
        np.testing.assert_allclose(got[finite], want[finite], rtol=2.0 ** (1 - bits))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    else:
        _same(got, want)


@pytest.mark.parametrize("t", ["f16", "bf16", "f32", "f8E5M2", "f8E4M3FNUZ"])
def test_fma_rounds_the_fused_result_once(device, rng, t):
    a, b, c = (_float_values(t, rng, 60) for _ in range(3))
    got = _run(device, "math.fma", [t, t, t], t, [a, b, c])
    with np.errstate(all="ignore"):
        _same(got, numerics.round_to(t, a * b + c))


@pytest.mark.parametrize("t", ["f16", "bf16", "f8E4M3FN", "f8E5M2FNUZ"])
@pytest.mark.parametrize("predicate, ref", [("olt", np.less), ("uge", lambda a, b: ~(a < b)),
                                            ("une", np.not_equal), ("ord", None)])
def test_cmpf_on_narrow_floats(device, rng, t, predicate, ref):
    a = _float_values(t, rng, 60)
    b = np.concatenate([a[:20], _float_values(t, rng, 60)[20:]])
    got = _run(device, "arith.cmpf", [t, t], "i1", [a, b], predicate=predicate)
    with np.errstate(invalid="ignore"):
        want = ~(np.isnan(a) | np.isnan(b)) if ref is None else ref(a, b)
    np.testing.assert_array_equal(got, want.astype(np.uint8))


@pytest.mark.parametrize("t, value", [("f32", 2.5), ("i64", -7), ("bf16", 1.0 / 3), ("i1", 1)])
def test_rank_zero_kernel_yields_a_constant(device, t, value):
    attrs = {"float_value": value} if t[0] in "fb" else {"int_value": value}
    data = elementwise("k", [], [], [t], [op("arith.constant", result_type=t, **attrs)], [1],
                       tile_size=1)
    out, = run(device, data, [], [((), t)], (1, 1, 1))
    want = numerics.round_to(t, np.array(value, dtype=np.float64 if t[0] in "fb" else np.int64))
    np.testing.assert_array_equal(out, want.astype(np.uint8) if t == "i1" else want)
