"""Fused straight-line runs compute exactly what one closure per instruction computes.

Random programs over every fusible op (and some that are not, which split runs), with a branch
into the middle of a run, are run both ways on random register values; every register must end
bit-identical.
"""
from __future__ import annotations

import math
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from irtk.vm import Context, isa, load_module
from irtk.vm.fusion import TEMPLATES
from irtk.vm.writer import FunctionBuilder, ModuleWriter, Reg
from tests.vm.helpers import i32

COUNTS = {"i32": 6, "i64": 4, "f32": 4, "f64": 4, "ref": 0}
CC = "0" + "i" * 6 + "I" * 4 + "f" * 4 + "F" * 4
CC = CC + "_" + CC[1:]
FUSIBLE = sorted(name for name in TEMPLATES if "ref" not in name)
UNFUSED = ["exp.f32", "sqrt.f64", "min.u.i32", "cast.f64.si64", "floor.f32", "abs.i64"]
OPS = FUSIBLE + UNFUSED


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


ints32 = st.integers(-2 ** 31, 2 ** 31 - 1)
ints64 = st.integers(-2 ** 63, 2 ** 63 - 1)
floats = st.floats(allow_nan=True, allow_infinity=True, width=32)
doubles = st.floats(allow_nan=True, allow_infinity=True)


@st.composite
def instruction(draw):
    op = isa.lookup(draw(st.sampled_from(OPS)))
    operands = []
    for kind in op.operands:
        bank = kind.rstrip(">")
        if bank in COUNTS:
            operands.append(Reg(bank, draw(st.integers(0, COUNTS[bank] - 1))))
        elif kind == "imm_i32":
            operands.append(draw(ints32))
        elif kind == "imm_i64":
            operands.append(draw(ints64))
        elif kind == "imm_f32":
            operands.append(draw(floats))
        else:
            operands.append(draw(doubles))
    return op.name, operands


def build(blocks) -> bytes:
    a, b, c = blocks
    fb = FunctionBuilder()
    to_b, to_c = fb.new_label(), fb.new_label()
    for name, operands in a:
        fb.emit(name, *operands)
    fb.emit("cond_br", i32(0), to_b, to_c)
    fb.bind(to_b)
    for name, operands in b:
        fb.emit(name, *operands)
    fb.bind(to_c)   # b falls through into c: a br is inserted, and c is also a branch target
    for name, operands in c:
        fb.emit(name, *operands)
    fb.emit("return", [Reg(bank, i) for bank in ("i32", "i64", "f32", "f64")
                       for i in range(COUNTS[bank])])
    fb.set_register_counts(**COUNTS)
    w = ModuleWriter("fuzzed")
    w.add_export("main", w.add_function("main", CC, fb))
    return w.to_bytes()


def same(x, y) -> bool:
    if isinstance(x, float):
        return struct.pack("<d", x) == struct.pack("<d", y) or (math.isnan(x) and math.isnan(y))
    return x == y and type(x) is type(y)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.tuples(*[st.lists(instruction(), max_size=12)] * 3),
       st.lists(ints32, min_size=6, max_size=6), st.lists(ints64, min_size=4, max_size=4),
       st.lists(floats, min_size=4, max_size=4), st.lists(doubles, min_size=4, max_size=4))
def test_fused_and_unfused_execution_agree(blocks, i32s, i64s, f32s, f64s):
    module = load_module(build(blocks))
    args = [*i32s, *i64s, *[f32(x) for x in f32s], *f64s]
    fused = Context(module, fuse=True).call("main", args)
    plain = Context(load_module(build(blocks)), fuse=False).call("main", args)
    assert len(fused) == len(plain)
    for i, (x, y) in enumerate(zip(fused, plain)):
        assert same(x, y), (i, x, y)




def test_fusion_is_used_for_straight_line_code():
    fb = FunctionBuilder()
    fb.emit("const.i32", i32(1), 3)
    fb.emit("add.i32", i32(0), i32(0), i32(1))
    fb.emit("mul.i32", i32(0), i32(0), i32(1))
    fb.emit("return", [i32(0)])
    w = ModuleWriter("m")
    w.add_export("main", w.add_function("main", "0i_i", fb))
    ctx = Context(load_module(w.to_bytes()))
    assert ctx.functions[0].code[0].__code__.co_filename == "<irtk vm fused block>"
    assert ctx.call("main", [2 ** 31 - 4]) == [(((2 ** 31 - 1) * 3 + 2 ** 31) % 2 ** 32) - 2 ** 31]
