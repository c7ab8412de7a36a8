"""`async_call`: exported functions as futures; several calls in flight on one thread."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hal_cpu.semaphore import CpuSemaphore
from irtk import hal
from irtk.errors import InputError, RuntimeFailure
from irtk.runtime import AsyncCall, load
from irtk.vm.assembler import assemble
from tests.vm.fakes import FakeDevice

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "elementwise.mlir"

# wait_then_scale(fence, x): await the fence, then return x * 3
PROGRAM = """
module @async
import @hal.fence.await "0iCrD_i"
export @wait_then_scale = @wait_then_scale {abi.results = "i32"}
export @no_wait = @no_wait {abi.args = "", abi.results = ""}
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
func @no_wait "0v_v" {
    return ()
}
"""


def new_fence() -> hal.Fence:
    fence = hal.Fence()
    fence.insert(CpuSemaphore(0), 1)
    return fence


@pytest.fixture
def module():
    return load(assemble(PROGRAM), device=FakeDevice())


def test_async_calls_are_futures_that_finish_in_any_order(module):
    rng = np.random.default_rng(5)
    fences = [new_fence() for _ in range(4)]
    values = [int(v) for v in rng.integers(-1000, 1000, 4)]
    calls = [module.wait_then_scale.async_call(f, v) for f, v in zip(fences, values)]
    assert all(isinstance(c, AsyncCall) for c in calls)
    assert not any(c.done() for c in calls)
    for i in (2, 0, 3, 1):
        fences[i].signal()
        assert calls[i].done()
        assert calls[i].result() == values[i] * 3
    assert all(c.done() for c in calls)


def test_an_async_call_that_never_waits_is_done_at_once(module):
    call = module.no_wait.async_call()
    assert call.done() and call.result() is None


def test_argument_errors_are_raised_by_async_call_itself(module):
    with pytest.raises(InputError, match="wait_then_scale: expected 2 arguments, got 1"):
        module.wait_then_scale.async_call(new_fence())


def test_a_failed_fence_fails_only_its_own_call(module):
    good, bad = new_fence(), new_fence()
    ok = module.wait_then_scale.async_call(good, 2)
    broken = module.wait_then_scale.async_call(bad, 3)
    bad.fail(RuntimeFailure("device lost"))
    good.signal()
    assert ok.result() == 6
    with pytest.raises(RuntimeFailure, match="device lost"):
        broken.result()


def test_result_times_out_and_the_call_stays_in_flight(module):
    fence = new_fence()
    call = module.wait_then_scale.async_call(fence, 7)
    with pytest.raises(TimeoutError):
        call.result(timeout=0.01)
    fence.signal()
    assert call.result(timeout=5) == 21


def test_compiled_module_calls_overlap_on_the_task_system():
    from irtk.compiler import driver
    data = driver.compile_str(EXAMPLE.read_text(), target="cpu")
    m = load(data, device="local-task")
    rng = np.random.default_rng(99)
    inputs = [(rng.standard_normal((2, 4)).astype(np.float32),
               rng.standard_normal(4).astype(np.float32)) for _ in range(6)]
    calls = [m.main.async_call(x, w) for x, w in inputs]
    for (x, w), call in zip(inputs, calls):
        y, t = call.result(timeout=60)
        x64, w64 = x.astype(np.float64), w.astype(np.float64)
        np.testing.assert_allclose(y, np.exp(-x64 * x64) * w64 + np.maximum(x64, 0),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(t, np.trunc(x.T).astype(np.int32))
    assert m.main(*inputs[0])[1].dtype == np.int32   # the blocking call still works alongside
