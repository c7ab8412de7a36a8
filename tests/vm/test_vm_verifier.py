"""The verifier rejects every kind of malformed module, naming the function and offset."""
from __future__ import annotations

import pytest

from irtk.errors import VerificationError
from irtk.vm import isa, load_module
from irtk.vm.encoding import encode
from irtk.vm.writer import FunctionBuilder, ModuleWriter


class RawBuilder(FunctionBuilder):
    """A function whose bytecode is given verbatim (to write what FunctionBuilder would not)."""

    def __init__(self, code: bytes, **counts: int) -> None:
        super().__init__()
        self.code = code
        self.set_register_counts(**{b: counts.get(b, 0) for b in isa.BANKS})

    def finish(self) -> bytes:
        return self.code


def ins(name: str, *operands) -> bytes:
    return encode(isa.lookup(name), operands)


def module(code: bytes, cc: str = "0v_v", setup=None, **counts: int) -> bytes:
    w = ModuleWriter("bad")
    if setup:
        setup(w)
    w.add_export("main", w.add_function("main", cc, RawBuilder(code, **counts)))
    return w.to_bytes()


def rejects(data: bytes, message: str) -> None:
    with pytest.raises(VerificationError) as info:
        load_module(data)
    assert message in str(info.value)


RET = ins("return", ())


def test_accepts_a_well_formed_function():
    load_module(module(ins("const.i32", 0, 1) + RET, i32=1))


def test_register_out_of_range():
    code = ins("const.i32", 0, 1) + ins("const.i32", 1, 2) + ins("add.i32", 2, 0, 7) + RET
    rejects(module(code, i32=5),
            "function 'main' at offset 14: register i32:7 out of range (5 registers)")


def test_register_out_of_range_in_its_own_bank():
    rejects(module(ins("mov.f64", 0, 0) + RET, i32=4, f64=0),
            "function 'main' at offset 0: register f64:0 out of range (0 registers)")


def test_register_list_with_bad_bank_code():
    code = ins("return", ())[:1] + (1).to_bytes(2, "little") + (7 << 13).to_bytes(2, "little")
    rejects(module(code), "function 'main' at offset 0: 'return' register list has bad bank 7")


def test_branch_target_not_at_an_instruction_start():
    code = ins("br", 2) + RET
    rejects(module(code), "at offset 0: branch target 2 is not the start of an instruction")


def test_branch_target_outside_the_function():
    rejects(module(ins("br", 100) + RET), "at offset 0: branch target 100 is outside the "
                                          "function (8 bytes)")


def test_last_instruction_must_be_a_terminator():
    rejects(module(RET + ins("const.i32", 0, 1), i32=1),
            "at offset 3: last instruction 'const.i32' is not a terminator")


def test_every_block_ends_in_a_terminator():
    # const.i32 at 0 falls through into the branch target 7: the block [0, 7) has no terminator
    code = ins("const.i32", 0, 1) + ins("cond_br", 0, 7, 7) + RET
    rejects(module(code, i32=1),
            "function 'main' at offset 0: block ends in 'const.i32', not a terminator: it falls "
            "through into the branch target 7")


def test_unreachable_code_after_a_terminator_is_a_block_too():
    code = RET + ins("const.i32", 0, 1) + RET
    load_module(module(code, i32=1))
    rejects(module(RET + ins("const.i32", 0, 1), i32=1), "is not a terminator (br, cond_br, "
            "return, fail, br_table)")


def test_br_table_targets_are_checked_each():
    table = ins("br_table", 0, 0, (0, 21, 99))   # 21 bytes: the return after it is at 21
    rejects(module(table + RET, i32=1),
            "function 'main' at offset 0: branch target 99 is outside the function")
    table = ins("br_table", 0, 0, (0, 5))
    rejects(module(table + RET, i32=1), "at offset 0: branch target 5 is not the start of an "
                                        "instruction")


def test_truncated_block_list():
    code = ins("br_table", 0, 0, (0, 0))[:-3]
    rejects(module(code, i32=1), "function 'main' at offset 0: truncated instruction 'br_table'")


def test_type_ordinal_out_of_range():
    code = ins("cmp.type.ref", 0, 0, 2) + RET
    rejects(module(code, setup=lambda w: w.add_type("!vm.buffer"), i32=1, ref=1),
            "function 'main' at offset 0: type 2 out of range (1 types)")


