"""Yieldable calls: an invocation waiting on a fence suspends, several stay in flight on one
thread, and each resumes with its results when its fence is reached."""
from __future__ import annotations

import threading
import time

import pytest

from hal_cpu.semaphore import CpuSemaphore
from irtk import hal
from irtk.errors import RuntimeFailure
from irtk.modules.hal import HalModule
from irtk.vm import Context, FenceWait, NativeFunction, NativeModule, load_module
from irtk.vm.assembler import assemble
from tests.vm.fakes import FakeDevice


def new_fence() -> hal.Fence:
    fence = hal.Fence()
    fence.insert(CpuSemaphore(0), 1)
    return fence


# main(fence, x): counter += 1; seen = counter; await fence; return (x * 1000 + seen * 10
# + counter after the wait) -- so the result shows what ran while this invocation was parked.
PROGRAM = """
module @waits
import @hal.fence.await "0iCrD_i"
globals i32 1
export @main = @main
export @nested = @nested
func @main "0ri_ii" registers(i32 8, ref 1) {
    i32:1 = global.load.i32 global.i32[0]
    i32:2 = const.i32 1
    i32:1 = add.i32 i32:1, i32:2
    global.store.i32 global.i32[0], i32:1
    i32:3 = const.i32 -1
    i32:4 = call.import.variadic @hal.fence.await [1](i32:3, ref:0)
    i32:5 = global.load.i32 global.i32[0]
    i32:6 = const.i32 1000
    i32:6 = mul.i32 i32:0, i32:6
    i32:7 = const.i32 10
    i32:7 = mul.i32 i32:1, i32:7
    i32:6 = add.i32 i32:6, i32:7
    i32:6 = add.i32 i32:6, i32:5
    return (i32:6, i32:4)
}
func @nested "0ri_ii" registers(i32 3, ref 1) {
    i32:1, i32:2 = call @middle(ref:0, i32:0)
    return (i32:1, i32:2)
}
func @middle "0ri_ii" registers(i32 4, ref 1) {
    i32:2 = const.i32 5
    i32:0 = add.i32 i32:0, i32:2
    i32:1, i32:3 = call @main(ref:0, i32:0)
    i32:1 = sub.i32 i32:1, i32:2
    return (i32:1, i32:3)
}
"""


def context(**options) -> Context:
    return Context(load_module(assemble(PROGRAM)), [HalModule(FakeDevice())], **options)


def test_two_invocations_wait_on_their_own_fences_on_one_thread():
    ctx = context()
    fence_a, fence_b = new_fence(), new_fence()
    a = ctx.start("main", [fence_a, 1])
    b = ctx.start("main", [fence_b, 2])
    assert not a.done() and not b.done()
    assert not a.poll() and not b.poll()
    fence_b.signal()
    assert b.poll() and not a.poll()
    assert b.result() == [2000 + 20 + 2, 0]   # b saw counter 2 before and after its wait
    fence_a.signal()
    assert a.result() == [1000 + 10 + 2, 0]   # a was parked while b ran: counter moved 1 -> 2


def test_a_reached_fence_does_not_suspend():
    fence = new_fence()
    fence.signal()
    ctx = context()
    invocation = ctx.start("main", [fence, 3])
    assert invocation.done()
    assert invocation.result() == [3000 + 10 + 1, 0]


def test_suspension_keeps_every_frame_of_a_nested_call():
    ctx = context()
    fence = new_fence()
    invocation = ctx.start("nested", [fence, 4])
    assert not invocation.done()
    fence.signal()
    # middle passes 4 + 5 = 9 to main, then subtracts 5 from its result
    assert invocation.result() == [9000 + 10 + 1 - 5, 0]


def test_blocking_call_waits_for_a_fence_signalled_by_another_thread():
    ctx = context()
    fence = new_fence()
    timer = threading.Timer(0.05, fence.signal)
    timer.start()
    start = time.monotonic()
    assert ctx.call("main", [fence, 5]) == [5000 + 10 + 1, 0]
    assert time.monotonic() - start >= 0.04
    timer.join()


def test_a_blocking_call_advances_the_other_invocations_in_flight():
    ctx = context()
    parked, fence_b = new_fence(), new_fence()
    a = ctx.start("main", [parked, 1])
    parked.signal()
    threading.Timer(0.05, fence_b.signal).start()
    ctx.call("main", [fence_b, 2])
    assert a._state is None   # finished while the blocking call waited, without a poll
    assert a.result() == [1000 + 10 + 2, 0]


def test_result_with_a_timeout_leaves_the_invocation_in_flight():
    ctx = context()
    fence = new_fence()
    invocation = ctx.start("main", [fence, 6])
    with pytest.raises(TimeoutError, match="'main' did not finish within 0.02 s"):
        invocation.result(timeout=0.02)
    fence.signal()
    assert invocation.result(timeout=5) == [6000 + 10 + 1, 0]


def test_fence_await_timeout_resumes_with_status_1():
    text = PROGRAM.replace("i32:3 = const.i32 -1", "i32:3 = const.i32 30")
    ctx = Context(load_module(assemble(text)), [HalModule(FakeDevice())])
    start = time.monotonic()
    result = ctx.call("main", [new_fence(), 7])
    assert result == [7000 + 10 + 1, 1]
    assert time.monotonic() - start >= 0.025


def test_fence_failing_while_suspended_fails_the_invocation_with_its_call_site():
    ctx = context()
    fence = new_fence()
    invocation = ctx.start("main", [fence, 8])
    fence.fail(RuntimeError("queue lost"))
    with pytest.raises(RuntimeFailure) as info:
        invocation.result()
    message = str(info.value)
    assert message == ("hal.fence.await: RuntimeError: queue lost "
                       "(in function 'main' at offset 35)")
    assert invocation.done()


class Later(NativeModule):
    """A yieldable native function that is ready after `polls` polls, then returns 2 values."""

    name = "later"
    EXPORTS = (NativeFunction("pair", "0i_ii", yieldable=True),)

    def __init__(self) -> None:
        self.polls = 0

    def pair(self, x):
        module = self

        class After(FenceWait):
            def __init__(self) -> None:
                super().__init__([], None, lambda reached: (x, x * 2))

            def ready(self) -> bool:
                module.polls += 1
                return module.polls >= 3

        return After()


def test_a_native_module_can_define_its_own_wait():
    text = """
    module @m
    import @later.pair "0i_ii"
    export @main = @main
    func @main "0i_ii" {
        i32:0, i32:1 = call.import @later.pair(i32:0)
        return (i32:0, i32:1)
    }
    """
    later = Later()
    ctx = Context(load_module(assemble(text)), [later])
    invocation = ctx.start("main", [21])
    assert not invocation.poll() and not invocation.done()
    assert invocation.result() == [21, 42]
    assert later.polls >= 3


def test_init_that_waits_is_driven_to_completion():
    text = """
    module @m
    import @later.pair "0i_ii"
    globals i32 1
    init @__init
    export @main = @main
    func @__init "0v_v" {
        i32:0 = const.i32 4
        i32:0, i32:1 = call.import @later.pair(i32:0)
        global.store.i32 global.i32[0], i32:1
        return ()
    }
    func @main "0v_i" {
        i32:0 = global.load.i32 global.i32[0]
        return (i32:0)
    }
    """
    ctx = Context(load_module(assemble(text)), [Later()])
    assert ctx.call("main") == [8]
