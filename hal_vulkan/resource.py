"""Device-owned Vulkan handles and when they may be destroyed.

A HAL object (buffer, executable, command buffer, semaphore) keeps its Vulkan handles in a
`Resource`. The resource, not the HAL object, is what the device tracks: it records the queue
serial of the last submission that used it, so `release()` (or the garbage collector dropping the
HAL object) destroys the handles only once the GPU is done with them, and `Device.release()`
can destroy whatever is left.
"""
from __future__ import annotations

import weakref
from abc import ABC, abstractmethod
from typing import Any


class Resource(ABC):
    kind = "resource"

    def __init__(self) -> None:
        self.last_use = 0  # queue serial of the last submission that used the handles
        self.destroyed = False

    def idle(self, completed: int) -> bool:
        """Whether no submission can still touch the handles, `completed` being the newest
        queue serial known complete."""
        return self.last_use <= completed

    @abstractmethod
    def destroy_handles(self) -> None:
        """Destroy the Vulkan handles; called once, under the device lock."""


def release_when_collected(owner: Any, resource: Resource, garbage: Any) -> weakref.finalize:
    """When `owner` is garbage collected, queue `resource` for destruction.

    The finalizer only appends to the device's garbage queue (thread-safe, no Vulkan call):
    collection may happen in the middle of another driver call, so the actual destruction waits
    for the next safe point (`VulkanDevice.collect`).
    """
    fin = weakref.finalize(owner, garbage.append, resource)
    fin.atexit = False
    return fin
