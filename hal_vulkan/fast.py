"""The per-call Vulkan calls, made straight through cffi.

The `vulkan` binding builds every struct argument with a generic constructor that inspects the
struct's fields and casts each value (`_new`), and converts every argument again in `_callApi`;
on a whole row-sum call that was about a third of the host time spent in Vulkan calls. The few
calls each submit and wait makes (vkQueueSubmit, vkCreateSemaphore, vkGetSemaphoreCounterValue,
vkWaitSemaphores)
fill their structs with `ffi.new` here and call the loader's entry points directly. Results go
through `status.check_result`, so errors read as they do for every other call.
"""
from __future__ import annotations

from typing import Any, Sequence

import vulkan as vk

from hal_vulkan.status import check_result

ffi, lib = vk.ffi, vk.lib

_ALL_COMMANDS = vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT


def queue_submit(queue: Any, waits: Sequence[tuple[Any, int]],
                 signals: Sequence[tuple[Any, int]], command_buffers: Sequence[Any]) -> None:
    """One vkQueueSubmit of one batch: wait on timeline points (handle, value), run the command
    buffers, signal timeline points."""
    timeline = ffi.new("VkTimelineSemaphoreSubmitInfo*")
    timeline.sType = vk.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO
    info = ffi.new("VkSubmitInfo*")
    info.sType = vk.VK_STRUCTURE_TYPE_SUBMIT_INFO
    info.pNext = timeline
    keep = []  # the arrays the structs point at live until the call returns
    if waits:
        handles = ffi.new("VkSemaphore[]", [h for h, _ in waits])
        values = ffi.new("uint64_t[]", [v for _, v in waits])
        stages = ffi.new("VkPipelineStageFlags[]", [_ALL_COMMANDS] * len(waits))
        keep += [handles, values, stages]
        info.waitSemaphoreCount = len(waits)
        info.pWaitSemaphores = handles
        info.pWaitDstStageMask = stages
        timeline.waitSemaphoreValueCount = len(waits)
        timeline.pWaitSemaphoreValues = values
    if command_buffers:
        cbs = ffi.new("VkCommandBuffer[]", list(command_buffers))
        keep.append(cbs)
        info.commandBufferCount = len(command_buffers)
        info.pCommandBuffers = cbs
    if signals:
        handles = ffi.new("VkSemaphore[]", [h for h, _ in signals])
        values = ffi.new("uint64_t[]", [v for _, v in signals])
        keep += [handles, values]
        info.signalSemaphoreCount = len(signals)
        info.pSignalSemaphores = handles
        timeline.signalSemaphoreValueCount = len(signals)
        timeline.pSignalSemaphoreValues = values
    check_result("vkQueueSubmit", lib.vkQueueSubmit(queue, 1, info, ffi.NULL))
    del keep


def create_timeline(device: Any, initial_value: int) -> Any:
    """A new timeline VkSemaphore (a fence.create per call makes one)."""
    type_info = ffi.new("VkSemaphoreTypeCreateInfo*")
    type_info.sType = vk.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO
    type_info.semaphoreType = vk.VK_SEMAPHORE_TYPE_TIMELINE
    type_info.initialValue = initial_value
    info = ffi.new("VkSemaphoreCreateInfo*")
    info.sType = vk.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO
    info.pNext = type_info
    handle = ffi.new("VkSemaphore*")
    check_result("vkCreateSemaphore", lib.vkCreateSemaphore(device, info, ffi.NULL, handle))
    return handle[0]


def counter_value(device: Any, semaphore: Any) -> int:
    """vkGetSemaphoreCounterValue."""
    value = ffi.new("uint64_t*")
    check_result("vkGetSemaphoreCounterValue",
                 lib.vkGetSemaphoreCounterValue(device, semaphore, value))
    return int(value[0])


class SemaphoreWait:
    """A prepared vkWaitSemaphores for all of some timeline points (built once, waited on
    many times, as a wait loop in slices does)."""

    def __init__(self, points: Sequence[tuple[Any, int]]) -> None:
        self._handles = ffi.new("VkSemaphore[]", [h for h, _ in points])
        self._values = ffi.new("uint64_t[]", [v for _, v in points])
        info = ffi.new("VkSemaphoreWaitInfo*")
        info.sType = vk.VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO
        info.semaphoreCount = len(points)
        info.pSemaphores = self._handles
        info.pValues = self._values
        self._info = info

    def wait(self, device: Any, timeout_ns: int) -> bool:
        """True once every point is reached, False when `timeout_ns` passes first; a failed
        wait raises the DeviceCallError naming its result."""
        result = lib.vkWaitSemaphores(device, self._info, timeout_ns)
        if result == vk.VK_TIMEOUT:
            return False
        check_result("vkWaitSemaphores", result)
        return True
