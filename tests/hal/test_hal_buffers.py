"""Buffers and buffer views: allocation, host access, fills, copies, updates and subspans."""
from __future__ import annotations

import numpy as np
import pytest

from irtk.errors import RuntimeFailure
from irtk.hal import BindingRef, BufferView, ElementType
from tests.hal.helpers import run


@pytest.mark.parametrize("size", [0, 1, 7, 4096, 1 << 20])
def test_allocate_gives_a_buffer_of_the_size_asked(device, size):
    buf = device.allocator.allocate(size)
    assert buf.size == size
    assert len(buf.read()) == size


def test_write_then_read_round_trips_at_any_offset(device, rng):
    data = rng.integers(0, 256, 1000, dtype=np.uint8).tobytes()
    buf = device.allocator.allocate(1003)
    buf.write(data, 3)
    assert buf.read(3, 1000) == data
    assert buf.read(500, 17) == data[497:514]
    assert buf.read(1002) == data[-1:]


def test_host_access_outside_the_buffer_is_refused(device):
    buf = device.allocator.allocate(16)
    with pytest.raises(RuntimeFailure, match="outside the buffer of 16 bytes"):
        buf.read(8, 9)
    with pytest.raises(RuntimeFailure, match="outside the buffer of 16 bytes"):
        buf.write(b"x" * 4, 13)
    with pytest.raises(ValueError):  # range errors are also ValueErrors
        buf.read(-1, 2)


@pytest.mark.parametrize("pattern", [b"\x5a", b"\x12\xf4", b"\x01\x82\xc3\x44"],
                         ids=["1-byte", "2-byte", "4-byte"])
@pytest.mark.parametrize("offset", [0, 1, 2, 3, 6, 37])
def test_fill_repeats_the_pattern_at_unaligned_offsets(device, rng, pattern, offset):
    size = 128
    before = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    buf = device.allocator.allocate_with_data(before)
    length = (size - offset - 5) // len(pattern) * len(pattern)
    cb = device.create_command_buffer()
    cb.fill_buffer(BindingRef(buf, offset, length), pattern)
    cb.finalize()
    run(device, [cb])
    expected = bytearray(before)
    expected[offset:offset + length] = pattern * (length // len(pattern))
    assert buf.read() == bytes(expected)


def test_fill_length_must_be_whole_patterns_and_pattern_1_2_or_4_bytes(device):
    buf = device.allocator.allocate(16)
    cb = device.create_command_buffer()
    with pytest.raises(RuntimeFailure, match="not a multiple of the 4-byte pattern"):
        cb.fill_buffer(BindingRef(buf, 0, 6), b"abcd")
    with pytest.raises(RuntimeFailure, match="1, 2 or 4 bytes, got 3"):
        cb.fill_buffer(BindingRef(buf, 0, 6), b"abc")


def test_copy_of_sub_ranges_between_and_within_buffers(device, rng):
    src_data = rng.integers(0, 256, 300, dtype=np.uint8).tobytes()
    dst_data = rng.integers(0, 256, 300, dtype=np.uint8).tobytes()
    src = device.allocator.allocate_with_data(src_data)
    dst = device.allocator.allocate_with_data(dst_data)
    cb = device.create_command_buffer()
    cb.copy_buffer(BindingRef(src, 3, 101), BindingRef(dst, 7, 101))
    cb.execution_barrier()
    cb.copy_buffer(BindingRef(dst, 7, 101), BindingRef(dst, 150, 101))
    cb.finalize()
    run(device, [cb])
    expected = bytearray(dst_data)
    expected[7:108] = src_data[3:104]
    expected[150:251] = src_data[3:104]
    assert dst.read() == bytes(expected)
    assert src.read() == src_data


def test_overlapping_copy_within_one_buffer_is_refused(device):
    buf = device.allocator.allocate(64)
    cb = device.create_command_buffer()
    with pytest.raises(RuntimeFailure, match="overlap"):
        cb.copy_buffer(BindingRef(buf, 0, 32), BindingRef(buf, 16, 32))


@pytest.mark.parametrize("offset,length", [(0, 64), (1, 3), (6, 130), (4, 70000)])
def test_update_writes_the_bytes_captured_at_record_time(device, rng, offset, length):
    data = bytearray(rng.integers(0, 256, length, dtype=np.uint8).tobytes())
    before = rng.integers(0, 256, offset + length + 9, dtype=np.uint8).tobytes()
    buf = device.allocator.allocate_with_data(before)
    cb = device.create_command_buffer()
    cb.update_buffer(data, BindingRef(buf, offset, length))
    cb.finalize()
    original = bytes(data)
    data[:] = bytes(length)  # later changes to the caller's bytes do not matter
    run(device, [cb])
    assert buf.read() == before[:offset] + original + before[offset + length:]


def test_update_larger_than_its_target_is_refused(device):
    buf = device.allocator.allocate(8)
    cb = device.create_command_buffer()
    with pytest.raises(RuntimeFailure, match="do not fit"):
        cb.update_buffer(b"123456789", BindingRef(buf, 0, 8))


def test_subspan_is_a_window_onto_its_buffer(device, rng):
    data = rng.integers(0, 256, 256, dtype=np.uint8).tobytes()
    buf = device.allocator.allocate_with_data(data)
    span = buf.subspan(16, 64)
    inner = span.subspan(8, 16)
    assert (span.size, inner.size) == (64, 16)
    assert inner.allocated_buffer is buf and inner.byte_offset == 24
    assert span.read() == data[16:80] and inner.read() == data[24:40]
    inner.write(b"\xee" * 4, 2)
    assert buf.read(26, 4) == b"\xee" * 4
    assert buf.subspan(0, 256) is buf
    with pytest.raises(RuntimeFailure, match="outside the buffer of 64 bytes"):
        span.subspan(60, 8)
    with pytest.raises(RuntimeFailure, match="outside the buffer of 64 bytes"):
        span.read(0, 65)


def test_commands_on_subspans_touch_only_their_window(device, rng):
    data = rng.integers(0, 256, 200, dtype=np.uint8).tobytes()
    buf = device.allocator.allocate_with_data(data)
    span = buf.subspan(40, 100)
    cb = device.create_command_buffer()
    cb.fill_buffer(BindingRef(span, 4, 8), b"\x11\x22")
    cb.copy_buffer(BindingRef(span, 20, 10), BindingRef(span, 60, 10))
    with pytest.raises(RuntimeFailure, match=r"range \[96, 104\) is outside the buffer of 100"):
        cb.fill_buffer(BindingRef(span, 96, 8), b"\x00")
    cb.finalize()
    run(device, [cb])
    expected = bytearray(data)
    expected[44:52] = b"\x11\x22" * 4
    expected[100:110] = data[60:70]
    assert buf.read() == bytes(expected)


@pytest.mark.parametrize("etype", [ElementType.f32, ElementType.i8, ElementType.i64,
                                   ElementType.f16])
def test_buffer_view_reads_back_as_numpy(device, rng, etype):
    dtype = etype.numpy_dtype()
    array = rng.standard_normal((3, 5)).astype(dtype) if etype.is_float else \
        rng.integers(-100, 100, (3, 5)).astype(dtype)
    buf = device.allocator.allocate(8 + array.nbytes)
    buf.write(array.tobytes(), 8)
    view = BufferView(buf, (3, 5), etype, byte_offset=8)
    assert view.byte_length == array.nbytes
    assert view.format_shape() == f"3x5x{etype.name}"
    np.testing.assert_array_equal(view.to_numpy(), array)
