"""Scalar op semantics of every bank: wrapping integers, float32 rounding, IEEE edge cases."""
from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from irtk.errors import RuntimeFailure
from tests.vm.helpers import apply, f32, f64, i32, i64, run

I32_MIN, I32_MAX = -2 ** 31, 2 ** 31 - 1
I64_MIN, I64_MAX = -2 ** 63, 2 ** 63 - 1


def as_f32(x: float) -> float:
    return float(np.float32(x))


@pytest.mark.parametrize("op, a, b, expected", [
    ("add.i32", I32_MAX, 1, I32_MIN),
    ("sub.i32", I32_MIN, 1, I32_MAX),
    ("mul.i32", 65536, 65536, 0),
    ("mul.i32", -3, 7, -21),
    ("div.s.i32", -7, 2, -3),
    ("div.s.i32", I32_MIN, -1, I32_MIN),
    ("div.u.i32", -1, 2, I32_MAX),
    ("rem.s.i32", -7, 2, -1),
    ("rem.s.i32", 7, -2, 1),
    ("rem.u.i32", -1, 10, 5),
    ("and.i32", 0b1100, 0b1010, 0b1000),
    ("or.i32", 0b1100, 0b1010, 0b1110),
    ("xor.i32", -1, 0b1010, ~0b1010),
    ("shl.i32", 1, 31, I32_MIN),
    ("shl.i32", 1, 33, 2),          # the shift amount is taken modulo the width
    ("shr.s.i32", -8, 1, -4),
    ("shr.u.i32", -8, 28, 15),
    ("min.s.i32", -1, 1, -1),
    ("max.s.i32", -1, 1, 1),
    ("min.u.i32", -1, 1, 1),
    ("max.u.i32", -1, 1, -1),
    ("add.i64", I64_MAX, 1, I64_MIN),
    ("mul.i64", 2 ** 32, 2 ** 32, 0),
    ("div.s.i64", -9, 4, -2),
    ("div.u.i64", -1, 2, I64_MAX),
    ("rem.s.i64", -9, 4, -1),
    ("shl.i64", 1, 63, I64_MIN),
    ("shr.u.i64", -1, 60, 15),
    ("min.u.i64", -1, 0, 0),
])
def test_integer_binary_ops_wrap_like_twos_complement(op, a, b, expected):
    assert apply(op, a, b) == expected


@pytest.mark.parametrize("op, a, expected", [
    ("neg.i32", I32_MIN, I32_MIN),
    ("neg.i32", 5, -5),
    ("not.i32", 0, -1),
    ("abs.i32", -5, 5),
    ("abs.i32", I32_MIN, I32_MIN),
    ("neg.i64", I64_MIN, I64_MIN),
    ("not.i64", -1, 0),
    ("cmp.nz.i32", 7, 1),
    ("cmp.nz.i64", 0, 0),
])
def test_integer_unary_ops(op, a, expected):
    assert apply(op, a) == expected


@pytest.mark.parametrize("op", ["div.s.i32", "div.u.i32", "rem.s.i64", "rem.u.i64"])
def test_integer_division_by_zero_is_a_runtime_failure_naming_the_place(op):
    with pytest.raises(RuntimeFailure, match=r"function 'main' at offset 0: .*by zero"):
        apply(op, 1, 0)


@pytest.mark.parametrize("op, a, b, expected", [
    ("cmp.eq.i32", 3, 3, 1), ("cmp.ne.i32", 3, 3, 0),
    ("cmp.lt.s.i32", -1, 0, 1), ("cmp.lt.u.i32", -1, 0, 0),
    ("cmp.lte.s.i32", 2, 2, 1), ("cmp.lte.u.i32", 0, -1, 1),
    ("cmp.lt.s.i64", I64_MIN, 0, 1), ("cmp.lt.u.i64", I64_MIN, 0, 0),
    ("cmp.eq.f32", 1.5, 1.5, 1), ("cmp.eq.f64", math.nan, math.nan, 0),
    ("cmp.ne.f64", math.nan, math.nan, 1), ("cmp.lt.f32", 1.0, 2.0, 1),
    ("cmp.lte.f64", 2.0, 2.0, 1), ("cmp.lt.f64", math.nan, 1.0, 0),
])
def test_compares_give_zero_or_one(op, a, b, expected):
    assert apply(op, a, b) == expected


def test_cmp_nan():
    assert apply("cmp.nan.f32", math.nan) == 1
    assert apply("cmp.nan.f64", 1.0) == 0


def test_f32_ops_round_to_float32():
    assert apply("add.f32", 0.1, 0.2) == as_f32(as_f32(0.1) + as_f32(0.2))
    assert apply("mul.f32", 1.0000001, 1.0000001) == as_f32(np.float32(1.0000001) ** 2)
    assert apply("div.f32", 1.0, 3.0) == as_f32(1 / 3)
    assert apply("sqrt.f32", 2.0) == float(np.sqrt(np.float32(2.0)))
    assert apply("add.f32", 3e38, 3e38) == math.inf


def test_f32_arguments_are_rounded_on_entry():
    assert apply("mov.f32", 0.1) == as_f32(0.1)


def test_f64_ops_keep_double_precision():
    assert apply("add.f64", 0.1, 0.2) == 0.1 + 0.2
    assert apply("div.f64", 1.0, 3.0) == 1 / 3


