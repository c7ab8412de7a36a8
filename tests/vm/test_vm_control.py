"""Control flow, calls, globals, `__init`, `fail`, lists, buffers and rodata refs."""
from __future__ import annotations

import gc
import weakref

import pytest

from irtk.errors import InputError, RuntimeFailure
from irtk.vm import MAX_FRAMES, Context, VMBuffer, VMList, load_module
from irtk.vm.writer import FunctionBuilder, ModuleWriter
from tests.vm.helpers import f32, f64, i32, i64, module_with, ref, run


def sum_to_n(b: FunctionBuilder) -> None:
    """acc = 0; for i in 1..n: acc += i; return acc   (n in i32:0)"""
    loop, body, done = b.new_label(), b.new_label(), b.new_label()
    b.emit("const.i32", i32(1), 0)
    b.emit("const.i32", i32(2), 1)
    b.emit("const.i32", i32(4), 1)
    b.bind(loop)
    b.emit("cmp.lte.s.i32", i32(3), i32(2), i32(0))
    b.emit("cond_br", i32(3), body, done)
    b.bind(body)
    b.emit("add.i32", i32(1), i32(1), i32(2))
    b.emit("add.i32", i32(2), i32(2), i32(4))
    b.emit("br", loop)
    b.bind(done)
    b.emit("return", [i32(1)])


@pytest.mark.parametrize("n, expected", [(0, 0), (1, 1), (10, 55), (1000, 500500)])
def test_loop_sums_one_to_n(n, expected):
    assert run("0i_i", sum_to_n, [n]) == [expected]


