"""Host buffers and the allocator: reads, writes, range checks, release."""
from __future__ import annotations

import numpy as np
import pytest

from hal_cpu import CpuAllocator
from irtk.errors import RuntimeFailure


def test_buffers_round_trip_bytes(rng):
    """New buffers' contents are undefined (as on a GPU); written bytes read back."""
    buf = CpuAllocator().allocate(64)
    assert buf.size == 64 and len(buf.read()) == 64
    buf.write(bytes(64))
    data = rng.integers(0, 256, 16, dtype=np.uint8).tobytes()
    buf.write(data, 8)
    assert buf.read(8, 16) == data
    assert buf.read(24) == bytes(40)


def test_allocate_with_data_accepts_any_contiguous_buffer(rng):
    arr = rng.standard_normal((3, 5)).astype(np.float32)
    buf = CpuAllocator().allocate_with_data(arr)
    assert buf.size == arr.nbytes
    np.testing.assert_array_equal(np.frombuffer(buf.read(), np.float32).reshape(3, 5), arr)
    arr[0, 0] = 99  # the buffer holds its own copy
    assert np.frombuffer(buf.read(0, 4), np.float32)[0] != 99
    view = memoryview(np.arange(4, dtype=np.int32))
    assert CpuAllocator().allocate_with_data(view).read() == np.arange(4, dtype=np.int32).tobytes()


def test_zero_size_buffers_are_valid():
    buf = CpuAllocator().allocate(0)
    assert buf.read() == b""
    buf.write(b"", 0)
    assert CpuAllocator().allocate_with_data(b"").size == 0


@pytest.mark.parametrize("offset, length", [(-1, 4), (0, 65), (60, 8), (65, 0), (0, -2)])
def test_out_of_range_access_raises_value_error(offset, length):
    buf = CpuAllocator().allocate(64)
    with pytest.raises(ValueError, match="outside the buffer of 64 bytes"):
        buf.read(offset, length)
    if length >= 0:
        with pytest.raises(ValueError, match="outside the buffer"):
            buf.write(bytes(length), offset)


def test_negative_size_is_refused():
    with pytest.raises(ValueError):
        CpuAllocator().allocate(-1)


def test_release_is_idempotent_and_later_use_raises():
    buf = CpuAllocator().allocate(8)
    buf.release()
    buf.release()
    assert buf.released
    with pytest.raises(RuntimeFailure, match="after release"):
        buf.read()
    with pytest.raises(RuntimeFailure, match="after release"):
        buf.write(b"x")