def test_function_must_not_be_empty():
    rejects(module(b""), "function 'main' at offset 0: function has no instructions")


def test_truncated_instruction():
    rejects(module(RET + ins("const.i64", 0, 5)[:-3], i64=1),
            "function 'main' at offset 3: truncated instruction 'const.i64'")


def test_truncated_register_list():
    rejects(module(ins("return", ((("i32", 0)),))[:-1], i32=1),
            "at offset 0: truncated instruction 'return'")


def test_unknown_opcode():
    rejects(module(b"\xff" + RET), "function 'main' at offset 0: unknown opcode 0xFF")


def test_invalid_utf8_in_a_string_operand():
    code = ins("const.i32", 0, 1) + ins("fail", 0, "ab")[:-2] + b"\xff\xfe"
    rejects(module(code, i32=1), "at offset 7: 'fail' string is not valid UTF-8")


def test_call_target_out_of_range():
    rejects(module(ins("call", 3, (), ()) + RET),
            "at offset 0: function ordinal 3 out of range (1 functions)")


def test_import_ordinal_out_of_range():
    rejects(module(ins("call.import", 0, (), ()) + RET),
            "at offset 0: import ordinal 0 out of range (0 imports)")


def test_rodata_ordinal_out_of_range():
    rejects(module(ins("const.ref.rodata", 0, 2) + RET, ref=1),
            "at offset 0: rodata segment 2 out of range (0 segments)")


def test_global_ordinal_out_of_range_in_its_bank():
    def setup(w):
        w.add_global("i32")
    rejects(module(ins("global.load.f32", 0, 0) + RET, setup=setup, f32=1),
            "at offset 0: global f32:0 out of range (0 f32 globals)")


def test_call_argument_banks_must_match_the_callee():
    code = ins("call", 0, (("i64", 0),), ()) + RET
    rejects(module(code, "0i_v", i32=1, i64=1),
            "at offset 0: call to 'main' passes (i64), expected (i32) (0i_v)")


def test_call_result_banks_must_match_the_callee():
    code = ins("call", 0, (), (("f32", 0),)) + RET
    rejects(module(code, f32=1), "call to 'main' takes results as (f32), expected () (0v_v)")


def test_return_banks_must_match_the_function():
    rejects(module(ins("return", (("i32", 0),)), "0v_f", i32=1),
            "at offset 0: return of (i32), the function returns (f32) (0v_f)")


def with_import(name: str, cc: str):
    return lambda w: w.add_import(name, cc)


def test_plain_call_to_a_variadic_import_is_rejected():
    rejects(module(ins("call.import", 0, (), ()) + RET, setup=with_import("x.f", "0CiD_v")),
            "import 'x.f' is variadic (0CiD_v); use call.import.variadic")


def test_variadic_call_needs_one_size_per_segment():
    code = ins("call.import.variadic", 0, (1, 1), (("i32", 0),), ()) + RET
    rejects(module(code, setup=with_import("x.f", "0CiD_v"), i32=1),
            "call to 'x.f' gives 2 segment sizes, its calling convention 0CiD_v has 1")


def test_variadic_call_arguments_follow_the_segment_sizes():
    code = ins("call.import.variadic", 0, (2,), (("i32", 0), ("f32", 0)), ()) + RET
    rejects(module(code, setup=with_import("x.f", "0CiD_v"), i32=1, f32=1),
            "call to 'x.f' passes (i32, f32), expected (i32, i32) (0CiD_v)")


def test_variadic_call_to_a_plain_import_is_rejected():
    code = ins("call.import.variadic", 0, (), (), ()) + RET
    rejects(module(code, setup=with_import("x.f", "0v_v")),
            "import 'x.f' is not variadic (0v_v); use call.import")


def test_discard_refs_only_takes_ref_registers():
    rejects(module(ins("discard.refs", (("i32", 0),)) + RET, i32=1),
            "discard.refs of non-ref register i32:0")


def test_arguments_need_registers():
    rejects(module(RET, "0ii_v", i32=1),
            "function 'main': needs 2 i32 registers for its arguments, has 1")


def patched(data: bytes, old: bytes, new: bytes) -> bytes:
    """The module with one string replaced by another of the same length (past the writer)."""
    assert len(old) == len(new) and data.count(old) == 1
    return data.replace(old, new)


