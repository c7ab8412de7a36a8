"""Mangled module files raise irtk errors only: never a Python exception, a crash or a hang.

Byte flips and truncations of a module that uses every part of the format (imports, variadic
calls, exports with reflection, rodata, globals, `__init`, strings, debug locations) are loaded,
verified, linked, decoded and disassembled. Seeded (derandomized) so failures reproduce.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from irtk.errors import Error
from irtk.vm import Context, NativeFunction, NativeModule, load_module
from irtk.vm.disassembler import disassemble_module
from irtk.vm.writer import FunctionBuilder, ModuleWriter, Reg


class Sink(NativeModule):
    name = "sink"
    EXPORTS = (NativeFunction("put", "0rCiD_i"), NativeFunction("take", "0I_r"))

    def put(self, ref, values):
        return len(values)

    def take(self, n):
        return None


def sample_module() -> bytes:
    w = ModuleWriter("sample")
    put = w.add_import("sink.put", "0rCiD_i")
    take = w.add_import("sink.take", "0I_r")
    text = w.add_rodata("text", "text/plain", b"hello")
    w.add_type("!vm.buffer")
    counter = w.add_global("i32")
    w.add_global("ref")

    init = FunctionBuilder()
    init.emit("const.i32", 0, 3)
    init.emit("global.store.i32", counter, 0)
    init.emit("return", [])
    w.set_init_function(w.add_function("__init", "0v_v", init))

    helper = w.declare_function("helper", "0iI_i")
    main = FunctionBuilder()
    loop, body, done = main.new_label(), main.new_label(), main.new_label()
    main.emit("global.load.i32", 1, counter)
    main.emit("const.i32", 2, 0)
    main.bind(loop)
    main.location("sample.mlir:4:7")
    main.emit("cmp.lt.s.i32", 3, 2, 1)
    main.emit("cond_br", 3, body, done)
    main.bind(body)
    main.emit("call", helper, [Reg("i32", 2), Reg("i64", 0)], [Reg("i32", 2)])
    main.emit("br", loop)
    main.bind(done)
    main.emit("const.ref.rodata", 0, text)
    main.emit("call.import.variadic", put, [2], [Reg("ref", 0), Reg("i32", 0), Reg("i32", 2)],
              [Reg("i32", 4)])
    main.emit("call.import", take, [Reg("i64", 0)], [Reg("ref", 1)])
    main.emit("cmp.nz.ref", 5, 1)
    end = main.new_label()
    main.emit("cond_br", 5, end, end)
    main.bind(end)
    main.emit("return", [Reg("i32", 4)])
    w.add_export("main", w.add_function("main", "0iI_i", main),
                 {"abi.args": "i32;i64", "abi.results": "i32"})

    h = FunctionBuilder()
    h.emit("const.i32", 1, 1)
    h.emit("add.i32", 0, 0, 1)
    h.emit("return", [Reg("i32", 0)])
    w.define_function(helper, h)
    return w.to_bytes()


SAMPLE = sample_module()


def load_everything(data: bytes) -> None:
    try:
        Context(load_module(data), [Sink()], run_init=False)
    except Error:
        pass
    try:
        disassemble_module(data)
    except Error:
        pass


def test_sample_module_is_valid():
    ctx = Context(load_module(SAMPLE), [Sink()])
    assert ctx.call("main", [0, 0]) == [2]
    assert "sink.put" in disassemble_module(SAMPLE)


FUZZ = settings(max_examples=300, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(SAMPLE) - 1), st.integers(1, 255)),
                min_size=1, max_size=6))
def test_byte_flips_raise_only_irtk_errors(flips):
    data = bytearray(SAMPLE)
    for position, mask in flips:
        data[position] ^= mask
    load_everything(bytes(data))


@FUZZ
@given(st.integers(0, len(SAMPLE) - 1))
def test_truncations_raise_only_irtk_errors(length):
    load_everything(SAMPLE[:length])


@pytest.mark.parametrize("value", [0x00, 0xFF, 0x7F, 0x80])
def test_every_byte_set_to_an_extreme_raises_only_irtk_errors(value):
    for position in range(0, len(SAMPLE), 3):
        data = bytearray(SAMPLE)
        data[position] = value
        load_everything(bytes(data))
