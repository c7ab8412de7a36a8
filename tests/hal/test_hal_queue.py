"""Queue operations with wait and signal fences: alloca/dealloca, fill, copy, update, read,
write and execute, several in flight at once, ordered only by their fences."""
from __future__ import annotations

import numpy as np
import pytest

from irtk.errors import RuntimeFailure
from irtk.hal import BindingRef, Fence
from tests.hal import programs
from tests.hal.conftest import signal_later
from tests.hal.helpers import TIMEOUT, floats, new_fence


def test_a_chain_of_transfers_queued_before_its_start_is_signalled(device, rng):
    """alloca -> write -> fill -> copy -> update -> read -> dealloca, all queued at once."""
    data = rng.integers(0, 256, 1000, dtype=np.uint8).tobytes()
    patch = rng.integers(0, 256, 33, dtype=np.uint8).tobytes()
    start = new_fence(device)
    steps = [new_fence(device) for _ in range(7)]
    out = bytearray(1000)
    thread = signal_later(start)  # local-sync blocks in the first op until this fires
    a = device.queue_alloca(start, steps[0], 1000)
    b = device.queue_alloca(steps[0], steps[1], 1000)
    device.queue_write(steps[1], steps[2], data, a, 0)
    device.queue_fill(steps[2], steps[3], b, 1, 998, b"\xab\xcd")
    device.queue_copy(steps[3], steps[4], a, 100, b, 301, 200)
    device.queue_update(steps[4], steps[5], patch, b, 7)
    device.queue_read(steps[5], steps[6], b, 0, out, 1000)
    done = new_fence(device)
    device.queue_dealloca(steps[6], done, a)
    assert done.wait(TIMEOUT)
    thread.join()
    expected = bytearray(b.read(0, 1))  # byte 0 was never written: whatever alloca gave
    expected += b"\xab\xcd" * 499
    expected += bytes(1)
    expected[-1:] = b.read(999, 1)
    expected[301:501] = data[100:300]
    expected[7:40] = patch
    assert bytes(out) == bytes(expected) == b.read()


def test_several_submissions_in_flight_run_in_fence_order(device, rng):
    """x -> 2x eight times, each dispatch waiting on the one before, all queued up front."""
    program = programs.load(device, 700)
    x = rng.standard_normal(program.n).astype(np.float32)
    bx = device.allocator.allocate_with_data(x.tobytes())
    cb = device.create_command_buffer(1)
    cb.dispatch(program.executable, program.executable.lookup("scale"), program.workgroups,
                program.scale_constants, [BindingRef(None, 0, -1, slot=0)])
    cb.finalize()
    start = new_fence(device)
    fences = [start] + [new_fence(device) for _ in range(8)]
    thread = signal_later(start)
    for wait, signal in zip(fences, fences[1:]):
        device.queue_execute(wait, signal, [cb], [[(bx, 0, -1)]])
    assert fences[-1].wait(TIMEOUT)
    thread.join()
    np.testing.assert_array_equal(floats(bx), x * np.float32(256))
    program.executable.release()


def test_independent_submissions_all_complete(device, rng):
    bufs = [device.allocator.allocate(256) for _ in range(6)]
    fences = [new_fence(device) for _ in bufs]
    patterns = [bytes([i + 1]) for i in range(len(bufs))]
    for buf, fence, pattern in zip(bufs, fences, patterns):
        device.queue_fill(Fence(), fence, buf, 0, 256, pattern)
    for buf, fence, pattern in zip(bufs, fences, patterns):
        assert fence.wait(TIMEOUT)
        assert buf.read() == pattern * 256


def test_update_captures_its_bytes_at_the_call_and_write_lands_before_its_signal(device):
    target = device.allocator.allocate(8)
    start, wrote, updated = new_fence(device), new_fence(device), new_fence(device)
    source = bytearray(b"AAAA")  # a write's bytes must stay unchanged until its signal
    patch = bytearray(b"BBBB")
    thread = signal_later(start, delay=0.1)
    device.queue_write(start, wrote, source, target, 0)
    device.queue_update(wrote, updated, patch, target, 4)
    patch[:] = b"DDDD"  # the update captured its bytes already
    assert updated.wait(TIMEOUT)
    assert target.read() == b"AAAABBBB"
    thread.join()


def test_queue_ops_refuse_bad_ranges_and_fail_their_fence(device):
    buf = device.allocator.allocate(16)
    cases = [
        lambda f: device.queue_fill(Fence(), f, buf, 8, 12, b"\x00"),
        lambda f: device.queue_copy(Fence(), f, buf, 0, buf, 12, 8),
        lambda f: device.queue_update(Fence(), f, b"x" * 20, buf, 0),
        lambda f: device.queue_write(Fence(), f, b"x" * 9, buf, 8),
        lambda f: device.queue_read(Fence(), f, buf, 10, bytearray(16), 7),
    ]
    for case in cases:
        fence = new_fence(device)
        with pytest.raises(RuntimeFailure, match="outside"):
            case(fence)
        with pytest.raises(RuntimeFailure, match="outside"):
            fence.wait(TIMEOUT)
    fence = new_fence(device)
    with pytest.raises(RuntimeFailure, match="do not fit the 4-byte host target"):
        device.queue_read(Fence(), fence, buf, 0, bytearray(4), 8)


def test_read_after_a_failed_wait_leaves_the_host_memory_alone(device):
    buf = device.allocator.allocate_with_data(b"\x01" * 8)
    upstream, done = new_fence(device), new_fence(device)
    upstream.fail(RuntimeFailure("no data"))
    out = bytearray(8)
    device.queue_read(upstream, done, buf, 0, out, 8)
    with pytest.raises(RuntimeFailure, match="no data"):
        done.wait(TIMEOUT)
    assert out == bytearray(8)


def test_dealloca_releases_the_buffer_once_its_wait_is_reached(device):
    start, done = new_fence(device), new_fence(device)
    buf = device.queue_alloca(Fence(), start, 64)
    assert start.wait(TIMEOUT)
    device.queue_fill(start, new_fence(device), buf, 0, 64, b"\x01")
    device.queue_dealloca(start, done, buf)
    assert done.wait(TIMEOUT)
    cb = device.create_command_buffer()
    with pytest.raises(RuntimeFailure, match="released"):
        cb.fill_buffer(BindingRef(buf, 0, 4), b"\x00")


def test_wait_idle_waits_for_host_queue_operations(device, rng):
    """A queue_read waiting on an unsignalled fence keeps the device busy; once the fence is
    signalled wait_idle returns with the bytes copied."""
    if not hasattr(device, "wait_idle"):
        pytest.skip("the device has no wait_idle")
    data = rng.integers(0, 256, 64, dtype=np.uint8).tobytes()
    buf = device.allocator.allocate_with_data(data)
    start, done = new_fence(device), new_fence(device)
    out = bytearray(64)
    device.queue_read(start, done, buf, 0, out, 64)
    assert not device.wait_idle(0.2)
    start.signal()
    assert device.wait_idle(TIMEOUT)
    assert bytes(out) == data
    assert done.wait(0)
