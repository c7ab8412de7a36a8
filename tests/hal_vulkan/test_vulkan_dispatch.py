"""Compute dispatches: results against numpy, binding tables, reuse, barriers, limits."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from irtk.errors import DeviceError, RuntimeFailure
from irtk.hal import BindingRef, Fence

from tests.hal_vulkan.kernels import mul_add_executable

WG = 64


@pytest.fixture
def executable(device):
    exe = device.create_executable("vulkan-spirv-fb", mul_add_executable(WG))
    yield exe
    exe.release()


def submit(device, cbs, tables=None) -> None:
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), cbs, tables)
    assert sem.wait(1, timeout=30)


def groups(n: int) -> tuple[int, int, int]:
    return ((n + WG - 1) // WG, 1, 1)


def f32(buf, n: int) -> np.ndarray:
    return np.frombuffer(buf.read(0, 4 * n), np.float32)


def test_exports_describe_the_entry_points(executable):
    assert [e.name for e in executable.exports] == ["mul_add", "scale"]
    assert executable.lookup("scale") == 1
    mul_add = executable.exports[0]
    assert (mul_add.binding_count, mul_add.push_constant_count) == (3, 1)
    assert mul_add.workgroup_size == (WG, 1, 1)


@pytest.mark.parametrize("n", [1, 63, 64, 65, 1000, 4099])
def test_mul_add_matches_numpy(device, executable, rng, n):
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    alloc = device.allocator
    A, B = alloc.allocate_with_data(a.tobytes()), alloc.allocate_with_data(b.tobytes())
    C = alloc.allocate_with_data(np.full(n + 16, -7, np.float32).tobytes())  # guard words
    cb = device.create_command_buffer()
    cb.dispatch(executable, 0, groups(n), [n],
                [BindingRef(A, 0, 4 * n), BindingRef(B, 0, 4 * n), BindingRef(C, 0, 4 * n)])
    cb.finalize()
    submit(device, [cb])
    np.testing.assert_allclose(f32(C, n), a * b + 1, rtol=1e-6)
    assert np.all(f32(C, n + 16)[n:] == -7)  # the bounds check kept the tail untouched


def test_dependent_dispatches_need_and_get_a_barrier(device, executable, rng):
    """mul_add then scale on its output, then a copy out: barriers order all three."""
    n = 300
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    alloc = device.allocator
    A, B = alloc.allocate_with_data(a.tobytes()), alloc.allocate_with_data(b.tobytes())
    C, D = alloc.allocate(4 * n), alloc.allocate(4 * n)
    cb = device.create_command_buffer()
    refs = [BindingRef(A, 0, 4 * n), BindingRef(B, 0, 4 * n), BindingRef(C, 0, 4 * n)]
    cb.dispatch(executable, 0, groups(n), [n], refs)
    cb.execution_barrier()
    bits = struct.unpack("<I", struct.pack("<f", 0.5))[0]
    cb.dispatch(executable, 1, groups(n), [n, bits], [BindingRef(C, 0, 4 * n)])
    cb.execution_barrier()
    cb.copy_buffer(BindingRef(C, 0, 4 * n), BindingRef(D, 0, 4 * n))
    cb.finalize()
    submit(device, [cb])
    np.testing.assert_allclose(f32(D, n), (a * b + 1) * 0.5, rtol=1e-6)


def test_fill_then_dispatch_reads_the_filled_values(device, executable):
    n = 100
    alloc = device.allocator
    A, B, C = alloc.allocate(4 * n), alloc.allocate(4 * n), alloc.allocate(4 * n)
    cb = device.create_command_buffer()
    cb.fill_buffer(BindingRef(A, 0, 4 * n), struct.pack("<f", 3.0))
    cb.update_buffer(np.full(n, 2.0, np.float32).tobytes(), BindingRef(B, 0, 4 * n))
    cb.execution_barrier()
    cb.dispatch(executable, 0, groups(n), [n],
                [BindingRef(A, 0, -1), BindingRef(B, 0, -1), BindingRef(C, 0, -1)])
    cb.finalize()
    submit(device, [cb])
    assert np.all(f32(C, n) == 7.0)


def test_binding_tables_reuse_one_recording_per_table(device, executable, rng):
    """One command buffer, slots filled at submit; the same table again reuses its recording."""
    n = 200
    cb = device.create_command_buffer(binding_capacity=3)
    cb.dispatch(executable, 0, groups(n), [n],
                [BindingRef(None, 0, 4 * n, slot=0), BindingRef(None, 0, 4 * n, slot=1),
                 BindingRef(None, 0, 4 * n, slot=2)])
    cb.finalize()
    alloc = device.allocator
    inputs = [rng.standard_normal((2, n)).astype(np.float32) for _ in range(2)]
    tables, outs = [], []
    for x in inputs:
        A, B, C = (alloc.allocate_with_data(x[0].tobytes()),
                   alloc.allocate_with_data(x[1].tobytes()), alloc.allocate(4 * n))
        tables.append([(A, 0, 4 * n), (B, 0, 4 * n), (C, 0, 4 * n)])
        outs.append(C)
    submit(device, [cb], [tables[0]])
    submit(device, [cb], [tables[1]])
    command_buffers = device.tracker.live()["VkCommandBuffer"]
    for table, C in zip(tables, outs):
        C.write(bytes(4 * n))
        submit(device, [cb], [table])
    assert device.tracker.live()["VkCommandBuffer"] == command_buffers  # nothing re-recorded
    for x, C in zip(inputs, outs):
        np.testing.assert_allclose(f32(C, n), x[0] * x[1] + 1, rtol=1e-6)
    # Two command buffers in one submit run in order: the second reads the first's output.
    cb2 = device.create_command_buffer(binding_capacity=1)
    bits = struct.unpack("<I", struct.pack("<f", -2.0))[0]
    cb2.dispatch(executable, 1, groups(n), [n, bits], [BindingRef(None, 0, -1, slot=0)])
    cb2.finalize()
    submit(device, [cb, cb2], [tables[0], [(outs[0], 0, 4 * n)]])
    np.testing.assert_allclose(f32(outs[0], n), (inputs[0][0] * inputs[0][1] + 1) * -2,
                               rtol=1e-6)


def test_one_command_buffer_with_many_tables_in_one_submit(device, executable, rng):
    """More tables than kept recordings, all in one submit: each gets its own recording."""
    n = 64
    cb = device.create_command_buffer(binding_capacity=1)
    bits = struct.unpack("<I", struct.pack("<f", 3.0))[0]
    cb.dispatch(executable, 1, groups(n), [n, bits], [BindingRef(None, 0, -1, slot=0)])
    cb.finalize()
    values = rng.standard_normal((6, n)).astype(np.float32)
    bufs = [device.allocator.allocate_with_data(v.tobytes()) for v in values]
    submit(device, [cb] * 6, [[(b, 0, 4 * n)] for b in bufs])
    for v, b in zip(values, bufs):
        np.testing.assert_allclose(f32(b, n), v * 3, rtol=1e-6)
    submit(device, [cb], [[(bufs[0], 0, 4 * n)]])  # idle extras are dropped again
    assert len(cb._recordings) <= 4


def test_slot_offsets_are_relative_to_the_table_entry(device, executable, rng):
    align = max(int(device.info.extra["minStorageBufferOffsetAlignment"]), 16)
    n = 50
    a = rng.standard_normal(n).astype(np.float32)
    big = device.allocator.allocate(4 * align + 4 * n)
    big.write(a.tobytes(), 3 * align)
    ones = device.allocator.allocate_with_data(np.ones(n, np.float32).tobytes())
    out = device.allocator.allocate(4 * n)
    cb = device.create_command_buffer(binding_capacity=1)
    cb.dispatch(executable, 0, groups(n), [n],
                [BindingRef(None, align, 4 * n, slot=0), BindingRef(ones, 0, 4 * n),
                 BindingRef(out, 0, 4 * n)])
    cb.finalize()
    submit(device, [cb], [[(big, 2 * align, -1)]])
    np.testing.assert_allclose(f32(out, n), a + 1, rtol=1e-6)


def test_missing_binding_table_slot_fails_the_submit(device, executable):
    cb = device.create_command_buffer(binding_capacity=3)
    buf = device.allocator.allocate(64)
    cb.dispatch(executable, 1, (1, 1, 1), [16, 0], [BindingRef(None, 0, 64, slot=2)])
    cb.finalize()
    sem = device.create_semaphore(0)
    with pytest.raises(RuntimeFailure, match="slot 2"):
        device.queue_execute(Fence(), Fence([(sem, 1)]), [cb], [[(buf, 0, 64)]])
    with pytest.raises(RuntimeFailure, match="slot 2"):
        sem.query()


def test_unaligned_binding_offset_names_the_limit(device, executable):
    buf = device.allocator.allocate(1024)
    cb = device.create_command_buffer()
    with pytest.raises(DeviceError, match="minStorageBufferOffsetAlignment"):
        cb.dispatch(executable, 1, (1, 1, 1), [1, 0], [BindingRef(buf, 4, 64)])


def test_binding_above_max_storage_buffer_range_is_refused(device, executable):
    limit = int(device.info.extra["maxStorageBufferRange"])
    if limit > 256 << 20:
        pytest.skip(f"maxStorageBufferRange is {limit} bytes; too large to allocate in a test")
    buf = device.allocator.allocate(limit + 256)
    cb = device.create_command_buffer()
    with pytest.raises(DeviceError, match=r"exceeds maxStorageBufferRange"):
        cb.dispatch(executable, 1, (1, 1, 1), [1, 0], [BindingRef(buf, 0, limit + 256)])


def test_dispatch_arguments_are_checked_when_recorded(device, executable):
    buf = device.allocator.allocate(64)
    cb = device.create_command_buffer()
    with pytest.raises(RuntimeFailure, match="1 push constants given, the entry point takes 2"):
        cb.dispatch(executable, 1, (1, 1, 1), [1], [BindingRef(buf, 0, 64)])
    with pytest.raises(RuntimeFailure, match="2 bindings given, the entry point takes 1"):
        cb.dispatch(executable, 1, (1, 1, 1), [1, 0], [BindingRef(buf, 0, 64)] * 2)
    with pytest.raises(DeviceError, match="maxComputeWorkGroupCount"):
        cb.dispatch(executable, 1, (1 << 20, 1, 1), [1, 0], [BindingRef(buf, 0, 64)])
    with pytest.raises(ValueError, match="ordinal 5"):
        cb.dispatch(executable, 5, (1, 1, 1), [], [])
    cb.finalize()
    with pytest.raises(RuntimeFailure, match="finalized"):
        cb.execution_barrier()


def test_unfinalized_command_buffer_is_refused(device):
    cb = device.create_command_buffer()
    cb.execution_barrier()
    sem = device.create_semaphore(0)
    with pytest.raises(RuntimeFailure, match="not finalized"):
        device.queue_execute(Fence(), Fence([(sem, 1)]), [cb])


def test_command_buffer_reruns_many_times(device, executable):
    n = 64
    buf = device.allocator.allocate_with_data(np.ones(n, np.float32).tobytes())
    cb = device.create_command_buffer()
    bits = struct.unpack("<I", struct.pack("<f", 2.0))[0]
    cb.dispatch(executable, 1, groups(n), [n, bits], [BindingRef(buf, 0, 4 * n)])
    cb.finalize()
    sem = device.create_semaphore(0)
    for i in range(1, 11):  # submitted back to back, ordered by the semaphore chain
        device.queue_execute(Fence([(sem, i - 1)]), Fence([(sem, i)]), [cb])
    assert sem.wait(10, timeout=30)
    assert np.all(f32(buf, n) == 1024.0)


def test_timestamps_measure_each_dispatch(device, executable):
    n = 4096
    buf = device.allocator.allocate_with_data(np.ones(n, np.float32).tobytes())
    cb = device.create_command_buffer(timestamps=True)
    bits = struct.unpack("<I", struct.pack("<f", 3.0))[0]
    for _ in range(3):
        cb.dispatch(executable, 1, groups(n), [n, bits], [BindingRef(buf, 0, 4 * n)])
        cb.execution_barrier()
    cb.finalize()
    with pytest.raises(RuntimeFailure, match="not been submitted"):
        cb.dispatch_times()
    submit(device, [cb])
    times = cb.dispatch_times()
    assert len(times) == 3 and all(0 <= t < 10 for t in times)
    assert np.all(f32(buf, n) == 27.0)
    plain = device.create_command_buffer()
    with pytest.raises(RuntimeFailure, match="timestamps=True"):
        plain.dispatch_times()


def test_empty_binding_at_the_very_end_of_a_block(device, executable):
    """A zero-length binding still gets a valid (non-empty) descriptor range."""
    big = device.allocator.allocate(16 << 20)
    assert big.resource.block.dedicated
    cb = device.create_command_buffer()
    cb.dispatch(executable, 1, (1, 1, 1), [0, 0], [BindingRef(big, big.size, 0)])
    cb.finalize()
    submit(device, [cb])


@pytest.fixture(params=[None, "0", "1"], ids=["default", "rebind=0", "rebind=1"])
def rebind_device(request, driver, device_index, monkeypatch):
    """A device made with IRTK_VULKAN_REBIND unset, 0 or 1."""
    if request.param is None:
        monkeypatch.delenv("IRTK_VULKAN_REBIND", raising=False)
    else:
        monkeypatch.setenv("IRTK_VULKAN_REBIND", request.param)
    dev = driver.create_device(device_index)
    dev.rebind_switch = request.param
    yield dev
    dev.release()


def test_rebinding_is_the_default_where_descriptors_update_after_bind(rebind_device):
    """Rebinding where the device can update storage descriptors after bind, unless it has push
    descriptors (then only with the switch at 1); never with the switch at 0."""
    device, switch = rebind_device, rebind_device.rebind_switch
    can, push = device.physical.update_after_bind, device.physical.push_descriptors
    expected = can and switch != "0" and (switch == "1" or not push)
    assert device.update_after_bind == expected
    assert device.push_descriptors == (push and not expected)


def test_new_binding_tables_rebind_instead_of_rerecording(rebind_device, rng):
    """Where descriptors can be updated after bind, one recording serves any number of
    different tables once idle: its descriptor sets are rewritten, nothing is re-recorded.
    Otherwise each table is a (cached) recording; the results are the same either way."""
    device = rebind_device
    executable = device.create_executable("vulkan-spirv-fb", mul_add_executable(WG))
    n = 128
    cb = device.create_command_buffer(binding_capacity=3)
    for _ in range(2):  # two dispatches, so a rebind rewrites more than one set
        cb.dispatch(executable, 0, groups(n), [n],
                    [BindingRef(None, 0, 4 * n, slot=i) for i in range(3)])
        cb.execution_barrier()
    cb.finalize()
    alloc = device.allocator
    recorded = []
    for _ in range(6):  # more distinct tables than recordings are kept
        x = rng.standard_normal((2, n)).astype(np.float32)
        A, B, C = (alloc.allocate_with_data(x[0].tobytes()),
                   alloc.allocate_with_data(x[1].tobytes()), alloc.allocate(4 * n))
        submit(device, [cb], [[(A, 0, -1), (B, 0, -1), (C, 0, -1)]])
        expected = x[0].astype(np.float64) * x[1] + 1
        np.testing.assert_allclose(f32(C, n), expected, rtol=1e-6, atol=1e-6)
        recorded.append(cb._last.handle)
    if device.update_after_bind:
        assert len(cb._recordings) == 1 and len(set(recorded)) == 1
    else:  # push descriptors or plain sets: each table is a (cached) recording
        assert len(cb._recordings) <= 4 and len(set(recorded)) > 1


def test_a_new_buffer_where_a_released_one_was_reuses_its_recording(rebind_device, rng):
    """A recording names the block's VkBuffer and an offset, not the HAL buffer: an output
    allocated where the last call's (released) output was finds the recording made for it,
    as a host program that allocates its result per call does; a buffer elsewhere does not."""
    device = rebind_device
    executable = device.create_executable("vulkan-spirv-fb", mul_add_executable(WG))
    n = 128
    cb = device.create_command_buffer(binding_capacity=3)
    cb.dispatch(executable, 0, groups(n), [n],
                [BindingRef(None, 0, 4 * n, slot=i) for i in range(3)])
    cb.finalize()
    x = rng.standard_normal((2, n)).astype(np.float32)
    alloc = device.allocator
    A, B = alloc.allocate_with_data(x[0].tobytes()), alloc.allocate_with_data(x[1].tobytes())
    expected = x[0].astype(np.float64) * x[1] + 1
    places, recorded = [], []
    for _ in range(3):
        C = alloc.allocate(4 * n)
        C.write(rng.standard_normal(n).astype(np.float32).tobytes())
        submit(device, [cb], [[(A, 0, -1), (B, 0, -1), (C, 0, -1)]])
        np.testing.assert_allclose(f32(C, n), expected, rtol=1e-6, atol=1e-6)
        places.append(C.resource.location(0))
        recorded.append(cb._last.handle)
        C.release()
        device.collect()
    assert len(set(places)) == 1, "the allocator should hand out the released range again"
    assert len(set(recorded)) == 1 and len(cb._recordings) == 1
    held = alloc.allocate(4 * n)  # takes the recycled range: the next output lands elsewhere
    C = alloc.allocate(4 * n)
    submit(device, [cb], [[(A, 0, -1), (B, 0, -1), (C, 0, -1)]])
    np.testing.assert_allclose(f32(C, n), expected, rtol=1e-6, atol=1e-6)
    assert C.resource.location(0) != places[0]
    if not device.update_after_bind:
        assert cb._last.handle != recorded[0]
    held.release()
