"""VM assembly: the assembler and disassembler round-trip, and mistakes name file:line:col."""
from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irtk.errors import ParseError
from irtk.vm import isa, load_module
from irtk.vm.assembler import assemble
from irtk.vm.disassembler import disassemble_module
from irtk.vm.writer import FunctionBuilder, ModuleWriter
from tests.vm.helpers import f32, f64, i32, run_asm
from tests.vm.test_vm_fuzz import SAMPLE


def round_trips(data: bytes) -> str:
    """Disassemble, assemble, and check both the bytes and the text come back the same."""
    text = disassemble_module(data)
    again = assemble(text)
    assert again == data
    assert disassemble_module(again) == text
    return text


def test_a_module_using_every_part_of_the_format_round_trips_byte_for_byte():
    text = round_trips(SAMPLE)
    assert "loc(\"sample.mlir:4:7\")" in text and "init @__init" in text


def operand_text(kind: str, op: isa.Op) -> str:
    bank = kind.rstrip(">")
    if bank in isa.BANKS:
        return f"{bank}:1"
    return {
        "imm_i32": "-7", "imm_i64": "9007199254740993", "imm_f32": "0.1", "imm_f64": "-2.5e-300",
        "rodata": "@data", "global": f"global.{op.bank}[0]", "func": "@main",
        "import": "@ext.fn" if op.name == "call.import" else "@ext.var", "block": "^next",
        "blocks": "[^next, ^next]", "type": '"!vm.buffer"', "u16list": "[2]",
        "regs": "(i32:0, ref:1)", "str": '"a \\"quoted\\" // text"',
    }[kind]


def every_op_module() -> str:
    lines = ['module @all', 'type "!vm.buffer"', 'import @ext.fn "0ir_v"',
             'import @ext.var "0CiD_v"', 'rodata @data "application/octet-stream" x"00ff"',
             "globals i32 1, i64 1, f32 1, f64 1, ref 1", 'func @main "0v_v" {']
    for op in isa.OPS:
        writes = [operand_text(k, op).replace(":1", ":2") for k in op.operands
                  if k in isa.WRITE_KINDS]
        reads = [operand_text(k, op) for k in op.operands if k not in isa.WRITE_KINDS]
        if op.name.startswith("call"):
            *head, args, results = reads
            writes = ["i32:3"]
            text = f"{op.name} {' '.join(head)}{args}"
        else:
            text = op.name + (" " + ", ".join(reads) if reads else "")
        lines.append("    " + (", ".join(writes) + " = " if writes else "") + text)
    lines += ["  ^next:", "    return ()", "}"]
    return "\n".join(lines) + "\n"


def test_every_op_has_a_text_form_that_round_trips():
    data = assemble(every_op_module())
    text = round_trips(data)
    for op in isa.OPS:
        assert f" {op.name}" in text, op.name


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(0, 2 ** 64 - 1))
def test_float_immediates_keep_their_exact_bits(bits32, bits64):
    single = struct.unpack("<f", struct.pack("<I", bits32))[0]
    double = struct.unpack("<d", struct.pack("<Q", bits64))[0]
    w = ModuleWriter("floats")
    b = FunctionBuilder()
    b.emit("const.f32", f32(0), single)
    b.emit("const.f64", f64(0), double)
    b.emit("return", [])
    w.add_function("main", "0v_v", b)
    data = w.to_bytes()
    text = round_trips(data)
    if math.isnan(single):
        assert f"bits(0x{bits32:08X})" in text


def test_special_floats_read_back():
    text = """
    module @m
    export @main = @main
    func @main "0v_ffFF" {
        f32:0 = const.f32 -0.0
        f32:1 = const.f32 inf
        f64:0 = const.f64 -inf
        f64:1 = const.f64 bits(0x7FF8000000000001)
        return (f32:0, f32:1, f64:0, f64:1)
    }
    """
    neg_zero, inf, neg_inf, nan = run_asm(text)
    assert math.copysign(1.0, neg_zero) == -1.0 and inf == math.inf and neg_inf == -math.inf
    assert struct.pack("<d", nan) == struct.pack("<Q", 0x7FF8000000000001)


def test_functions_imports_and_rodata_can_be_named_or_numbered():
    text = """
    module @m
    rodata @a "text/plain" x"61"
    rodata @b "text/plain" x"6263"
    export @main = #1
    func @helper "0r_I" {
        i64:0 = buffer.length ref:0
        return (i64:0)
    }
    func @main "0v_I" {
        ref:0 = const.ref.rodata #1
        i64:0 = call #0(ref:0)
        ref:1 = const.ref.rodata rodata[0]
        i64:1 = call @helper(ref:1)
        i64:0 = add.i64 i64:0, i64:1
        return (i64:0)
    }
    """
    assert run_asm(text) == [3]


