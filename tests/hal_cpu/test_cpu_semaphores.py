"""Timeline semaphores and fences: signal, wait with timeout, failure reaching every waiter."""
from __future__ import annotations

import threading
import time

import pytest

from hal_cpu import CpuSemaphore
from irtk.errors import RuntimeFailure
from irtk.hal import Fence


def test_signal_advances_the_payload():
    sem = CpuSemaphore(3)
    assert sem.query() == 3
    sem.signal(5)
    assert sem.query() == 5
    assert sem.wait(4, timeout=0) and sem.wait(5, timeout=0)


def test_wait_times_out_with_false():
    sem = CpuSemaphore(0)
    start = time.monotonic()
    assert sem.wait(1, timeout=0.05) is False
    assert time.monotonic() - start >= 0.04
    assert sem.wait(1, timeout=0) is False


def test_wait_wakes_when_another_thread_signals():
    sem = CpuSemaphore(0)
    threading.Timer(0.02, sem.signal, args=(2,)).start()
    assert sem.wait(2, timeout=10)
    assert sem.query() == 2


def test_payload_cannot_go_back():
    sem = CpuSemaphore(4)
    with pytest.raises(RuntimeFailure, match="only increase"):
        sem.signal(3)
    sem.signal(4)  # the same value is allowed
    assert sem.query() == 4


def test_failure_reaches_every_waiter_with_the_original_message():
    sem = CpuSemaphore(0)
    errors: list[BaseException] = []

    def waiter() -> None:
        try:
            sem.wait(10)
        except RuntimeFailure as e:
            errors.append(e)

    threads = [threading.Thread(target=waiter) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.02)
    original = ValueError("disk on fire")
    sem.fail(original)
    for t in threads:
        t.join(timeout=10)
    assert len(errors) == 4
    assert all("disk on fire" in str(e) and e.__cause__ is original for e in errors)
    assert len({id(e) for e in errors}) == 4  # one exception object per waiter
    with pytest.raises(RuntimeFailure, match="disk on fire"):
        sem.query()
    with pytest.raises(RuntimeFailure, match="disk on fire"):
        sem.wait(0)  # a failed semaphore fails every wait, even one already reached
    sem.signal(20)  # signalling a failed semaphore changes nothing
    assert sem.failure is original


def test_first_failure_wins_and_irtk_errors_keep_their_message():
    sem = CpuSemaphore(0)
    sem.fail(RuntimeFailure("first"))
    sem.fail(RuntimeFailure("second"))
    with pytest.raises(RuntimeFailure) as info:
        sem.wait(1, timeout=0)
    assert str(info.value) == "first"


def test_fence_waits_for_every_point():
    a, b = CpuSemaphore(0), CpuSemaphore(0)
    fence = Fence()
    fence.insert(a, 1)
    fence.insert(b, 2)
    fence.insert(a, 3)  # the same semaphore keeps the larger value
    assert fence.points == [(a, 3), (b, 2)]
    assert fence.wait(timeout=0) is False
    fence.signal()
    assert fence.is_reached() and a.query() == 3 and b.query() == 2
