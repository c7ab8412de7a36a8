"""Object lifetimes: create/release loops leak nothing, dropped objects are reclaimed, objects in
flight outlive their release, and releasing the device destroys everything."""
from __future__ import annotations

import gc

import numpy as np

from irtk.hal import BindingRef, Fence

from tests.hal_vulkan.kernels import mul_add_executable


def one_round(device, data: bytes, release: bool) -> None:
    n = 100
    exe = device.create_executable("vulkan-spirv-fb", data)
    bufs = [device.allocator.allocate_with_data(np.ones(n, np.float32).tobytes())
            for _ in range(3)]
    cb = device.create_command_buffer(binding_capacity=1)
    cb.dispatch(exe, 0, (2, 1, 1), [n], [BindingRef(bufs[0], 0, 4 * n),
                                         BindingRef(None, 0, 4 * n, slot=0),
                                         BindingRef(bufs[2], 0, 4 * n)])
    cb.execution_barrier()  # the fill writes what the dispatch reads
    cb.fill_buffer(BindingRef(bufs[1], 1, 3), b"\x00")  # unaligned: uses a staging buffer
    cb.finalize()
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), [cb], [[(bufs[1], 0, 4 * n)]])
    assert sem.wait(1, timeout=30)
    assert np.all(np.frombuffer(bufs[2].read(), np.float32) == 2.0)
    if release:
        for obj in (cb, exe, sem, *bufs):
            obj.release()


def test_create_release_loop_leaks_nothing(device):
    data = mul_add_executable()
    one_round(device, data, release=True)  # warm caches (blocks, descriptor pools)
    before = device.live_objects()
    for _ in range(15):
        one_round(device, data, release=True)
    assert device.live_objects() == before


def test_dropped_objects_are_reclaimed_by_the_garbage_collector(device):
    data = mul_add_executable()
    before = device.live_objects()
    for _ in range(10):
        one_round(device, data, release=False)
    gc.collect()
    assert device.live_objects() == before


def test_buffer_released_while_in_flight_stays_valid_until_done(device):
    gate, done = device.create_semaphore(0), device.create_semaphore(0)
    target = device.allocator.allocate(64)
    cb = device.create_command_buffer()
    cb.fill_buffer(BindingRef(target, 0, 64), b"\x09")
    cb.finalize()
    live = device.live_objects()
    device.queue_execute(Fence([(gate, 1)]), Fence([(done, 1)]), [cb])
    cb.release()
    target.release()
    assert device.tracker.live()["VkCommandBuffer"] == live.get("VkCommandBuffer", 0) + 1
    gate.signal(1)
    assert done.wait(1, timeout=30)
    device.collect()
    assert device.tracker.live().get("VkCommandBuffer", 0) == live.get("VkCommandBuffer", 0)


def test_semaphore_released_while_in_flight_is_destroyed_after_it_is_signalled(device):
    gate, done = device.create_semaphore(0), device.create_semaphore(0)
    live = device.tracker.live()["VkSemaphore"]
    device.queue_execute(Fence([(gate, 1)]), Fence([(done, 1)]), [])
    done.release()
    assert device.tracker.live()["VkSemaphore"] == live  # the GPU will still signal it
    gate.signal(1)
    assert device.wait_idle(timeout=30)
    assert device.tracker.live()["VkSemaphore"] == live - 1


def test_semaphore_outlives_its_signal_even_after_the_queue_timeline_passed(device, monkeypatch):
    """A submission signals the queue's private timeline first and the caller's semaphores
    after it, so the timeline can say "completed" while the driver's queue thread has still to
    signal `done`. Destroying `done` then let that thread write freed memory (the heap
    corruption seen on lavapipe and SwiftShader in end-to-end runs); it must wait for its own
    signal. The window is held open here by pinning the completed serial."""
    gate, done = device.create_semaphore(0), device.create_semaphore(0)
    live = device.tracker.live()["VkSemaphore"]
    device.queue_execute(Fence([(gate, 1)]), Fence([(done, 1)]), [])
    serial = device.queue.serial
    monkeypatch.setattr(device.queue, "poll", lambda: serial)
    done.release()
    device.collect()
    assert device.tracker.live()["VkSemaphore"] == live  # not signalled yet: kept
    monkeypatch.undo()
    gate.signal(1)
    assert device.wait_idle(timeout=30)
    assert device.tracker.live()["VkSemaphore"] == live - 1


def test_releasing_the_device_destroys_everything(fresh_device):
    data = mul_add_executable()
    one_round(fresh_device, data, release=False)
    kept = [fresh_device.allocator.allocate(1 << 20), fresh_device.create_semaphore(0),
            fresh_device.create_executable("vulkan-spirv-fb", data)]
    assert fresh_device.tracker.live()
    fresh_device.release()
    assert fresh_device.tracker.live() == {}
    for obj in kept:
        obj.release()  # after the device is gone: a no-op, not a crash


def test_device_create_use_release_loop_leaves_no_vulkan_object(driver, device_index):
    """Devices made and dropped in a loop, each after a round of executables, buffers, command
    buffers and semaphores (some released, some just dropped): every handle is destroyed."""
    data = mul_add_executable()
    for i in range(3):
        device = driver.create_device(device_index)
        one_round(device, data, release=i % 2 == 0)
        one_round(device, data, release=False)
        assert device.live_objects()  # objects exist while the device does
        device.release()
        assert device.tracker.live() == {}
        del device
        gc.collect()


def test_semaphores_of_the_newest_submission_outlive_it_until_the_queue_moves_on(device):
    """A driver's queue thread still locks a wait semaphore's timeline after it signals the
    submission (hal_vulkan/queue.py): a semaphore is destroyed only once a later submission
    (or wait_idle's barrier) has completed, never just when its own one has."""
    device.wait_idle(30)
    gc.collect()
    base = device.live_objects().get("VkSemaphore", 0)
    fences = [Fence([(device.create_semaphore(0), 1)]) for _ in range(3)]
    for wait, signal in zip(fences, fences[1:]):
        device.queue_execute(wait, signal, [])
    fences[0].signal()
    assert fences[-1].wait(10)
    del fences, wait, signal
    gc.collect()
    device.collect()
    # the last submission has completed but not settled: its two semaphores are kept
    # (the tracker itself: live_objects() waits for the device to be idle first)
    assert device.tracker.live().get("VkSemaphore", 0) >= base + 2
    assert device.wait_idle(30)
    gc.collect()
    device.collect()
    assert device.live_objects().get("VkSemaphore", 0) == base
