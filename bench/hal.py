"""HAL-level costs, below the VM: CPU-driver parallel speed-up and Vulkan submit latency.

    .venv/bin/python bench/hal.py [--elements N] [--reps N]

Prints three tables. First, one large elementwise dispatch (c = a * b + 1 over N f32, memory
bound) on local-sync and on local-task with 1 and 2 workers: median seconds per dispatch
(submit + wait), the speed-up over local-sync, and how many cores the process kept busy
meanwhile (CPU seconds per wall second: above 1 only when threads really run at once).
Second, the same for a compute-bound program (sqrt(atan(cos(sin(tanh(exp(x)))))) over N f32) compiled for the
cpu target and called whole (upload, dispatch, read-back). Third, per Vulkan device, the median time of submit + wait
for a small dispatch three ways: a command buffer recorded once and resubmitted with the same
bindings; one recorded once and resubmitted with a different binding table each time (eight
sets of buffers in turn); and a command buffer freshly recorded for every submit.

The executables are the HAL conformance suite's (tests/hal/programs.py), so the numbers are for
exactly what the tests check.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from irtk.hal import BindingRef, Device, Fence  # noqa: E402
from tests.hal import programs  # noqa: E402


def median_time(fn, reps: int) -> float:
    return timed(fn, reps)[0]


def timed(fn, reps: int) -> tuple[float, float]:
    """(median wall seconds per call, process CPU seconds per wall second over all calls):
    the second is above 1 only when threads really ran at the same time."""
    fn()  # warm up (pipelines, recordings, pools)
    times = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    busy = (time.process_time() - cpu0) / max(time.perf_counter() - wall0, 1e-9)
    return statistics.median(times), busy


def submit_and_wait(device: Device, cbs, tables=None) -> None:
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), cbs, tables)
    sem.wait(1)


def mul_add_buffers(device: Device, n: int, rng: np.random.Generator):
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    return [device.allocator.allocate_with_data(a.tobytes()),
            device.allocator.allocate_with_data(b.tobytes()),
            device.allocator.allocate(4 * n)]


def record(device: Device, program: programs.Program, refs, capacity: int = 0):
    cb = device.create_command_buffer(capacity)
    cb.dispatch(program.executable, program.executable.lookup("mul_add"), program.workgroups,
                program.mul_add_constants, refs)
    cb.finalize()
    return cb


def cpu_devices() -> list[tuple[str, Callable[[], Device]]]:
    """(label, factory) of the CPU devices the tables compare."""
    from hal_cpu import create_sync_driver, create_task_driver
    return [("local-sync", lambda: create_sync_driver().create_device(0)),
            ("local-task, 1 worker", lambda: create_task_driver(worker_count=1).create_device(0)),
            ("local-task, 2 workers", lambda: create_task_driver(worker_count=2).create_device(0))]


def cpu_table(n: int, reps: int) -> None:
    rng = np.random.default_rng(0)
    rows = []
    base = None
    for label, make in cpu_devices():
        device = make()
        program = programs.load(device, n)
        bufs = mul_add_buffers(device, n, rng)
        cb = record(device, program, [BindingRef(x, 0, -1) for x in bufs])
        t, busy = timed(lambda: submit_and_wait(device, [cb]), reps)
        expected = (np.frombuffer(bufs[0].read(), np.float32).astype(np.float64)
                    * np.frombuffer(bufs[1].read(), np.float32) + 1)
        assert np.allclose(np.frombuffer(bufs[2].read(), np.float32), expected, rtol=1e-6, atol=1e-6)
        base = base or t
        rows.append((label, t, base / t, busy))
        device.release()
    print(f"\nelementwise c = a * b + 1 over {n} f32 (one dispatch, submit + wait)")
    print(f"{'device':>24} | {'median':>10} | {'speed-up':>8} | {'cores busy':>10}")
    print("-" * 63)
    for label, t, speedup, busy in rows:
        print(f"{label:>24} | {t * 1e3:>7.2f} ms | {speedup:>7.2f}x | {busy:>10.2f}")


COMPUTE_BOUND = """
func.func @main(%a: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %e = tensor.empty() : tensor<{n}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}}
      ins(%a : tensor<{n}xf32>) outs(%e : tensor<{n}xf32>) {{
  ^bb0(%x: f32, %o: f32):
    %y = math.exp %x : f32
    %z = math.tanh %y : f32
    %w = math.sin %z : f32
    %v = math.cos %w : f32
    %u = math.atan %v : f32
    %t = math.sqrt %u : f32
    linalg.yield %t : f32
  }} -> tensor<{n}xf32>
  return %r : tensor<{n}xf32>
}}
"""


def cpu_call_table(n: int, reps: int) -> None:
    """Whole calls of a compute-bound program: where the task system's threads pay off."""
    import irtk

    vmfb = irtk.compile_str(COMPUTE_BOUND.format(n=n), target="cpu")
    x = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    expected = np.sqrt(np.arctan(np.cos(np.sin(np.tanh(np.exp(x.astype(np.float64)))))))
    rows, base = [], None
    for label, make in cpu_devices():
        device = make()
        module = irtk.load(vmfb, device=device)
        t, busy = timed(lambda: module.main(x), reps)
        assert np.allclose(np.asarray(module.main(x)), expected, rtol=1e-5, atol=1e-6)
        base = base or t
        rows.append((label, t, base / t, busy))
        del module
        device.release()
    print(f"\nsqrt(atan(cos(sin(tanh(exp(x)))))) over {n} f32 (a whole call of a program compiled for cpu)")
    print(f"{'device':>24} | {'median':>10} | {'speed-up':>8} | {'cores busy':>10}")
    print("-" * 63)
    for label, t, speedup, busy in rows:
        print(f"{label:>24} | {t * 1e3:>7.2f} ms | {speedup:>7.2f}x | {busy:>10.2f}")


