"""Scalar types: every fact about the element and scalar types irtk knows, in one table.

The compiler (front end, kernel IR, SPIR-V and CPU code generators, VM code generation), the
HAL (element types, storage conversion) and both drivers ask this module, so that adding or
changing a type is one row here. Algorithms over the facts (rounding, encoding bits, SPIR-V
sequences) stay where they are used (`irtk.hal.numerics`, the code generators); this module
holds only data.

Names are MLIR's spellings. `index` is 32 bits wide inside kernels (and in buffers) and 64 bits
in host code, as the VM keeps it in an i64 register.

Small float formats, as LLVM's APFloat defines them (`FloatFormat.kind`):
- "ieee" (f16, bf16, f32, f64, f8E5M2): overflow and inf give inf, NaN stays NaN;
- "fn" (f8E4M3FN): no inf; overflow and inf give NaN (S.1111.111);
- "fnuz" (f8E4M3FNUZ, f8E5M2FNUZ): no inf, no -0; NaN is 0x80; overflow and inf give NaN;
- "finite" (f4E2M1FN): no inf or NaN; overflow and inf saturate to +-max, NaN gives +0;
- "e8m0" (f8E8M0FNU): unsigned powers of two 2^-127..2^127, no zero; 0xFF is NaN, which is
  also what negative numbers, inf and overflow give; zero and tiny values give 2^-127, and a
  tie rounds up (`irtk.hal.numerics`; the SPIR-V generator differs on zero and ties,
  docs/codegen_spirv.md).

| type | bias | inf | NaN | max | notes |
|---|---|---|---|---|---|
| f8E5M2 | 15 | yes | S.11111.xx | 57344 | IEEE-like |
| f8E4M3FN | 7 | no | S.1111.111 | 448 | overflow and inf become NaN |
| f8E5M2FNUZ | 16 | no | 0x80 | 57344 | no -0 (rounds to +0); overflow, inf become NaN |
| f8E4M3FNUZ | 8 | no | 0x80 | 240 | as above |
| f8E8M0FNU | 127 | no | 0xFF | 2^127 | powers of two only, unsigned, no zero |
| f4E2M1FN | 1 | no | no | 6 | overflow and inf saturate to ±6 |

Choices where APFloat has no rule: f8E8M0FNU takes zero and values below 2^-127 to 2^-127 and
negative values to NaN; f4E2M1FN, which has no NaN, encodes NaN as +0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FloatFormat:
    """A binary float format: sign (unless "e8m0"), exponent and mantissa fields."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    kind: str               # "ieee", "fn", "fnuz", "finite", "e8m0" (module docstring)

    @property
    def bits(self) -> int:
        return (0 if self.kind == "e8m0" else 1) + self.exponent_bits + self.mantissa_bits

    @property
    def signed(self) -> bool:
        return self.kind != "e8m0"

    @property
    def has_inf(self) -> bool:
        return self.kind == "ieee"

    @property
    def min_exponent(self) -> int:
        """Exponent of the smallest normal value."""
        return 1 - self.bias if self.mantissa_bits else -self.bias

    @property
    def max_bits(self) -> int:
        """Bits of the largest finite magnitude."""
        top = (1 << self.exponent_bits) - 1
        m = self.mantissa_bits
        if self.kind == "ieee":
            return ((top - 1) << m) | ((1 << m) - 1)
        if self.kind == "fn":
            return (top << m) | ((1 << m) - 2)
        if self.kind == "e8m0":
            return top - 1
        return (top << m) | ((1 << m) - 1)

    @property
    def nan_bits(self) -> int:
        """The positive quiet NaN (0 for "finite", which has none: NaN becomes +0)."""
        m, e = self.mantissa_bits, self.exponent_bits
        if self.kind == "ieee":
            return (((1 << e) - 1) << m) | (1 << (m - 1))
        if self.kind == "fn":
            return (1 << (e + m)) - 1
        if self.kind == "fnuz":
            return 1 << (e + m)
        if self.kind == "e8m0":
            return 0xFF
        return 0

    def is_nan_bits(self, bits: int) -> bool:
        m, e = self.mantissa_bits, self.exponent_bits
        if self.kind == "ieee":
            return (bits >> m) & ((1 << e) - 1) == (1 << e) - 1 and bits & ((1 << m) - 1) != 0
        if self.kind == "fn":
            return bits & ((1 << (e + m)) - 1) == (1 << (e + m)) - 1
        if self.kind in ("fnuz", "e8m0"):
            return bits == self.nan_bits
        return False

    def value(self, bits: int) -> float:
        """The exact value of a bit pattern (NaN for NaN codes)."""
        m, e = self.mantissa_bits, self.exponent_bits
        if self.is_nan_bits(bits):
            return float("nan")
        if self.kind == "e8m0":
            return 2.0 ** (bits - self.bias)
        sign = -1.0 if bits >> (e + m) & 1 else 1.0
        exp, mant = (bits >> m) & ((1 << e) - 1), bits & ((1 << m) - 1)
        if self.kind == "ieee" and exp == (1 << e) - 1:
            return sign * float("inf")
        if exp == 0:
            return sign * mant * 2.0 ** (1 - self.bias - m)
        return sign * (1 + mant / (1 << m)) * 2.0 ** (exp - self.bias)


