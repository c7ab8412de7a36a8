"""Host work ordered by fences: what a queue operation that the device cannot run itself needs.

`queue_read` and `queue_write` move bytes between device buffers and host memory; a GPU cannot
touch the caller's memory, so the copy runs on the host, after the wait fence is reached and
before the signal fence is signalled. Each device keeps one `HostQueue`: a thread that runs
these operations in submission order. An error (including a failed wait fence) fails the signal
fence instead of being raised, exactly as a failed device submission would.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from irtk.errors import RuntimeFailure
from irtk.hal.semaphore import Fence


class HostQueueOp:
    """Wait, work, signal; any error fails the signal fence instead."""

    __slots__ = ("wait", "signal", "work")

    def __init__(self, wait: Fence, signal: Fence, work: Callable[[], None]) -> None:
        self.wait: Fence | None = wait
        self.signal: Fence | None = signal
        self.work: Callable[[], None] | None = work

    def ready(self) -> bool:
        """Whether running it now would not block on its wait fence (a failed fence counts:
        the operation then only reports the failure)."""
        wait = self.wait
        if wait is None:
            return True
        try:
            return wait.is_reached(flush=False)
        except Exception:  # noqa: BLE001 - failed: running it forwards the failure
            return True

    def __call__(self) -> None:
        # The work and the wait fence are dropped before signalling, so whoever the signal
        # wakes finds the buffers and semaphores they held already unreferenced here.
        wait, signal, work = self.wait, self.signal, self.work
        if wait is None or signal is None or work is None:
            raise RuntimeError("a host queue operation runs once")
        self.wait = self.signal = self.work = None
        error: Exception | None = None
        try:
            wait.wait()
            work()
        except Exception as e:  # noqa: BLE001 - reported through the fence
            error = e
        except BaseException as e:
            # Ctrl-C on a host thread running it (local-sync, or a waiter that donated
            # itself): the work is cut short, so whoever waits for it must learn that.
            signal.fail(RuntimeFailure(f"interrupted ({type(e).__name__}) before it finished"))
            raise
        del wait, work
        if error is None:
            try:
                signal.signal()
                return
            except Exception as e:  # noqa: BLE001 - e.g. a value below the payload
                error = e
        signal.fail(error)


class HostQueue:
    """One thread running host queue operations in the order they were submitted."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[HostQueueOp | threading.Event | None] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, op: HostQueueOp) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
        self._queue.put(op)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far has run and been dropped (a barrier through
        the queue); True when it has, False on timeout."""
        with self._lock:
            running = self._thread is not None and self._thread is not threading.current_thread()
        if not running:
            return True
        barrier = threading.Event()
        self._queue.put(barrier)
        return barrier.wait(timeout)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Finish what is queued (up to `timeout` seconds) and stop the thread."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            if thread is not threading.current_thread():
                thread.join(timeout)

    def _loop(self) -> None:
        while True:
            op = self._queue.get()
            if op is None:
                return
            if isinstance(op, threading.Event):
                op.set()  # drain(): every earlier operation has run and been dropped
                continue
            op()
            del op  # do not hold its fences and buffers while waiting for the next