def vulkan_table(reps: int) -> None:
    try:
        from hal_vulkan.driver import create_driver
        driver = create_driver()
        infos = driver.enumerate_devices()
    except Exception as e:  # noqa: BLE001 - a machine without Vulkan prints why
        print(f"\nno Vulkan device: {e}")
        return
    n = 1024
    rng = np.random.default_rng(1)
    print(f"\nVulkan submit + wait of one small dispatch ({n} elements)")
    columns = ["reused, same bindings", "reused, new table", "recorded each time"]
    print(f"{'device':>32} | " + " | ".join(f"{c:>22}" for c in columns))
    print("-" * (35 + 25 * len(columns)))
    for info in infos:
        device = driver.create_device(info.index)
        program = programs.load(device, n)
        sets = [mul_add_buffers(device, n, rng) for _ in range(8)]
        direct = record(device, program, [BindingRef(x, 0, -1) for x in sets[0]])
        slots = record(device, program, [BindingRef(None, 0, -1, slot=i) for i in range(3)], 3)
        turn = iter(range(1 << 62))

        def new_table() -> None:
            bufs = sets[next(turn) % len(sets)]
            submit_and_wait(device, [slots], [[(b, 0, -1) for b in bufs]])

        def fresh() -> None:
            cb = record(device, program, [BindingRef(x, 0, -1) for x in sets[0]])
            submit_and_wait(device, [cb])
            cb.release()
        times = [median_time(lambda: submit_and_wait(device, [direct]), reps),
                 median_time(new_table, reps), median_time(fresh, reps)]
        print(f"{info.name[:32]:>32} | " + " | ".join(f"{t * 1e3:>19.3f} ms" for t in times))
        direct.release()
        slots.release()
        program.executable.release()
        device.release()
    driver.release()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1 << 23)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    cpu_table(args.elements, max(3, args.reps // 4))
    cpu_call_table(args.elements, max(3, args.reps // 4))
    vulkan_table(args.reps)


if __name__ == "__main__":
    main()
