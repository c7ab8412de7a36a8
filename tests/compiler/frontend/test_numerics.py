"""irtk's small float formats (`irtk.types`, `irtk.hal.numerics`) agree with xDSL's independent
definitions, with which the front end reads float literals."""
from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import builtin

from irtk.hal import numerics
from irtk.types import FLOAT_FORMATS

TYPES = {"f8E4M3FN": builtin.Float8E4M3FNType(), "f8E4M3FNUZ": builtin.Float8E4M3FNUZType(),
         "f8E5M2": builtin.Float8E5M2Type(), "f8E5M2FNUZ": builtin.Float8E5M2FNUZType(),
         "f4E2M1FN": builtin.Float4E2M1FNType()}


def _codes(name: str) -> np.ndarray:
    return np.arange(1 << FLOAT_FORMATS[name].bits, dtype=np.uint8)


def _values(name: str) -> np.ndarray:
    return numerics.from_bits(name, _codes(name)).astype(np.float64)


@pytest.mark.parametrize("name", sorted(TYPES))
def test_decode_matches_xdsl(name):
    ours = _values(name)
    theirs = np.array([TYPES[name].decode_bits(int(b)) for b in _codes(name)])
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    finite = ~np.isnan(ours)
    np.testing.assert_array_equal(ours[finite], theirs[finite])
    np.testing.assert_array_equal(np.signbit(ours[finite]), np.signbit(theirs[finite]))


@pytest.mark.parametrize("name", sorted(TYPES))
def test_round_trip_and_round_to_nearest_even(name):
    values = _values(name)
    finite = values[np.isfinite(values)]
    np.testing.assert_array_equal(numerics.round_to(name, finite), finite)
    again = numerics.from_bits(name, numerics.to_bits(name, finite))
    np.testing.assert_array_equal(again, finite)
    # Midpoints between neighbours round to the one with an even mantissa (bit 0 clear).
    pos = np.unique(finite[finite > 0])
    mids = (pos[:-1] + pos[1:]) / 2
    got = numerics.round_to(name, mids)
    even = np.where(numerics.to_bits(name, pos[:-1]) % 2 == 0, pos[:-1], pos[1:])
    np.testing.assert_array_equal(got, even)


def test_overflow_follows_each_format():
    assert np.isnan(numerics.round_to("f8E4M3FN", np.array([768.0])))[0]   # no inf: NaN
    assert numerics.round_to("f8E5M2", np.array([1e6]))[0] == np.inf        # IEEE-like
    assert numerics.round_to("f4E2M1FN", np.array([100.0]))[0] == 6.0       # no NaN: largest
    assert numerics.round_to("f8E4M3FNUZ", np.array([-0.0]))[0] == 0.0
    assert not np.signbit(numerics.round_to("f8E4M3FNUZ", np.array([-0.0]))[0])


def test_integer_wrapping_and_bf16():
    np.testing.assert_array_equal(numerics.round_to("i8", np.array([127 + 1, -129, 255])),
                                  [-128, 127, -1])
    np.testing.assert_array_equal(numerics.round_to("i4", np.array([9, -8])), [-7, -8])
    x = np.array([1.00390625, 3.0e38, -2.5])       # bf16 keeps 8 mantissa bits
    np.testing.assert_array_equal(numerics.round_to("bf16", x),
                                  [1.0, 1.765625 * 2.0 ** 127, -2.5])
