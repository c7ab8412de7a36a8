"""Host reads and writes of buffers whose memory the host cannot map.

Used only when the allocator places buffers in memory that is not host-visible (a device
without host-visible storage memory, or `host_mapped=False`): the bytes travel through a
temporary host-visible buffer and a one-off copy on the queue, waited for on the spot.
The copy does not wait on any semaphore, so it must not be used for a buffer that queued work
still writes (the HAL contract: wait for that work's fence first), and it queues behind every
earlier submission (one queue, in order): `Buffer.read`/`write` of unmapped memory wait until
submissions blocked on fences move. Queue operations therefore never use it: they copy through
`staging_allocator()` buffers on the queue, ordered by their fences.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import vulkan as vk

from hal_vulkan.allocator import VulkanAllocator
from hal_vulkan.recorder import execution_barrier
from hal_vulkan.status import call

if TYPE_CHECKING:
    from hal_vulkan.buffer import VulkanBuffer
    from hal_vulkan.context import DeviceContext


class HostTransfer:
    """The device's staging: host-mapped buffers, and the copies that reach unmapped memory
    (`buffer.StagedCopies`)."""

    def __init__(self, context: DeviceContext) -> None:
        self.context = context
        self._allocator: VulkanAllocator | None = None

    def staging_allocator(self) -> VulkanAllocator:
        """Host-mapped buffers (for staging): written by the host at once, never through the
        queue, so making one cannot wait behind submissions blocked on a fence."""
        return self._staging()

    def _staging(self) -> VulkanAllocator:
        if self._allocator is None:
            self._allocator = VulkanAllocator(self.context, self, host_mapped=True,
                                              block_size=4 << 20)
        return self._allocator

    def upload(self, buffer: VulkanBuffer, offset: int, data: bytes) -> None:
        with self.context.lock:
            tmp = self._staging().allocate_with_data(data)
        try:
            self._run(lambda cb: _copy(cb, tmp, 0, buffer, offset, len(data)))
        finally:
            tmp.release()

    def download(self, buffer: VulkanBuffer, offset: int, length: int) -> bytes:
        if not length:
            return b""
        with self.context.lock:
            tmp = self._staging().allocate(length)
        try:
            self._run(lambda cb: _copy(cb, buffer, offset, tmp, 0, length))
            return tmp.read(0, length)
        finally:
            tmp.release()

    def _run(self, body: Callable[[Any], None]) -> None:
        """Record, submit and wait for a one-off copy; the wait happens outside the device
        lock so other threads can keep signalling and submitting meanwhile."""
        context = self.context
        with context.lock:
            cb = call(vk.vkAllocateCommandBuffers, context.handle, vk.VkCommandBufferAllocateInfo(
                sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                commandPool=context.command_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                commandBufferCount=1))[0]
            context.tracker.created("VkCommandBuffer")
            serial = 0
            try:
                call(vk.vkBeginCommandBuffer, cb, vk.VkCommandBufferBeginInfo(
                    sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                    flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
                execution_barrier(cb)
                body(cb)
                barrier = vk.VkMemoryBarrier(sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                             srcAccessMask=vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                                             dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT)
                vk.vkCmdPipelineBarrier(cb, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                                        vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, [barrier], 0,
                                        None, 0, None)
                call(vk.vkEndCommandBuffer, cb)
                serial = context.queue.submit([], [], [cb], [])
            finally:
                if not serial:
                    self._free(cb)
        try:
            context.queue.wait_serial(serial, 1 << 62)
        finally:
            with context.lock:
                if context.queue.poll() >= serial:
                    self._free(cb)

    def _free(self, cb: Any) -> None:
        vk.vkFreeCommandBuffers(self.context.handle, self.context.command_pool, 1, [cb])
        self.context.tracker.destroyed("VkCommandBuffer")

    def trim(self) -> None:
        if self._allocator is not None:
            self._allocator.trim()

    def destroy(self) -> None:
        if self._allocator is not None:
            self._allocator.destroy()
            self._allocator = None


def _copy(cb: Any, src: VulkanBuffer, src_offset: int, dst: VulkanBuffer, dst_offset: int,
          size: int) -> None:
    region = vk.VkBufferCopy(srcOffset=src.device_offset(src_offset),
                             dstOffset=dst.device_offset(dst_offset), size=size)
    vk.vkCmdCopyBuffer(cb, src.vk_buffer, dst.vk_buffer, 1, [region])
