"""The task system of local-task: a fixed pool of worker threads (the in-order queue is in
submission_queue.py).

A batch of independent work items (the chunks of a dispatch, or every command between two
barriers) is posted to the pool; the posting thread pulls items from the same batch too, so a
batch always completes even when every worker is busy, and a batch of one item never leaves the
calling thread. numpy releases the GIL inside its loops, so large blocks run truly in parallel.

`InlineRunner` is the same contract for local-sync: everything on the caller's thread, in order.
"""
from __future__ import annotations

import math
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Protocol


WorkItem = Callable[[], None]


class Runner(Protocol):
    """Where work items run: inline (local-sync) or on the task system (local-task)."""

    def split(self, end: int, granule: int, min_points: int | None = None
              ) -> list[tuple[int, int]]:
        """Cut iterations [0, end) into chunks whose bounds are multiples of `granule`, each
        of at least `min_points` iterations where given (else the runner's own minimum)."""

    def run(self, items: Sequence[WorkItem]) -> None:
        """Run independent work items; returns when all are done, raising the first error."""

# A dispatch is only split when each chunk gets at least this many iterations: below it, the
# cost of handing a chunk to another thread outweighs the work.
MIN_CHUNK_ITERATIONS = 1 << 15
# Chunks per thread: more than one evens out uneven chunk times.
CHUNKS_PER_THREAD = 4


class InlineRunner:
    """local-sync's runner: no threads; a dispatch is one chunk."""

    worker_count = 1

    def split(self, end: int, granule: int, min_points: int | None = None
              ) -> list[tuple[int, int]]:
        return [(0, end)]

    def run(self, items: Sequence[WorkItem]) -> None:
        for item in items:
            item()

    def shutdown(self) -> None:
        pass


class _Batch:
    """Work items shared by the posting thread and the workers; the first error wins."""

    def __init__(self, items: Sequence[WorkItem]) -> None:
        self.items = items
        self.next = 0
        self.pending = len(items)
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.done = threading.Event()

    def work(self) -> None:
        while True:
            with self.lock:
                if self.next >= len(self.items):
                    return
                item = self.items[self.next]
                self.next += 1
                skip = self.error is not None
            error = None
            if not skip:
                try:
                    item()
                except BaseException as e:  # noqa: BLE001 - carried to the posting thread
                    error = e
            with self.lock:
                if error is not None and self.error is None:
                    self.error = error
                self.pending -= 1
                if self.pending == 0:
                    self.done.set()


class TaskSystem:
    """A pool of `worker_count` threads, created once per device. A dispatch is split into
    chunks of at least `min_chunk_iterations` iterations."""

    def __init__(self, worker_count: int, name: str = "irtk-cpu",
                 min_chunk_iterations: int = MIN_CHUNK_ITERATIONS) -> None:
        if worker_count < 1:
            raise ValueError(f"worker_count must be >= 1, got {worker_count}")
        self.worker_count = worker_count
        self.min_chunk_iterations = min_chunk_iterations
        self._queue: queue.SimpleQueue[_Batch | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._worker, name=f"{name}-worker-{i}",
                                          daemon=True) for i in range(worker_count)]
        for t in self._threads:
            t.start()

    def split(self, end: int, granule: int, min_points: int | None = None
              ) -> list[tuple[int, int]]:
        """Whole workgroups per chunk; up to CHUNKS_PER_THREAD chunks per thread, each of at
        least `min_points` (default: the driver's min_chunk_iterations)."""
        least = self.min_chunk_iterations if min_points is None else max(1, min_points)
        chunks = min(math.ceil(end / least),
                     CHUNKS_PER_THREAD * (self.worker_count + 1))
        if chunks <= 1:
            return [(0, end)]
        size = math.ceil(math.ceil(end / chunks) / granule) * granule
        return [(s, min(s + size, end)) for s in range(0, end, size)]

    def run(self, items: Sequence[WorkItem]) -> None:
        if not items:
            return
        if len(items) == 1:
            items[0]()
            return
        batch = _Batch(items)
        for _ in range(min(self.worker_count, len(items) - 1)):
            self._queue.put(batch)
        batch.work()
        batch.done.wait()
        if batch.error is not None:
            raise batch.error

    def shutdown(self) -> None:
        """Stop the workers once they finish what they hold (a batch in flight still completes
        on its posting thread)."""
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=5.0)

    def _worker(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            batch.work()
