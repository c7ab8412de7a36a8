"""A block of device memory: one VkDeviceMemory with a VkBuffer over all of it.

The allocator (`allocator.py`) carves HAL buffers out of blocks (Vulkan limits the number of
allocations and each one is slow); a buffer is (block, offset, size) and a descriptor binds the
block's VkBuffer at an offset. A block is mapped for its whole life when its allocator keeps
host-mapped memory, so buffer reads and writes are copies (plus flush or invalidate where the
memory is not coherent).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import vulkan as vk

from hal_vulkan.status import call
from hal_vulkan.suballocator import RangeAllocator

if TYPE_CHECKING:
    from hal_vulkan.context import DeviceContext

# Uniform texel buffer: executables may read bindings through buffer views (recorder.py).
BUFFER_USAGE = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
                | vk.VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT)
_block_serials = iter(range(1, 1 << 62))


class MemoryBlock:
    """One VkDeviceMemory with a VkBuffer over all of it, mapped when host-visible.

    `memory_type` picks (index, property flags) of the memory type from the buffer's
    memoryTypeBits; `mapped` maps the block; `alignment` is where its ranges may start."""

    def __init__(self, context: DeviceContext, size: int, dedicated: bool, *,
                 memory_type: Callable[[int], tuple[int, int]], mapped: bool,
                 alignment: int) -> None:
        self.context = context
        self.size = size
        self.dedicated = dedicated
        # Identity of the VkBuffer that a later block never shares (handles may be reused).
        self.serial = next(_block_serials)
        self.mapping: memoryview | None = None
        self.memory: Any = None
        handle, tracker = context.handle, context.tracker
        self.buffer = call(vk.vkCreateBuffer, handle, vk.VkBufferCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=size, usage=BUFFER_USAGE,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        tracker.created("VkBuffer")
        try:
            reqs = vk.vkGetBufferMemoryRequirements(handle, self.buffer)
            self.type_index, self.flags = memory_type(reqs.memoryTypeBits)
            self.memory = call(vk.vkAllocateMemory, handle, vk.VkMemoryAllocateInfo(
                sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=reqs.size,
                memoryTypeIndex=self.type_index), None)
            tracker.created("VkDeviceMemory")
            call(vk.vkBindBufferMemory, handle, self.buffer, self.memory, 0)
            if mapped:
                raw = call(vk.vkMapMemory, handle, self.memory, 0, size, 0)
                self.mapping = memoryview(raw).cast("B")
        except BaseException:
            self.destroy()
            raise
        self.coherent = bool(self.flags & vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
        self.ranges = RangeAllocator(size, alignment)

    def destroy(self) -> None:
        handle = self.context.handle
        if self.mapping is not None:
            try:
                self.mapping.release()
            except BufferError:  # a view still exported; unmapping below invalidates it anyway
                pass
            self.mapping = None
            vk.vkUnmapMemory(handle, self.memory)
        if self.buffer is not None:
            vk.vkDestroyBuffer(handle, self.buffer, None)
            self.context.tracker.destroyed("VkBuffer")
            self.buffer = None
        if self.memory is not None:
            vk.vkFreeMemory(handle, self.memory, None)
            self.context.tracker.destroyed("VkDeviceMemory")
            self.memory = None

    def flush(self, offset: int, length: int, invalidate: bool) -> None:
        """Make host writes visible to the device (or device writes to the host) when the
        memory is not coherent; ranges widen to nonCoherentAtomSize as Vulkan requires."""
        if self.coherent or length == 0:
            return
        atom = int(self.context.physical.limits["nonCoherentAtomSize"])
        start = offset // atom * atom
        end = min(self.size, (offset + length + atom - 1) // atom * atom)
        rng = vk.VkMappedMemoryRange(sType=vk.VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
                                     memory=self.memory, offset=start, size=end - start)
        fn = vk.vkInvalidateMappedMemoryRanges if invalidate else vk.vkFlushMappedMemoryRanges
        call(fn, self.context.handle, 1, [rng])