def test_repeated_names_are_printed_as_ordinals_and_still_round_trip():
    w = ModuleWriter("dups")
    for value in (1, 2):
        b = FunctionBuilder()
        b.emit("const.i32", i32(0), value)
        b.emit("return", [])
        w.add_export(f"f{value}", w.add_function("same", "0v_v", b))
    text = round_trips(w.to_bytes())
    assert "export @f2 = #1" in text


def test_falling_through_into_a_label_inserts_a_branch():
    text = """
    module @m
    export @main = @main
    func @main "0i_i" {
        i32:1 = const.i32 0
      ^loop:
        i32:1 = add.i32 i32:1, i32:0
        i32:0 = const.i32 0
        i32:2 = cmp.nz.i32 i32:1
        cond_br i32:2, ^done, ^loop
      ^done:
        return (i32:1)
    }
    """
    assert run_asm(text, [41]) == [41]
    listing = disassemble_module(assemble(text))
    assert "    br ^" in listing   # the inserted branch the verifier asks for


def test_comments_blank_lines_and_optional_commas():
    text = """
    // a comment line
    module @m   // trailing comment
    export @main = @main {abi.args = "i32;i32", "odd key" = "x"}

    func @main "0ii_i" registers(i32 3) {
        i32:2 = add.i32 i32:0 i32:1      // commas between operands are optional
        return (i32:2)
    }
    """
    assert run_asm(text, [2, 3]) == [5]
    assert load_module(assemble(text)).exports[0].reflection == {"abi.args": "i32;i32",
                                                                 "odd key": "x"}


@pytest.mark.parametrize("body, where, message", [
    ("    i32:0 = add.q32 i32:0, i32:0", "5:13", "unknown VM op 'add.q32'"),
    ("    i32:0 = add.i32 i32:0, f32:0", "5:28", "expected an i32 register, found f32:0"),
    ("    br ^nowhere", "5:8", "label ^nowhere is never defined in function 'main'"),
    ("    call @missing()", "5:10", "unknown function @missing"),
    ("    i32:0 = const.i32 4294967296", "5:23", "4294967296 does not fit 32 bits"),
    ("    i32:0, i32:1 = const.i32 1", "5:5", "'const.i32' writes 1 register(s)"),
    ("    i32:0 = const.i32 1 2", "5:25", "unexpected '2'"),
    ('    fail i32:0, "bad \\q escape"', "5:17", 'malformed string "bad \\q escape": Invalid'),
    ('    fail i32:0, "\\ud800"', "5:17", "not valid Unicode"),
    ('    fail i32:0, "unterminated', "5:17", "unexpected character '\"'"),
])
def test_mistakes_name_the_line_and_column(body, where, message):
    text = f'module @m\nexport @main = @main\n\nfunc @main "0v_v" {{\n{body}\n    return ()\n}}\n'
    with pytest.raises(ParseError) as info:
        assemble(text, "prog.vmasm")
    assert str(info.value).startswith(f"prog.vmasm:{where}: error: "), str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize("text, message", [
    ('func @f "0v_v" {\n    return ()\n}\n', "1:1: error: missing 'module @name' line"),
    ('module @m\nfunc @f "0x_v" {\n    return ()\n}\n', "2:9: error: unknown type 'x'"),
    ('module @m\nfunc @f "0v_v" {\n    return ()\n', "2:1: error: function 'f' has no closing"),
    ('module @m\nrodata @r "x" elided(40)\n', "2:15: error: rodata 'r' was elided"),
    ('module @m\nexport @e = @nope\n', "2:13: error: unknown function @nope"),
    ('module @m\nbogus 1\n', "2:1: error: unknown statement 'bogus'"),
    ('module @m\nglobals q32 1\n', "2:9: error: unknown bank 'q32'"),
])
def test_module_level_mistakes(text, message):
    with pytest.raises(ParseError, match=None) as info:
        assemble(text, "m.s")
    assert f"m.s:{message}" in str(info.value)


def test_the_example_in_the_docs_assembles_and_runs():
    from pathlib import Path

    from irtk.modules.hal import HalModule
    from tests.vm.fakes import FakeDevice
    doc = (Path(__file__).resolve().parents[2] / "docs" / "vm.md").read_text()
    start = doc.index("```\nmodule @example") + 4
    text = doc[start:doc.index("```", start)]
    # the sum of 1..n
    results = [run_asm(text, [n], [HalModule(FakeDevice())])[0] for n in (0, 1, 4, 10)]
    assert results == [0, 1, 10, 55]
