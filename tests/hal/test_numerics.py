"""Element storage and rounding for every scalar type, against independent references."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from irtk import types
from irtk.hal import numerics

SMALL = list(types.SMALL_FLOAT_TYPES)


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


# Known codes of each small float format (value of the code, by the format's definition).
KNOWN = {
    "f8E4M3FN": {0x00: 0.0, 0x01: 2.0 ** -9, 0x08: 2.0 ** -6, 0x38: 1.0, 0x7E: 448.0,
                 0xFE: -448.0, 0x80: -0.0},
    "f8E4M3FNUZ": {0x01: 2.0 ** -10, 0x40: 1.0, 0x7F: 240.0, 0xFF: -240.0},
    "f8E5M2": {0x01: 2.0 ** -16, 0x3C: 1.0, 0x7B: 57344.0, 0x7C: np.inf, 0xFC: -np.inf},
    "f8E5M2FNUZ": {0x01: 2.0 ** -17, 0x40: 1.0, 0x7F: 57344.0, 0xFF: -57344.0},
    "f8E8M0FNU": {0x00: 2.0 ** -127, 0x7F: 1.0, 0x80: 2.0, 0xFE: 2.0 ** 127},
    "f4E2M1FN": {0x0: 0.0, 0x1: 0.5, 0x2: 1.0, 0x3: 1.5, 0x4: 2.0, 0x5: 3.0, 0x6: 4.0, 0x7: 6.0,
                 0xF: -6.0, 0x9: -0.5},
}
NAN_CODES = {"f8E4M3FN": [0x7F, 0xFF], "f8E4M3FNUZ": [0x80], "f8E5M2": [0x7D, 0x7E, 0xFF],
             "f8E5M2FNUZ": [0x80], "f8E8M0FNU": [0xFF], "f4E2M1FN": []}


@pytest.mark.parametrize("t", SMALL)
def test_small_float_codes_decode_to_their_values(t):
    codes = np.array(list(KNOWN[t]), dtype=np.uint8)
    values = numerics.from_bits(t, codes)
    np.testing.assert_array_equal(values, np.array(list(KNOWN[t].values()), dtype=np.float32))
    assert np.signbit(values).tolist() == [np.signbit(v) for v in KNOWN[t].values()]
    assert np.isnan(numerics.from_bits(t, np.array(NAN_CODES[t], dtype=np.uint8))).all()


def _reference_round(t: str, x: float) -> float:
    """Round to nearest, ties to the even code, by brute force over every code of the type;
    then the type's overflow rule."""
    f = types.FLOAT_FORMATS[t]
    codes = np.arange(1 << f.bits, dtype=np.uint8)
    values = numerics.from_bits(t, codes).astype(np.float64)
    finite = np.isfinite(values)
    vmax = values[finite].max()
    if np.isnan(x):
        return 0.0 if f.kind == "finite" else np.nan
    if not f.signed and x < 0:
        return np.nan
    mags = values[finite & (values >= 0)]
    mag_codes = codes[finite & (values >= 0)]
    a = abs(x)
    if a > 2 * vmax:
        a = 2 * vmax                        # beyond any rounding: overflow
    step = np.diff(np.sort(mags))[-1]
    cands = np.append(mags, vmax + step)   # the first value past the largest: overflow
    cand_codes = np.append(mag_codes, int(mag_codes[np.argmax(mags)]) + 1)
    dist = np.abs(cands - a)
    best = np.flatnonzero(dist == dist.min())
    if len(best) == 1:
        pick = best[0]
    elif not f.mantissa_bits:               # a lone significand bit is odd: ties round up
        pick = best[np.argmax(cands[best])]
    else:
        pick = next(i for i in best if cand_codes[i] % 2 == 0)
    r = cands[pick]
    if r > vmax:
        if f.has_inf:
            r = np.inf
        elif f.kind == "finite":
            r = vmax
        else:
            return np.nan
    if not f.mantissa_bits and r == 0:
        r = mags.min()
    if f.kind == "fnuz" and r == 0:
        return 0.0
    return -r if x < 0 or (x == 0 and np.signbit(x) and f.signed) else r


