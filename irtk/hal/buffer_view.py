"""A buffer view: a buffer with a shape and an element type (what a tensor is at run time)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from irtk import tracing
from irtk.hal import numerics
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
        return self.element_type.storage_bytes(math.prod(self.shape))

    def to_numpy(self) -> np.ndarray:
        """The contents as an array of the element type's numpy dtype; for a type numpy lacks
        (bf16, f8/f4, i4, i2), its decoded values (`ElementType.value_dtype`)."""
        tracer = tracing.active
        if tracer is None:
            return self._read()
        with tracer.span("download", "transfer", direction="download",
                         bytes=self.byte_length, shape=self.format_shape()):
            return self._read()

    def _read(self) -> np.ndarray:
        et = self.element_type
        if not et.has_numpy_dtype:
            data = self.buffer.read(self.byte_offset, self.byte_length)
            return numerics.decode(et.name, data, math.prod(self.shape)).reshape(self.shape)
        out = np.empty(self.shape, dtype=et.numpy_dtype())
        self.buffer.read_into(out.reshape(-1).data.cast("B"), self.byte_offset)
        return out

    def format_shape(self) -> str:
        """IREE's spelling of a tensor type, e.g. `4x2xf32`."""
        return "x".join([str(d) for d in self.shape] + [self.element_type.name])
