"""What the objects made on one logical device share: a small context in place of the device.

Every object of the driver (allocator, buffers, command buffers and their recordings,
executables, semaphores, descriptor pools, the pipeline cache, the transfer path) needs a few
things of its device: the VkDevice handle and the device functions loaded for it, the physical
device's limits and features, the descriptor model chosen when the device was made, the lock
that serialises the externally-synchronised Vulkan objects, the live-object tracker, the command
pool and the queue, and the lifetimes of its resources (`adopt`, `retire`, the garbage queue
that finalizers feed, and `check`, which every HAL entry point calls). `DeviceContext` holds
exactly that. `VulkanDevice` makes it and hands it to the objects, so they import this module
and not the device: the device sits above its objects, importing them (only the driver imports
the device).

The context is also what keeps a device's Vulkan state reachable from its objects: a buffer
dropped after the device object itself still finds the handle, the lock and the garbage queue
here, and `released` says whether the handle may still be used.
"""
from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from irtk.errors import DeviceError

if TYPE_CHECKING:
    from irtk.hal import DeviceInfo
    from hal_vulkan.physical_device import PhysicalDevice
    from hal_vulkan.queue import Queue
    from hal_vulkan.resource import Resource
    from hal_vulkan.tracker import ObjectTracker
    from hal_vulkan.validation import ValidationLog


class DeviceContext:
    """A logical device as its objects see it (made once by `VulkanDevice`)."""

    def __init__(self, *, handle: Any, physical: PhysicalDevice, log: ValidationLog | None,
                 tracker: ObjectTracker, lock: threading.RLock, queue: Queue,
                 command_pool: Any, update_after_bind: bool, push_descriptors: bool,
                 push_descriptor_set: Callable[..., Any] | None) -> None:
        self.handle = handle  # the VkDevice
        self.physical = physical  # limits, features, memory types, identity
        self.log = log  # the validation log (None when validation is off)
        self.tracker = tracker
        self.lock = lock  # serialises the queue, command pool, descriptor pools, allocator
        self.queue = queue
        self.command_pool = command_pool
        # Descriptor model: sets rewritten after bind (rebinding), push descriptors, or
        # plain sets; chosen once per device (VulkanDevice).
        self.update_after_bind = update_after_bind
        self.push_descriptors = push_descriptors
        self.push_descriptor_set = push_descriptor_set  # vkCmdPushDescriptorSetKHR, if used
        self.released = False
        self.garbage: deque[Resource] = deque()  # fed by finalizers, drained by collect()
        self._resources: dict[int, Resource] = {}
        self._retiring: list[Resource] = []
        self._swept_at = -1  # the completed serial the last sweep of _retiring saw

    @property
    def info(self) -> DeviceInfo:
        return self.physical.info

    # -- the hook of every HAL call -----------------------------------------------------------
    def check(self) -> None:
        """Entry point of every HAL call: raise validation messages, free finished resources.

        A call makes several HAL calls, so this is on the per-call path many times over: it
        sweeps the retiring resources only when something may have become free since the
        last sweep (new garbage, or a newer completed serial: one counter read), not on
        every call."""
        if self.released:
            raise DeviceError(f"device '{self.info.name}' was released")
        if self.log is not None:
            self.log.raise_pending()
        if self.garbage:
            self.collect()
        elif self._retiring or self.queue.in_flight:
            if self.queue.poll() != self._swept_at:
                self.collect()

    # -- resource lifetimes -------------------------------------------------------------------
    def adopt(self, resource: Resource) -> None:
        """Own `resource`: destroyed by `retire`, by collection, or with the device."""
        with self.lock:
            self._resources[id(resource)] = resource

    def retire(self, resource: Resource) -> None:
        """Destroy `resource` as soon as the last submission using it has completed."""
        if self.released:
            return
        with self.lock:
            if resource.idle(self.queue.poll()):
                self._destroy(resource)
            else:
                self._retiring.append(resource)

    def collect(self) -> None:
        """Destroy collected or released resources that no pending submission uses."""
        if self.released:
            return
        with self.lock:
            # Polling first drops finished submissions, whose references may be the last to
            # the objects they used; their finalizers then feed the garbage queue below.
            completed = self.queue.poll()
            while self.garbage:
                self._retiring.append(self.garbage.popleft())
            self._swept_at = completed
            if not self._retiring:
                return
            still = []
            for resource in self._retiring:
                if resource.idle(completed):
                    self._destroy(resource)
                else:
                    still.append(resource)
            self._retiring = still

    def awaits_signals(self) -> bool:
        """Whether a retiring resource still waits for a GPU signal of its own (a semaphore
        whose last signal lands just after the queue's timeline: SemaphoreResource.idle)."""
        return any(getattr(r, "gpu_signal", 0) for r in self._retiring)

    def _destroy(self, resource: Resource) -> None:
        if resource.destroyed:
            return
        resource.destroyed = True
        self._resources.pop(id(resource), None)
        resource.destroy_handles()

    def release_resources(self) -> None:
        """Mark the device released and destroy every resource it still owns, in use or not
        (the device has waited for its queue); the caller holds the lock."""
        self.released = True
        self.garbage.clear()
        self._retiring.clear()
        for resource in list(self._resources.values()):
            resource.destroyed = True
            resource.destroy_handles()
        self._resources.clear()

    def __repr__(self) -> str:
        return f"DeviceContext({self.info.name!r})"
