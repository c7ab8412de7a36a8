"""Queue operations: fences in and out, errors failing the signal fence, drivers, registry."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from hal_cpu import create_sync_driver, create_task_driver
from irtk.errors import DeviceError, RuntimeFailure
from irtk.hal import BindingRef, Fence, registry

from .cpu_kernel_builder import binary, executable, kernel, op, operand, unary


def _dispatch_cb(device, n: int, bufs, capacity: int = 0):
    exe = device.create_executable("cpu-kernel-fb", unary("neg", "arith.negf", "f32", "f32", n))
    cb = device.create_command_buffer(binding_capacity=capacity)
    cb.dispatch(exe, 0, (-(-n // 64), 1, 1), [], bufs)
    cb.finalize()
    return cb


def test_dispatch_error_fails_the_signal_fence_with_a_clear_message(device):
    n = 100
    small = device.allocator.allocate(4 * n - 4)
    out = device.allocator.allocate(4 * n)
    cb = _dispatch_cb(device, n, [BindingRef(None, 0, -1, slot=0), BindingRef(out, 0, -1)],
                      capacity=1)
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), [cb], [[(small, 0, small.size)]])
    with pytest.raises(RuntimeFailure, match=r"kernel 'neg': input 0 .* does not fit in "
                                             r"binding 0 \(396 bytes"):
        sem.wait(1, timeout=30)


def test_missing_binding_table_slot_fails_the_fence(device):
    out = device.allocator.allocate(400)
    cb = _dispatch_cb(device, 100, [BindingRef(None, 0, -1, slot=1), BindingRef(out, 0, -1)],
                      capacity=2)
    sem = device.create_semaphore(0)
    message = "uses binding-table slot 1 but the binding table has 1 entry"
    with pytest.raises(RuntimeFailure, match=message):  # found at submit...
        device.queue_execute(Fence(), Fence([(sem, 1)]), [cb], [[(out, 0, 400)]])
    with pytest.raises(RuntimeFailure, match=message):  # ...and reported through the fence
        sem.wait(1, timeout=30)


def test_released_buffer_fails_the_fence(device):
    a, out = device.allocator.allocate(400), device.allocator.allocate(400)
    cb = _dispatch_cb(device, 100, [BindingRef(a, 0, -1), BindingRef(out, 0, -1)])
    a.release()
    sem = device.create_semaphore(0)
    with pytest.raises(RuntimeFailure, match="released"):
        device.queue_execute(Fence(), Fence([(sem, 1)]), [cb])
    with pytest.raises(RuntimeFailure, match="released"):
        sem.wait(1, timeout=30)


def test_failed_wait_fence_propagates_to_the_signal_fence(device):
    upstream, downstream = device.create_semaphore(0), device.create_semaphore(0)
    buf = device.allocator.allocate_with_data(bytes(4))
    cb = device.create_command_buffer()
    cb.fill_buffer(BindingRef(buf, 0, 4), b"\xff")
    cb.finalize()
    upstream.fail(RuntimeFailure("producer crashed"))
    device.queue_execute(Fence([(upstream, 1)]), Fence([(downstream, 1)]), [cb])
    with pytest.raises(RuntimeFailure, match="producer crashed"):
        downstream.wait(1, timeout=30)
    assert buf.read() == bytes(4)  # the work never ran


def test_local_task_returns_before_its_wait_fence_is_reached(task_device, rng):
    dev = task_device
    n = 1000
    a = rng.standard_normal(n).astype(np.float32)
    src, dst = dev.allocator.allocate_with_data(a.tobytes()), dev.allocator.allocate(4 * n)
    cb = _dispatch_cb(dev, n, [BindingRef(src, 0, -1), BindingRef(dst, 0, -1)])
    gate, done = dev.create_semaphore(0), dev.create_semaphore(0)
    dev.queue_execute(Fence([(gate, 1)]), Fence([(done, 1)]), [cb])
    dev.queue_execute(Fence([(done, 1)]), Fence([(done, 2)]), [cb])  # queued behind it
    assert done.wait(1, timeout=0.05) is False
    gate.signal(1)
    assert done.wait(2, timeout=30)
    np.testing.assert_array_equal(np.frombuffer(dst.read(), np.float32), -a)


@pytest.mark.parametrize("executor", ["reference", "native"])
def test_local_task_spreads_a_dispatch_over_its_workers(task_device, monkeypatch, executor):
    """The reference's chunks follow the driver's min_chunk_iterations; native chunks follow
    their estimated work (CHUNK_WORK body evaluations), made small here."""
    import hal_cpu.kernel as kmod
    import hal_cpu.native_executor as native
    monkeypatch.setenv("IRTK_CPU_EXECUTOR", executor)
    monkeypatch.setattr(native, "CHUNK_WORK", 64)
    seen: set[str] = set()
    original = kmod.Kernel.run

    def spy(self, views, start, end):
        seen.add(threading.current_thread().name)
        time.sleep(0.005)
        original(self, views, start, end)

    monkeypatch.setattr(kmod.Kernel, "run", spy)
    n = 64 * 40
    src = task_device.allocator.allocate(4 * n)
    dst = task_device.allocator.allocate(4 * n)
    cb = _dispatch_cb(task_device, n, [BindingRef(src, 0, -1), BindingRef(dst, 0, -1)])
    sem = task_device.create_semaphore(0)
    plan = cb.commands[0].executable.kernels[0].plan
    assert isinstance(plan, native.NativePlan) == (executor == "native")
    task_device.queue_execute(Fence(), Fence([(sem, 1)]), [cb])
    assert sem.wait(1, timeout=30)
    assert len(seen) >= 2, seen


def test_queue_alloca_and_dealloca_follow_their_fences(device):
    s = device.create_semaphore(0)
    buf = device.queue_alloca(Fence(), Fence([(s, 1)]), 64)
    assert s.wait(1, timeout=30) and buf.size == 64
    device.queue_dealloca(Fence([(s, 1)]), Fence([(s, 2)]), buf)
    assert s.wait(2, timeout=30)
    with pytest.raises(RuntimeFailure, match="after release"):
        buf.read()


def test_drivers_enumerate_one_device_each(monkeypatch):
    monkeypatch.setenv("IRTK_TASK_WORKERS", "5")
    task_info, = create_task_driver().enumerate_devices()
    assert task_info.name == "CPU (local-task, 5 workers)" and task_info.worker_count == 5
    assert task_info.index == 0 and task_info.executable_formats == ("cpu-kernel-fb",)
    sync_info, = create_sync_driver().enumerate_devices()
    assert sync_info.driver == "local-sync" and sync_info.uri == "local-sync://0"
    monkeypatch.setenv("IRTK_TASK_WORKERS", "many")
    with pytest.raises(DeviceError, match="IRTK_TASK_WORKERS"):
        create_task_driver().enumerate_devices()
    with pytest.raises(DeviceError, match="index 1"):
        create_sync_driver().create_device(1)


def test_registry_makes_new_drivers_with_their_options():
    """`create_driver` is the registry's factory with options, apart from the shared driver:
    here local-task's pool size and how finely it splits a dispatch."""
    driver = registry.create_driver("local-task", worker_count=2, min_chunk_iterations=100)
    assert driver is not registry.get_driver("local-task")
    dev = driver.create_device(0)
    try:
        assert dev.info.worker_count == 2
        assert dev.task_system.split(1000, 1) == [(s, s + 100) for s in range(0, 1000, 100)]
    finally:
        dev.release()
    with pytest.raises(DeviceError, match="unknown driver 'metal'; drivers: local-sync, "
                                          "local-task"):
        registry.create_driver("metal")
    with pytest.raises(DeviceError, match="chunks of at least one iteration, got 0"):
        create_task_driver(min_chunk_iterations=0)


