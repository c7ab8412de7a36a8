"""Limits: live VM heap and device memory per call and per context, steps and wall time."""
from __future__ import annotations

import time

import pytest

from irtk import Limits
from irtk.errors import RuntimeFailure
from irtk.modules.hal import HalModule
from irtk.vm.limits import LIST_SLOT_BYTES, format_bytes, host_memory_bytes
from tests.conftest import all_device_uris
from tests.vm.helpers import run_asm

MiB = 1 << 20

# main(n, size): allocate n buffers of `size` bytes and keep every one in a list.
KEEP_BUFFERS = """module @m
export @main = @main
func @main "0iI_i" {
    ref:0 = list.alloc i32:0
    list.resize ref:0, i32:0
    i32:1 = const.i32 0
    i32:2 = const.i32 1
    br ^loop
  ^loop:
    i32:3 = cmp.lt.s.i32 i32:1, i32:0
    cond_br i32:3, ^body, ^done
  ^body:
    ref:1 = buffer.alloc i64:0
    list.resize ref:0, i32:1
    i32:1 = add.i32 i32:1, i32:2
    list.resize ref:0, i32:1
    i32:4 = sub.i32 i32:1, i32:2
    list.set.ref ref:0, i32:4, ref:1
    br ^loop
  ^done:
    return (i32:1)
}
"""

# main(n, size): allocate n buffers of `size` bytes, each dropped by the next.
DROP_BUFFERS = """module @m
export @main = @main
func @main "0iI_i" {
    i32:1 = const.i32 0
    i32:2 = const.i32 1
    br ^loop
  ^loop:
    i32:3 = cmp.lt.s.i32 i32:1, i32:0
    cond_br i32:3, ^body, ^done
  ^body:
    ref:1 = buffer.alloc i64:0
    i32:1 = add.i32 i32:1, i32:2
    br ^loop
  ^done:
    return (i32:1)
}
"""

# main(n): a list of n lists of 2^20 slots each, all kept.
KEEP_LISTS = """module @m
export @main = @main
func @main "0i_i" {
    ref:0 = list.alloc i32:0
    list.resize ref:0, i32:0
    i32:1 = const.i32 0
    i32:2 = const.i32 1
    i32:5 = const.i32 1048576
    br ^loop
  ^loop:
    i32:3 = cmp.lt.s.i32 i32:1, i32:0
    cond_br i32:3, ^body, ^done
  ^body:
    ref:1 = list.alloc i32:0
    list.resize ref:1, i32:5
    list.set.ref ref:0, i32:1, ref:1
    i32:1 = add.i32 i32:1, i32:2
    br ^loop
  ^done:
    return (i32:1)
}
"""

SPIN = """module @m
export @main = @main
func @main "0v_v" {
    br ^spin
  ^spin:
    br ^spin
}
"""


def test_kept_buffers_stop_at_the_per_call_heap_limit_with_a_message_saying_so():
    limits = Limits(heap_bytes_per_call=10 * MiB)
    assert run_asm(KEEP_BUFFERS, [9, MiB], limits=limits) == [9]
    with pytest.raises(RuntimeFailure) as info:
        run_asm(KEEP_BUFFERS, [100, MiB], limits=limits)
    text = str(info.value)
    assert "function 'main' at offset" in text
    assert "out of VM heap memory: buffer.alloc of 1048576 bytes" in text
    assert "call 'main'" in text and "Limits.heap_bytes_per_call" in text


def test_buffers_dropped_each_iteration_stay_within_any_limit():
    limits = Limits(heap_bytes_per_call=3 * MiB, heap_bytes=3 * MiB)
    assert run_asm(DROP_BUFFERS, [200, MiB], limits=limits) == [200]


def test_kept_lists_are_charged_per_slot():
    limits = Limits(heap_bytes_per_call=5 * (1 << 20) * LIST_SLOT_BYTES)
    assert run_asm(KEEP_LISTS, [4], limits=limits) == [4]
    with pytest.raises(RuntimeFailure, match=r"out of VM heap memory: list.resize to 1048576 "
                                             r"elements would bring call 'main'"):
        run_asm(KEEP_LISTS, [64], limits=limits)


def test_the_context_limit_counts_what_calls_keep_alive_together():
    from irtk.vm import Context, load_module
    from irtk.vm.assembler import assemble
    ctx = Context(load_module(assemble(KEEP_BUFFERS)),
                  limits=Limits(heap_bytes_per_call=8 * MiB, heap_bytes=12 * MiB))
    # Results are dropped at once, so calls one after another never add up...
    for _ in range(5):
        assert ctx.call("main", [7, MiB]) == [7]
    assert ctx.memory_in_use()["heap"] < MiB
    # ...but a call over the per-call limit fails whatever the context holds.
    with pytest.raises(RuntimeFailure, match="Limits.heap_bytes_per_call"):
        ctx.call("main", [9, MiB])


