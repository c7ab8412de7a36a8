"""Common subexpression elimination on TIR: which repeated ops go, which stay, and that the
uses of a dropped op's results move to the op it repeats."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import irtk
from irtk.compiler import cse, tir
from irtk.compiler.cse import MAX_CONSTANT_BYTES, eliminate_common_subexpressions
from irtk.compiler.driver import compile_program
from irtk.compiler.kernel import Op
from tests.compiler.tir_build import S, T, amap, function, identity, program, region
from tests.conftest import all_device_uris, target_for

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"


def kinds(f: tir.Function) -> list[str]:
    return [op.kind for op in tir.walk(f.body)]


def exp(b, x, out=None):
    return b.elementwise([x], out if out is not None else b.empty(x.type),
                         [Op("math.exp", (0,), "f32")])


def twice_summed() -> tir.Program:
    """Two sums of x + y with their own fills and empties, and their product."""
    def build(b, x, y):
        sums = []
        for _ in range(2):
            s = b.elementwise([x, y], b.empty(T(4, 5)), [Op("arith.addf", (0, 1), "f32")])
            sums.append(b.row_sum(s, b.fill(0.0, b.empty(T(4)))))
        return b.elementwise(sums, b.empty(T(4)), [Op("arith.mulf", (0, 1), "f32")])
    return program(function("main", [T(4, 5), T(4, 5)], build))


def test_a_repeated_computation_is_computed_once_and_its_uses_follow():
    p = twice_summed()
    # The second empty, add, empty, fill and sum, and the product's empty (one of T(4)).
    assert eliminate_common_subexpressions(p) == 6
    (f,) = p.functions
    assert kinds(f).count("generic") == 4     # add, fill, sum, product
    product = [op for op in f.body.ops if op.kind == "generic"][-1]
    assert product.operands[0] is product.operands[1]


@pytest.mark.parametrize("uri", all_device_uris())
def test_a_program_after_elimination_computes_what_numpy_does(uri):
    m = irtk.load(compile_program(twice_summed(), target=target_for(uri)), device=uri)
    rng = np.random.default_rng()
    x, y = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    s = (x + y).sum(axis=1)
    np.testing.assert_allclose(m.main(x.astype(np.float32), y.astype(np.float32)), s * s,
                               rtol=1e-5, atol=1e-6)


def test_ops_that_differ_in_an_operand_attribute_or_float_bits_stay():
    def build(b, x, y):
        zero, minus_zero = b.constant(0.0, S("f32")), b.constant(-0.0, S("f32"))
        return [exp(b, x), exp(b, y),                                  # operands differ
                b.fill(0.0, b.empty(T(4))), b.fill(-0.0, b.empty(T(4))),  # bits differ
                b.elementwise([x], b.empty(T(4)), [Op("math.log", (0,), "f32")]),
                b.scalar("arith.addf", [zero, zero], S("f32")),
                b.scalar("arith.addf", [minus_zero, zero], S("f32"))]
    p = program(function("main", [T(4), T(4)], build))
    assert eliminate_common_subexpressions(p) == 4   # the four empties of T(4) after the first
    assert kinds(p.functions[0]).count("generic") == 5


def test_barriers_unfoldable_constants_casts_and_large_constants_stay():
    big = np.arange(MAX_CONSTANT_BYTES // 4 + 1, dtype=np.float32)

    def build(b, x):
        held = [b.op("barrier", [x], [x.type]).result for _ in range(2)]
        unfoldable = [b.constant(np.ones(4, np.float32), T(4), unfoldable=True)
                      for _ in range(2)]
        large = [b.constant(big, T(len(big))) for _ in range(2)]
        cast = [b.op("cast", [x], [T(None)]).result for _ in range(2)]
        return [*held, *unfoldable, *large, *cast]
    p = program(function("main", [T(4)], build))
    assert eliminate_common_subexpressions(p) == 0


def test_an_op_in_a_loop_body_reuses_the_enclosing_one_but_sibling_bodies_do_not_share():
    def build(b, x, n):
        outer = exp(b, x)
        lb, step = b.index(0), b.index(1)

        def body(bb, iv, acc):
            again = exp(bb, x)                     # repeats `outer`: goes
            inner = bb.elementwise([acc, again], bb.empty(T(4)),
                                   [Op("arith.addf", (0, 1), "f32")])
            return [inner]
        loop = b.op("scf.for", [lb, n, step, outer], [T(4)],
                    regions=[region([S("index"), T(4)], body)])
        cond = b.scalar("arith.cmpi", [n, lb], S("i1"), predicate="sgt")

        def branch(bb):
            return [bb.elementwise([x, x], bb.empty(T(4)), [Op("arith.mulf", (0, 1), "f32")])]
        choice = b.op("scf.if", [cond], [T(4)], regions=[region([], branch),
                                                          region([], branch)])
        return [loop.result, choice.result]
    p = program(function("main", [T(4), S("index")], build))
    eliminate_common_subexpressions(p)
    (f,) = p.functions
    loop = next(op for op in f.body.ops if op.kind == "scf.for")
    body_generics = [op for op in loop.regions[0].ops if op.kind == "generic"]
    assert len(body_generics) == 1                    # only the add
    outer = next(op for op in f.body.ops if op.kind == "generic")
    assert body_generics[0].operands[1] is outer.result
    choice = next(op for op in f.body.ops if op.kind == "scf.if")
    assert [[op.kind for op in r.ops].count("generic") for r in choice.regions] == [1, 1]
    m = irtk.load(compile_program(p, target="cpu"), device="local-sync")
    x = np.random.default_rng().standard_normal(4).astype(np.float32)
    looped, chosen = m.main(x, 3)
    np.testing.assert_allclose(looped, 4 * np.exp(x.astype(np.float64)), rtol=1e-5)
    np.testing.assert_allclose(chosen, x.astype(np.float64) ** 2, rtol=1e-6)


def dispatch_count(text: str, filename: str) -> int:
    dumped: list[str] = []
    irtk.compile_str(text, target="cpu", filename=filename, dump_after="dispatch",
                     dump=dumped.append)
    return "".join(dumped).count("= flow.dispatch @")


def test_the_exported_encoder_layer_takes_each_mean_once(monkeypatch):
    path = FIXTURES / "encoder.mlir"
    text = path.read_text()
    with_cse = dispatch_count(text, str(path))
    monkeypatch.setattr(cse, "eliminate_common_subexpressions", lambda program: 0)
    # PyTorch's layer norm sums x in f64 (for the variance) and in f32 (for the mean); in f32
    # the two sums, and the means, are one: one dispatch less per layer norm.
    assert with_cse == dispatch_count(text, str(path)) - 2


def test_a_generic_that_only_copies_its_input_is_its_input():
    def build(b, x):
        copy = b.elementwise([x], b.empty(T(4, 5)), [], yields=0)
        summed = [b.row_sum(v, b.fill(0.0, b.empty(T(4)))) for v in (copy, x)]
        transposed = b.generic([x], [b.empty(T(5, 4))], [identity(2), amap(2, (0, 1, 0),
                                                                          (1, 0, 0))], [], [0])
        return [*summed, transposed[0]]
    p = program(function("main", [T(4, 5)], build))
    eliminate_common_subexpressions(p)
    (f,) = p.functions
    sums = [op for op in f.body.ops if op.kind == "generic"
            and op.attrs["iterator_types"] == ["parallel", "reduction"]]
    assert len(sums) == 1 and sums[0].operands[0] is f.args[0]
    ret = f.body.ops[-1]
    assert ret.operands[0] is ret.operands[1]
    assert kinds(f).count("generic") == 3    # the fill, the sum, the transpose (not a copy)