def test_loop_with_wrapping_accumulator():
    assert run("0i_i", sum_to_n, [100000]) == [(100000 * 100001 // 2 + 2 ** 31) % 2 ** 32 - 2 ** 31]


def two_function_module(callee_body, callee_cc: str, caller_body, caller_cc: str) -> Context:
    w = ModuleWriter("calls")
    callee = w.declare_function("callee", callee_cc)
    caller_builder = FunctionBuilder()
    caller_body(caller_builder, callee)
    w.add_export("main", w.add_function("main", caller_cc, caller_builder))
    callee_builder = FunctionBuilder()
    callee_body(callee_builder, callee)
    w.define_function(callee, callee_builder)
    return Context(load_module(w.to_bytes()))


def test_internal_call_passes_arguments_per_bank_and_returns_results():
    def callee(b, _):   # (i32 a, f64 x, i32 b) -> (i32 a - b, f64 x * 2)
        b.emit("sub.i32", i32(2), i32(0), i32(1))
        b.emit("add.f64", f64(1), f64(0), f64(0))
        b.emit("return", [i32(2), f64(1)])

    def caller(b, callee_ordinal):
        b.emit("const.i32", i32(0), 10)
        b.emit("const.i32", i32(1), 3)
        b.emit("const.f64", f64(0), 1.25)
        b.emit("call", callee_ordinal, [i32(0), f64(0), i32(1)],
               [i32(5), f64(3)])
        b.emit("return", [i32(5), f64(3)])
    ctx = two_function_module(callee, "0iFi_iF", caller, "0v_iF")
    assert ctx.call("main") == [7, 2.5]


def test_recursion_computes_factorial():
    def fact(b, self_ordinal):   # n <= 1 ? 1 : n * fact(n - 1)
        base, recurse = b.new_label(), b.new_label()
        b.emit("const.i32", i32(1), 1)
        b.emit("cmp.lte.s.i32", i32(2), i32(0), i32(1))
        b.emit("cond_br", i32(2), base, recurse)
        b.bind(base)
        b.emit("return", [i32(1)])
        b.bind(recurse)
        b.emit("sub.i32", i32(3), i32(0), i32(1))
        b.emit("call", self_ordinal, [i32(3)], [i32(4)])
        b.emit("mul.i32", i32(4), i32(4), i32(0))
        b.emit("return", [i32(4)])

    def caller(b, callee):
        b.emit("call", callee, [i32(0)], [i32(0)])
        b.emit("return", [i32(0)])
    ctx = two_function_module(fact, "0i_i", caller, "0i_i")
    assert ctx.call("main", [10]) == [3628800]
    assert ctx.call("main", [MAX_FRAMES - 1]) == [0]   # deep but within the limit


def test_unbounded_recursion_is_a_stack_overflow_failure_not_a_python_error():
    def forever(b, self_ordinal):
        b.emit("call", self_ordinal, [], [])
        b.emit("return", [])

    def caller(b, callee):
        b.emit("call", callee, [], [])
        b.emit("return", [])
    ctx = two_function_module(forever, "0v_v", caller, "0v_v")
    with pytest.raises(RuntimeFailure, match=f"stack overflow: more than {MAX_FRAMES} frames"):
        ctx.call("main")


def globals_module(init_value: int) -> bytes:
    w = ModuleWriter("globals")
    counter = w.add_global("i32")
    scale = w.add_global("f64")
    init = FunctionBuilder()
    init.emit("const.i32", i32(0), init_value)
    init.emit("global.store.i32", counter, i32(0))
    init.emit("const.f64", f64(0), 0.5)
    init.emit("global.store.f64", scale, f64(0))
    init.emit("return", [])
    w.set_init_function(w.add_function("__init", "0v_v", init))
    bump = FunctionBuilder()   # counter += 1; return counter, counter * scale
    bump.emit("global.load.i32", i32(0), counter)
    bump.emit("const.i32", i32(1), 1)
    bump.emit("add.i32", i32(0), i32(0), i32(1))
    bump.emit("global.store.i32", counter, i32(0))
    bump.emit("cast.si32.f64", f64(0), i32(0))
    bump.emit("global.load.f64", f64(1), scale)
    bump.emit("mul.f64", f64(0), f64(0), f64(1))
    bump.emit("return", [i32(0), f64(0)])
    w.add_export("bump", w.add_function("bump", "0v_iF", bump))
    return w.to_bytes()


def test_init_runs_once_at_load_and_globals_persist_between_calls():
    ctx = Context(load_module(globals_module(41)))
    assert ctx.call("bump") == [42, 21.0]
    assert ctx.call("bump") == [43, 21.5]


def test_each_context_has_its_own_globals():
    module = load_module(globals_module(0))
    a, b = Context(module), Context(module)
    a.call("bump")
    assert b.call("bump") == [1, 0.5]


def fail_in_callee_module() -> bytes:
    w = ModuleWriter("failing")
    helper = FunctionBuilder()
    helper.emit("const.i32", i32(0), 9)
    helper.location("model.mlir:7:3")
    helper.emit("fail", i32(0), "no executable for this device")
    callee = w.add_function("helper", "0v_v", helper)
    main = FunctionBuilder()
    main.emit("call", callee, [], [])
    main.emit("return", [])
    w.add_export("main", w.add_function("main", "0v_v", main))
    return w.to_bytes()


def test_fail_message_reaches_the_caller_with_function_and_location():
    ctx = Context(load_module(fail_in_callee_module()))
    with pytest.raises(RuntimeFailure) as info:
        ctx.call("main")
    assert str(info.value) == ("no executable for this device "
                               "(in function 'helper' at model.mlir:7:3)")
    assert info.value.status == 9
    assert info.value.function == "helper"


def test_fail_in_init_fails_the_load():
    w = ModuleWriter("init-fails")
    init = FunctionBuilder()
    init.emit("const.i32", i32(0), 1)
    init.emit("fail", i32(0), "module has no executable for device 'fake'")
    w.set_init_function(w.add_function("__init", "0v_v", init))
    with pytest.raises(RuntimeFailure, match="module has no executable for device 'fake'"):
        Context(load_module(w.to_bytes()))


def test_lists_hold_values_of_every_bank():
    def body(b):
        b.emit("const.i32", i32(0), 2)
        b.emit("list.alloc", ref(0), i32(0))
        b.emit("const.i32", i32(1), 4)
        b.emit("list.resize", ref(0), i32(1))
        b.emit("const.i32", i32(2), 0)
        b.emit("const.i32", i32(3), -7)
        b.emit("list.set.i32", ref(0), i32(2), i32(3))
        b.emit("const.i32", i32(2), 1)
        b.emit("const.f64", f64(0), 2.5)
        b.emit("list.set.f64", ref(0), i32(2), f64(0))
        b.emit("const.i32", i32(2), 2)
        b.emit("list.set.ref", ref(0), i32(2), ref(0))          # the list holds itself
        b.emit("const.i32", i32(2), 0)
        b.emit("list.get.i32", i32(4), ref(0), i32(2))
        b.emit("const.i32", i32(2), 1)
        b.emit("list.get.f64", f64(1), ref(0), i32(2))
        b.emit("const.i32", i32(2), 3)
        b.emit("list.get.i64", i64(0), ref(0), i32(2))          # unset: reads as zero
        b.emit("list.size", i32(5), ref(0))
        b.emit("return", [i32(4), f64(1), i64(0), i32(5),
                          ref(0)])
    values = run("0v_iFIir", body)
    assert values[:4] == [-7, 2.5, 0, 4]
    assert isinstance(values[4], VMList) and values[4].items[2] is values[4]


def test_list_index_out_of_range_is_a_runtime_failure():
    def body(b):
        b.emit("const.i32", i32(0), 0)
        b.emit("list.alloc", ref(0), i32(0))
        b.emit("const.i32", i32(1), 3)
        b.emit("list.get.i32", i32(2), ref(0), i32(1))
        b.emit("return", [])
    with pytest.raises(RuntimeFailure, match=r"at offset \d+: list index 3 out of range"):
        run("0v_v", body)


def test_buffers_store_load_copy_and_rodata_is_read_only():
    def setup(w):
        w.add_rodata("greeting", "text/plain", b"hello, world")

    def body(b):
        b.emit("const.i64", i64(0), 16)
        b.emit("buffer.alloc", ref(0), i64(0))
        b.emit("const.i64", i64(1), 4)
        b.emit("const.f32", f32(0), 1.5)
        b.emit("buffer.store.f32", ref(0), i64(1), f32(0))
        b.emit("buffer.load.i32", i32(0), ref(0), i64(1))
        b.emit("const.ref.rodata", ref(1), 0)
        b.emit("const.i64", i64(2), 0)
        b.emit("const.i64", i64(3), 8)
        b.emit("const.i64", i64(4), 5)
        b.emit("buffer.copy", ref(1), i64(2), ref(0), i64(3), i64(4))     # "hello" -> bytes 8..13
        b.emit("buffer.length", i64(5), ref(1))
        b.emit("return", [i32(0), i64(5), ref(0), ref(1)])
    ctx = Context(load_module(module_with("0v_iIrr", body, setup=setup)))
    bits, length, buf, rodata = ctx.call("main")
    assert bits == 0x3FC00000 and length == 12
    assert buf.tobytes()[8:13] == b"hello"
    assert isinstance(rodata, VMBuffer) and rodata.readonly and rodata.text() == "hello, world"
    assert ctx.call("main")[3] is rodata   # one ref per segment, over the module's bytes


def test_storing_into_rodata_fails():
    def setup(w):
        w.add_rodata("data", "application/octet-stream", b"\0" * 8)

    def body(b):
        b.emit("const.ref.rodata", ref(0), 0)
        b.emit("const.i64", i64(0), 0)
        b.emit("const.i32", i32(0), 1)
        b.emit("buffer.store.i32", ref(0), i64(0), i32(0))
        b.emit("return", [])
    ctx = Context(load_module(module_with("0v_v", body, setup=setup)))
    with pytest.raises(RuntimeFailure, match="buffer is read-only"):
        ctx.call("main")


def test_null_ref_compares_and_select():
    def body(b):
        b.emit("const.ref.null", ref(0))
        b.emit("cmp.nz.ref", i32(0), ref(0))
        b.emit("const.i64", i64(0), 1)
        b.emit("buffer.alloc", ref(1), i64(0))
        b.emit("cmp.nz.ref", i32(1), ref(1))
        b.emit("cmp.eq.ref", i32(2), ref(1), ref(1))
        b.emit("select.ref", ref(2), i32(0), ref(1), ref(0))          # cond 0 -> picks the null
        b.emit("return", [i32(0), i32(1), i32(2), ref(2)])
    assert run("0v_iiir", body) == [0, 1, 1, None]


def test_registers_do_not_keep_refs_alive_after_return():
    class Payload:
        pass
    payload = Payload()
    alive = weakref.ref(payload)

    def body(b):
        b.emit("mov.ref", ref(1), ref(0))
        b.emit("mov.ref", ref(2), ref(1))
        b.emit("return", [])
    ctx = Context(load_module(module_with("0r_v", body)))
    ctx.call("main", [payload])
    del payload
    gc.collect()
    assert alive() is None


def test_discard_refs_drops_a_register_early():
    def body(b):
        b.emit("mov.ref", ref(1), ref(0))
        b.emit("discard.refs", [ref(0), ref(1)])
        b.emit("cmp.nz.ref", i32(0), ref(1))
        b.emit("return", [i32(0)])
    assert run("0r_i", body, [object()]) == [0]


def test_calling_with_the_wrong_argument_count_or_type_is_an_input_error():
    ctx = Context(load_module(module_with("0i_i", sum_to_n)))
    with pytest.raises(InputError, match="main: expected 1 argument, got 0"):
        ctx.call("main", [])
    with pytest.raises(InputError, match=r"main: argument 0: expected an integer \(i32\)"):
        ctx.call("main", [1.5])
    with pytest.raises(InputError, match="has no function 'nope'"):
        ctx.call("nope", [])


def test_step_limit_ends_an_endless_loop_with_a_runtime_failure():
    from tests.vm.helpers import run_asm
    text = """module @m
export @main = @main
func @main "0v_v" {
    br ^spin
  ^spin:
    br ^spin
}
"""
    with pytest.raises(RuntimeFailure, match="function 'main' at offset 5: step limit of 1000 "
                                             "branches and calls exceeded"):
        run_asm(text, step_limit=1000)


def test_step_limit_bounds_exponential_recursion_within_the_depth_limit():
    from tests.vm.helpers import run_asm
    # f(n): if n > 0: f(n - 1); f(n - 1) -- 2^200 calls, never deeper than 201 frames
    text = """module @m
export @main = @main
func @main "0i_v" {
    i32:1 = cmp.nz.i32 i32:0
    cond_br i32:1, ^recurse, ^out
  ^recurse:
    i32:2 = const.i32 1
    i32:2 = sub.i32 i32:0, i32:2
    call @main(i32:2)
    call @main(i32:2)
    return ()
  ^out:
    return ()
}
"""
    assert run_asm(text, [3], step_limit=1000) == []
    with pytest.raises(RuntimeFailure, match="step limit of 5000 branches and calls exceeded"):
        run_asm(text, [200], step_limit=5000)
