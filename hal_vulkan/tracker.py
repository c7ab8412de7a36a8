"""Counting live Vulkan handles per kind, so leak tests can compare before and after a loop.

Every vkCreate*/vkAllocate* the driver makes is paired with `created`, every destroy with
`destroyed`; `live()` is what is still alive. Cheap enough to be always on.
"""
from __future__ import annotations

import threading
from collections import Counter


class ObjectTracker:
    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def created(self, kind: str, count: int = 1) -> None:
        with self._lock:
            self._counts[kind] += count

    def destroyed(self, kind: str, count: int = 1) -> None:
        with self._lock:
            self._counts[kind] -= count

    def live(self) -> dict[str, int]:
        """Kinds with live handles (a negative count would mean a double destroy: a bug)."""
        with self._lock:
            return {k: v for k, v in self._counts.items() if v}
