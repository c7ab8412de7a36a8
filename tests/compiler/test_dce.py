"""Dead code elimination on TIR (dce.py): pure ops nothing reads go before dispatch formation,
with what only they read; ops with effects or that can fail stay, and so do loops and
branches; the program computes what it did."""
from __future__ import annotations

import numpy as np
import pytest

import irtk
from irtk.compiler import tir
from irtk.compiler.dce import eliminate_dead_ops
from irtk.compiler.driver import compile_program
from irtk.compiler.kernel import Op
from tests.compiler.tir_build import S, T, function, program, region
from tests.conftest import all_device_uris, target_for


def kinds(f: tir.Function) -> list[str]:
    return [op.kind for op in tir.walk(f.body)]


def exp(b, x):
    return b.elementwise([x], b.empty(x.type), [Op("math.exp", (0,), "f32")])


def with_a_dead_layer() -> tir.Program:
    """exp(x) is returned; a matmul of x by w and the sum of its rows are computed and
    dropped, as in a model whose function returns an inner activation."""
    def build(b, x, w):
        product = b.matmul(x, w, b.fill(0.0, b.empty(T(4, 3))))
        b.row_sum(product, b.fill(0.0, b.empty(T(4))))
        return exp(b, x)
    return program(function("main", [T(4, 5), T(5, 3)], build))


def test_a_dead_chain_goes_with_what_only_it_reads():
    p = with_a_dead_layer()
    # The sum, its fill and empty, the matmul, its fill and empty.
    assert eliminate_dead_ops(p) == 6
    (f,) = p.functions
    assert kinds(f).count("generic") == 1


@pytest.mark.parametrize("uri", all_device_uris())
def test_a_program_without_its_dead_layer_computes_what_numpy_does(uri):
    seen: list[str] = []
    data = compile_program(with_a_dead_layer(), target=target_for(uri), dump_after="dispatch",
                           dump=seen.append)
    assert "".join(seen).count("= flow.dispatch") == 1
    m = irtk.load(data, device=uri)
    rng = np.random.default_rng()
    x, w = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    np.testing.assert_allclose(m.main(x.astype(np.float32), w.astype(np.float32)), np.exp(x),
                               rtol=1e-5)


def test_effects_failures_and_control_flow_stay():
    def build(b, x, n):
        zero, lb, step = b.index(0), b.index(0), b.index(1)
        b.scalar("arith.divsi", [n, zero], S("index"))         # can fail: stays
        b.op("barrier", [x], [x.type])                         # keeps things apart: stays
        b.op("cast", [x], [T(None)])                           # checks at run time: stays

        def body(bb, iv, acc):
            return [acc]
        b.op("scf.for", [lb, n, step, x], [T(4)], regions=[region([S("index"), T(4)], body)])
        b.scalar("arith.addi", [n, n], S("index"))             # pure and unread: goes
        return exp(b, x)
    p = program(function("main", [T(4), S("index")], build))
    assert eliminate_dead_ops(p) == 1
    (f,) = p.functions
    assert {"arith.divsi", "barrier", "cast", "scf.for"} <= set(kinds(f))
    assert "arith.addi" not in kinds(f)


def test_what_a_kept_loop_reads_stays():
    def build(b, x, n):
        lb, step = b.index(0), b.index(1)
        outer = exp(b, x)                                      # read inside the loop

        def body(bb, iv, acc):
            bb.elementwise([acc], bb.empty(T(4)), [Op("math.log", (0,), "f32")])  # unread
            return [bb.elementwise([acc, outer], bb.empty(T(4)),
                                   [Op("arith.addf", (0, 1), "f32")])]
        loop = b.op("scf.for", [lb, n, step, x], [T(4)],
                    regions=[region([S("index"), T(4)], body)])
        return loop.result
    p = program(function("main", [T(4), S("index")], build))
    assert eliminate_dead_ops(p) == 2                          # the log and its empty
    m = irtk.load(compile_program(p, target="cpu"), device="local-sync")
    x = np.random.default_rng().standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(m.main(x, 3), x + 3 * np.exp(x.astype(np.float64)), rtol=1e-5)
