"""The disassembler lists every part of a module and one instruction per line."""
from __future__ import annotations

from irtk.vm.disassembler import disassemble_module
from irtk.vm.writer import FunctionBuilder, ModuleWriter, Reg


def sample() -> bytes:
    w = ModuleWriter("demo")
    length = w.add_import("hal.buffer.length", "0r_I")
    wait = w.add_import("hal.fence.await", "0iCrD_i")
    w.add_rodata("exe", "cpu-kernel-fb", b"\0" * 40)
    g = w.add_global("f32")
    b = FunctionBuilder()
    done = b.new_label()
    b.emit("global.load.f32", 0, g)
    b.location("demo.mlir:3:9")
    b.emit("call.import", length, [Reg("ref", 0)], [Reg("i64", 0)])
    b.emit("call.import.variadic", wait, [1], [Reg("i32", 0), Reg("ref", 0)], [Reg("i32", 1)])
    b.emit("const.ref.rodata", 1, 0)
    b.emit("cond_br", 1, done, done)
    b.bind(done)
    b.emit("fail", 1, 'say "hi"')
    w.add_export("main", w.add_function("main", "0ri_v", b), {"abi.args": "4xf32;i32"})
    return w.to_bytes()


def test_listing_shows_header_imports_exports_rodata_and_code():
    text = disassemble_module(sample())
    expected = [
        "module 'demo' (format version 1)",
        "  [0] hal.buffer.length 0r_I",
        "  [1] hal.fence.await 0iCrD_i",
        "  main -> function 0 'main' {abi.args = \"4xf32;i32\"}",
        "globals: i32 0, i64 0, f32 1, f64 0, ref 0",
        "  [0] 'exe' cpu-kernel-fb 40 bytes",
        "  function 0 'main' 0ri_v (registers: i32 2, i64 1, f32 1, ref 2)",
        "        0: f32:0 = global.load.f32 global.f32[0]",
        "        7: i64:0 = call.import @hal.buffer.length(ref:0)  // demo.mlir:3:9",
        "       20: i32:1 = call.import.variadic @hal.fence.await [1](i32:0, ref:0)",
        "       39: ref:1 = const.ref.rodata rodata[0] 'exe'",
        "       46: cond_br i32:1, ^57, ^57",
        '       57: fail i32:1, "say \\"hi\\""',
    ]
    for line in expected:
        assert line in text.splitlines(), line


def test_listing_of_a_broken_function_ends_with_the_error():
    data = bytearray(sample())
    at = data.find(bytes([0x13]) + (1).to_bytes(2, "little"))   # the fail instruction
    data[at] = 0xFF
    assert "   57: <error: unknown opcode 0xFF>" in disassemble_module(bytes(data))
