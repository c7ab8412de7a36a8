"""The device's one compute queue: submissions, their timeline points, and what is in flight.

Every submission also signals a queue-private timeline semaphore with an increasing serial, so
"has the GPU finished with X" is one counter read. Submissions stay listed until their serial is
reached, which keeps their command buffers, bindings and semaphores alive and lets a failure
propagate to the work that waits on it.

Reached is not finished with, though: a driver's queue thread goes on touching a submission
after signalling it (Mesa's common queue code installs the later signal points and then
releases the wait points, locking each wait semaphore's timeline). Destroying a semaphore in
that window crashed lavapipe's queue thread on loaded machines. The thread handles submissions
in order, so once serial N + 1 is reached it is done with N: a semaphore stamped N is destroyed
when `settled()` reaches N (SemaphoreResource.idle; buffers, pipelines and command buffers are
done with before the signal). A barrier (an empty submission holding nothing of ours) settles
everything before it, for `wait_idle`.
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import vulkan as vk

from irtk.errors import DeviceError
from hal_vulkan import fast
from hal_vulkan.status import call

if TYPE_CHECKING:
    from hal_vulkan.physical_device import PhysicalDevice
    from hal_vulkan.tracker import ObjectTracker


class Timeline(Protocol):
    """What the queue needs of a HAL semaphore whose points it waits on or signals
    (`semaphore.VulkanSemaphore`)."""

    error: BaseException | None

    @property
    def handle(self) -> Any: ...

    def payload(self) -> int: ...

    def fail(self, error: BaseException) -> None: ...


Points = list[tuple[Timeline, int]]


@dataclass
class Submission:
    serial: int
    waits: Points
    signals: Points
    keep_alive: list[Any] = field(default_factory=list)


class Queue:
    """Made before the device's context (which holds it), from the parts of the device it
    needs: the VkDevice, the physical device (queue family, limits, name), the tracker and
    the device lock."""

    def __init__(self, vk_device: Any, physical: PhysicalDevice, tracker: ObjectTracker,
                 lock: threading.RLock) -> None:
        self.vk_device = vk_device
        self.physical = physical
        self.tracker = tracker
        self.lock = lock
        self.handle = vk.vkGetDeviceQueue(vk_device, physical.queue_family, 0)
        self.timeline = fast.create_timeline(vk_device, 0)
        tracker.created("VkSemaphore")
        self.serial = 0  # last serial submitted
        self.completed = 0  # last serial known complete
        self.barrier = 0  # the newest barrier's serial (a submission of no resources)
        self.in_flight: deque[Submission] = deque()
        # Called (with the lock held) when `completed` advances, before anyone can learn it
        # has: what reads a completed submission's results (trace timings) reads them before
        # the recordings can be reused.
        self.on_complete: Callable[[int], None] | None = None

    def poll(self) -> int:
        """The newest completed serial; forgets the submissions it covers. Takes the device
        lock (callers such as `wait_serial` may not hold it): two threads popping finished
        submissions at once could otherwise pop one that has not finished, or an empty deque,
        and `completed` could go back to an older reading."""
        if self.completed < self.serial:
            with self.lock:
                completed = fast.counter_value(self.vk_device, self.timeline)
                if completed > self.completed:
                    self.completed = completed
                    if self.on_complete is not None:
                        self.on_complete(completed)
                while self.in_flight and self.in_flight[0].serial <= self.completed:
                    self.in_flight.popleft()
        return self.completed

    def settled(self, completed: int | None = None) -> int:
        """The newest serial the driver is entirely done with: one before the newest
        completed (`completed`, else polled), or that one if it is a barrier (module
        docstring)."""
        if completed is None:
            completed = self.poll()
        return completed if completed == self.barrier else completed - 1

    def submit_barrier(self) -> int:
        """An empty submission that only signals the private timeline (caller holds the device
        lock): once it completes, every submission before it has settled."""
        serial = self.serial + 1
        fast.queue_submit(self.handle, [], [(self.timeline, serial)], [])
        self.serial = self.barrier = serial
        self.in_flight.append(Submission(serial, [], [], []))
        return serial

    def submit(self, waits: Sequence[tuple[Timeline, int]],
               signals: Sequence[tuple[Timeline, int]], command_buffers: list[Any],
               keep_alive: list[Any]) -> int:
        """One vkQueueSubmit (caller holds the device lock); returns its serial."""
        serial = self.serial + 1
        # The private timeline goes first: drivers that signal in order then have it reached
        # by the time a host waiter sees the caller's points, so resources free sooner.
        fast.queue_submit(self.handle, [(s.handle, v) for s, v in waits],
                          [(self.timeline, serial)] + [(s.handle, v) for s, v in signals],
                          command_buffers)
        self.serial = serial
        self.in_flight.append(Submission(serial, list(waits), list(signals), keep_alive))
        return serial

    def wait_serial(self, serial: int, timeout_ns: int) -> bool:
        """Block until the private timeline reaches `serial`; False on timeout."""
        if self.completed >= serial:
            return True
        if not fast.SemaphoreWait([(self.timeline, serial)]).wait(self.vk_device, timeout_ns):
            return False
        self.poll()
        return True

    # -- failure ------------------------------------------------------------------------------
    def on_semaphore_failed(self, semaphore: Timeline, error: BaseException) -> None:
        """Fail everything downstream of `semaphore` and unblock whatever waits on it."""
        with self.lock:
            self.poll()
            pending = [sub for sub in self.in_flight]
            gpu_signals = any(s is semaphore for sub in pending for s, _ in sub.signals)
            waiting_values = [v for sub in pending for s, v in sub.waits if s is semaphore]
            downstream = [sig for sub in pending if any(s is semaphore for s, _ in sub.waits)
                          for sig in sub.signals]
            if not gpu_signals:
                current = semaphore.payload()
                limit = int(self.physical.limits.get("maxTimelineSemaphoreValueDifference",
                                                     (1 << 31) - 1))
                target = max([current + 1] + waiting_values)
                target = min(target + (1 << 32), current + limit)
                if target > current:
                    call(vk.vkSignalSemaphore, self.vk_device, vk.VkSemaphoreSignalInfo(
                        sType=vk.VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
                        semaphore=semaphore.handle, value=target))
        for downstream_semaphore, _ in downstream:
            downstream_semaphore.fail(error)

    def abandon_blocked(self) -> None:
        """Before tearing down: fail host-signalled points that queued work still waits on,
        so the GPU can drain instead of waiting forever."""
        self.poll()
        gpu_signalled = {id(s) for sub in self.in_flight for s, _ in sub.signals}
        for sub in list(self.in_flight):
            for s, v in sub.waits:
                if id(s) not in gpu_signalled and s.error is None and s.payload() < v:
                    s.fail(DeviceError(f"device '{self.physical.info.name}' was released while "
                                       "queued work waited on this semaphore"))

    def destroy(self) -> None:
        vk.vkDestroySemaphore(self.vk_device, self.timeline, None)
        self.tracker.destroyed("VkSemaphore")
        self.in_flight.clear()
