"""Buffers: host read/write, and fill/copy/update recorded in command buffers."""
from __future__ import annotations

import numpy as np
import pytest

from irtk.errors import DeviceError, RuntimeFailure
from irtk.hal import BindingRef, Fence
from hal_vulkan.suballocator import RangeAllocator


def run(device, cb, tables=None) -> None:
    """Finalize, submit and wait for one command buffer."""
    if not cb.finalized:
        cb.finalize()
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), [cb], tables)
    assert sem.wait(1, timeout=30)


def test_write_then_read_round_trips(device, rng):
    data = rng.integers(0, 256, 1000, dtype=np.uint8).tobytes()
    buf = device.allocator.allocate(1000)
    buf.write(data)
    assert buf.read() == data
    buf.write(b"\x01\x02\x03", 997)
    assert buf.read(995, 5) == data[995:997] + b"\x01\x02\x03"
    assert buf.read(1000) == b""


def test_numpy_arrays_can_be_written(device, rng):
    values = rng.standard_normal((7, 9)).astype(np.float32)
    buf = device.allocator.allocate(values.nbytes)
    buf.write(values)
    assert np.array_equal(np.frombuffer(buf.read(), np.float32).reshape(7, 9), values)


def test_out_of_range_access_is_refused(device):
    buf = device.allocator.allocate(16)
    with pytest.raises(ValueError, match="outside the buffer of 16 bytes"):
        buf.read(8, 9)
    with pytest.raises(ValueError, match="outside the buffer of 16 bytes"):
        buf.write(b"x" * 17)


def test_zero_size_buffer_is_valid(device):
    buf = device.allocator.allocate(0)
    assert buf.size == 0 and buf.read() == b""
    buf.write(b"")


def test_buffers_are_suballocated_at_storage_alignment(device):
    align = int(device.info.extra["minStorageBufferOffsetAlignment"])
    bufs = [device.allocator.allocate(n) for n in (1, 100, 3000, 5)]
    offsets = [b.resource.offset for b in bufs]
    assert all(o % align == 0 for o in offsets)
    assert len({b.resource.block.buffer for b in bufs}) == 1  # one block serves them all
    assert len(set(offsets)) == len(offsets)


def test_released_buffer_refuses_access(device):
    buf = device.allocator.allocate(64)
    buf.release()
    buf.release()  # idempotent
    with pytest.raises(DeviceError, match="buffer was released"):
        buf.read()


_FILLS = [(pattern, offset, length)
          for pattern in (b"\xab", b"\x12\x34", b"\xde\xad\xbe\xef")
          for offset, length in ((0, 64), (4, 40), (1, 12), (2, 6), (3, 4), (0, 0), (6, 2),
                                 (5, 28), (2, 12), (6, 20))
          if offset % len(pattern) == 0 and length % len(pattern) == 0]


@pytest.mark.parametrize("pattern,offset,length", _FILLS)
def test_fill_writes_the_pattern(device, pattern, offset, length):
    buf = device.allocator.allocate_with_data(bytes(range(80)))
    cb = device.create_command_buffer()
    cb.fill_buffer(BindingRef(buf, offset, length), pattern)
    run(device, cb)
    expected = bytearray(range(80))
    expected[offset:offset + length] = (pattern * 80)[:length]
    assert buf.read() == bytes(expected)


def test_copy_between_and_within_buffers(device, rng):
    src_data = rng.integers(0, 256, 300, dtype=np.uint8).tobytes()
    src = device.allocator.allocate_with_data(src_data)
    dst = device.allocator.allocate_with_data(bytes(300))
    cb = device.create_command_buffer()
    cb.copy_buffer(BindingRef(src, 3, 101), BindingRef(dst, 7, 101))
    cb.execution_barrier()
    cb.copy_buffer(BindingRef(dst, 7, 101), BindingRef(dst, 150, 101))
    run(device, cb)
    out = dst.read()
    assert out[7:108] == src_data[3:104] and out[150:251] == src_data[3:104]
    assert out[:7] == bytes(7) and out[108:150] == bytes(42)


