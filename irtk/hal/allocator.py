"""The allocator hands out buffers from a device's memory."""
from __future__ import annotations

from abc import ABC, abstractmethod

from irtk.hal.buffer import Buffer, BufferUsage


class Allocator(ABC):
    @abstractmethod
    def allocate(self, size: int, usage: BufferUsage = BufferUsage.DEFAULT) -> Buffer:
        """A new buffer of at least `size` bytes (zero-size requests give a valid buffer)."""

    def allocate_with_data(self, data: bytes | memoryview, usage: BufferUsage = BufferUsage.DEFAULT) -> Buffer:
        size = memoryview(data).nbytes
        buf = self.allocate(size, usage)
        if size:
            buf.write(data, 0)
        return buf
