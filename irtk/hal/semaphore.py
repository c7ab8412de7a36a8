"""Timeline semaphores and fences: how queue operations order themselves and report completion.

A semaphore carries a monotonically increasing 64-bit value; a fence is a set of (semaphore,
value) points. A failed semaphore carries the error that caused it, and waiting on it raises.
Timeouts are in seconds for the whole wait (None: forever; 0: just poll).
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

INFINITE_TIMEOUT: float | None = None

# Polling interval bounds for waits that span several semaphores (wait-any).
_POLL_MIN_S = 50e-6
_POLL_MAX_S = 2e-3


class Semaphore(ABC):
    @abstractmethod
    def query(self) -> int:
        """The current payload value; raises the failure if the semaphore has failed. A poll:
        work held back for a waiter (see `flush`) is started."""

    def peek(self) -> int:
        """`query` without `flush`: for a thread that will wait (or flush) next."""
        return self.query()

    @abstractmethod
    def signal(self, value: int) -> None:
        """Host signal: advance the payload to `value`."""

    @abstractmethod
    def wait(self, value: int, timeout: float | None = INFINITE_TIMEOUT) -> bool:
        """Block until the payload reaches `value`; False on timeout, raises on failure."""

    @abstractmethod
    def fail(self, error: Exception) -> None:
        """Mark the semaphore failed: every waiter, now and later, gets `error`."""

    def donate(self, value: int) -> bool:
        """Run work that signals it on the calling thread where the device allows that
        (local-task), until `value` is reached or nothing more may run here; True when
        reached. A plain semaphore runs nothing: False unless reached."""
        return self.peek() >= value

    def flush(self) -> None:
        """Make sure the work that signals it is under way: a device may hold a submission back
        for a thread that will wait on it (local-task); whoever polls instead of waiting, or
        hands a pending wait back to its caller, calls this."""


@dataclass
class Fence:
    """A set of timeline points; a queue op waits on one fence and signals another."""

    points: list[tuple[Semaphore, int]] = field(default_factory=list)

    def insert(self, semaphore: Semaphore, value: int) -> None:
        for i, (s, v) in enumerate(self.points):
            if s is semaphore:
                self.points[i] = (s, max(v, value))
                return
        self.points.append((semaphore, value))

    def signal(self) -> None:
        for s, v in self.points:
            s.signal(v)

    def fail(self, error: Exception) -> None:
        for s, _ in self.points:
            s.fail(error)

    def flush(self) -> None:
        for s, _ in self.points:
            s.flush()

    def donate(self) -> bool:
        """`Semaphore.donate` for every point; True when all are reached."""
        return all(s.donate(v) for s, v in self.points)

    def wait(self, timeout: float | None = INFINITE_TIMEOUT) -> bool:
        """Wait for all points within `timeout` seconds overall; raises if one has failed."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        for s, v in self.points:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not s.wait(v, remaining):
                return False
        return True

    def is_reached(self, flush: bool = True) -> bool:
        """Every point reached (raises if one has failed); `flush=False` checks without
        starting held-back work (the caller waits or flushes next)."""
        if flush:
            return all(s.query() >= v for s, v in self.points)
        return all(s.peek() >= v for s, v in self.points)


def wait_all(fences: Sequence[Fence], timeout: float | None = INFINITE_TIMEOUT) -> bool:
    """Every fence reached within `timeout` seconds overall; raises the first failure met."""
    return Fence([p for f in fences for p in f.points]).wait(timeout)


def wait_any(fences: Sequence[Fence], timeout: float | None = INFINITE_TIMEOUT) -> int:
    """The index of a reached fence (the lowest if several are), or -1 on timeout.

    A failed fence counts as done and raises its failure, as IREE's wait-any reports the
    failure of any semaphore it waits on. An empty fence is reached at once.
    """
    if not fences:
        raise ValueError("wait_any needs at least one fence")
    deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
    delay = _POLL_MIN_S
    while True:
        for i, fence in enumerate(fences):
            if fence.is_reached():
                return i
        if deadline is not None and time.monotonic() >= deadline:
            return -1
        pause = delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic()))
        time.sleep(pause)
        delay = min(delay * 2, _POLL_MAX_S)