def test_overlapping_copy_is_refused(device):
    buf = device.allocator.allocate(64)
    cb = device.create_command_buffer(1)
    with pytest.raises(RuntimeFailure, match="overlap"):
        cb.copy_buffer(BindingRef(buf, 0, 32), BindingRef(buf, 16, 32))
    cb.copy_buffer(BindingRef(buf, 0, 32), BindingRef(None, 16, 32, slot=0))
    cb.finalize()
    sem = device.create_semaphore(0)
    with pytest.raises(RuntimeFailure, match="overlap"):
        device.queue_execute(Fence(), Fence([(sem, 1)]), [cb], [[(buf, 0, 64)]])
    with pytest.raises(RuntimeFailure, match="overlap"):
        sem.wait(1)  # the signal fence fails with the same error


@pytest.mark.parametrize("offset,size", [(0, 64), (4, 8), (3, 5), (0, 70000), (8, 65536),
                                         (1, 65537)])
def test_update_copies_host_bytes(device, rng, offset, size):
    data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    buf = device.allocator.allocate(offset + size + 8)
    buf.write(bytes(buf.size))
    cb = device.create_command_buffer()
    cb.update_buffer(data, BindingRef(buf, offset, size))
    run(device, cb)
    out = buf.read()
    assert out[offset:offset + size] == data
    assert out[:offset] == bytes(offset) and out[offset + size:] == bytes(8)


def test_update_data_is_captured_at_record_time(device):
    buf = device.allocator.allocate(8)
    data = bytearray(b"abcdefgh")
    cb = device.create_command_buffer()
    cb.update_buffer(data, BindingRef(buf, 0, 8))
    data[:] = b"zzzzzzzz"
    run(device, cb)
    assert buf.read() == b"abcdefgh"


def test_update_larger_than_target_is_refused(device):
    buf = device.allocator.allocate(8)
    cb = device.create_command_buffer()
    with pytest.raises(RuntimeFailure, match="do not fit"):
        cb.update_buffer(b"123456789", BindingRef(buf, 0, 8))


def test_large_buffers_get_their_own_block(device, rng):
    big = device.allocator.allocate(48 << 20)
    small = device.allocator.allocate(64)
    assert big.resource.block is not small.resource.block and big.resource.block.dedicated
    tail = rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    big.write(tail, big.size - 4096)
    assert big.read(big.size - 4096) == tail


def test_unmapped_memory_goes_through_staging_transfers(driver, device_index, rng):
    """With host_mapped=False buffers live in unmapped memory; read/write stage through copies."""
    device = driver.create_device(device_index, host_mapped=False)
    try:
        data = rng.integers(0, 256, 777, dtype=np.uint8).tobytes()
        buf = device.allocator.allocate_with_data(data)
        assert buf.resource.block.mapping is None
        assert buf.read() == data and buf.read(10, 5) == data[10:15]
        cb = device.create_command_buffer()
        cb.fill_buffer(BindingRef(buf, 4, 8), b"\x07")
        run(device, cb)
        assert buf.read(0, 16) == data[:4] + b"\x07" * 8 + data[12:16]
    finally:
        device.release()


def test_range_allocator_reuses_and_merges_freed_ranges():
    ranges = RangeAllocator(1024, 64)
    a, b, c = ranges.allocate(100), ranges.allocate(64), ranges.allocate(1)
    assert (a, b, c) == (0, 128, 192)
    assert ranges.allocate(1024) is None
    ranges.free(b, 64)
    assert ranges.allocate(10) == 128  # first fit takes the hole
    ranges.free(128, 10)
    ranges.free(a, 100)
    ranges.free(c, 1)
    assert ranges.is_empty and ranges.largest_free == 1024
    with pytest.raises(ValueError, match="already free"):
        ranges.free(0, 64)