@pytest.mark.parametrize("t", SMALL)
def test_small_float_rounding_matches_brute_force_nearest_even(t, rng):
    f = types.FLOAT_FORMATS[t]
    vmax = float(np.nanmax(np.abs(np.where(np.isinf(numerics._table(t).values), np.nan,
                                           numerics._table(t).values))))
    values = numerics.from_bits(t, np.arange(1 << f.bits, dtype=np.uint8)).astype(np.float64)
    finite = np.sort(values[np.isfinite(values)])
    midpoints = (finite[1:] + finite[:-1]) / 2          # every tie
    x = np.concatenate([
        rng.standard_normal(300) * vmax / 4, rng.uniform(-2, 2, 200), midpoints,
        np.nextafter(midpoints, np.inf), np.nextafter(midpoints, -np.inf),
        [0.0, -0.0, np.inf, -np.inf, np.nan, vmax, -vmax, vmax * 1.06, vmax * 1.2, 1e30,
         -1e30, 1e-30, -1e-30]])
    got = numerics.round_to(t, x).astype(np.float64)
    want = np.array([_reference_round(t, v) for v in x])
    np.testing.assert_array_equal(got, want)
    same_sign = np.isnan(want) | (np.signbit(got) == np.signbit(want))
    assert same_sign.all(), x[~same_sign]


def test_bf16_rounds_once_from_float32_and_float64(rng):
    x32 = np.concatenate([rng.standard_normal(2000).astype(np.float32),
                          np.array([1.00390625, 1.01171875, 3.4e38, -3.4e38, np.nan, np.inf,
                                    -0.0, 1e-40], dtype=np.float32)])
    got = numerics.round_to("bf16", x32)
    # Reference: the two bf16 neighbours of each value, pick the nearer, ties to even.
    bits = x32.view(np.uint32) & np.uint32(0xFFFF0000)
    lo = bits.view(np.float32).astype(np.float64)
    x = x32.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        hi = (bits + np.uint32(0x10000)).view(np.float32).astype(np.float64)
        hi = np.where(np.isinf(hi) & np.isfinite(x), np.copysign(2.0 ** 128, x), hi)
        pick_hi = (np.abs(hi - x) < np.abs(x - lo)) | \
            ((np.abs(hi - x) == np.abs(x - lo)) & ((bits >> np.uint32(16)) & np.uint32(1) == 1))
    want = np.where(pick_hi, hi, lo)
    want = np.where(np.isnan(x) | np.isinf(x), x, want)
    want = np.where(np.abs(want) == 2.0 ** 128, np.copysign(np.inf, x), want)  # overflow
    np.testing.assert_array_equal(got.astype(np.float64), want)
    # From float64: one rounding, not f64 -> f32 -> bf16.
    tricky = np.array([1 + 2.0 ** -8 + 2.0 ** -40, 1 + 2.0 ** -8, -(1 + 2.0 ** -8 + 2.0 ** -30)])
    np.testing.assert_array_equal(numerics.round_to("bf16", tricky),
                                  np.array([1 + 2.0 ** -7, 1.0, -(1 + 2.0 ** -7)], np.float32))


@pytest.mark.parametrize("t", ["f16", "bf16", "f32", "f64", *SMALL])
def test_float_storage_round_trips_every_value_of_the_type(t, rng):
    x = rng.standard_normal(500) * 8
    values = numerics.round_to(t, x)
    data = numerics.encode(t, values)
    assert len(data) == types.storage_bytes(t, 500)
    back = numerics.decode(t, data, 500)
    np.testing.assert_array_equal(back, values)
    assert back.dtype == types.scalar_type(t).compute_dtype


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_f16_matches_numpy_half_rounding(rng):
    x = np.concatenate([rng.standard_normal(1000) * 1000, [65519.99, 65520.0, 1e-8, np.nan]])
    np.testing.assert_array_equal(numerics.round_to("f16", x), x.astype(np.float16))
    assert numerics.encode("f16", x) == x.astype("<f2").tobytes()


