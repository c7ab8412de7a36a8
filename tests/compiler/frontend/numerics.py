"""Scalar semantics of the kernel IR's element types for the test-only TIR evaluator.

Floats are held as float64 numpy arrays of values exactly representable in their type (every
op rounds its result to the type, round-to-nearest-even); integers as int64 arrays of the
signed value wrapped to their width (i1 as 0/1). Small float formats (f8*, f4E2M1FN) are
decoded from and encoded to bit patterns with tables built from their definitions.
"""
from __future__ import annotations

import math

import numpy as np

# name: (exponent bits, mantissa bits, bias, largest finite, has inf, has NaN, has -0)
SMALL_FLOATS = {
    "f8E4M3FN": (4, 3, 7, 448.0, False, True, True),
    "f8E4M3FNUZ": (4, 3, 8, 240.0, False, True, False),
    "f8E5M2": (5, 2, 15, 57344.0, True, True, True),
    "f8E5M2FNUZ": (5, 2, 16, 57344.0, False, True, False),
    "f4E2M1FN": (2, 1, 1, 6.0, False, False, True),
}
INT_WIDTHS = {"i1": 1, "i2": 2, "i4": 4, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "index": 64}
FLOAT_WIDTHS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f8E8M0FNU": 8,
                **{k: 1 + v[0] + v[1] for k, v in SMALL_FLOATS.items()}}


def is_float(t: str) -> bool:
    return t in FLOAT_WIDTHS


def width(t: str) -> int:
    return INT_WIDTHS.get(t) or FLOAT_WIDTHS[t]


def wrap(v: np.ndarray, t: str) -> np.ndarray:
    """Signed value of the low `width(t)` bits (i1: 0 or 1)."""
    w = INT_WIDTHS[t]
    v = np.asarray(v).astype(np.int64)
    if w == 64:
        return v
    if w == 1:
        return v & 1
    v = v & ((1 << w) - 1)
    return np.where(v >= 1 << (w - 1), v - (1 << w), v)


def unsigned(v: np.ndarray, t: str) -> np.ndarray:
    """The unsigned reading of an integer value (as uint64 for i64/index)."""
    w = INT_WIDTHS[t]
    v = np.asarray(v).astype(np.int64)
    if w == 64:
        return v.astype(np.uint64)
    return v & ((1 << w) - 1)


def signed(v: np.ndarray, t: str) -> np.ndarray:
    """The signed reading (i1 true is -1, as MLIR's sign extension reads it)."""
    return -np.asarray(v, dtype=np.int64) if t == "i1" else np.asarray(v, dtype=np.int64)


def _round_small(x: np.ndarray, t: str) -> np.ndarray:
    if t == "f8E8M0FNU":
        with np.errstate(divide="ignore", invalid="ignore"):
            e = np.clip(np.round(np.log2(np.abs(x))), -127, 127)
        return np.where(np.isfinite(x) & (x > 0), 2.0 ** e, np.nan)
    ebits, mbits, bias, top, has_inf, has_nan, neg_zero = SMALL_FLOATS[t]
    a = np.abs(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
        e = np.maximum(e, 1 - bias)
        q = 2.0 ** (e - mbits)
        r = np.round(a / q) * q
    over = np.isinf(a) | (r > top)
    r = np.where(over, np.inf if has_inf and True else (np.nan if has_nan else top), r)
    if has_inf:
        r = np.where(np.isinf(a), np.inf, r)
    r = np.where(np.isnan(x), np.nan, r)
    r = np.copysign(r, x)
    if not neg_zero:
        r = np.where(r == 0, 0.0, r)
    if not has_nan:
        r = np.where(np.isnan(r), top, r)
    return r


def round_to(x, t: str) -> np.ndarray:
    """Round float64 values to float type t (returned as float64)."""
    x = np.asarray(x, dtype=np.float64)
    if t == "f64":
        return x
    if t == "f32":
        return x.astype(np.float32).astype(np.float64)
    if t == "f16":
        return x.astype(np.float16).astype(np.float64)
    if t == "bf16":
        bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
        nan = np.isnan(x)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
        out = bits.astype(np.uint32).view(np.float32).astype(np.float64)
        return np.where(nan, np.nan, out)
    return _round_small(x, t)


def _decode_table(t: str) -> np.ndarray:
    if t == "f8E8M0FNU":
        return np.array([np.nan if p == 255 else 2.0 ** (p - 127) for p in range(256)])
    ebits, mbits, bias, _, has_inf, has_nan, neg_zero = SMALL_FLOATS[t]
    values = []
    emax = (1 << ebits) - 1
    for p in range(1 << (1 + ebits + mbits)):
        s = p >> (ebits + mbits)
        e = (p >> mbits) & emax
        m = p & ((1 << mbits) - 1)
        if not neg_zero and has_nan and p == 1 << (ebits + mbits):
            values.append(math.nan)
            continue
        if has_inf and e == emax:
            values.append(math.nan if m else (-math.inf if s else math.inf))
            continue
        if has_nan and neg_zero and not has_inf and e == emax and m == (1 << mbits) - 1:
            values.append(math.nan)
            continue
        v = m * 2.0 ** (1 - bias - mbits) if e == 0 else (1 + m / (1 << mbits)) * 2.0 ** (e - bias)
        values.append(-v if s else v)
    return np.array(values)


_TABLES: dict[str, np.ndarray] = {}


def decode(bits: np.ndarray, t: str) -> np.ndarray:
    """Float values of bit patterns (an unsigned int array) of type t."""
    bits = np.asarray(bits).astype(np.int64)
    if t == "f32":
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    if t == "f64":
        return bits.astype(np.uint64).view(np.float64)
    if t == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if t == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if t not in _TABLES:
        _TABLES[t] = _decode_table(t)
    return _TABLES[t][bits & ((1 << FLOAT_WIDTHS[t]) - 1)]


def encode(x: np.ndarray, t: str) -> np.ndarray:
    """Bit patterns (int64) of float values already representable in t."""
    x = np.asarray(x, dtype=np.float64)
    if t == "f32":
        return x.astype(np.float32).view(np.uint32).astype(np.int64)
    if t == "f64":
        return x.view(np.int64)
    if t == "f16":
        return x.astype(np.float16).view(np.uint16).astype(np.int64)
    if t == "bf16":
        return (round_to(x, "bf16").astype(np.float32).view(np.uint32) >> 16).astype(np.int64)
    if t not in _TABLES:
        _TABLES[t] = _decode_table(t)
    table = _TABLES[t]
    out = np.zeros(x.shape, dtype=np.int64)
    for idx, v in np.ndenumerate(x):
        if np.isnan(v):
            out[idx] = int(np.flatnonzero(np.isnan(table))[0])
        else:
            hits = np.flatnonzero((table == v) & (np.signbit(table) == np.signbit(v)))
            if not len(hits):
                hits = np.flatnonzero(table == v)
            out[idx] = int(hits[0])
    return out
