"""The disassembler prints a module as VM assembly: every part, one instruction per line."""
from __future__ import annotations

from irtk.vm.disassembler import disassemble_module
from irtk.vm.writer import FunctionBuilder, ModuleWriter
from tests.vm.helpers import f32, i32, i64, ref


def sample() -> bytes:
    w = ModuleWriter("demo")
    length = w.add_import("hal.buffer.length", "0r_I")
    wait = w.add_import("hal.fence.await", "0iCrD_i")
    w.add_rodata("exe", "cpu-kernel-fb", b"\0" * 40)
    w.add_type("!hal.buffer")
    g = w.add_global("f32")
    b = FunctionBuilder()
    done = b.new_label()
    b.emit("global.load.f32", f32(0), g)
    b.location("demo.mlir:3:9")
    b.emit("call.import", length, [ref(0)], [i64(0)])
    b.emit("call.import.variadic", wait, [1], [i32(0), ref(0)], [i32(1)])
    b.emit("const.ref.rodata", ref(1), 0)
    b.emit("cmp.type.ref", i32(1), ref(1), 0)
    b.emit("cond_br", i32(1), done, done)
    b.bind(done)
    b.emit("fail", i32(1), 'say "hi"')
    w.add_export("main", w.add_function("main", "0ri_v", b), {"abi.args": "4xf32;i32"})
    return w.to_bytes()


def lines(text: str) -> list[str]:
    """Lines without the trailing offset comments."""
    return [line.split("  //")[0].rstrip() for line in text.splitlines()]


def test_listing_shows_header_imports_exports_rodata_and_code():
    text = disassemble_module(sample())
    assert text.startswith("module @demo  // format version 2\n")
    expected = [
        'type "!hal.buffer"',
        'import @hal.buffer.length "0r_I"',
        'import @hal.fence.await "0iCrD_i"',
        'rodata @exe "cpu-kernel-fb" x"' + "00" * 40 + '"',
        "globals f32 1",
        'export @main = @main {abi.args = "4xf32;i32"}',
        'func @main "0ri_v" registers(i32 2, i64 1, f32 1, ref 2) {',
        "    f32:0 = global.load.f32 global.f32[0]",
        '    i64:0 = call.import @hal.buffer.length(ref:0) loc("demo.mlir:3:9")',
        "    i32:1 = call.import.variadic @hal.fence.await [1](i32:0, ref:0)",
        "    ref:1 = const.ref.rodata @exe",
        '    i32:1 = cmp.type.ref ref:1, "!hal.buffer"',
        "    cond_br i32:1, ^66, ^66",
        "  ^66:",
        '    fail i32:1, "say \\"hi\\""',
        "}",
    ]
    got = lines(text)
    for line in expected:
        assert line in got, line
    # every instruction line ends with its byte offset, the one error messages name
    assert "// 66" in text.splitlines()[got.index('    fail i32:1, "say \\"hi\\""')]


def test_large_rodata_can_be_elided():
    text = disassemble_module(sample(), rodata_limit=16)
    assert 'rodata @exe "cpu-kernel-fb" elided(40)' in text


def test_listing_of_a_broken_function_ends_with_the_error():
    data = bytearray(sample())
    at = data.find(bytes([0x13]) + (1).to_bytes(2, "little"))   # the fail instruction
    data[at] = 0xFF
    assert "    // error at offset 66: unknown opcode 0xFF" in disassemble_module(bytes(data))
