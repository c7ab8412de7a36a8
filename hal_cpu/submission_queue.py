"""local-task's in-order queue, which a waiting host thread may help drain.

Submissions run one at a time in the order they were made: on the queue's own thread, or on a
host thread that is about to block on a fence of this device with no time limit. Such a thread
*donates* itself (as IREE's task executor lets a waiting caller do): it takes the next
submission, if nobody is running one and its wait fence is already reached, and runs it in
place. A call that submits and then waits — nearly every VM call — then costs no thread
hand-off in either direction, which in Python is tens to hundreds of microseconds each. The
queue thread still guarantees progress when nobody waits (a submission returns at once), so
local-task stays asynchronous.

A donor never takes a submission whose wait fence is not reached (it would block on someone
else's work) and never runs one while another is running (order), so donation changes where a
submission runs, never when relative to the others.

Waking the queue thread at every submit would cost as much as the hand-off it saves (the thread
wakes, takes the GIL, finds the work taken), so the wake is deferred, as a GPU driver defers
a submission until a flush (IREE's `queue_flush`): a submission waits for a donor or a wake when
it is the only one queued and only this queue's semaphores learn of its end. Anything that
could otherwise wait for it for ever wakes the thread (`wake`): a wait with a time limit, a
donor about to block, a second submission (so a host loop still overlaps its work with the
queue's), a poll of its fences (`flush`), a call handed back to its caller unfinished, drain
and shutdown.
"""
from __future__ import annotations

import threading
from collections import deque

from irtk.hal.host_queue import HostQueueOp

_Entry = HostQueueOp | threading.Event   # an Event is drain()'s barrier


class SubmissionQueue:
    """Host queue operations in submission order, on a thread started by the first submit."""

    def __init__(self, name: str = "irtk-cpu-queue") -> None:
        self._name = name
        self._cond = threading.Condition()
        self._entries: deque[_Entry] = deque()
        self._busy = False        # someone runs the entry taken last
        self._closed = False
        self._deferred = False    # entries queued without waking the thread
        self._thread: threading.Thread | None = None

    def submit(self, op: HostQueueOp, defer_wake: bool = False, inline: bool = False) -> None:
        """Queue `op`. `defer_wake`: only semaphores with this queue's `donate` hear of its end,
        so the thread need not wake unless something else is queued. `inline`: a cheap
        operation (alloca, dealloca) runs at once on this thread when nothing is queued or
        running and its wait fence is reached — exactly when the queue would have run it."""
        if inline:
            with self._cond:
                run_now = not self._busy and not self._entries and op.ready()
                if run_now:
                    self._busy = True
            if run_now:
                self._run(op)
                return
        self._put(op, defer_wake)

    def wake(self) -> None:
        """Let the queue thread run what is queued (at once, or when the running entry ends)."""
        if not self._deferred:   # read without the lock: only a deferred entry needs a wake
            return
        with self._cond:
            if self._deferred:
                self._deferred = False
                if not self._busy:
                    self._cond.notify_all()

    def donate(self) -> bool:
        """Run the next submission on the calling thread when it may run now; True if one ran
        (the caller then checks again whether what it waits for is done)."""
        with self._cond:
            if self._busy or not self._entries:
                return False
            head = self._entries[0]
            if isinstance(head, HostQueueOp) and not head.ready():
                return False
            self._entries.popleft()
            self._busy = True
        self._run(head)
        return True

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far has run and been dropped (a barrier through
        the queue); True when it has, False on timeout."""
        with self._cond:
            if self._thread is None or self._thread is threading.current_thread():
                return True
        barrier = threading.Event()
        self._put(barrier)
        return barrier.wait(timeout)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Finish what is queued (up to `timeout` seconds) and stop the thread."""
        with self._cond:
            thread, self._thread = self._thread, None
            self._closed = True
            self._deferred = False
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _put(self, entry: _Entry, defer_wake: bool = False) -> None:
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._entries.append(entry)
            if defer_wake and len(self._entries) == 1:
                self._deferred = True
            else:
                self._deferred = False
                self._cond.notify_all()

    def _run(self, entry: _Entry) -> None:
        try:
            if isinstance(entry, threading.Event):
                entry.set()   # drain(): every earlier operation has run and been dropped
            else:
                entry()
        finally:
            with self._cond:
                self._busy = False
                if self._entries:   # the rest is the queue thread's unless a donor takes it
                    self._deferred = False
                    self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._busy or not self._entries or self._deferred:
                    if self._closed and not self._entries:
                        return
                    self._cond.wait()
                entry = self._entries.popleft()
                self._busy = True
            self._run(entry)
            del entry  # do not hold its fences and buffers while waiting for the next