def test_registry_gives_a_working_local_task_device(rng):
    dev = registry.get_device("local-task")
    assert dev is registry.get_device("local-task")
    assert dev.info.driver == "local-task" and dev.supports_format("cpu-kernel-fb")
    n = 10
    a = rng.standard_normal(n).astype(np.float32)
    exe = dev.create_executable("cpu-kernel-fb", binary("mul", "arith.mulf", "f32", "f32", n))
    ba, out = dev.allocator.allocate_with_data(a.tobytes()), dev.allocator.allocate(4 * n)
    cb = dev.create_command_buffer()
    cb.dispatch(exe, 0, (1, 1, 1), [], [BindingRef(ba, 0, -1), BindingRef(ba, 0, -1),
                                        BindingRef(out, 0, -1)])
    cb.finalize()
    sem = dev.create_semaphore(0)
    dev.queue_execute(Fence(), Fence([(sem, 1)]), [cb])
    assert sem.wait(1, timeout=30)
    np.testing.assert_array_equal(np.frombuffer(out.read(), np.float32), a * a)


def test_released_device_refuses_new_work():
    dev = create_task_driver(worker_count=2).create_device()
    dev.release()
    dev.release()  # idempotent
    with pytest.raises(DeviceError, match="released"):
        dev.create_command_buffer()


def test_in_place_kernel_with_two_outputs_reads_before_writing(device, rng):
    # out0 = x + 1 written over x itself; out1 = x (the old value), in another buffer.
    n = 200
    x = rng.standard_normal(n).astype(np.float32)
    k = kernel("inplace", [n], [operand(0, "f32", [n], 1)],
               [operand(0, "f32", [n], 1), operand(1, "f32", [n], 1)],
               [op("arith.constant", result_type="f32", float_value=1.0),
                op("arith.addf", 0, 3, result_type="f32")], [4, 0])
    exe = device.create_executable("cpu-kernel-fb", executable(k))
    bx, by = device.allocator.allocate_with_data(x.tobytes()), device.allocator.allocate(4 * n)
    cb = device.create_command_buffer()
    cb.dispatch(exe, 0, (4, 1, 1), [], [BindingRef(bx, 0, -1), BindingRef(by, 0, -1)])
    cb.finalize()
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), [cb])
    assert sem.wait(1, timeout=30)
    np.testing.assert_array_equal(np.frombuffer(bx.read(), np.float32), x + np.float32(1))
    np.testing.assert_array_equal(np.frombuffer(by.read(), np.float32), x)
