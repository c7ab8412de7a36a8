"""Host-memory buffers and their allocator.

A CPU buffer is a numpy uint8 array, so kernels and transfers see the bytes without copies:
`host_memory` is the view they slice and reinterpret.
"""
from __future__ import annotations

import numpy as np

from irtk.errors import RuntimeFailure
from irtk.hal.errors import OutOfMemoryError
from irtk.hal.allocator import Allocator
from irtk.hal.buffer import Buffer, BufferUsage


class CpuBuffer(Buffer):
    """A byte range in host memory; `release` drops it early (later use raises)."""

    def __init__(self, size: int, usage: BufferUsage = BufferUsage.DEFAULT,
                 data: np.ndarray | None = None, address: int | None = None) -> None:
        """`data`: the bytes to hold (else new, uninitialised ones), at `address` when the
        caller knows it."""
        super().__init__(size, usage)
        if data is None:
            data, address = _aligned(size)
        elif address is None:
            address = data.ctypes.data
        self._data: np.ndarray | None = data
        # Where the bytes are: native kernels take addresses (an array never moves).
        self.address: int = address
        self.read_only: bool = not self._data.flags.writeable

    @property
    def released(self) -> bool:
        return self._data is None

    @property
    def writable(self) -> bool:
        return self._data is None or self._data.flags.writeable

    @property
    def host_memory(self) -> np.ndarray:
        """The buffer's bytes as a uint8 array (no copy); read-only for an imported one."""
        data = self._data
        if data is None:
            raise RuntimeFailure(f"buffer of {self.size} bytes was used after release")
        return data

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        if length is None:
            length = self.size - offset
        self._check_range(offset, length)
        return self.host_memory[offset:offset + length].tobytes()

    def read_into(self, out: memoryview, offset: int = 0) -> None:
        """One copy, straight from the buffer's bytes into `out`."""
        n = out.nbytes
        self._check_range(offset, n)
        np.frombuffer(out, dtype=np.uint8, count=n)[:] = self.host_memory[offset:offset + n]

    def write(self, data: bytes | bytearray | memoryview, offset: int = 0) -> None:
        src = _as_bytes(data)
        self._check_range(offset, src.size)
        if not self.writable:
            raise RuntimeFailure(f"write to a read-only buffer of {self.size} bytes (imported "
                                 "host memory: a module constant)")
        self.host_memory[offset:offset + src.size] = src

    def release(self) -> None:
        self._data = None

    def __repr__(self) -> str:
        state = "released" if self._data is None else f"{self.size} bytes"
        return f"CpuBuffer({state})"


class CpuAllocator(Allocator[CpuBuffer]):
    """Allocates host buffers whose contents are undefined, as on a GPU and in IREE: zeroing
    (or faulting in fresh zero pages) costs as much as a pass over the buffer, and the compiler
    fills whatever a kernel reads before writing (`tensor.empty` operands)."""

    def allocate(self, size: int, usage: BufferUsage = BufferUsage.DEFAULT) -> CpuBuffer:
        if size < 0:
            raise ValueError(f"cannot allocate a buffer of {size} bytes")
        try:
            return CpuBuffer(size, usage)
        except MemoryError:
            raise OutOfMemoryError("allocate", "out of host memory",
                                   f" (a buffer of {size} bytes)") from None

    def import_host(self, data: memoryview,
                    usage: BufferUsage = BufferUsage.DEFAULT) -> CpuBuffer:
        """The bytes in place, as a read-only array: kernels read the mapped module file."""
        src = _as_bytes(data)
        if src.flags.writeable:   # a writable source could change under the device
            src = src.view()
            src.flags.writeable = False
        return CpuBuffer(src.size, usage, src)

    def allocate_with_data(self, data: bytes | memoryview,
                           usage: BufferUsage = BufferUsage.DEFAULT) -> CpuBuffer:
        src = _as_bytes(data)
        copy, address = _aligned(src.size)
        copy[:] = src
        return CpuBuffer(src.size, usage, copy, address)


ALIGNMENT = 64


def _aligned(size: int) -> tuple[np.ndarray, int]:
    """`size` uninitialised bytes starting on a 64-byte boundary, as IREE's heap buffers: a
    native kernel's 64-byte vector loads then each read one cache line, not two. With the
    address of the first byte."""
    raw = np.empty(size + ALIGNMENT, dtype=np.uint8)
    address = raw.ctypes.data
    start = -address % ALIGNMENT
    return raw[start:start + size], address + start


def _as_bytes(data: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    """Any C-contiguous buffer-protocol object as a flat uint8 array (no copy)."""
    view = data.data if isinstance(data, np.ndarray) else memoryview(data)
    if not view.c_contiguous:
        raise ValueError("buffer data must be C-contiguous")
    return np.frombuffer(view.cast("B") if view.format != "B" or view.ndim != 1 else view,
                         dtype=np.uint8)
