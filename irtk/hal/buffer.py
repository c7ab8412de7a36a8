"""A device buffer: a byte range the device reads and writes, mappable by the host.

Software Vulkan drivers and the CPU driver expose host-visible memory, so `read`/`write` map
directly; a driver without host-visible memory stages through a transfer.
"""
from __future__ import annotations

import enum
from abc import ABC, abstractmethod


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

    @abstractmethod
    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        """Copy `length` bytes (default: to the end) starting at `offset` out to the host."""

    @abstractmethod
    def write(self, data: bytes | bytearray | memoryview, offset: int = 0) -> None:
        """Copy host bytes into the buffer at `offset`."""

    def release(self) -> None:
        """Free the device memory now; idempotent. Drivers override to free eagerly."""

    def _check_range(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ValueError(
                f"range [{offset}, {offset + length}) is outside the buffer of {self.size} bytes")
