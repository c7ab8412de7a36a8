"""Timeline semaphores: host signal/query/wait, GPU waits on host points, failure."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from irtk.errors import RuntimeFailure
from irtk.hal import BindingRef, Fence


def fill_cb(device, buf, value: bytes):
    cb = device.create_command_buffer()
    cb.fill_buffer(BindingRef(buf, 0, buf.size), value)
    cb.finalize()
    return cb


def test_host_signal_advances_the_payload(device):
    sem = device.create_semaphore(3)
    assert sem.query() == 3
    sem.signal(5)
    sem.signal(5)  # the same value again is already reached
    assert sem.query() == 5
    assert sem.wait(4, timeout=0) and sem.wait(5, timeout=0)
    with pytest.raises(RuntimeFailure, match="can only increase: it is 5, signalled 2"):
        sem.signal(2)


def test_wait_times_out_with_false(device):
    sem = device.create_semaphore(0)
    start = time.monotonic()
    assert sem.wait(1, timeout=0.05) is False
    assert time.monotonic() - start >= 0.045
    assert sem.wait(1, timeout=0) is False


def test_wait_wakes_when_another_thread_signals(device):
    sem = device.create_semaphore(0)
    timer = threading.Timer(0.02, sem.signal, args=(2,))
    timer.start()
    assert sem.wait(2, timeout=10)
    timer.join()


def test_queued_work_waits_for_a_host_signal(device):
    gate, done = device.create_semaphore(0), device.create_semaphore(0)
    buf = device.allocator.allocate_with_data(bytes(64))
    device.queue_execute(Fence([(gate, 1)]), Fence([(done, 1)]), [fill_cb(device, buf, b"\x05")])
    assert done.wait(1, timeout=0.05) is False
    assert buf.read() == bytes(64)
    gate.signal(1)
    assert done.wait(1, timeout=30)
    assert buf.read() == b"\x05" * 64


def test_signal_fence_with_several_points(device):
    s1, s2 = device.create_semaphore(0), device.create_semaphore(10)
    buf = device.allocator.allocate(16)
    signal = Fence()
    signal.insert(s1, 3)
    signal.insert(s2, 11)
    device.queue_execute(Fence(), signal, [fill_cb(device, buf, b"\x01")])
    assert signal.wait(timeout=30) and signal.is_reached()
    assert (s1.query(), s2.query()) == (3, 11)


def test_failed_semaphore_raises_on_wait_and_query(device):
    sem = device.create_semaphore(0)
    sem.fail(RuntimeFailure("kernel exploded"))
    with pytest.raises(RuntimeFailure, match="kernel exploded"):
        sem.wait(1, timeout=1)
    with pytest.raises(RuntimeFailure, match="kernel exploded"):
        sem.query()
    sem.signal(7)  # a failed semaphore ignores signals; the failure stays
    sem.fail(RuntimeFailure("second"))  # the first failure is the cause
    with pytest.raises(RuntimeFailure, match="kernel exploded"):
        sem.query()


def test_failure_wakes_a_blocked_waiter(device):
    sem = device.create_semaphore(0)
    caught: list[BaseException] = []

    def waiter() -> None:
        try:
            sem.wait(1)
        except RuntimeFailure as e:
            caught.append(e)

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.05)
    start = time.monotonic()
    sem.fail(ValueError("bad input"))
    thread.join(timeout=10)
    assert not thread.is_alive() and time.monotonic() - start < 2
    assert len(caught) == 1 and "ValueError: bad input" in str(caught[0])


def test_failure_propagates_to_queued_work(device):
    """Work waiting on a failed point is released and its signal fence fails too."""
    gate, done = device.create_semaphore(0), device.create_semaphore(0)
    buf = device.allocator.allocate(16)
    device.queue_execute(Fence([(gate, 1)]), Fence([(done, 1)]), [fill_cb(device, buf, b"\x01")])
    gate.fail(RuntimeFailure("upstream failed"))
    with pytest.raises(RuntimeFailure, match="upstream failed"):
        done.wait(1, timeout=30)
    assert device.wait_idle(timeout=30)  # the queue drained instead of hanging


def test_submit_after_a_failure_fails_the_signal_fence(device):
    gate, done = device.create_semaphore(0), device.create_semaphore(0)
    gate.fail(RuntimeFailure("earlier step failed"))
    buf = device.allocator.allocate(16)
    device.queue_execute(Fence([(gate, 1)]), Fence([(done, 1)]), [fill_cb(device, buf, b"\x01")])
    with pytest.raises(RuntimeFailure, match="earlier step failed"):
        done.wait(1, timeout=1)


def test_releasing_the_device_unblocks_queued_work(fresh_device):
    gate, done = fresh_device.create_semaphore(0), fresh_device.create_semaphore(0)
    buf = fresh_device.allocator.allocate_with_data(np.zeros(4, np.uint32).tobytes())
    cb = fill_cb(fresh_device, buf, b"\x01")
    fresh_device.queue_execute(Fence([(gate, 1)]), Fence([(done, 1)]), [cb])
    fresh_device.release()  # must not hang on the never-signalled gate
    assert fresh_device.tracker.live() == {}


def test_semaphores_of_another_device_are_refused(device, fresh_device):
    other = fresh_device.create_semaphore(0)
    with pytest.raises(RuntimeFailure, match="not of device"):
        device.queue_execute(Fence(), Fence([(other, 1)]), [])


def test_empty_submission_still_signals(device):
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 4)]), [])
    assert sem.wait(4, timeout=30)
