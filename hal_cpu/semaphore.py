"""Timeline semaphores on a condition variable.

The queue thread, worker threads and the host all meet here, so the payload and the failure are
only touched under the condition's lock. A failure is sticky and wins over the payload: once a
semaphore has failed, every wait and query raises, as IREE's semaphores do.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from irtk.errors import Error, RuntimeFailure
from irtk.hal.semaphore import INFINITE_TIMEOUT, Semaphore

if TYPE_CHECKING:
    from hal_cpu.submission_queue import SubmissionQueue


class CpuSemaphore(Semaphore):
    """`queue`, where given (local-task), is the device's submission queue: a wait without a
    time limit runs its ready submissions on the waiting thread before blocking, so the thread
    that waits does the work instead of waking another to do it; any wait that blocks wakes
    the queue thread first (its wake may have been deferred for a donor)."""

    def __init__(self, initial_value: int = 0, queue: SubmissionQueue | None = None) -> None:
        if initial_value < 0:
            raise ValueError(f"semaphore initial value must be >= 0, got {initial_value}")
        self.queue = queue
        self._value = initial_value
        self._failure: BaseException | None = None
        self._cond = threading.Condition()

    def query(self) -> int:
        value = self.peek()
        if self.queue is not None:
            self.queue.wake()
        return value

    def peek(self) -> int:
        with self._cond:
            if self._failure is not None:
                raise failure_error(self._failure)
            return self._value

    def signal(self, value: int) -> None:
        with self._cond:
            if self._failure is not None:
                return  # the failure already reached every waiter; nothing to advance
            if value < self._value:
                raise RuntimeFailure(
                    f"semaphore payload can only increase: it is {self._value}, signalled {value}")
            if value != self._value:
                self._value = value
                self._cond.notify_all()

    def wait(self, value: int, timeout: float | None = INFINITE_TIMEOUT) -> bool:
        queue = self.queue
        if queue is not None:
            while True:
                with self._cond:
                    if self._failure is not None or self._value >= value:
                        return self._result()
                # A bounded wait must not start work that may outlast it.
                if timeout is not None or not queue.donate():
                    break
            queue.wake()
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        with self._cond:
            while self._failure is None and self._value < value:
                if deadline is None:
                    self._cond.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return self._result()

    def _result(self) -> bool:
        if self._failure is not None:
            raise failure_error(self._failure)
        return True

    def flush(self) -> None:
        if self.queue is not None:
            self.queue.wake()

    def donate(self, value: int) -> bool:
        queue = self.queue
        while True:
            with self._cond:
                if self._failure is not None:
                    return True          # over: waiting on it raises the failure
                if self._value >= value:
                    return True
            if queue is None or not queue.donate():
                return False

    def fail(self, error: BaseException) -> None:
        with self._cond:
            if self._failure is None:  # the first failure is the cause; later ones are echoes
                self._failure = error
                self._cond.notify_all()

    @property
    def failure(self) -> BaseException | None:
        """The error this semaphore failed with, or None (does not raise)."""
        with self._cond:
            return self._failure

    def __repr__(self) -> str:
        state = f"failed: {self._failure}" if self._failure is not None else f"value={self._value}"
        return f"CpuSemaphore({state})"


def failure_error(error: BaseException) -> RuntimeFailure:
    """A fresh RuntimeFailure for one waiter, carrying the original message (and as its cause).

    Each waiter gets its own exception object because raising one object from several threads
    would interleave their tracebacks.
    """
    message = str(error) if isinstance(error, Error) else f"{type(error).__name__}: {error}"
    failure = RuntimeFailure(message)
    failure.__cause__ = error
    return failure
