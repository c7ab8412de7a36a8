"""Element types of buffer views, encoded as IREE encodes them (numerical type << 24 | bits).

The same 32-bit code travels through VM bytecode (`hal.buffer_view.create`), module reflection
and the Python API, so it has one definition here. The codes are IREE's
(`iree_hal_element_types_t`): numerical type 0x10 is a signless integer, 0x13 a boolean, 0x21
an IEEE float, 0x22 bf16 and 0x24..0x2B one code per small float format; IREE names no 2-bit
integer, and its compiler encodes i2 as it does every signless integer (0x10 << 24 | bits).

Types numpy lacks (bf16, the f8/f4 formats, i4, i2) cross the Python boundary as their decoded
values (`value_dtype`: float32 or int8) and are stored as `irtk.hal.numerics` defines. Every
other fact about a type (widths, packing, dtypes) is `irtk.types`'s; the codes are the one
thing this module adds.
"""
from __future__ import annotations

import enum

import numpy as np

from irtk.types import SCALAR_TYPES, ScalarType


class ElementType(enum.IntEnum):
    """Element type codes; names follow MLIR's spelling of the type."""

    i1 = 0x13000008  # booleans are stored one per byte
    i2 = 0x10000002  # packed four per byte
    i4 = 0x10000004  # packed two per byte
    i8 = 0x10000008
    i16 = 0x10000010
    i32 = 0x10000020
    i64 = 0x10000040
    f16 = 0x21000010
    bf16 = 0x22000010
    f32 = 0x21000020
    f64 = 0x21000040
    f8E5M2 = 0x24000008
    f8E4M3FN = 0x25000008
    f8E5M2FNUZ = 0x26000008
    f8E4M3FNUZ = 0x27000008
    f8E8M0FNU = 0x28000008
    f4E2M1FN = 0x2B000004  # packed two per byte

    @property
    def storage_bits(self) -> int:
        """Bits one element takes in a buffer (the code's low byte; i1: 8). IREE calls it the
        bit count; `int.bit_count` is taken (a population count), hence the name."""
        return int(self) & 0xFF

    @property
    def byte_size(self) -> int:
        """IREE's dense byte count: bytes one element takes alone (1 for sub-byte types)."""
        return (self.storage_bits + 7) // 8

    @property
    def is_float(self) -> bool:
        return (int(self) >> 24) & 0xF0 == 0x20

    @property
    def is_packed(self) -> bool:
        """Stored several elements to a byte (i2, i4, f4E2M1FN)."""
        return self.storage_bits < 8

    @property
    def scalar_type(self) -> ScalarType:
        return SCALAR_TYPES[self.name]

    def storage_bytes(self, count: int) -> int:
        """Bytes that `count` dense row-major elements occupy (packed types share bytes)."""
        return self.scalar_type.storage_bytes(count)

    @property
    def has_numpy_dtype(self) -> bool:
        return self.scalar_type.numpy_dtype is not None

    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype that stores this type as it is; ValueError for types numpy lacks."""
        dtype = self.scalar_type.numpy_dtype
        if dtype is None:
            raise ValueError(f"{self.name} has no numpy dtype")
        return dtype

    def value_dtype(self) -> np.dtype:
        """The numpy dtype of this type's values: its own dtype, or for types numpy lacks the
        one their decoded values are held in (float32 for bf16/f8/f4, int8 for i4/i2)."""
        return self.scalar_type.compute_dtype

    @classmethod
    def from_name(cls, name: str) -> "ElementType":
        try:
            return cls[name]
        except KeyError:
            raise ValueError(f"unknown element type '{name}'") from None

    @classmethod
    def from_numpy(cls, dtype: np.dtype) -> "ElementType":
        dtype = np.dtype(dtype)
        for et in cls:
            own = et.scalar_type.numpy_dtype
            if own is not None and own == dtype:   # (a dtype equals None: float64)
                return et
        raise ValueError(f"no element type for numpy dtype {dtype}")
