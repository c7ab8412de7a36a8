"""Element storage and rounding for every scalar type a kernel may use.

One implementation shared by the compiler (constants), the runtime (parsing and printing
`--input` values) and both drivers, so that every place agrees on the bits of a value:

- storage: how `count` elements sit in memory (dense, row-major, little endian): i1 one byte
  (0 or 1); the sub-byte types packed from the low bits of each byte up, i4 and f4E2M1FN two
  per byte (element 2k in the low nibble of byte k), i2 four per byte (element 4k + j in bits
  2j..2j+1 of byte k); bf16 and the f8 types as their raw bits; everything else as numpy
  stores it; "index" is i32.
- values: what numpy computes in — bool for i1, int8 (sign-extended) for i4 and i2, float32
  for bf16 and the small float types (holding values exactly representable in the type), the
  natural numpy dtype otherwise.
- rounding (`round_to`): a value of any float width to the nearest value of a float type, ties to
  even, with the type's overflow, NaN and signed-zero rules as LLVM's APFloat defines them for
  `arith.truncf`; integers wrap to their width.

The formats of the small float types, and every other fact about a type (widths, packing,
numpy dtypes), are in `irtk.types`; this module holds the conversions.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from irtk.types import FLOAT_FORMATS, SMALL_FLOAT_TYPES, FloatFormat, scalar_type


def _small_float(element_type: str) -> FloatFormat | None:
    """The format of a float narrower than 16 bits (these go through code tables)."""
    return FLOAT_FORMATS[element_type] if element_type in SMALL_FLOAT_TYPES else None


@dataclass(frozen=True)
class _Table:
    values: np.ndarray        # float32 value of every code (NaN for NaN codes)
    magnitudes: np.ndarray    # sorted finite non-negative values
    codes: np.ndarray         # the code of each magnitude (positive sign)
    nan_code: int
    max_value: float


@cache
def _table(name: str) -> _Table:
    f = FLOAT_FORMATS[name]
    values = np.array([f.value(c) for c in range(1 << f.bits)], dtype=np.float64)
    sign_bit = 1 << (f.bits - 1) if f.signed else 1 << f.bits
    positive = [c for c in range(1 << f.bits) if c < sign_bit and np.isfinite(values[c])]
    order = sorted(positive, key=lambda c: values[c])
    nan_codes = [c for c in range(1 << f.bits) if f.is_nan_bits(c)]
    nan_code = min(nan_codes) if nan_codes else 0   # the positive NaN (0x7F, 0x80, 0xFF)
    if f.kind == "ieee":
        nan_code = f.nan_bits
    mags = values[order]
    return _Table(values.astype(np.float32), mags, np.array(order, dtype=np.uint8), nan_code,
                  float(mags[-1]))


def _encode_small(name: str, x: np.ndarray) -> np.ndarray:
    """Codes (uint8) of the nearest `name` values to float64 `x`, ties to even."""
    f, t = FLOAT_FORMATS[name], _table(name)
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    with np.errstate(all="ignore"):
        _, e = np.frexp(np.where(np.isfinite(a) & (a > 0), a, 1.0))
        e = np.maximum(e - 1, f.min_exponent)
        quantum = np.ldexp(1.0, (e - f.mantissa_bits).astype(np.int32))
        q = np.rint(a / quantum) * quantum
    nan = np.isnan(x)
    overflow = ~nan & (q > t.max_value)
    q = np.where(overflow | nan, 0.0, q)
    if not f.mantissa_bits:                       # no zero: the smallest value stands for it
        q = np.maximum(q, t.magnitudes[0])
    idx = np.clip(np.searchsorted(t.magnitudes, q), 0, len(t.magnitudes) - 1)
    codes = t.codes[idx].astype(np.uint8)
    negative = np.signbit(x) & ~nan
    if f.signed:
        sign = np.uint8(1 << (f.bits - 1))
        neg = negative & ~((q == 0) & (f.kind == "fnuz"))   # FNUZ: -0 rounds to +0
        codes = np.where(neg, codes | sign, codes)
    else:
        nan = nan | (negative & (x != 0))
    if f.has_inf:
        inf_code = ((1 << f.exponent_bits) - 1) << f.mantissa_bits
        inf = np.where(negative, inf_code | (1 << (f.bits - 1)), inf_code)
        codes = np.where(overflow, inf, codes)
    elif f.kind == "finite":
        top = t.codes[-1] | (1 << (f.bits - 1))
        codes = np.where(overflow, np.where(negative, top, t.codes[-1]), codes)
        nan = np.zeros_like(nan)
    else:
        nan = nan | overflow
    return np.where(nan, t.nan_code, codes).astype(np.uint8)


def _decode_small(name: str, codes: np.ndarray) -> np.ndarray:
    mask = (1 << FLOAT_FORMATS[name].bits) - 1
    return _table(name).values[np.asarray(codes, dtype=np.uint8) & mask]


# --- bf16 ------------------------------------------------------------------------------------

def _bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 or float64 values to bf16 bits (uint16), ties to even; NaN stays NaN."""
    x = np.asarray(x)
    if x.dtype == np.float64:   # one rounding straight from double: go through the generic path
        return _bf16_bits_from_f64(x)
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet = (bits >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def _bf16_bits_from_f64(x: np.ndarray) -> np.ndarray:
    f32 = x.astype(np.float32)          # may round twice: fix the cases where it matters
    back = f32.astype(np.float64)
    # Truncate to f32 toward zero and set a sticky bit when inexact, then round once to bf16.
    with np.errstate(all="ignore"):
        too_far = np.abs(back) > np.abs(x)
    bits = f32.view(np.uint32).copy()
    finite = np.isfinite(x) & np.isfinite(back)
    dec = finite & too_far & (bits & np.uint32(0x7FFFFFFF) != 0)
    bits = np.where(dec, bits - np.uint32(1), bits)
    inexact = finite & (bits.view(np.float32).astype(np.float64) != x)
    bits = np.where(inexact, bits | np.uint32(1), bits)
    return _bf16_bits(bits.view(np.float32))


def _bf16_values(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


# --- integers --------------------------------------------------------------------------------

def wrap_int(element_type: str, x: np.ndarray) -> np.ndarray:
    """Integers of any numpy integer dtype, wrapped to `element_type`'s width (two's complement)."""
    w = scalar_type(element_type).bits
    x = np.asarray(x)
    if w == 1:
        return (x & 1).astype(np.bool_)
    if w < 8:
        half = 1 << (w - 1)
        return (((x.astype(np.int64) + half) & (2 * half - 1)) - half).astype(np.int8)
    return x.astype(scalar_type(element_type).compute_dtype, casting="unsafe")


# --- public API ------------------------------------------------------------------------------

def round_to(element_type: str, x: np.ndarray) -> np.ndarray:
    """`x` as values of `element_type` in its compute dtype: floats rounded (truncf rules),
    integers wrapped."""
    scalar_type(element_type)
    with np.errstate(over="ignore", invalid="ignore"):   # overflow to inf is the rule
        return _round_to(element_type, x)


def _round_to(element_type: str, x: np.ndarray) -> np.ndarray:
    t = scalar_type(element_type)
    if t.is_int:
        x = np.asarray(x)
        if x.dtype == np.bool_:
            return x if element_type == "i1" else x.astype(t.compute_dtype)
        return wrap_int(element_type, x)
    if t.numpy_dtype is not None:        # a float numpy has (f16, f32, f64): its cast rounds
        return np.asarray(x).astype(t.numpy_dtype)
    if element_type == "bf16":
        x = np.asarray(x)
        return _bf16_values(_bf16_bits(x if x.dtype == np.float64 else x.astype(np.float32)))
    return _decode_small(element_type, _encode_small(element_type, np.asarray(x, dtype=np.float64)))


def to_bits(element_type: str, x: np.ndarray) -> np.ndarray:
    """The raw code of each value (uint8 for f8/f4/i4/i2/i1, uint16 for f16/bf16, ...)."""
    t = scalar_type(element_type)
    if _small_float(element_type):
        return _encode_small(element_type, np.asarray(x, dtype=np.float64))
    if element_type == "bf16":
        return _bf16_bits(x)
    if element_type == "i1":
        return (np.asarray(x) != 0).astype(np.uint8)
    if element_type in ("i2", "i4"):
        mask = np.uint8((1 << t.bits) - 1)
        return wrap_int(element_type, x).view(np.uint8) & mask
    v = round_to(element_type, x)
    return v.view(np.dtype(f"u{v.dtype.itemsize}"))


def from_bits(element_type: str, bits: np.ndarray) -> np.ndarray:
    """Values (compute dtype) of raw codes."""
    t = scalar_type(element_type)
    bits = np.asarray(bits)
    if _small_float(element_type):
        return _decode_small(element_type, bits)
    if element_type == "bf16":
        return _bf16_values(bits)
    if element_type == "i1":
        return bits != 0
    if element_type in ("i2", "i4"):
        return wrap_int(element_type, bits.astype(np.int64) & ((1 << t.bits) - 1))
    dtype = t.compute_dtype
    return bits.astype(np.dtype(f"u{dtype.itemsize}")).view(dtype)


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    """`bits`-wide codes (bits 1, 2 or 4) -> bytes, packed from the low bits of each byte up:
    element (8 // bits) * k + j sits in bits [j * bits, (j + 1) * bits) of byte k."""
    per_byte = 8 // bits
    codes = np.asarray(codes, dtype=np.uint8).reshape(-1) & np.uint8((1 << bits) - 1)
    if codes.size % per_byte:
        codes = np.append(codes, np.zeros(per_byte - codes.size % per_byte, np.uint8))
    lanes = codes.reshape(-1, per_byte)
    out = np.zeros(lanes.shape[0], dtype=np.uint8)
    for j in range(per_byte):
        out |= lanes[:, j] << np.uint8(j * bits)
    return out


def unpack_codes(data: np.ndarray, count: int, bits: int) -> np.ndarray:
    """Bytes -> the first `count` `bits`-wide codes (the inverse of `pack_codes`)."""
    per_byte = 8 // bits
    data = np.asarray(data, dtype=np.uint8).reshape(-1)
    out = np.empty((data.size, per_byte), dtype=np.uint8)
    mask = np.uint8((1 << bits) - 1)
    for j in range(per_byte):
        out[:, j] = (data >> np.uint8(j * bits)) & mask
    return out.reshape(-1)[:count]


def pack_nibbles(codes: np.ndarray) -> np.ndarray:
    """4-bit codes -> bytes, element 2k in the low nibble of byte k."""
    return pack_codes(codes, 4)


def unpack_nibbles(data: np.ndarray, count: int) -> np.ndarray:
    """Bytes -> `count` 4-bit codes."""
    return unpack_codes(data, count, 4)


def encode(element_type: str, values: np.ndarray | list | float | int) -> bytes:
    """Storage bytes of `values` (rounded to nearest even / wrapped as `round_to` does)."""
    t = scalar_type(element_type)
    arr = np.asarray(values)
    if arr.dtype.kind in "fc" or t.is_float:
        arr = arr.astype(np.float64) if arr.dtype.kind not in "f" else arr
    flat = arr.reshape(-1)
    if t.packed:
        return pack_codes(to_bits(element_type, flat), t.storage_bits).tobytes()
    if t.is_int and flat.dtype.kind == "f":
        raise ValueError(f"{element_type} values must be integers, got {flat.dtype}")
    return np.ascontiguousarray(to_bits(element_type, flat)).tobytes()


def decode(element_type: str, data: bytes | bytearray | memoryview | np.ndarray,
           count: int | None = None) -> np.ndarray:
    """The first `count` elements (all when None) stored in `data`, as compute-dtype values."""
    t = scalar_type(element_type)
    raw = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) \
        else data.reshape(-1).view(np.uint8)
    if t.packed:
        bits = t.storage_bits
        n = raw.size * (8 // bits) if count is None else count
        if t.storage_bytes(n) > raw.size:
            raise ValueError(f"{n} {element_type} elements need {t.storage_bytes(n)} "
                             f"bytes, got {raw.size}")
        return from_bits(element_type, unpack_codes(raw, n, bits))
    dtype = t.storage_dtype
    assert dtype is not None
    n = raw.size // dtype.itemsize if count is None else count
    if n * dtype.itemsize > raw.size:
        raise ValueError(f"{n} {element_type} elements need {n * dtype.itemsize} bytes, "
                         f"got {raw.size}")
    stored = raw[:n * dtype.itemsize].view(dtype)
    if not t.stores_values:                 # i1, bf16, f8: decoded from their codes
        return from_bits(element_type, stored)
    return stored.astype(t.compute_dtype)
