"""Tensors of element types numpy has no dtype for: bf16, the f8/f4 small floats, i4 and i2.

The Python API hands these in and out as a `TypedArray`: the decoded values in an ordinary
numpy array (float32 for the floats, int8 for the integers, each value exactly one the type
holds) together with the element type, so that printing (`4xf8E4M3FN=1 2 3 4`), checking the
argument type and encoding the buffer all know what the values are. Encoding and decoding use
`irtk.hal.numerics`, the storage rules the compiler and the drivers share.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from irtk import hal
from irtk.hal import numerics


def integer_range_error(values: np.ndarray, element_type: hal.ElementType) -> str | None:
    """"5 is out of range for i2 [-2, 3]" when an integer lies outside the type's signed or
    unsigned range (MLIR's literals may be either), else None."""
    if element_type.is_float or not values.size:
        return None
    bits = element_type.storage_bits
    low, high = -(1 << (bits - 1)), (1 << bits) - 1
    lo, hi = int(values.min()), int(values.max())
    if lo >= low and hi <= high:
        return None
    return (f"{lo if lo < low else hi} is out of range for {element_type.name} "
            f"[{low}, {high}]")


class TypedArray:
    """Values of `element_type` held in `values` (its `ElementType.value_dtype`)."""

    __slots__ = ("values", "element_type")

    def __init__(self, values: np.ndarray, element_type: hal.ElementType) -> None:
        self.values = values
        self.element_type = element_type

    @classmethod
    def from_values(cls, values: Any, element_type: hal.ElementType) -> "TypedArray":
        """Any real numbers rounded (floats, ties to even) or wrapped (integers) to the type."""
        array = np.asarray(values)
        if array.dtype.kind == "b":
            array = array.astype(np.int8)
        rounded = numerics.round_to(element_type.name, array)
        return cls(np.asarray(rounded, dtype=element_type.value_dtype()), element_type)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, shape: tuple[int, ...],
                   element_type: hal.ElementType) -> "TypedArray":
        """The elements stored in `data` (dense, row-major)."""
        count = int(np.prod(shape, dtype=np.int64))
        values = numerics.decode(element_type.name, data, count)
        return cls(values.reshape(shape), element_type)

    def to_bytes(self) -> bytes:
        """The storage bytes (packed for the sub-byte types)."""
        return numerics.encode(self.element_type.name, self.values)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)

    @property
    def size(self) -> int:
        return int(self.values.size)

    @property
    def ndim(self) -> int:
        return self.values.ndim

    def type_text(self) -> str:
        """IREE's spelling of the tensor type, e.g. `4x2xbf16`."""
        return "x".join([str(d) for d in self.shape] + [self.element_type.name])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.values if dtype is None else self.values.astype(dtype)

    def __repr__(self) -> str:
        return f"TypedArray({self.type_text()}, {self.values.tolist()!r})"
