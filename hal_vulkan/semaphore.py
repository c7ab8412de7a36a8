"""HAL semaphores as Vulkan timeline semaphores.

The payload lives in Vulkan, so the GPU signals and waits on it directly. Failure has no Vulkan
counterpart: it is recorded here, then the Vulkan payload is bumped (when no GPU signal is still
pending) so host waiters and queued GPU work waiting on it wake up instead of hanging; they see
the recorded error. Host waits run in slices so a failure recorded while a GPU signal is still
pending is noticed too.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import vulkan as vk

from irtk.errors import DeviceError, Error, RuntimeFailure
from irtk.hal import Semaphore
from irtk.hal.errors import DeviceCallError
from hal_vulkan import fast
from hal_vulkan.resource import Resource, release_when_collected
from hal_vulkan.status import call

if TYPE_CHECKING:
    from hal_vulkan.context import DeviceContext

WAIT_SLICE_S = 0.05  # how soon a host waiter notices a failure the GPU cannot deliver


class SemaphoreResource(Resource):
    kind = "semaphore"

    def __init__(self, context: DeviceContext, initial_value: int) -> None:
        super().__init__()
        self.context = context
        self.handle = fast.create_timeline(context.handle, initial_value)
        context.tracker.created("VkSemaphore")
        self.gpu_signal = 0  # the highest value a submission signals it to

    def idle(self, completed: int) -> bool:
        """Not when the last submission using it has completed but when the driver is done
        with it (`Queue.settled`: its queue thread still locks a wait semaphore's timeline
        after signalling). The private timeline is signalled before the caller's semaphores,
        so a semaphore also waits until its own last GPU signal has landed."""
        if self.last_use > self.context.queue.settled(completed):
            return False
        if not self.gpu_signal:
            return True
        try:
            value = fast.counter_value(self.context.handle, self.handle)
        except DeviceError:
            return False  # a lost device: destroyed with the device
        return value >= self.gpu_signal

    def destroy_handles(self) -> None:
        vk.vkDestroySemaphore(self.context.handle, self.handle, None)
        self.context.tracker.destroyed("VkSemaphore")


class VulkanSemaphore(Semaphore):
    def __init__(self, context: DeviceContext, initial_value: int = 0) -> None:
        self.context = context
        self.resource = SemaphoreResource(context, initial_value)
        context.adopt(self.resource)
        self._finalizer = release_when_collected(self, self.resource, context.garbage)
        self.error: BaseException | None = None
        self._fail_lock = threading.Lock()

    @property
    def handle(self) -> Any:
        if not self._finalizer.alive or self.context.released:
            raise DeviceError("semaphore was released")
        return self.resource.handle

    def _raise_failure(self) -> None:
        """A fresh RuntimeFailure per waiter (one object raised in several threads would mix
        their tracebacks), carrying the original message and the error as its cause."""
        error = self.error
        message = str(error) if isinstance(error, Error) else f"{type(error).__name__}: {error}"
        raise RuntimeFailure(message) from error

    def payload(self) -> int:
        """The Vulkan counter value, ignoring failure."""
        return fast.counter_value(self.context.handle, self.handle)

    def query(self) -> int:
        self.context.check()
        if self.error is not None:
            self._raise_failure()
        return self.payload()

    def signal(self, value: int) -> None:
        """Host signal; signalling the current value again is a no-op, a lower one an error."""
        self.context.check()
        if self.error is not None:
            return  # the failure already reached every waiter; nothing to advance
        current = self.payload()
        if value < current:
            raise RuntimeFailure(
                f"semaphore payload can only increase: it is {current}, signalled {value}")
        if value == current:
            return
        call(vk.vkSignalSemaphore, self.context.handle, vk.VkSemaphoreSignalInfo(
            sType=vk.VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO, semaphore=self.handle, value=value))
        self.context.check()

    def wait(self, value: int, timeout: float | None = None) -> bool:
        """Block until the payload reaches `value` (timeout in seconds, None: forever)."""
        context = self.context
        context.check()
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        waiter = fast.SemaphoreWait([(self.handle, value)])
        while True:
            if self.error is not None:
                self._raise_failure()
            remaining = WAIT_SLICE_S if deadline is None else deadline - time.monotonic()
            slice_ns = int(max(0.0, min(remaining, WAIT_SLICE_S)) * 1e9)
            try:
                reached = waiter.wait(context.handle, slice_ns)
            except DeviceCallError as error:
                self.fail(error)
                raise error from None
            if reached:
                break
            if deadline is not None and time.monotonic() >= deadline:
                if self.error is not None:
                    self._raise_failure()
                context.check()
                return False
        if self.error is not None:
            self._raise_failure()
        context.collect()
        context.check()
        return True

    def fail(self, error: BaseException) -> None:
        """Record the first error, wake waiters and fail work that depends on this semaphore."""
        with self._fail_lock:
            if self.error is not None:
                return
            self.error = error
        if not self.context.released and self._finalizer.alive:
            self.context.queue.on_semaphore_failed(self, error)

    def release(self) -> None:
        """Destroy the Vulkan semaphore once no submission uses it; idempotent."""
        if self._finalizer.detach() is not None:
            self.context.retire(self.resource)

    def __repr__(self) -> str:
        state = f"failed: {self.error}" if self.error is not None else "ok"
        return f"VulkanSemaphore({state})"
