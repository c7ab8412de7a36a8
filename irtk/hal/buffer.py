"""A device buffer: a byte range the device reads and writes, mappable by the host.

Software Vulkan drivers and the CPU driver expose host-visible memory, so `read`/`write` map
directly; a driver without host-visible memory stages through a transfer.

A subspan (`Buffer.subspan`) is a window onto another buffer, as IREE's `hal.buffer.subspan`
makes: it owns no memory, and drivers see through it to the allocated buffer and its offset
(`allocated_buffer`, `byte_offset`) whenever they bind or copy it.
"""
from __future__ import annotations

import enum
from abc import ABC, abstractmethod

from irtk.errors import RuntimeFailure


class BufferUsage(enum.IntFlag):
    TRANSFER = 1
    DISPATCH_STORAGE = 2
    MAPPING = 4
    DEFAULT = TRANSFER | DISPATCH_STORAGE | MAPPING


class Buffer(ABC):
    """A buffer allocated by a device's allocator; released when the last reference drops."""

    def __init__(self, size: int, usage: BufferUsage = BufferUsage.DEFAULT) -> None:
        self.size = size
        self.usage = usage

    @property
    def allocated_buffer(self) -> "Buffer":
        """The buffer that owns the memory (itself, unless this is a subspan)."""
        return self

    @property
    def byte_offset(self) -> int:
        """Where this buffer starts inside `allocated_buffer`."""
        return 0

    @property
    def writable(self) -> bool:
        """False for a buffer imported over read-only host memory (`Allocator.import_host`):
        transfers and dispatches refuse to write it."""
        return True

    @abstractmethod
    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        """Copy `length` bytes (default: to the end) starting at `offset` out to the host."""

    @abstractmethod
    def write(self, data: bytes | bytearray | memoryview, offset: int = 0) -> None:
        """Copy host bytes into the buffer at `offset`."""

    def read_into(self, out: memoryview, offset: int = 0) -> None:
        """Copy `out.nbytes` bytes starting at `offset` into `out` (a writable byte view, such
        as a new numpy array's): drivers with mapped memory override it to copy once."""
        out[:] = self.read(offset, out.nbytes)

    def release(self) -> None:
        """Free the device memory now; idempotent. Drivers override to free eagerly."""

    def subspan(self, offset: int, length: int) -> "Buffer":
        """A window of `length` bytes at `offset` (the whole buffer for (0, size): itself)."""
        self._check_range(offset, length)
        if offset == 0 and length == self.size:
            return self
        return SubspanBuffer(self.allocated_buffer, self.byte_offset + offset, length)

    def _check_range(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise RangeError(
                f"range [{offset}, {offset + length}) is outside the buffer of {self.size} bytes")


class RangeError(RuntimeFailure, ValueError):
    """A byte range outside a buffer (a ValueError too, as it was before subspans existed)."""


class SubspanBuffer(Buffer):
    """Bytes [byte_offset, byte_offset + size) of an allocated buffer; keeps it alive."""

    def __init__(self, allocated: Buffer, byte_offset: int, size: int) -> None:
        super().__init__(size, allocated.usage)
        self._allocated = allocated
        self._offset = byte_offset

    @property
    def allocated_buffer(self) -> Buffer:
        return self._allocated

    @property
    def byte_offset(self) -> int:
        return self._offset

    @property
    def writable(self) -> bool:
        return self._allocated.writable

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        if length is None:
            length = self.size - offset
        self._check_range(offset, length)
        return self._allocated.read(self._offset + offset, length)

    def read_into(self, out: memoryview, offset: int = 0) -> None:
        self._check_range(offset, out.nbytes)
        self._allocated.read_into(out, self._offset + offset)

    def write(self, data: bytes | bytearray | memoryview, offset: int = 0) -> None:
        self._check_range(offset, memoryview(data).nbytes)
        self._allocated.write(data, self._offset + offset)

    def release(self) -> None:
        """A subspan owns no memory; releasing it leaves the allocated buffer alone."""

    def __repr__(self) -> str:
        return f"SubspanBuffer({self.size} bytes at {self._offset} of {self._allocated!r})"
