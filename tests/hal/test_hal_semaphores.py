"""Timeline semaphores and fences: signal, wait, wait-any/all, timeouts and failure."""
from __future__ import annotations

import threading
import time

import pytest

from irtk.errors import RuntimeFailure
from irtk.hal import BindingRef, Fence
from irtk.hal.semaphore import wait_all, wait_any
from tests.hal.conftest import signal_later
from tests.hal.helpers import TIMEOUT, new_fence


def test_signal_query_and_wait(device):
    sem = device.create_semaphore(3)
    assert sem.query() == 3
    assert sem.wait(3, timeout=0)
    sem.signal(7)
    assert sem.query() == 7
    assert sem.wait(5, timeout=0) and sem.wait(7, timeout=TIMEOUT)


def test_payload_never_decreases(device):
    sem = device.create_semaphore(5)
    sem.signal(5)  # the same value again is fine
    with pytest.raises(RuntimeFailure, match="can only increase: it is 5, signalled 2"):
        sem.signal(2)


@pytest.mark.parametrize("timeout", [0.0, 0.15])
def test_wait_times_out_after_the_timeout(device, timeout):
    sem = device.create_semaphore(0)
    start = time.monotonic()
    assert not sem.wait(1, timeout=timeout)
    elapsed = time.monotonic() - start
    assert timeout <= elapsed < timeout + 2.0
    assert not Fence([(sem, 1)]).wait(timeout=0)


def test_fence_timeout_is_for_the_whole_wait(device):
    fence = Fence([(device.create_semaphore(0), 1) for _ in range(4)])
    start = time.monotonic()
    assert not fence.wait(timeout=0.1)
    assert time.monotonic() - start < 0.1 * 4


def test_a_signal_from_another_thread_wakes_the_waiter(device):
    sem = device.create_semaphore(0)
    thread = signal_later(sem, 2)
    assert sem.wait(2, timeout=TIMEOUT)
    thread.join()


def test_wait_all_needs_every_fence(device):
    a, b = new_fence(device), new_fence(device)
    a.signal()
    assert not wait_all([a, b], timeout=0.02)
    thread = signal_later(b)
    assert wait_all([a, b], timeout=TIMEOUT)
    thread.join()


def test_wait_any_returns_the_first_reached_fence(device):
    fences = [new_fence(device) for _ in range(3)]
    assert wait_any(fences, timeout=0.02) == -1
    thread = signal_later(fences[2])
    assert wait_any(fences, timeout=TIMEOUT) == 2
    thread.join()
    fences[0].signal()
    assert wait_any(fences, timeout=0) == 0


def test_a_failed_semaphore_raises_for_every_waiter(device):
    sem = device.create_semaphore(0)
    caught: list[BaseException] = []

    def waiter() -> None:
        try:
            sem.wait(1, timeout=TIMEOUT)
        except RuntimeFailure as e:
            caught.append(e)
    threads = [threading.Thread(target=waiter) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    sem.fail(RuntimeFailure("kernel exploded"))
    for t in threads:
        t.join(TIMEOUT)
    assert len(caught) == 3 and all("kernel exploded" in str(e) for e in caught)
    with pytest.raises(RuntimeFailure, match="kernel exploded"):
        sem.query()
    with pytest.raises(RuntimeFailure, match="kernel exploded"):
        wait_any([new_fence(device), Fence([(sem, 1)])], timeout=TIMEOUT)
    sem.signal(5)  # signalling a failed semaphore changes nothing
    with pytest.raises(RuntimeFailure, match="kernel exploded"):
        sem.wait(1, timeout=0)


def test_a_failed_submission_fails_everything_downstream(device):
    """A -> B -> C, A queued before its input fails: every fence gets the error.

    Work submitted after the failure never runs; A itself, already queued, may (a GPU queue
    cannot withdraw a submission), but its signal fence fails all the same."""
    buf = device.allocator.allocate_with_data(b"\x07" * 16)
    source = new_fence(device)
    fences = [new_fence(device) for _ in range(3)]
    waits = [source, fences[0], fences[1]]
    cbs = []
    for i in range(3):
        cb = device.create_command_buffer()
        cb.fill_buffer(BindingRef(buf, 4 * i, 4), bytes([i + 1]))
        cb.finalize()
        cbs.append(cb)
    if device.info.driver == "local-sync":
        # local-sync waits inline: fail the input from another thread while it waits.
        timer = threading.Timer(0.05, source.fail, [RuntimeFailure("upstream failed")])
        timer.start()
    else:
        timer = None
    for cb, wait, signal in zip(cbs, waits, fences):
        if timer is not None:
            timer.join()
        device.queue_execute(wait, signal, [cb])
        if timer is None and signal is fences[0]:
            source.fail(RuntimeFailure("upstream failed"))
    for fence in fences:
        with pytest.raises(RuntimeFailure, match="upstream failed"):
            fence.wait(TIMEOUT)
    assert buf.read(4, 12) == b"\x07" * 12


def test_a_submission_waiting_on_an_already_failed_fence_fails(device):
    upstream = new_fence(device)
    upstream.fail(RuntimeFailure("producer crashed"))
    buf = device.allocator.allocate_with_data(bytes(4))
    done = new_fence(device)
    device.queue_fill(upstream, done, buf, 0, 4, b"\xff")
    with pytest.raises(RuntimeFailure, match="producer crashed"):
        done.wait(TIMEOUT)
    assert buf.read() == bytes(4)
