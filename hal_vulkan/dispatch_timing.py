"""Device time of each dispatch while a trace is recorded (`irtk.tracing`).

While a tracer is active every recording writes timestamps around its dispatches
(`VulkanCommandBuffer._find_recording`). A submission's timed recordings wait here until the
queue reports the submission complete (`Queue.on_complete`, run before the recordings can be
reused or destroyed); their timestamps then become the tracer's device events, mapped onto the
host clock (`irtk.tracing.device_time_base`).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from irtk import tracing
from irtk.errors import Error

if TYPE_CHECKING:
    from hal_vulkan.queue import Queue
    from hal_vulkan.recorder import Recording

Labels = list[tuple[str, tuple[int, int, int]]]


@dataclass
class _Pending:
    serial: int
    submit_ns: int
    tracer: tracing.Tracer
    recordings: list[tuple["Recording", Labels]]


class DispatchTiming:
    """Pending timed submissions of one device's queue."""

    def __init__(self, queue: "Queue", device_name: str) -> None:
        self.queue = queue
        self.device_name = device_name
        self._pending: deque[_Pending] = deque()

    def submitted(self, tracer: tracing.Tracer, serial: int, submit_ns: int,
                  recordings: list[tuple["Recording", Labels]]) -> None:
        """Caller holds the device lock (so the queue's hook is installed before it polls)."""
        if not recordings:
            return
        self.queue.on_complete = self._completed
        self._pending.append(_Pending(serial, submit_ns, tracer, recordings))

    def _completed(self, completed: int) -> None:
        now = time.monotonic_ns()
        while self._pending and self._pending[0].serial <= completed:
            p = self._pending.popleft()
            spans: list[tuple[str, tuple[int, int, int], int, int]] = []
            try:
                for recording, labels in p.recordings:
                    assert recording.timestamps is not None, "only timed recordings wait here"
                    for (name, groups), (begin, duration) in zip(
                            labels, recording.timestamps.read_ns(len(labels))):
                        spans.append((name, groups, begin, duration))
            except Error:
                continue  # the queries are gone (device lost): nothing to report
            if not spans:
                continue
            base = tracing.device_time_base(p.submit_ns, spans[0][2], now)
            for name, groups, begin, duration in spans:
                p.tracer.device_event(self.device_name, name, "dispatch", begin + base,
                                      duration, workgroups=list(groups), serial=p.serial)

    def clear(self) -> None:
        self._pending.clear()
