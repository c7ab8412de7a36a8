"""Command buffers: reuse with binding tables, transfers, barriers, recording errors."""
from __future__ import annotations

import numpy as np
import pytest

from irtk.errors import RuntimeFailure
from irtk.hal import BindingRef, Fence

from .cpu_kernel_builder import binary, unary


def _submit(device, cbs, tables=None, timeout: float = 30) -> None:
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), cbs, tables)
    assert sem.wait(1, timeout=timeout)


def _floats(buf) -> np.ndarray:
    return np.frombuffer(buf.read(), np.float32)


def test_one_recording_runs_with_many_binding_tables(device, rng):
    n = 300
    exe = device.create_executable("cpu-kernel-fb", binary("add", "arith.addf", "f32", "f32", n))
    cb = device.create_command_buffer(binding_capacity=3)
    cb.dispatch(exe, 0, (5, 1, 1), [], [BindingRef(None, 0, -1, slot=s) for s in range(3)])
    cb.finalize()
    alloc = device.allocator
    for _ in range(3):
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        ba, bb, out = alloc.allocate_with_data(a.tobytes()), alloc.allocate_with_data(b), \
            alloc.allocate(4 * n)
        _submit(device, [cb], [[(ba, 0, ba.size), (bb, 0, bb.size), (out, 0, out.size)]])
        np.testing.assert_array_equal(_floats(out), a + b)


def test_binding_table_offsets_add_to_the_slot_reference(device, rng):
    n = 64
    exe = device.create_executable("cpu-kernel-fb", unary("neg", "arith.negf", "f32", "f32", n))
    data = rng.standard_normal(3 * n).astype(np.float32)
    arena = device.allocator.allocate_with_data(data.tobytes())
    cb = device.create_command_buffer(binding_capacity=1)
    # input: entry (offset 4n bytes) + 0; output: entry + 4n bytes -> the third block.
    cb.dispatch(exe, 0, (1, 1, 1), [], [BindingRef(None, 0, 4 * n, slot=0),
                                        BindingRef(None, 4 * n, 4 * n, slot=0)])
    cb.finalize()
    _submit(device, [cb], [[(arena, 4 * n, 8 * n)]])
    got = _floats(arena)
    np.testing.assert_array_equal(got[:2 * n], data[:2 * n])
    np.testing.assert_array_equal(got[2 * n:], -data[n:2 * n])


def test_barrier_orders_dependent_dispatches(device, rng):
    n = 5000
    exe = device.create_executable("cpu-kernel-fb",
                                   unary("exp", "math.exp", "f32", "f32", n, tile_size=128))
    a = rng.uniform(-1, 1, n).astype(np.float32)
    alloc = device.allocator
    b0, b1, b2 = alloc.allocate_with_data(a.tobytes()), alloc.allocate(4 * n), alloc.allocate(4 * n)
    cb = device.create_command_buffer()
    grid = (-(-n // 128), 1, 1)
    cb.dispatch(exe, 0, grid, [], [BindingRef(b0, 0, -1), BindingRef(b1, 0, -1)])
    cb.execution_barrier()
    cb.dispatch(exe, 0, grid, [], [BindingRef(b1, 0, -1), BindingRef(b2, 0, -1)])
    cb.execution_barrier()
    cb.copy_buffer(BindingRef(b2, 0, 4 * n), BindingRef(b0, 0, 4 * n))
    cb.finalize()
    _submit(device, [cb])
    # exp is the C library's on the native executor, numpy's on the reference: a few ULP.
    np.testing.assert_array_max_ulp(
        _floats(b0), np.exp(np.exp(a.astype(np.float64))).astype(np.float32), maxulp=4)


@pytest.mark.parametrize("pattern", [b"\xab", b"\x01\x02", b"\x01\x02\x03\x04"])
def test_fill_repeats_the_pattern(device, pattern):
    buf = device.allocator.allocate_with_data(bytes(37))
    cb = device.create_command_buffer()
    cb.fill_buffer(BindingRef(buf, 4, 24), pattern)
    cb.finalize()
    _submit(device, [cb])
    assert buf.read() == bytes(4) + pattern * (24 // len(pattern)) + bytes(9)


def test_copy_and_update(device, rng):
    src = rng.integers(0, 256, 100, dtype=np.uint8).tobytes()
    a = device.allocator.allocate_with_data(src)
    b = device.allocator.allocate_with_data(bytes(100))
    cb = device.create_command_buffer()
    cb.copy_buffer(BindingRef(a, 10, 50), BindingRef(b, 20, 50))
    cb.execution_barrier()
    cb.update_buffer(b"hello", BindingRef(b, 0, 5))
    cb.finalize()
    _submit(device, [cb])
    out = b.read()
    assert out[:5] == b"hello" and out[20:70] == src[10:60]
    assert out[5:20] == bytes(15) and out[70:] == bytes(30)


def test_update_captures_data_at_record_time(device):
    buf = device.allocator.allocate(4)
    data = bytearray(b"abcd")
    cb = device.create_command_buffer()
    cb.update_buffer(data, BindingRef(buf, 0, 4))
    cb.finalize()
    data[:] = b"zzzz"
    _submit(device, [cb])
    assert buf.read() == b"abcd"


def test_several_command_buffers_in_one_submission_run_in_order(device):
    buf = device.allocator.allocate(8)
    first, second = device.create_command_buffer(), device.create_command_buffer()
    first.fill_buffer(BindingRef(buf, 0, 8), b"\x11")
    second.update_buffer(b"\x22\x22", BindingRef(buf, 2, 2))
    first.finalize()
    second.finalize()
    _submit(device, [first, second])
    assert buf.read() == b"\x11\x11\x22\x22\x11\x11\x11\x11"


def test_recording_errors_are_reported_where_they_are_made(device):
    exe = device.create_executable("cpu-kernel-fb", binary("add", "arith.addf", "f32", "f32", 8))
    buf = device.allocator.allocate(32)
    cb = device.create_command_buffer(binding_capacity=1)
    ref = BindingRef(buf, 0, 32)
    with pytest.raises(RuntimeFailure, match="ordinal 1 is out of range"):
        cb.dispatch(exe, 1, (1, 1, 1), [], [ref] * 3)
    with pytest.raises(RuntimeFailure, match="2 binding"):
        cb.dispatch(exe, 0, (1, 1, 1), [], [ref] * 2)
    with pytest.raises(RuntimeFailure, match="slot 1 is beyond"):
        cb.dispatch(exe, 0, (1, 1, 1), [], [ref, ref, BindingRef(None, 0, -1, slot=1)])
    with pytest.raises(RuntimeFailure, match=r"range \[16, 48\)"):
        cb.copy_buffer(BindingRef(buf, 16, 32), ref)
    cb.finalize()
    with pytest.raises(RuntimeFailure, match="finalized"):
        cb.execution_barrier()


def test_unfinalized_command_buffer_is_refused(device):
    cb = device.create_command_buffer()
    with pytest.raises(RuntimeFailure, match="not finalized"):
        device.queue_execute(Fence(), Fence(), [cb])
