"""Device memory: large blocks (`memory_block.py`), each with one VkBuffer, carved into HAL buffers.

One block serves many buffers (Vulkan limits the number of allocations and each one is slow), so
a HAL buffer is (block, offset, size) and a descriptor binds the block's VkBuffer at an offset.
Offsets are multiples of minStorageBufferOffsetAlignment, hence valid descriptor offsets. Memory
is host-visible (coherent when possible) and stays mapped, so buffer read/write is a memcpy;
a device without host-visible memory for buffers (or `host_mapped=False`) stages through a
transfer instead. Requests of a quarter block or more get a dedicated block of their own.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import vulkan as vk

from irtk.errors import DeviceError
from irtk.hal.errors import OutOfMemoryError
from irtk.hal import Allocator, BufferUsage
from hal_vulkan.buffer import BufferResource, StagedCopies, VulkanBuffer
from hal_vulkan.memory_block import MemoryBlock
from hal_vulkan.resource import release_when_collected

if TYPE_CHECKING:
    from hal_vulkan.context import DeviceContext

DEFAULT_BLOCK_SIZE = 64 << 20
_HOST_VISIBLE = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
_HOST_COHERENT = vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
_DEVICE_LOCAL = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT


class VulkanAllocator(Allocator[VulkanBuffer]):
    """Suballocates HAL buffers from memory blocks; keeps one empty block around for reuse.

    `staged` reads and writes the buffers whose memory the host does not map (the device's
    transfer path)."""

    def __init__(self, context: DeviceContext, staged: StagedCopies,
                 host_mapped: bool | None = None, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        self.context = context
        self.staged = staged
        limits = context.physical.limits
        # Buffers start where a storage buffer or a texel-buffer view may be bound.
        self.alignment = max(16, int(limits["minStorageBufferOffsetAlignment"]),
                             int(limits.get("minTexelBufferOffsetAlignment", 16)))
        if not _has_host_visible(context):
            host_mapped = False
        self.host_mapped = True if host_mapped is None else host_mapped
        max_alloc = int(limits.get("maxMemoryAllocationSize", 1 << 62))
        self.block_size = max(self.alignment, min(block_size, max_alloc))
        self._blocks: list[MemoryBlock] = []
        self._memory_type: tuple[int, int] | None = None

    def memory_type(self, type_bits: int) -> tuple[int, int]:
        """(index, property flags) of the memory type for buffers, chosen once."""
        if self._memory_type is None:
            types = self.context.physical.memory_types
            if self.host_mapped:
                wanted = [_DEVICE_LOCAL | _HOST_VISIBLE | _HOST_COHERENT,
                          _HOST_VISIBLE | _HOST_COHERENT, _HOST_VISIBLE]
            else:
                wanted = [_DEVICE_LOCAL, 0]
            for want in wanted:
                for i, (flags, _heap) in enumerate(types):
                    if type_bits & (1 << i) and flags & want == want:
                        self._memory_type = (i, flags)
                        break
                if self._memory_type is not None:
                    break
            else:
                raise DeviceError(f"device '{self.context.info.name}' has no memory type for "
                                  f"storage buffers (memoryTypeBits 0x{type_bits:x})")
        return self._memory_type

    def allocate(self, size: int, usage: BufferUsage = BufferUsage.DEFAULT) -> VulkanBuffer:
        """A new buffer of `size` bytes (zero-size buffers still own one aligned unit)."""
        if size < 0:
            raise ValueError(f"buffer size {size} is negative")
        context = self.context
        context.check()
        with context.lock:
            block, offset = self._place(size)
            resource = BufferResource(self.free, block, offset, block.ranges.round(size))
            context.adopt(resource)
        buffer = VulkanBuffer(context, resource, size, usage, self.staged)
        buffer._finalizer = release_when_collected(buffer, resource, context.garbage)
        return buffer

    def _check_fits(self, size: int) -> None:
        """Refuse, before Vulkan sees it, a request no memory heap or buffer can hold (the
        validation layer reports those calls as errors rather than letting them fail)."""
        physical = self.context.physical
        limits = physical.limits
        bounds = [(int(limits.get("maxMemoryAllocationSize", 1 << 62)),
                   "maxMemoryAllocationSize"),
                  (int(limits.get("maxBufferSize", 1 << 62)), "maxBufferSize"),
                  (max((h for h, _ in physical.memory_heaps), default=1 << 62),
                   "the largest memory heap")]
        for bound, what in bounds:
            if size > bound:
                raise OutOfMemoryError(
                    "allocate", "VK_ERROR_OUT_OF_DEVICE_MEMORY",
                    f" (a buffer of {size} bytes exceeds {what}, {bound} bytes, of device "
                    f"'{self.context.info.name}')")

    def _place(self, size: int) -> tuple[MemoryBlock, int]:
        self._check_fits(size)
        if size * 4 >= self.block_size:
            reserved = max(self.alignment,
                           (size + self.alignment - 1) // self.alignment * self.alignment)
            return self._place_in_new_block(reserved, size, dedicated=True)
        for block in self._blocks:
            if not block.dedicated:
                offset = block.ranges.allocate(size)
                if offset is not None:
                    return block, offset
        return self._place_in_new_block(self.block_size, size, dedicated=False)

    def _place_in_new_block(self, block_size: int, size: int, dedicated: bool
                            ) -> tuple[MemoryBlock, int]:
        block = self._new_block(block_size, dedicated)
        self._blocks.append(block)
        offset = block.ranges.allocate(size)
        assert offset is not None, "a new block holds the allocation it is made for"
        return block, offset

    def _new_block(self, size: int, dedicated: bool) -> MemoryBlock:
        return MemoryBlock(self.context, size, dedicated, memory_type=self.memory_type,
                           mapped=self.host_mapped, alignment=self.alignment)

    def free(self, resource: BufferResource) -> None:
        """Return a buffer's range (under the device lock); empty blocks beyond one spare go."""
        block = resource.block
        if block.buffer is None:  # the whole allocator was already torn down
            return
        block.ranges.free(resource.offset, resource.reserved)
        if not block.ranges.is_empty:
            return
        spare = [b for b in self._blocks if not b.dedicated and b.ranges.is_empty]
        if block.dedicated or len(spare) > 1:
            self._blocks.remove(block)
            block.destroy()

    def trim(self) -> None:
        """Free the spare empty blocks kept for reuse."""
        for block in [b for b in self._blocks if b.ranges.is_empty]:
            self._blocks.remove(block)
            block.destroy()

    def destroy(self) -> None:
        """Free every block (device release); buffers still referenced become unusable."""
        for block in self._blocks:
            block.destroy()
        self._blocks.clear()

    @property
    def block_count(self) -> int:
        return len(self._blocks)


def _has_host_visible(context: DeviceContext) -> bool:
    return any(flags & _HOST_VISIBLE for flags, _ in context.physical.memory_types)