@dataclass(frozen=True)
class ScalarType:
    """One scalar type and how each layer holds it."""

    name: str
    bits: int                    # bits of a value (i1: 1; index: 32, its kernel width)
    storage_bits: int            # bits one element takes in a buffer (i1: 8; i2/i4/f4: packed)
    compute_dtype: np.dtype      # numpy dtype values are computed and held in
    storage_dtype: np.dtype | None  # numpy dtype of one stored element; None for packed types
    numpy_dtype: np.dtype | None    # numpy dtype that *is* this type; None where numpy lacks it
    register: str                # kernel register class: i1, i32, i64, f32 or f64
    vm_bank: str                 # VM register bank of a host scalar: i32, i64, f32 or f64
    float_format: FloatFormat | None = None

    @property
    def is_float(self) -> bool:
        return self.float_format is not None

    @property
    def is_int(self) -> bool:
        return self.float_format is None

    @property
    def packed(self) -> bool:
        """Stored several elements to a byte (i2, i4, f4E2M1FN)."""
        return self.storage_bits < 8

    @property
    def emulated_float(self) -> bool:
        """A float narrower than f32 with no native arithmetic anywhere (bf16, f8, f4): its
        values are computed in f32 and rounded back after every op."""
        return self.is_float and self.compute_dtype == np.float32 and self.name != "f32"

    @property
    def stores_values(self) -> bool:
        """A stored element is its value in the compute dtype (no decoding needed)."""
        return self.storage_dtype is not None and self.storage_dtype == self.compute_dtype

    def storage_bytes(self, count: int) -> int:
        """Bytes that `count` dense row-major elements occupy."""
        return -(-count * self.storage_bits // 8)


def _dtype(name: str | None) -> np.dtype | None:
    return None if name is None else np.dtype(name)


def _int(name: str, bits: int, storage_bits: int, compute: str, storage: str | None,
         numpy: str | None) -> ScalarType:
    register = "i1" if bits == 1 else "i64" if bits == 64 else "i32"
    bank = "i64" if bits == 64 else "i32"
    return ScalarType(name, bits, storage_bits, np.dtype(compute), _dtype(storage),
                      _dtype(numpy), register, bank)


def _float(fmt: FloatFormat, compute: str, storage: str | None, numpy: str | None) -> ScalarType:
    register = "f64" if fmt.bits == 64 else "f32"
    return ScalarType(fmt.name, fmt.bits, fmt.bits, np.dtype(compute), _dtype(storage),
                      _dtype(numpy), register, register, fmt)


INT_TYPES = ("i1", "i2", "i4", "i8", "i16", "i32", "i64")
NATIVE_FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
# Floats narrower than 16 bits, computed in f32 registers holding exactly representable values.
SMALL_FLOAT_TYPES = ("f8E4M3FN", "f8E4M3FNUZ", "f8E5M2", "f8E5M2FNUZ", "f8E8M0FNU", "f4E2M1FN")
FLOAT_TYPES = NATIVE_FLOAT_TYPES + SMALL_FLOAT_TYPES

FLOAT_FORMATS: dict[str, FloatFormat] = {f.name: f for f in (
    FloatFormat("f16", 5, 10, 15, "ieee"),
    FloatFormat("bf16", 8, 7, 127, "ieee"),
    FloatFormat("f32", 8, 23, 127, "ieee"),
    FloatFormat("f64", 11, 52, 1023, "ieee"),
    FloatFormat("f8E5M2", 5, 2, 15, "ieee"),
    FloatFormat("f8E4M3FN", 4, 3, 7, "fn"),
    FloatFormat("f8E4M3FNUZ", 4, 3, 8, "fnuz"),
    FloatFormat("f8E5M2FNUZ", 5, 2, 16, "fnuz"),
    FloatFormat("f8E8M0FNU", 8, 0, 127, "e8m0"),
    FloatFormat("f4E2M1FN", 2, 1, 1, "finite"),
)}

SCALAR_TYPES: dict[str, ScalarType] = {t.name: t for t in (
    _int("i1", 1, 8, "bool", "uint8", "bool"),
    _int("i2", 2, 2, "int8", None, None),
    _int("i4", 4, 4, "int8", None, None),
    _int("i8", 8, 8, "int8", "int8", "int8"),
    _int("i16", 16, 16, "int16", "<i2", "int16"),
    _int("i32", 32, 32, "int32", "<i4", "int32"),
    _int("i64", 64, 64, "int64", "<i8", "int64"),
    # index: 32-bit in kernels and buffers, an i64 register on the host.
    ScalarType("index", 32, 32, np.dtype("int32"), np.dtype("<i4"), None, "i32", "i64"),
    _float(FLOAT_FORMATS["f16"], "float16", "<f2", "float16"),
    _float(FLOAT_FORMATS["bf16"], "float32", "<u2", None),
    _float(FLOAT_FORMATS["f32"], "float32", "<f4", "float32"),
    _float(FLOAT_FORMATS["f64"], "float64", "<f8", "float64"),
    *(_float(FLOAT_FORMATS[name], "float32", "uint8" if name.startswith("f8") else None, None)
      for name in SMALL_FLOAT_TYPES),
)}
# Every scalar type, in a fixed order: integers, index, then floats.
SCALAR_TYPE_NAMES = tuple(SCALAR_TYPES)
PACKED_TYPES = tuple(t.name for t in SCALAR_TYPES.values() if t.packed)


def scalar_type(name: str) -> ScalarType:
    """The type called `name`; ValueError naming the known ones otherwise."""
    try:
        return SCALAR_TYPES[name]
    except KeyError:
        raise ValueError(f"unknown element type '{name}' "
                         f"(expected one of {', '.join(SCALAR_TYPE_NAMES)})") from None


def is_float(name: str) -> bool:
    return scalar_type(name).is_float


def storage_bytes(name: str, count: int) -> int:
    """Bytes that `count` elements of type `name` occupy."""
    return scalar_type(name).storage_bytes(count)
