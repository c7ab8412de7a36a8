"""Several threads calling one loaded module at once (a server), on every device.

Every call gets fresh random inputs and its results are checked against numpy; no call may
raise. The programs cover what calls share: the command buffer `__init` records once and
every call re-submits with its own binding table (several dispatches, with barriers), a module
whose result buffer is the next call's input (a global), and futures (`async_call`) that one
thread starts and another finishes.
"""
from __future__ import annotations

import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import irtk
from hal_cpu.semaphore import CpuSemaphore
from irtk import hal
from irtk.vm.assembler import assemble
from tests.conftest import all_device_uris
from tests.e2e.test_mlir_host_programs import GLOBALS
from tests.e2e.test_programs import CHAIN
from tests.vm.fakes import FakeDevice

DEVICES = all_device_uris()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "elementwise.mlir"
THREADS = 4
JOIN_TIMEOUT_S = 120   # for all the threads of one test together


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def run_threads(work: Callable[[int], None], count: int = THREADS) -> None:
    """Run `work(i)` on `count` threads started together; re-raise the first error."""
    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def body(i: int) -> None:
        try:
            start.wait()
            work(i)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors.append(e)
    threads = [threading.Thread(target=body, args=(i,), name=f"caller-{i}", daemon=True)
               for i in range(count)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "a calling thread hung"
    if errors:   # the first cause, not a barrier it broke in the other threads
        raise next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)),
                   errors[0])


@pytest.fixture(scope="module")
def chain_module() -> bytes:
    return irtk.compile_str(CHAIN, target="vulkan-spirv,cpu")


@pytest.fixture(scope="module")
def globals_module() -> bytes:
    return irtk.compile_str(GLOBALS, target="vulkan-spirv,cpu")


@pytest.fixture(scope="module")
def example_module() -> bytes:
    return irtk.compile_str(EXAMPLE.read_text(), target="vulkan-spirv,cpu")


def check_chain(rng: np.random.Generator, main: Any) -> None:
    """One call of CHAIN's three dispatches on fresh inputs, checked against numpy."""
    a = rng.standard_normal((5, 6, 7)).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)
    n = rng.integers(-50, 50, (7, 6, 5)).astype(np.int32)
    s, t, idx = main(a, b, n)
    s_ref = a.astype(np.float64) * b + 1
    np.testing.assert_allclose(s, s_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t, s_ref.transpose(2, 1, 0) * n, rtol=1e-5, atol=1e-5)
    i0, _, i2 = np.indices((5, 6, 7))
    np.testing.assert_array_equal(idx, i0 * 100 + i2)


def chain_stress(chain_module: bytes, device: str, calls: int, threads: int = THREADS,
                 loads: int = 1) -> None:
    """`threads` threads calling CHAIN `calls` times each; thread i calls load i % `loads` of
    the module (several loads: several contexts sharing the device)."""
    modules = [irtk.load(chain_module, device=device) for _ in range(loads)]

    def work(i: int) -> None:
        rng = rng_for("chain", device, i)
        main = modules[i % loads].main
        for _ in range(calls):
            check_chain(rng, main)
    run_threads(work, threads)


@pytest.mark.parametrize("device", DEVICES)
def test_threads_call_one_function_with_several_dispatches(chain_module, device):
    chain_stress(chain_module, device, calls=40)


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_threads_call_two_loads_of_a_module_many_times(chain_module, device):
    chain_stress(chain_module, device, calls=300, threads=8, loads=2)