@pytest.mark.parametrize("op, args, expected", [
    ("div.f64", (1.0, 0.0), math.inf),
    ("div.f64", (-1.0, 0.0), -math.inf),
    ("div.f32", (1.0, -0.0), -math.inf),
    ("rem.f64", (7.5, 2.0), 1.5),
    ("rem.f64", (-7.5, 2.0), -1.5),
    ("exp.f64", (1000.0,), math.inf),
    ("exp2.f32", (10.0,), 1024.0),
    ("log.f64", (0.0,), -math.inf),
    ("log2.f64", (8.0,), 3.0),
    ("rsqrt.f64", (4.0,), 0.5),
    ("rsqrt.f64", (0.0,), math.inf),
    ("pow.f64", (2.0, 10.0), 1024.0),
    ("pow.f64", (10.0, 400.0), math.inf),
    ("pow.f64", (0.0, -1.0), math.inf),
    ("floor.f64", (-1.5,), -2.0),
    ("ceil.f32", (1.25,), 2.0),
    ("round.f64", (2.5,), 3.0),
    ("round.f64", (-2.5,), -3.0),
    ("round.f64", (0.49999999999999994,), 0.0),
    ("abs.f32", (-2.0,), 2.0),
    ("neg.f64", (2.0,), -2.0),
    ("min.f64", (1.0, -1.0), -1.0),
    ("max.f32", (1.0, -1.0), 1.0),
    ("fma.f64", (2.0, 3.0, 4.0), 10.0),
    ("tanh.f64", (0.0,), 0.0),
    ("sin.f64", (0.0,), 0.0),
    ("cos.f64", (0.0,), 1.0),
])
def test_float_ops_follow_ieee(op, args, expected):
    assert apply(op, *args) == expected


@pytest.mark.parametrize("op, args", [
    ("sqrt.f64", (-1.0,)), ("log.f32", (-1.0,)), ("rem.f64", (1.0, 0.0)),
    ("min.f64", (math.nan, 1.0)), ("max.f32", (1.0, math.nan)), ("pow.f64", (-8.0, 1 / 3)),
    ("sin.f64", (math.inf,)), ("div.f64", (0.0, 0.0)),
])
def test_float_ops_give_nan_where_ieee_does(op, args):
    assert math.isnan(apply(op, *args))


def test_fma_rounds_once():
    a, b, c = 1.0 + 2 ** -30, 1.0 - 2 ** -30, -1.0
    assert apply("fma.f64", a, b, c) == -(2 ** -60)   # a*b+c in two roundings gives 0.0


def test_negative_zero_survives_floor_and_ceil():
    assert math.copysign(1.0, apply("ceil.f64", -0.5)) == -1.0
    assert math.copysign(1.0, apply("min.f64", 0.0, -0.0)) == -1.0


@pytest.mark.parametrize("op, a, expected", [
    ("ext.i8.i32.s", 0xFF, -1), ("ext.i8.i32.u", -1, 255),
    ("ext.i16.i32.s", 0x8000, -32768), ("ext.i16.i32.u", -1, 65535),
    ("trunc.i32.i8", 0x1234, 0x34), ("trunc.i32.i16", 0x12345, 0x2345),
    ("ext.i32.i64.s", -1, -1), ("ext.i32.i64.u", -1, 2 ** 32 - 1),
    ("trunc.i64.i32", 2 ** 32 + 5, 5), ("trunc.i64.i32", 2 ** 31, I32_MIN),
    ("cast.si32.f32", 16777217, 16777216.0), ("cast.ui32.f32", -1, 4294967296.0),
    ("cast.si32.f64", -5, -5.0), ("cast.ui32.f64", -1, 4294967295.0),
    ("cast.si64.f64", I64_MIN, -9.223372036854775808e18),
    ("cast.ui64.f64", -1, 1.8446744073709552e19),
    ("cast.si64.f32", 2 ** 24 + 3, 16777220.0),
    ("cast.ui64.f32", -1, 1.8446744073709552e19),
    ("cast.f32.si32", -2.75, -2), ("cast.f32.si32", 1e20, I32_MAX),
    ("cast.f64.si32", math.nan, 0), ("cast.f64.si32", -1e20, I32_MIN),
    ("cast.f32.ui32", 4e9, -294967296), ("cast.f64.ui32", -3.0, 0),
    ("cast.f64.si64", 1e30, I64_MAX), ("cast.f32.ui64", 1.5, 1),
    ("cast.f32.f64", 0.5, 0.5), ("cast.f64.f32", 0.1, float(np.float32(0.1))),
    ("cast.f64.f32", 1e300, math.inf),
    ("bitcast.f32.i32", 1.0, 0x3F800000), ("bitcast.i32.f32", 0x40000000, 2.0),
    ("bitcast.f64.i64", -0.0, I64_MIN), ("bitcast.i64.f64", 0x3FF0000000000000, 1.0),
])
def test_casts(op, a, expected):
    assert apply(op, a) == expected


def test_int_to_f32_rounds_ties_to_even_like_numpy():
    rng = np.random.default_rng(7)
    for value in rng.integers(-2 ** 63, 2 ** 63 - 1, size=50, dtype=np.int64):
        assert apply("cast.si64.f32", int(value)) == float(np.float32(value))


@pytest.mark.parametrize("bank, a, b", [("i32", 5, 9), ("i64", 2 ** 40, 3), ("f32", 1.5, 2.5),
                                        ("f64", 0.25, 0.75)])
def test_select_picks_by_condition(bank, a, b):
    assert apply(f"select.{bank}", 1, a, b) == a
    assert apply(f"select.{bank}", 0, a, b) == b


def test_constants_of_every_bank():
    def body(b):
        b.emit("const.i32", i32(0), -5)
        b.emit("const.i64", i64(0), 2 ** 40)
        b.emit("const.f32", f32(0), 0.1)
        b.emit("const.f64", f64(0), 0.1)
        b.emit("return", [i32(0), i64(0), f32(0), f64(0)])
    assert run("0v_iIfF", body) == [-5, 2 ** 40, struct.unpack("<f", struct.pack("<f", 0.1))[0],
                                    0.1]
