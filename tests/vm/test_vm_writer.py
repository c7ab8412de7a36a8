"""The writer: encoding, labels, register counts, deduplication and early misuse errors."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from irtk.vm import Context, load_module
from irtk.vm.writer import FunctionBuilder, ModuleWriter, Reg
from tests.vm.helpers import f32, i32, i64, ref


def test_forward_and_backward_labels_resolve_to_byte_offsets():
    b = FunctionBuilder()
    top, end = b.new_label(), b.new_label()
    b.bind(top)
    b.emit("br", end)            # 0: forward
    b.emit("br", top)            # 5: backward
    b.bind(end)
    b.emit("return", [])         # 10
    code = b.finish()
    assert code[1:5] == (10).to_bytes(4, "little")
    assert code[6:10] == (0).to_bytes(4, "little")


def test_register_counts_derive_from_use_and_arguments_and_can_be_overridden():
    b = FunctionBuilder()
    b.emit("const.i32", i32(4), 1)
    b.emit("return", [ref(2)])
    assert b.register_counts({"f32": 3}) == {"i32": 5, "i64": 0, "f32": 3, "f64": 0, "ref": 3}
    b.set_register_counts(i32=9)
    assert b.register_counts()["i32"] == 9


def test_module_round_trip_keeps_every_part():
    w = ModuleWriter("round")
    assert w.add_import("hal.buffer.length", "0r_I") == 0
    assert w.add_import("hal.device.default", "0v_r") == 1
    assert w.add_import("hal.buffer.length", "0r_I") == 0     # deduplicated
    assert w.add_rodata("blob", "application/octet-stream", b"\x01\x02") == 0
    assert w.add_global("i64") == 0 and w.add_global("i64") == 1 and w.add_global("ref") == 0
    assert w.add_type("!hal.buffer") == 0 and w.add_type("!hal.buffer") == 0
    w.add_requirement("i64")
    b = FunctionBuilder()
    b.location("f.mlir:1:2")
    b.emit("return", [i32(0)])
    f = w.add_function("main", "0i_i", b)
    w.add_export("main", f, {"abi.args": "i32", "abi.results": "i32"})
    m = load_module(w.to_bytes())
    assert m.name == "round"
    assert [(i.full_name, i.calling_convention) for i in m.imports] == [
        ("hal.buffer.length", "0r_I"), ("hal.device.default", "0v_r")]
    assert bytes(m.rodata[0].data) == b"\x01\x02" and m.rodata[0].mime_type == \
        "application/octet-stream"
    assert m.global_counts == {"i32": 0, "i64": 2, "f32": 0, "f64": 0, "ref": 1}
    assert m.types == ["!hal.buffer"] and m.requirements == ["i64"]
    assert m.exports[0].reflection == {"abi.args": "i32", "abi.results": "i32"}
    assert m.functions[0].name == "main" and m.functions[0].register_counts["i32"] == 1
    assert m.location(0, 0) == "f.mlir:1:2"
    assert m.init_function == -1


def test_import_with_two_signatures_is_rejected():
    w = ModuleWriter("m")
    w.add_import("hal.buffer.length", "0r_I")
    with pytest.raises(ValueError, match="added as 0r_I and as 0r_i"):
        w.add_import("hal.buffer.length", "0r_i")


@pytest.mark.parametrize("args, message", [
    (("nope.op",), "unknown VM op 'nope.op'"),
    (("add.i32", i32(1), i32(2)), "'add.i32' takes 3 operands"),
    (("add.i32", i32(1), i32(2), i32(-1)),
     "'add.i32' operand 2 (i32): register index -1 is outside [0, 65535]"),
    (("br", 3), "'br' operand 0 (block): expected a Label, got 3"),
    (("return", [("i32", 0)]), "'return' operand 0 (regs): register lists hold Reg values"),
    (("const.f32", f32(0), "x"), "'const.f32': bad imm_f32 operand 'x'"),
])
def test_emit_rejects_misuse_immediately(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        FunctionBuilder().emit(*args)


@pytest.mark.parametrize("args, message", [
    (("add.i32", i32(0), i32(1), f32(2)),
     "'add.i32' operand 2 (i32): expected a register in bank i32, got one in bank f32 (f32:2)"),
    (("cmp.eq.i64", i64(0), i64(1), i64(2)),      # the result of an i64 compare is an i32
     "'cmp.eq.i64' operand 0 (i32>): expected a register in bank i32, got one in bank i64 "
     "(i64:0)"),
    (("global.store.ref", 0, i32(1)),
     "'global.store.ref' operand 1 (ref): expected a register in bank ref, got one in bank i32"),
])
def test_emit_checks_the_bank_of_every_register_operand(args, message):
    b = FunctionBuilder()
    with pytest.raises(ValueError, match=re.escape(message)):
        b.emit(*args)
    assert b.offset == 0        # nothing of the refused instruction is written


@pytest.mark.parametrize("args, message", [
    (("add.i32", i32(0), 1, i32(2)),
     "'add.i32' operand 1 (i32): expected a Reg in bank i32, got 1"),
    (("const.i32", 0, 5), "'const.i32' operand 0 (i32>): expected a Reg in bank i32, got 0"),
])
def test_emit_refuses_a_bare_index_for_a_register_operand(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        FunctionBuilder().emit(*args)


def test_register_operands_encode_their_index_in_the_op_bank():
    b = FunctionBuilder()
    b.emit("select.f32", f32(7), i32(1), f32(2), f32(0x1234))
    assert b.finish() == bytes([0x24, 7, 0, 1, 0, 2, 0, 0x34, 0x12])
    assert b.register_counts() == {"i32": 2, "i64": 0, "f32": 0x1235, "f64": 0, "ref": 0}


def test_unbound_label_and_undefined_function_are_errors():
    b = FunctionBuilder()
    b.emit("br", b.new_label())
    with pytest.raises(ValueError, match="never bound"):
        b.finish()
    w = ModuleWriter("m")
    w.declare_function("later", "0v_v")
    with pytest.raises(ValueError, match="'later' was declared but never defined"):
        w.to_bytes()


def test_bad_register_bank_and_variadic_internal_function():
    with pytest.raises(ValueError, match="unknown register bank 'i8'"):
        Reg("i8", 0)
    with pytest.raises(ValueError, match="internal functions cannot be variadic"):
        ModuleWriter("m").declare_function("f", "0CiD_v")


def test_immediates_wrap_to_their_width():
    b = FunctionBuilder()
    b.emit("const.i32", i32(0), 0xFFFFFFFF)
    assert b.finish()[3:7] == b"\xff\xff\xff\xff"


def test_the_example_in_the_docs_builds_and_runs():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "vm.md").read_text()
    start = doc.index("```python\n", doc.index("## Emitting code")) + len("```python\n")
    scope: dict[str, object] = {}
    exec(doc[start:doc.index("```", start)], scope)
    data = scope["data"]
    assert isinstance(data, bytes)
    assert Context(load_module(data)).call("add_one", [41]) == [42]
