"""A buffer view: a buffer with a shape and an element type (what a tensor is at run time)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from irtk.hal.buffer import Buffer
from irtk.hal.element_type import ElementType

DENSE_ROW_MAJOR = 1  # IREE's encoding type for dense row-major data


@dataclass
class BufferView:
    buffer: Buffer
    shape: tuple[int, ...]
    element_type: ElementType
    byte_offset: int = 0
    encoding: int = DENSE_ROW_MAJOR

    @property
    def byte_length(self) -> int:
        return math.prod(self.shape) * self.element_type.byte_size

    def to_numpy(self) -> np.ndarray:
        data = self.buffer.read(self.byte_offset, self.byte_length)
        return np.frombuffer(data, dtype=self.element_type.numpy_dtype()).reshape(self.shape).copy()

    def format_shape(self) -> str:
        """IREE's spelling of a tensor type, e.g. `4x2xf32`."""
        return "x".join([str(d) for d in self.shape] + [self.element_type.name])
