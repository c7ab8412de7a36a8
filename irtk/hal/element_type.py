"""Element types of buffer views, encoded as IREE encodes them (numerical type << 24 | bits).

The same 32-bit code travels through VM bytecode (`hal.buffer_view.create`), module reflection
and the Python API, so it has one definition here.
"""
from __future__ import annotations

import enum

import numpy as np


class ElementType(enum.IntEnum):
    """Element type codes; names follow MLIR's spelling of the type."""

    i1 = 0x13000008  # booleans are stored one per byte
    i8 = 0x10000008
    i16 = 0x10000010
    i32 = 0x10000020
    i64 = 0x10000040
    f16 = 0x21000010
    bf16 = 0x22000010
    f32 = 0x21000020
    f64 = 0x21000040

    @property
    def bit_count(self) -> int:
        return int(self) & 0xFF

    @property
    def byte_size(self) -> int:
        return (self.bit_count + 7) // 8

    @property
    def is_float(self) -> bool:
        return (int(self) >> 24) in (0x21, 0x22)

    def numpy_dtype(self) -> np.dtype:
        if self is ElementType.bf16:
            raise ValueError("bf16 has no numpy dtype")
        return np.dtype(_NUMPY[self])

    @classmethod
    def from_name(cls, name: str) -> "ElementType":
        try:
            return cls[name]
        except KeyError:
            raise ValueError(f"unknown element type '{name}'") from None

    @classmethod
    def from_numpy(cls, dtype: np.dtype) -> "ElementType":
        dtype = np.dtype(dtype)
        for et, name in _NUMPY.items():
            if np.dtype(name) == dtype:
                return et
        raise ValueError(f"no element type for numpy dtype {dtype}")


_NUMPY = {
    ElementType.i1: "bool",
    ElementType.i8: "int8",
    ElementType.i16: "int16",
    ElementType.i32: "int32",
    ElementType.i64: "int64",
    ElementType.f16: "float16",
    ElementType.f32: "float32",
    ElementType.f64: "float64",
}
