"""The yield protocol: how a native function says "not ready yet, resume me later".

A native function marked `yieldable=True` may return a `Wait` instead of its results. The
interpreter then suspends the whole invocation (every frame stays as it is) and hands control
back to whoever drives it; the invocation resumes when `Wait.ready()` turns true, and the values
`Wait.results()` returns are written to the call's result registers, exactly as if the function
had returned them. So one thread can keep several invocations in flight, each parked on its own
fence, instead of blocking on the first one.

`FenceWait` is the common case: wait for a set of fences (anything with `is_reached(flush)`,
`wait(timeout)` and `flush()`, such as `irtk.hal.Fence`), with an optional deadline.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence


class Wait:
    """What a suspended yieldable call waits for; subclasses say when it is over and with what.

    `ready()` must not block; `block(timeout)` may block up to `timeout` seconds (None: no
    limit) and returns whether it became ready; `results()` is called once, after `ready()`
    returned True, and returns the native function's results (None, a value or a tuple) or
    raises (e.g. RuntimeFailure for a failed fence).
    """

    def ready(self) -> bool:
        raise NotImplementedError

    def block(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.ready():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.0005)
        return True

    def results(self) -> Any:
        return None

    def flush(self) -> None:
        """Make sure what it waits for is under way: called when the suspended call goes back
        to its caller instead of blocking here (see `Semaphore.flush`)."""

    def settle_here(self) -> bool:
        """Try to finish the wait on the calling thread before the call is suspended, where
        that is quick to find out; True when it is over (the call then goes on at once)."""
        return False


class FenceWait(Wait):
    """Ready when every fence is reached or the deadline (seconds from now) has passed.

    `finish(reached)` computes the results: `reached` says whether all fences were reached
    (False means the deadline passed first). A fence whose semaphore failed makes `ready()` /
    `block()` raise; `on_error` turns that exception into the one to raise (by default it is
    raised as is).
    """

    def __init__(self, fences: Sequence[Any], timeout: float | None,
                 finish: Callable[[bool], Any],
                 on_error: Callable[[Exception], Exception] | None = None) -> None:
        self.fences = [f for f in fences if f is not None]
        self.deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        self.finish = finish
        self.on_error = on_error
        self.reached = False

    def _reached(self) -> bool:
        try:
            return all(f.is_reached(flush=False) for f in self.fences)
        except Exception as e:
            if self.on_error is None:
                raise
            raise self.on_error(e) from e

    def ready(self) -> bool:
        if not self.reached:
            self.reached = self._reached()
        return self.reached or (self.deadline is not None and time.monotonic() >= self.deadline)

    def block(self, timeout: float | None) -> bool:
        if self.ready():
            return True
        limit = timeout
        if self.deadline is not None:
            left = max(self.deadline - time.monotonic(), 0.0)
            limit = left if limit is None else min(limit, left)
        try:
            for fence in self.fences:
                if not fence.wait(limit):
                    return self.ready()
        except Exception as e:
            if self.on_error is None:
                raise
            raise self.on_error(e) from e
        return self.ready()

    def flush(self) -> None:
        for fence in self.fences:
            fence.flush()

    def settle_here(self) -> bool:
        """Without a deadline, a device whose queue lets a waiter run its work (local-task)
        runs it here (`Fence.donate`), saving the suspension and the resumption."""
        if self.deadline is not None:
            return False
        for fence in self.fences:
            if not fence.donate():
                return False
        return self.ready()

    def results(self) -> Any:
        return self.finish(self.reached)