@pytest.mark.parametrize("device", DEVICES)
def test_threads_share_a_module_whose_result_feeds_the_next_call(globals_module, device):
    """`step` adds its argument to a global tensor, stores the sum there and returns it: each
    call's result buffer is the next call's input, whichever thread makes it. A call's code
    runs under the module's lock up to its wait, so the calls are ordered by the counter they
    return, and each sum is the one before plus that call's argument."""
    m = irtk.load(globals_module, device=device)
    calls = 25
    seen: list[tuple[int, np.ndarray, np.ndarray]] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        rng = rng_for("globals", device, i)
        for _ in range(calls):
            a = rng.standard_normal(3).astype(np.float32)
            s, c, _ = m.step(a)
            with lock:
                seen.append((int(c), a, np.asarray(s)))
    run_threads(work)
    seen.sort(key=lambda entry: entry[0])
    assert [c for c, _, _ in seen] == list(range(11, 11 + THREADS * calls))
    total = np.array([1.0, 2.0, 3.0], np.float32)
    for _, a, s in seen:
        total = total + a
        np.testing.assert_allclose(s, total, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_async_calls_started_on_one_thread_finish_on_others(example_module, device):
    """Each thread starts a few calls, keeps one to finish itself and hands the rest to the
    next thread, which finishes them among its own; every thread's `result()` also drives the
    calls of the others that are ready."""
    m = irtk.load(example_module, device=device)
    rounds, per_round = 4, 3
    handoff: list[list[tuple[Any, np.ndarray, np.ndarray]]] = [[] for _ in range(THREADS)]
    handoff_lock = threading.Lock()
    handed = threading.Barrier(THREADS, timeout=JOIN_TIMEOUT_S / 2)

    def check(call: Any, x: np.ndarray, w: np.ndarray) -> None:
        y, t = call.result(timeout=60)
        x64, w64 = x.astype(np.float64), w.astype(np.float64)
        np.testing.assert_allclose(y, np.exp(-x64 * x64) * w64 + np.maximum(x64, 0),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(t, np.trunc(x.T).astype(np.int32))

    def work(i: int) -> None:
        try:
            exchange(i)
        except BaseException:
            handed.abort()   # the other threads stop at the barrier instead of hanging
            raise

    def exchange(i: int) -> None:
        rng = rng_for("async", device, i)
        for _ in range(rounds):
            started = []
            for _ in range(per_round):
                x = (rng.standard_normal((2, 4)) * 3).astype(np.float32)
                w = rng.standard_normal(4).astype(np.float32)
                started.append((m.main.async_call(x, w), x, w))
            with handoff_lock:
                handoff[(i + 1) % THREADS].extend(started[1:])
            handed.wait()
            with handoff_lock:
                mine, handoff[i] = handoff[i], []
            for call, x, w in [started[0], *mine]:
                check(call, x, w)
            handed.wait()
    run_threads(work)


# wait_then_scale(fence, x): await the fence, then return x * 3 (no device work: the fences
# are host semaphores, signalled by another thread in random order)
WAITING = """
module @waiting
import @hal.fence.await "0iCrD_i"
export @wait_then_scale = @wait_then_scale {abi.results = "i32"}
func @wait_then_scale "0ri_i" registers(i32 4, ref 1) {
    i32:1 = const.i32 -1
    i32:2 = call.import.variadic @hal.fence.await [1](i32:1, ref:0)
    cond_br i32:2, ^failed, ^ok
  ^failed:
    fail i32:2, "await did not succeed"
  ^ok:
    i32:3 = const.i32 3
    i32:0 = mul.i32 i32:0, i32:3
    return (i32:0)
}
"""


def test_waiting_calls_of_many_threads_resume_once_each():
    """Many calls parked on fences at once, every thread polling all of them: each call is
    resumed exactly once, by whichever thread gets there first, and returns its own value."""
    m = irtk.load(assemble(WAITING), device=FakeDevice())
    calls, threads = 80, 6
    fences = [[hal.Fence([(CpuSemaphore(0), 1)]) for _ in range(calls)] for _ in range(threads)]
    order = [(t, k) for t in range(threads) for k in range(calls)]
    rng_for("waiting").shuffle(order)
    values = rng_for("waiting", "values").integers(-1000, 1000, (threads, calls))

    def signaller() -> None:
        for t, k in order:
            time.sleep(0.0002)   # so that the calls find their fences unsignalled and park
            fences[t][k].signal()

    def work(t: int) -> None:
        if t == threads:
            signaller()
            return
        if t % 2:   # blocking calls
            for k in range(calls):
                assert m.wait_then_scale(fences[t][k], int(values[t, k])) == values[t, k] * 3
        else:       # futures, finished in reverse order
            pending = [m.wait_then_scale.async_call(fences[t][k], int(values[t, k]))
                       for k in range(calls)]
            for k in reversed(range(calls)):
                assert pending[k].result(timeout=60) == values[t, k] * 3
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # switch threads often, so that races show
    try:
        run_threads(work, threads + 1)
    finally:
        sys.setswitchinterval(interval)
