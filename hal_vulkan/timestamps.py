"""Per-dispatch device time, from timestamp queries written around each vkCmdDispatch.

Opt-in per command buffer (`create_command_buffer(..., timestamps=True)`): each recording then
owns a query pool with two queries per dispatch, reset at the start of the recording. Times
are read once the submission has completed; software drivers report the host's clock.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import vulkan as vk

from irtk.errors import DeviceError
from hal_vulkan.status import call

if TYPE_CHECKING:
    from hal_vulkan.context import DeviceContext


def supported(context: DeviceContext) -> bool:
    limits = context.physical.limits
    return int(limits.get("timestampValidBits", 0)) > 0 and \
        float(limits.get("timestampPeriod", 0.0)) > 0.0


class TimestampQueries:
    """A query pool with a begin and an end timestamp for each of `dispatch_count` dispatches."""

    def __init__(self, context: DeviceContext, dispatch_count: int) -> None:
        if not supported(context):
            raise DeviceError(f"device '{context.info.name}' has no timestamp queries on its "
                              "compute queue")
        self.context = context
        self.count = 2 * max(1, dispatch_count)
        self.pool = call(vk.vkCreateQueryPool, context.handle, vk.VkQueryPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=self.count), None)
        context.tracker.created("VkQueryPool")
        bits = int(context.physical.limits["timestampValidBits"])
        self._mask = (1 << bits) - 1 if bits < 64 else (1 << 64) - 1
        self._period_s = float(context.physical.limits["timestampPeriod"]) * 1e-9

    def reset(self, cb: Any) -> None:
        vk.vkCmdResetQueryPool(cb, self.pool, 0, self.count)

    def before(self, cb: Any, dispatch: int) -> None:
        vk.vkCmdWriteTimestamp(cb, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, self.pool, 2 * dispatch)

    def after(self, cb: Any, dispatch: int) -> None:
        vk.vkCmdWriteTimestamp(cb, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self.pool,
                               2 * dispatch + 1)

    def read(self, dispatch_count: int) -> list[float]:
        """Seconds each dispatch took (call once the submission has completed)."""
        return [duration / 1e9 for _, duration in self.read_ns(dispatch_count)]

    def read_ns(self, dispatch_count: int) -> list[tuple[int, int]]:
        """(start, duration) of each dispatch in nanoseconds of the device's clock (call once
        the submission has completed)."""
        n = 2 * dispatch_count
        if not n:
            return []
        data = vk.ffi.new("uint64_t[]", n)
        call(vk.vkGetQueryPoolResults, self.context.handle, self.pool, 0, n, 8 * n, data, 8,
             vk.VK_QUERY_RESULT_64_BIT)
        period_ns = self._period_s * 1e9
        return [(round((data[2 * i] & self._mask) * period_ns),
                 round(((data[2 * i + 1] - data[2 * i]) & self._mask) * period_ns))
                for i in range(dispatch_count)]

    def destroy(self) -> None:
        vk.vkDestroyQueryPool(self.context.handle, self.pool, None)
        self.context.tracker.destroyed("VkQueryPool")
