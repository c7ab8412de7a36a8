"""A HAL buffer: a range of one memory block, read and written through the block's mapping.

The host side of the HAL contract is simple on purpose: the caller waits on the fence of the
work that touches a buffer before reading it, so read/write are plain copies (plus flush or
invalidate on non-coherent memory, or a staging transfer when the memory is not mappable).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from irtk.errors import DeviceError
from irtk.hal import Buffer, BufferUsage
from hal_vulkan.resource import Resource

if TYPE_CHECKING:
    from hal_vulkan.context import DeviceContext
    from hal_vulkan.memory_block import MemoryBlock


class StagedCopies(Protocol):
    """Host reads and writes of a buffer whose memory the host does not map: a copy through a
    host-visible buffer on the queue (`transfer.HostTransfer`)."""

    def download(self, buffer: VulkanBuffer, offset: int, length: int) -> bytes: ...

    def upload(self, buffer: VulkanBuffer, offset: int, data: bytes) -> None: ...


class BufferResource(Resource):
    """The block range a buffer owns; returned to the allocator (`free`) once the GPU is done
    with it."""

    kind = "buffer"

    def __init__(self, free: Callable[[BufferResource], None], block: MemoryBlock, offset: int,
                 reserved: int) -> None:
        super().__init__()
        self.free = free
        self.block = block
        self.offset = offset
        self.reserved = reserved

    def location(self, offset: int) -> tuple[int, int]:
        """What a command recorded for byte `offset` of this range names: the block's VkBuffer
        (by serial) and the offset in it. A range recycled at the same place names the same,
        so a recording made for an earlier buffer there serves it unchanged."""
        return (self.block.serial, self.offset + offset)

    def destroy_handles(self) -> None:
        self.free(self)


class VulkanBuffer(Buffer):
    def __init__(self, context: DeviceContext, resource: BufferResource, size: int,
                 usage: BufferUsage, staged: StagedCopies) -> None:
        super().__init__(size, usage)
        self.context = context
        self.resource = resource
        self.staged = staged
        self._finalizer: Any = None

    # -- what command recording needs --------------------------------------------------------
    @property
    def vk_buffer(self) -> Any:
        self._check_alive()
        return self.resource.block.buffer

    def device_offset(self, offset: int = 0) -> int:
        """Offset of byte `offset` of this buffer inside the block's VkBuffer."""
        return self.resource.offset + offset

    @property
    def released(self) -> bool:
        return self.resource.destroyed or self._finalizer is None or not self._finalizer.alive

    # -- host access -------------------------------------------------------------------------
    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        if length is None:
            length = self.size - offset
        view = self._readable(offset, length)
        return self.staged.download(self, offset, length) if view is None \
            else bytes(view)

    def read_into(self, out: memoryview, offset: int = 0) -> None:
        """One copy from the mapping into `out` (a result read back into its numpy array)."""
        view = self._readable(offset, out.nbytes)
        out[:] = self.staged.download(self, offset, out.nbytes) if view is None \
            else view

    def _readable(self, offset: int, length: int) -> memoryview | None:
        """The mapped bytes [offset, offset + length) made visible to the host, after the
        range, device and liveness checks; None where the memory is not mapped (staging)."""
        self._check_range(offset, length)
        self.context.check()
        self._check_alive()
        block = self.resource.block
        if block.mapping is None:
            return None
        start = self.resource.offset + offset
        block.flush(start, length, invalidate=True)
        return block.mapping[start:start + length]

    def write(self, data: bytes | bytearray | memoryview, offset: int = 0) -> None:
        src = memoryview(data)
        if src.ndim != 1 or src.format != "B":
            src = src.cast("B")
        self._check_range(offset, src.nbytes)
        self.context.check()
        self._check_alive()
        if not src.nbytes:
            return
        block = self.resource.block
        start = self.resource.offset + offset
        if block.mapping is None:
            self.staged.upload(self, offset, bytes(src))
            return
        block.mapping[start:start + src.nbytes] = src
        block.flush(start, src.nbytes, invalidate=False)

    def release(self) -> None:
        """Give the range back now, or once the submissions using it have completed."""
        if self._finalizer is not None and self._finalizer.detach() is not None:
            self.context.retire(self.resource)

    def _check_alive(self) -> None:
        if self.released:
            raise DeviceError("buffer was released")
        if self.context.released:
            raise DeviceError(f"device '{self.context.info.name}' was released")

    def __repr__(self) -> str:
        return f"VulkanBuffer(size={self.size}, offset={self.resource.offset})"
