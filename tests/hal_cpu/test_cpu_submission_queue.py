"""local-task's submission queue: a waiting thread runs the work itself, and nothing held back
for a waiter is ever stranded (see hal_cpu/submission_queue.py)."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from hal_cpu.semaphore import CpuSemaphore
from irtk.hal import BindingRef, Fence

from .cpu_kernel_builder import unary


@pytest.fixture
def negate(task_device, rng, monkeypatch):
    """A dispatch negating n floats, and the set of thread names its kernel ran on."""
    import hal_cpu.kernel as kmod
    threads: list[str] = []
    original = kmod.Kernel.run

    def spy(self, views, start, end):
        threads.append(threading.current_thread().name)
        original(self, views, start, end)

    monkeypatch.setattr(kmod.Kernel, "run", spy)
    n = 256
    a = rng.standard_normal(n).astype(np.float32)
    src = task_device.allocator.allocate_with_data(a.tobytes())
    dst = task_device.allocator.allocate(4 * n)
    exe = task_device.create_executable("cpu-kernel-fb",
                                        unary("neg", "arith.negf", "f32", "f32", n))
    cb = task_device.create_command_buffer()
    cb.dispatch(exe, 0, (-(-n // 64), 1, 1), [], [BindingRef(src, 0, -1),
                                                   BindingRef(dst, 0, -1)])
    cb.finalize()

    def check() -> None:
        np.testing.assert_array_equal(np.frombuffer(dst.read(), np.float32), -a)
    return cb, threads, check


def test_a_thread_that_waits_without_a_limit_runs_the_submission_itself(task_device, negate):
    cb, threads, check = negate
    done = task_device.create_semaphore(0)
    task_device.queue_execute(Fence(), Fence([(done, 1)]), [cb])
    assert done.wait(1)
    assert threads == [threading.current_thread().name]
    check()


def test_a_bounded_wait_leaves_the_work_to_the_queue_thread(task_device, negate):
    cb, threads, check = negate
    done = task_device.create_semaphore(0)
    task_device.queue_execute(Fence(), Fence([(done, 1)]), [cb])
    assert done.wait(1, timeout=30)
    assert threads and threads[0].endswith("-queue")
    check()


def test_a_submission_nobody_waits_for_runs_when_polled(task_device, negate):
    cb, threads, check = negate
    done = task_device.create_semaphore(0)
    task_device.queue_execute(Fence(), Fence([(done, 1)]), [cb])
    deadline = time.monotonic() + 30
    while done.query() < 1:      # a poll starts it; it must not wait for a waiter
        assert time.monotonic() < deadline, "the submission never ran"
        time.sleep(0.001)
    assert threads[0].endswith("-queue")
    check()


def test_a_submission_signalling_another_semaphore_starts_at_once(task_device, negate):
    """Only this device's semaphores can call its queue; a foreign one (here a bare CPU
    semaphore, as another device's would be) must see the work start without any help."""
    cb, threads, check = negate
    foreign = CpuSemaphore(0)
    task_device.queue_execute(Fence(), Fence([(foreign, 1)]), [cb])
    deadline = time.monotonic() + 30
    while foreign.query() < 1:
        assert time.monotonic() < deadline, "the submission never ran"
        time.sleep(0.001)
    check()


def test_a_waiter_does_not_take_work_whose_wait_fence_is_not_reached(task_device, negate):
    cb, threads, check = negate
    gate, done = task_device.create_semaphore(0), task_device.create_semaphore(0)
    task_device.queue_execute(Fence([(gate, 1)]), Fence([(done, 1)]), [cb])
    opener = threading.Timer(0.05, gate.signal, args=(1,))
    opener.start()
    try:
        assert done.wait(1)        # no limit: it would donate, but the head is not ready
    finally:
        opener.join()
    assert threads[0].endswith("-queue")
    check()


def test_a_second_submission_wakes_the_queue_thread(task_device, negate):
    """A host loop that submits twice before waiting still overlaps with the queue."""
    cb, threads, check = negate
    first, second = task_device.create_semaphore(0), task_device.create_semaphore(0)
    task_device.queue_execute(Fence(), Fence([(first, 1)]), [cb])
    task_device.queue_execute(Fence([(first, 1)]), Fence([(second, 1)]), [cb])
    deadline = time.monotonic() + 30
    while second.peek() < 1:     # peek never wakes anything: the second submit did
        assert time.monotonic() < deadline, "the queue thread was not woken"
        time.sleep(0.001)
    assert all(t.endswith("-queue") for t in threads)
    check()


def test_submissions_from_many_threads_run_once_each_in_order(task_device):
    """Donors and the queue thread share one queue: every operation runs exactly once, in
    submission order, whoever runs it."""
    sem = task_device.create_semaphore(0)
    log: list[int] = []
    count = 200
    lock = threading.Lock()
    next_value = [0]

    def submit_and_wait() -> None:
        for _ in range(count // 4):
            with lock:               # values in submission order
                next_value[0] += 1
                v = next_value[0]
                task_device._submit(Fence([(sem, v - 1)]) if v > 1 else Fence(),
                                    Fence([(sem, v)]), lambda v=v: log.append(v))
            assert sem.wait(v)
    threads = [threading.Thread(target=submit_and_wait) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert log == list(range(1, count + 1))


RELU = """
func.func @main(%a: tensor<1000xf32>) -> tensor<1000xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1000xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
       iterator_types = ["parallel"]} ins(%a : tensor<1000xf32>) outs(%e : tensor<1000xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.maximumf %x, %z : f32
    linalg.yield %m : f32
  } -> tensor<1000xf32>
  return %r : tensor<1000xf32>
}
"""


@pytest.mark.parametrize("limited", [False, True])
def test_a_vm_call_runs_its_dispatch_itself_unless_it_has_a_time_limit(
        rng, monkeypatch, limited):
    """A call without a time limit settles its fence wait in place (no suspension, no thread
    change); one with `Limits(seconds=...)` must not start work that may outlast its limit,
    so the queue thread runs it."""
    import hal_cpu.direct_program as direct
    import hal_cpu.kernel as kmod
    import irtk
    threads: list[str] = []
    original = kmod.Kernel.run
    original_direct = direct._run

    def spy(self, views, start, end):
        threads.append(threading.current_thread().name)
        original(self, views, start, end)

    def spy_direct(calls, runner, keep):   # the shortcut a VM call's dispatches take
        threads.append(threading.current_thread().name)
        original_direct(calls, runner, keep)
    monkeypatch.setattr(kmod.Kernel, "run", spy)
    monkeypatch.setattr(direct, "_run", spy_direct)
    module = irtk.load(irtk.compile_str(RELU, target="cpu"), device="local-task",
                       limits=irtk.Limits(seconds=60) if limited else None)
    a = rng.standard_normal(1000).astype(np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(module.main(a), np.maximum(a, 0))
    here = threading.current_thread().name
    assert threads and all((t != here) == limited for t in threads), threads