def test_internal_functions_cannot_be_variadic():
    data = patched(module(RET, "0iii_v", i32=3), b"0iii_v", b"0CiD_v")
    rejects(data, "function 'main': internal functions cannot be variadic")


def test_malformed_calling_convention():
    data = patched(module(RET, "0f_v", f32=1), b"0f_v", b"0x_v")
    rejects(data, "function 'main': unknown type 'x' in calling convention '0x_v'")


def test_export_of_a_missing_function():
    w = ModuleWriter("bad")
    w.add_function("f", "0v_v", RawBuilder(RET))
    w.add_export("main", 4)
    rejects(w.to_bytes(), "export 'main' refers to function 4 (1 functions)")


def test_duplicate_export():
    w = ModuleWriter("bad")
    f = w.add_function("f", "0v_v", RawBuilder(RET))
    w.add_export("main", f)
    w.add_export("main", f)
    rejects(w.to_bytes(), "export 'main' is defined twice")


def test_init_function_signature():
    w = ModuleWriter("bad")
    w.set_init_function(w.add_function("__init", "0i_v", RawBuilder(RET, i32=1)))
    rejects(w.to_bytes(), "init function '__init' must be 0v_v, is 0i_v")


def test_init_function_out_of_range():
    w = ModuleWriter("bad")
    w.set_init_function(3)
    rejects(w.to_bytes(), "init function 3 out of range (0 functions)")


def test_type_names_must_be_ref_types():
    w = ModuleWriter("bad")
    w.add_type("hal.buffer")
    rejects(w.to_bytes(), "type 0 'hal.buffer' is not a ref type name")


def test_import_name_needs_a_module():
    w = ModuleWriter("bad")
    w.add_import("nomodule", "0v_v")
    rejects(w.to_bytes(), "import 'nomodule' is not 'module.function'")


def test_too_many_globals():
    w = ModuleWriter("bad")
    w._globals["i64"] = 1 << 30
    rejects(w.to_bytes(), "module declares 1073741824 i64 globals")


def test_too_many_registers_in_all():
    w = ModuleWriter("bad")
    for i in range(70):
        w.add_function(f"f{i}", "0v_v", RawBuilder(RET, i32=65535))
    rejects(w.to_bytes(), "module declares 4587450 registers in all (limit 4194304)")


def test_format_version_mismatch(monkeypatch):
    monkeypatch.setattr(isa, "BYTECODE_VERSION", 7)
    data = ModuleWriter("future").to_bytes()
    monkeypatch.undo()
    rejects(data, f"module format version 7, this runtime reads {isa.BYTECODE_VERSION}")


def test_file_identifier():
    data = bytearray(ModuleWriter("m").to_bytes())
    data[4:8] = b"NOPE"
    rejects(bytes(data), "not an irtk module: file identifier b'NOPE', expected b'IRTK'")


def test_too_short_file():
    rejects(b"IRT", "not an irtk module")


def test_unreadable_path(tmp_path):
    rejects(str(tmp_path / "missing.vmfb"), "cannot read module file")
    (tmp_path / "empty.vmfb").write_bytes(b"")
    rejects(tmp_path / "empty.vmfb", "is empty")


def test_loading_from_a_path_maps_the_file(tmp_path):
    w = ModuleWriter("mapped")
    w.add_rodata("blob", "application/octet-stream", b"x" * 100)
    b = FunctionBuilder()
    b.emit("return", [])
    w.add_export("main", w.add_function("main", "0v_v", b))
    path = tmp_path / "m.vmfb"
    path.write_bytes(w.to_bytes())
    m = load_module(path)
    assert type(m.backing).__name__ == "mmap"
    assert m.rodata[0].data.readonly and bytes(m.rodata[0].data) == b"x" * 100


def test_rodata_and_bytecode_are_aligned_for_zero_copy_use():
    w = ModuleWriter("aligned")
    w.add_rodata("a", "application/octet-stream", b"123")
    w.add_rodata("b", "application/octet-stream", b"4567")
    b = FunctionBuilder()
    b.emit("return", [])
    w.add_export("main", w.add_function("main", "0v_v", b))
    data = w.to_bytes()
    for blob in (b"123", b"4567"):
        assert data.find(blob) % 16 == 0
