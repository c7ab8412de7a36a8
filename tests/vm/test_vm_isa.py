"""The op table is consistent, fully implemented, and documented in docs/vm.md."""
from __future__ import annotations

from irtk.modules import docgen
from irtk.vm import isa
from irtk.vm.interpreter import _CONTROL
from irtk.vm.ops import FACTORIES


def test_opcodes_and_names_are_unique_and_fit_a_byte():
    assert len({op.opcode for op in isa.OPS}) == len(isa.OPS)
    assert len({op.name for op in isa.OPS}) == len(isa.OPS)
    assert all(0 < op.opcode < 256 for op in isa.OPS)


def test_every_operand_kind_is_known():
    for op in isa.OPS:
        for kind in op.operands:
            assert kind in isa.KIND_SIZES, (op.name, kind)


def test_every_op_has_semantics_exactly_once():
    for op in isa.OPS:
        assert (op.name in FACTORIES) != (op.name in _CONTROL), op.name
    assert set(FACTORIES) | set(_CONTROL) == {op.name for op in isa.OPS}


def test_contract_ops_exist():
    required = ["const.i32", "const.i64", "const.f32", "const.f64", "const.ref.null",
                "const.ref.rodata", "br", "cond_br", "return", "fail", "call", "call.import",
                "call.import.variadic", "cmp.nz.i32", "cmp.nz.ref", "ext.i32.i64.s",
                "ext.i32.i64.u", "trunc.i64.i32", "cast.si32.f32", "cast.f32.si32",
                "cast.f32.f64", "list.alloc", "list.size", "list.resize", "buffer.alloc",
                "buffer.length", "br_table", "discard.refs", "buffer.clone", "buffer.copy",
                "buffer.compare", "buffer.load.i8.s", "buffer.load.i8.u", "buffer.load.i16.s",
                "buffer.load.i16.u", "buffer.store.i8", "buffer.store.i16", "cmp.type.ref"]
    for bank in ("i8", "i16", "i32", "i64", "f32", "f64"):
        required.append(f"buffer.fill.{bank}")
    for bank in ("i32", "i64", "f32", "f64"):
        required += [f"buffer.load.{bank}", f"buffer.store.{bank}"]
    for src in ("i32", "i64"):
        for dst in ("f32", "f64"):
            required += [f"cast.s{src}.{dst}", f"cast.u{src}.{dst}", f"cast.{dst}.s{src}",
                         f"cast.{dst}.u{src}"]
    for bank in ("i32", "i64"):
        for base in ("add", "sub", "mul", "div.s", "div.u", "rem.s", "rem.u", "and", "or", "xor",
                     "shl", "shr.s", "shr.u", "neg", "min.s", "max.s", "cmp.eq", "cmp.ne",
                     "cmp.lt.s", "cmp.lte.s", "cmp.lt.u", "cmp.lte.u"):
            required.append(f"{base}.{bank}")
    for bank in ("f32", "f64"):
        for base in ("add", "sub", "mul", "div", "rem", "neg", "abs", "min", "max", "exp", "log",
                     "sqrt", "rsqrt", "tanh", "pow", "floor", "ceil", "fma", "cmp.eq", "cmp.ne",
                     "cmp.lt", "cmp.lte"):
            required.append(f"{base}.{bank}")
    for bank in isa.BANKS:
        required += [f"mov.{bank}", f"select.{bank}", f"global.load.{bank}",
                     f"global.store.{bank}", f"list.get.{bank}", f"list.set.{bank}"]
    missing = [name for name in required if name not in isa.BY_NAME]
    assert missing == []


def test_terminators():
    assert {op.name for op in isa.OPS if op.is_terminator} == {
        "br", "cond_br", "br_table", "return", "fail"}


def test_iree_spelling_aliases():
    assert isa.lookup("div.i32.s").name == "div.s.i32"
    assert isa.lookup("cmp.lt.i64.u").name == "cmp.lt.u.i64"


def test_global_ops_know_their_bank():
    assert isa.lookup("global.store.ref").bank == "ref"
    assert isa.lookup("global.load.f64").bank == "f64"


def test_docs_tables_are_up_to_date():
    current = docgen.DOC_PATH.read_text(encoding="utf-8")
    assert docgen.update(current) == current, f"run: {docgen.COMMAND}"
