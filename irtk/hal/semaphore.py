"""Timeline semaphores and fences: how queue operations order themselves and report completion.

A semaphore carries a monotonically increasing 64-bit value; a fence is a set of (semaphore,
value) points. A failed semaphore carries the error that caused it, and waiting on it raises.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

INFINITE_TIMEOUT: float | None = None


class Semaphore(ABC):
    @abstractmethod
    def query(self) -> int:
        """The current payload value; raises the failure if the semaphore has failed."""

    @abstractmethod
    def signal(self, value: int) -> None:
        """Host signal: advance the payload to `value`."""

    @abstractmethod
    def wait(self, value: int, timeout: float | None = INFINITE_TIMEOUT) -> bool:
        """Block until the payload reaches `value`; False on timeout, raises on failure."""

    @abstractmethod
    def fail(self, error: Exception) -> None:
        """Mark the semaphore failed: every waiter, now and later, gets `error`."""


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

    def wait(self, timeout: float | None = INFINITE_TIMEOUT) -> bool:
        """Wait for all points; the timeout applies to each point in turn."""
        return all(s.wait(v, timeout) for s, v in self.points)

    def is_reached(self) -> bool:
        return all(s.query() >= v for s, v in self.points)