@pytest.mark.parametrize("t, lo, hi", [("i8", -128, 127), ("i16", -2 ** 15, 2 ** 15 - 1),
                                       ("i32", -2 ** 31, 2 ** 31 - 1),
                                       ("i64", -2 ** 63, 2 ** 63 - 1), ("i4", -8, 7),
                                       ("i2", -2, 1)])
def test_integers_wrap_to_their_width(t, lo, hi, rng):
    x = rng.integers(-2 ** 40, 2 ** 40, 300)
    span = hi - lo + 1
    want = [(int(v) - lo) % span + lo for v in x]
    np.testing.assert_array_equal(numerics.round_to(t, x).astype(np.int64), want)
    values = np.array([lo, hi, 0, -1, 1] + want[:50])
    back = numerics.decode(t, numerics.encode(t, values), len(values))
    np.testing.assert_array_equal(back.astype(np.int64), values)


def test_i4_and_f4_pack_two_per_byte_low_nibble_first():
    assert numerics.encode("i4", [1, -1, 7]) == bytes([0xF1, 0x07])
    assert numerics.encode("f4E2M1FN", [0.5, -6.0, 1.0, 0.0]) == bytes([0xF1, 0x02])
    np.testing.assert_array_equal(numerics.decode("i4", bytes([0x8F, 0x70]), 3), [-1, -8, 0])
    assert types.storage_bytes("i4", 5) == 3


def test_i2_packs_four_per_byte_low_bits_first():
    assert numerics.encode("i2", [1, -1, -2, 0, 1]) == bytes([0b00_10_11_01, 0b01])
    np.testing.assert_array_equal(numerics.decode("i2", bytes([0b01_00_11_10]), 4), [-2, -1, 0, 1])
    assert [types.storage_bytes("i2", n) for n in (0, 1, 4, 5, 9)] == [0, 1, 1, 2, 3]


@pytest.mark.parametrize("bits", [2, 4])
@pytest.mark.parametrize("count", [1, 3, 5, 7, 8, 13, 31])
def test_packing_round_trips_codes_at_odd_counts(bits, count, rng):
    codes = rng.integers(0, 1 << bits, count).astype(np.uint8)
    data = numerics.pack_codes(codes, bits)
    per_byte = 8 // bits
    assert data.size == -(-count // per_byte)
    for k, code in enumerate(codes):   # from bit (k % per_byte) * bits of byte k // per_byte
        assert (int(data[k // per_byte]) >> (k % per_byte * bits)) & ((1 << bits) - 1) == code
    assert int(data[-1]) >> ((count - 1) % per_byte + 1) * bits == 0   # padding is zero
    np.testing.assert_array_equal(numerics.unpack_codes(data, count, bits), codes)
    t = "i2" if bits == 2 else "i4"
    values = numerics.from_bits(t, codes)
    np.testing.assert_array_equal(numerics.decode(t, numerics.encode(t, values), count), values)


def test_i1_is_one_byte_per_element_read_as_nonzero():
    assert numerics.encode("i1", [True, False, 1, 0]) == bytes([1, 0, 1, 0])
    np.testing.assert_array_equal(numerics.decode("i1", bytes([0, 2, 255])), [False, True, True])


def test_bitcasts_between_equal_widths(rng):
    h = rng.standard_normal(50).astype(np.float16)
    bits = numerics.to_bits("f16", h)
    np.testing.assert_array_equal(numerics.from_bits("i16", bits), h.view(np.int16))
    assert numerics.to_bits("bf16", np.float32([1.0]))[0] == 0x3F80
    assert numerics.to_bits("f8E4M3FN", np.array([-448.0]))[0] == 0xFE


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="unknown element type 'f7'"):
        numerics.encode("f7", [1.0])
    with pytest.raises(ValueError, match="need 8 bytes"):
        numerics.decode("i32", b"\0\0\0\0", 2)
    with pytest.raises(ValueError, match="must be integers"):
        numerics.encode("i32", [1.5])
