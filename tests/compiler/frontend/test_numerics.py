"""The evaluator's small-float tables and rounding agree with xDSL's independent definitions."""
from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import builtin

from tests.compiler.frontend import numerics as nm

TYPES = {"f8E4M3FN": builtin.Float8E4M3FNType(), "f8E4M3FNUZ": builtin.Float8E4M3FNUZType(),
         "f8E5M2": builtin.Float8E5M2Type(), "f8E5M2FNUZ": builtin.Float8E5M2FNUZType(),
         "f4E2M1FN": builtin.Float4E2M1FNType()}


@pytest.mark.parametrize("name", sorted(TYPES))
def test_decode_matches_xdsl(name):
    bits = np.arange(1 << nm.FLOAT_WIDTHS[name])
    ours = nm.decode(bits, name)
    theirs = np.array([TYPES[name].decode_bits(int(b)) for b in bits])
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    finite = ~np.isnan(ours)
    np.testing.assert_array_equal(ours[finite], theirs[finite])
    np.testing.assert_array_equal(np.signbit(ours[finite]), np.signbit(theirs[finite]))


@pytest.mark.parametrize("name", sorted(TYPES))
def test_round_trip_and_round_to_nearest_even(name):
    bits = np.arange(1 << nm.FLOAT_WIDTHS[name])
    values = nm.decode(bits, name)
    finite = values[np.isfinite(values)]
    np.testing.assert_array_equal(nm.round_to(finite, name), finite)
    again = nm.decode(nm.encode(finite, name), name)
    np.testing.assert_array_equal(again, finite)
    # Midpoints between neighbours round to the one with an even mantissa (bit 0 clear).
    pos = np.unique(finite[finite > 0])
    mids = (pos[:-1] + pos[1:]) / 2
    got = nm.round_to(mids, name)
    even = np.where(nm.encode(pos[:-1], name) % 2 == 0, pos[:-1], pos[1:])
    np.testing.assert_array_equal(got, even)


def test_overflow_follows_each_format():
    assert np.isnan(nm.round_to(np.array([768.0]), "f8E4M3FN"))[0]      # no inf: NaN
    assert nm.round_to(np.array([1e6]), "f8E5M2")[0] == np.inf           # IEEE-like
    assert nm.round_to(np.array([100.0]), "f4E2M1FN")[0] == 6.0          # no NaN: largest
    assert nm.round_to(np.array([-0.0]), "f8E4M3FNUZ")[0] == 0.0
    assert not np.signbit(nm.round_to(np.array([-0.0]), "f8E4M3FNUZ")[0])


def test_integer_wrapping_and_bf16():
    np.testing.assert_array_equal(nm.wrap(np.array([127 + 1, -129, 255]), "i8"), [-128, 127, -1])
    np.testing.assert_array_equal(nm.wrap(np.array([9, -8]), "i4"), [-7, -8])
    x = np.array([1.00390625, 3.0e38, -2.5])       # bf16 keeps 8 mantissa bits
    np.testing.assert_array_equal(nm.round_to(x, "bf16"),
                                  [1.0, 1.765625 * 2.0 ** 127, -2.5])