def test_the_context_limit_is_reached_when_calls_keep_memory_in_globals():
    text = """module @m
globals ref 1
export @main = @main
func @main "0I_v" {
    ref:0 = global.load.ref global.ref[0]
    ref:1 = buffer.alloc i64:0
    ref:2 = list.alloc i32:0
    i32:0 = const.i32 2
    list.resize ref:2, i32:0
    i32:1 = const.i32 0
    i32:2 = const.i32 1
    list.set.ref ref:2, i32:1, ref:0
    list.set.ref ref:2, i32:2, ref:1
    global.store.ref global.ref[0], ref:2
    return ()
}
"""
    from irtk.vm import Context, load_module
    from irtk.vm.assembler import assemble
    ctx = Context(load_module(assemble(text)),
                  limits=Limits(heap_bytes_per_call=2 * MiB, heap_bytes=5 * MiB + 4096))
    for _ in range(5):
        ctx.call("main", [MiB])
    with pytest.raises(RuntimeFailure, match=r"out of VM heap memory: .* would bring "
                                             r"module 'm' to .*Limits.heap_bytes\)"):
        ctx.call("main", [MiB])


def test_default_limits_are_fractions_of_host_memory():
    resolved = Limits().resolved()
    memory = host_memory_bytes()
    assert resolved.heap_bytes_per_call <= resolved.heap_bytes <= memory
    assert resolved.device_bytes_per_call <= resolved.device_bytes <= memory
    assert format_bytes(512) == "512 bytes" and format_bytes(3 * MiB // 2) == "1.5 MiB"


def test_a_time_limit_ends_an_endless_loop():
    started = time.monotonic()
    with pytest.raises(RuntimeFailure, match=r"function 'main' at offset \d+: time limit of "
                                             r"0.2 s exceeded \(Limits.seconds\)"):
        run_asm(SPIN, limits=Limits(seconds=0.2))
    assert time.monotonic() - started < 5


def test_a_time_limit_also_ends_an_endless_init_at_load():
    text = SPIN.replace("export @main = @main", "init @main")
    with pytest.raises(RuntimeFailure, match="time limit of 0.1 s exceeded"):
        run_asm(text, limits=Limits(seconds=0.1))


def test_step_limit_through_limits_matches_the_step_limit_shorthand():
    with pytest.raises(RuntimeFailure, match="step limit of 777 branches and calls exceeded"):
        run_asm(SPIN, limits=Limits(steps=777))
    with pytest.raises(RuntimeFailure, match="step limit of 10000 branches"):
        run_asm(SPIN, step_limit=10000)


# main(n, size): allocate n device buffers of `size` bytes, all kept in a list.
KEEP_DEVICE_BUFFERS = """module @m
import @hal.device.default "0v_r"
import @hal.device.allocator "0r_r"
import @hal.allocator.allocate "0riiI_r"
export @main = @main
func @main "0iI_i" {
    ref:2 = call.import @hal.device.default()
    ref:3 = call.import @hal.device.allocator(ref:2)
    ref:0 = list.alloc i32:0
    list.resize ref:0, i32:0
    i32:1 = const.i32 0
    i32:2 = const.i32 1
    i32:5 = const.i32 0
    br ^loop
  ^loop:
    i32:3 = cmp.lt.s.i32 i32:1, i32:0
    cond_br i32:3, ^body, ^done
  ^body:
    ref:1 = call.import @hal.allocator.allocate(ref:3, i32:5, i32:5, i64:0)
    i32:1 = add.i32 i32:1, i32:2
    list.resize ref:0, i32:1
    i32:4 = sub.i32 i32:1, i32:2
    list.set.ref ref:0, i32:4, ref:1
    br ^loop
  ^done:
    return (i32:1)
}
"""


@pytest.mark.parametrize("uri", all_device_uris())
def test_device_allocations_are_bounded_per_call(uri):
    from irtk.hal import registry
    device = registry.get_device(uri)
    natives = [HalModule(device)]
    limits = Limits(device_bytes_per_call=8 * MiB)
    assert run_asm(KEEP_DEVICE_BUFFERS, [7, MiB], natives=natives, limits=limits) == [7]
    with pytest.raises(RuntimeFailure) as info:
        run_asm(KEEP_DEVICE_BUFFERS, [20, MiB], natives=natives, limits=limits)
    text = str(info.value)
    assert "hal.allocator.allocate" in text and "out of device memory" in text
    assert "Limits.device_bytes_per_call" in text


def test_a_memory_error_inside_an_op_is_named():
    from irtk.vm import interpreter
    assert interpreter._reason(MemoryError()) == "out of host memory"
    assert interpreter._reason(ValueError()) == "ValueError"


NEVER_SIGNALLED = """module @m
import @hal.device.default "0v_r"
import @hal.fence.create "0ri_r"
import @hal.fence.await "0iCrD_i"
export @main = @main
func @main "0v_i" {
    ref:0 = call.import @hal.device.default()
    i32:0 = const.i32 0
    ref:1 = call.import @hal.fence.create(ref:0, i32:0)
    i32:1 = const.i32 -1
    i32:2 = call.import.variadic @hal.fence.await [1](i32:1, ref:1)
    return (i32:2)
}
"""


@pytest.mark.parametrize("uri", all_device_uris())
def test_a_time_limit_ends_a_wait_that_never_ends(uri):
    from irtk.hal import registry
    natives = [HalModule(registry.get_device(uri))]
    started = time.monotonic()
    with pytest.raises(RuntimeFailure, match=r"hal.fence.await: 'main' ran past its time limit "
                                             r"of 0.2 s \(Limits.seconds\) while waiting"):
        run_asm(NEVER_SIGNALLED, natives=natives, limits=Limits(seconds=0.2))
    assert time.monotonic() - started < 5
