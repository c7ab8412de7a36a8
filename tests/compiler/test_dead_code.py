"""Dead-code elimination of host functions (regalloc.eliminate_dead_code): instructions whose
results nothing reads are dropped when they have no other effect and cannot fail; the rest
stay, and the function computes what it did."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import irtk
from irtk.compiler.regalloc import VirtualBuilder, eliminate_dead_code
from irtk.errors import RuntimeFailure
from irtk.vm import Context, load_module
from irtk.vm.disassembler import disassemble_module
from irtk.vm.writer import Label, ModuleWriter, Reg

FIXTURES = Path(__file__).resolve().parent.parent / "importers" / "fixtures"


def names(vb: VirtualBuilder) -> list[str]:
    return [item[1].name for item in vb.items if item[0] == "op"]


def run(vb: VirtualBuilder, cc: str, args: list, arg_banks: list[str]) -> list:
    w = ModuleWriter("test")
    w.add_export("main", w.add_function("main", cc, vb.allocate(arg_banks, "main")))
    return Context(load_module(w.to_bytes()), []).call("main", args)


def test_a_dead_chain_is_dropped_and_the_result_is_unchanged():
    rng = np.random.default_rng()
    a, b = (int(v) for v in rng.integers(-1000, 1000, size=2))
    vb = VirtualBuilder()
    x, y, d1, d2, d3, s = (Reg("i32", i) for i in range(6))
    vb.emit("const.i32", d1, 7)            # dead: only the dead d2 reads it
    vb.emit("mul.i32", d2, d1, x)          # dead
    vb.emit("global.load.i32", d3, 0)      # dead
    vb.emit("add.i32", s, x, y)
    vb.emit("return", [s])
    assert eliminate_dead_code(vb) == 3
    assert names(vb) == ["add.i32", "return"]
    assert run(vb, "0ii_i", [a, b], ["i32", "i32"]) == [a + b]


def test_ops_with_effects_or_that_can_fail_stay():
    vb = VirtualBuilder()
    x, q, c = Reg("i32", 0), Reg("i32", 1), Reg("i32", 2)
    r, f = Reg("ref", 0), Reg("f32", 0)
    vb.emit("div.s.i32", q, x, x)          # can trap (x = 0): stays though q is dead
    vb.emit("const.ref.null", r)           # an early release: stays
    vb.emit("const.f32", f, 1.5)
    vb.emit("cast.f32.si32", c, f)         # float-to-int casts can fail: stays, so f is live
    vb.emit("global.store.i32", 0, x)      # an effect
    vb.emit("return", [])
    assert eliminate_dead_code(vb) == 0
    assert names(vb) == ["div.s.i32", "const.ref.null", "const.f32", "cast.f32.si32",
                         "global.store.i32", "return"]


def test_a_trapping_dead_op_still_traps():
    vb = VirtualBuilder()
    x, q = Reg("i32", 0), Reg("i32", 1)
    vb.emit("div.s.i32", q, x, x)
    vb.emit("return", [x])
    w = ModuleWriter("test")
    w.add_export("main", w.add_function("main", "0i_i", vb.allocate(["i32"], "main")))
    ctx = Context(load_module(w.to_bytes()), [])
    assert ctx.call("main", [3]) == [3]
    with pytest.raises(RuntimeFailure):
        ctx.call("main", [0])


def test_values_only_dead_code_reads_in_another_block_are_dropped_too():
    """A value made in one block and read only by dead code in the next goes as well (the
    elimination repeats until nothing changes)."""
    vb = VirtualBuilder()
    x, t, u = Reg("i32", 0), Reg("i32", 1), Reg("i32", 2)
    nxt = Label()
    vb.emit("const.i32", t, 5)
    vb.emit("br", nxt)
    vb.bind(nxt)
    vb.emit("add.i32", u, t, x)            # dead, and with it t
    vb.emit("return", [x])
    assert eliminate_dead_code(vb) == 2
    assert names(vb) == ["br", "return"]


def test_a_value_a_loop_carries_stays():
    """i counts down around a loop: each write is read by the next iteration's compare."""
    n = int(np.random.default_rng().integers(3, 50))
    vb = VirtualBuilder()
    i, one, z, acc = Reg("i32", 0), Reg("i32", 1), Reg("i32", 2), Reg("i32", 3)
    head, body, done = Label(), Label(), Label()
    vb.emit("const.i32", one, 1)
    vb.emit("const.i32", acc, 0)
    vb.emit("br", head)
    vb.bind(head)
    vb.emit("cmp.nz.i32", z, i)
    vb.emit("cond_br", z, body, done)
    vb.bind(body)
    vb.emit("sub.i32", i, i, one)
    vb.emit("add.i32", acc, acc, one)
    vb.emit("br", head)
    vb.bind(done)
    vb.emit("return", [acc])
    assert eliminate_dead_code(vb) == 0
    assert run(vb, "0i_i", [n], ["i32"]) == [n]


def test_a_compiled_call_computes_no_dead_dispatch_operands():
    """The exported MLP's segment is recorded once in `__init`; its call no longer loads the
    workgroup counts or spells the binding sizes it used to, and still gives torch's answer."""
    data = np.load(FIXTURES / "mlp.npz")
    vmfb = irtk.compile_str((FIXTURES / "mlp.mlir").read_text(), target="vulkan-spirv,cpu")
    text = disassemble_module(vmfb)
    main = text[text.index("func @main"):]
    main = main[:main.index("\n}")]
    assert "global.load.i32" not in main
    got = np.asarray(irtk.load(vmfb, device="local-sync").main(data["x"]))
    np.testing.assert_allclose(got, data["y0"], rtol=1e-5, atol=1e-6)
