"""Results that stay on the device: `m.f(x, device_results=True)` returns `DeviceArray`s.

A chain of calls (`y = m.f(x)`, `z = m.g(y)`) otherwise reads every intermediate back to numpy
and uploads it again. A `DeviceArray` holds the result's buffer view where the call left it;
passed to a call on the same device it is handed over as it is (no copy), on another device it
is copied through the host. `to_numpy()` reads it. Every driver: on the CPU drivers the buffer
is host memory, on Vulkan device memory.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from irtk import hal
from irtk.runtime.typed_array import TypedArray


class DeviceArray:
    """A tensor on `device`: `shape`, `dtype` (the numpy dtype, or the decoded values' dtype
    for element types numpy lacks), `element_type` (irtk's name, e.g. "f32"), `to_numpy()`."""

    __slots__ = ("buffer_view", "device")

    def __init__(self, buffer_view: hal.BufferView, device: hal.Device) -> None:
        self.buffer_view = buffer_view
        self.device = device

    @property
    def shape(self) -> tuple[int, ...]:
        return self.buffer_view.shape

    @property
    def element_type(self) -> str:
        return self.buffer_view.element_type.name

    @property
    def dtype(self) -> np.dtype:
        et = self.buffer_view.element_type
        return np.dtype(et.numpy_dtype() if et.has_numpy_dtype else et.value_dtype())

    def to_numpy(self) -> np.ndarray | TypedArray:
        """The contents, read from the device (a TypedArray for element types numpy lacks)."""
        if not self.buffer_view.element_type.has_numpy_dtype:
            return TypedArray(self.buffer_view.to_numpy(), self.buffer_view.element_type)
        return self.buffer_view.to_numpy()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        values = self.buffer_view.to_numpy()
        return values if dtype is None else values.astype(dtype)

    def __repr__(self) -> str:
        return f"<irtk DeviceArray {self.buffer_view.format_shape()} on {self.device.info.name}>"
