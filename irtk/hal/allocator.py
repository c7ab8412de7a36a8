"""The allocator hands out buffers from a device's memory."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from irtk.hal.buffer import Buffer, BufferUsage

BufferT = TypeVar("BufferT", bound=Buffer, covariant=True)


class Allocator(ABC, Generic[BufferT]):
    """Generic in the driver's buffer class, which its allocations are."""

    @abstractmethod
    def allocate(self, size: int, usage: BufferUsage = BufferUsage.DEFAULT) -> BufferT:
        """A new buffer of at least `size` bytes (zero-size requests give a valid buffer); its
        contents are undefined until written."""

    def import_host(self, data: memoryview,
                    usage: BufferUsage = BufferUsage.DEFAULT) -> BufferT | None:
        """A buffer over the read-only host bytes `data` without a copy (IREE's
        `iree_hal_allocator_import_buffer`), which nothing may write, or None when the device
        cannot use host memory in place (the caller then copies). A module's constants come in
        this way, straight from the mapped module file."""
        return None

    def allocate_with_data(self, data: bytes | memoryview,
                           usage: BufferUsage = BufferUsage.DEFAULT) -> BufferT:
        size = memoryview(data).nbytes
        buf = self.allocate(size, usage)
        if size:
            buf.write(data, 0)
        return buf
