"""Dispatch formation: which generics fuse into one dispatch, what the kernels hold, and what
stops fusion (barriers, unfoldable constants, region boundaries)."""
from __future__ import annotations

import numpy as np
import pytest

import irtk
from irtk.compiler import tir
from irtk.compiler.driver import compile_program
from irtk.compiler.constants import fill_pattern
from irtk.compiler.dispatch import form_dispatches
from irtk.compiler.kernel import AffineMap, Op
from tests.compiler.tir_build import S, T, amap, function, identity, program, projection, region
from tests.conftest import all_device_uris, target_for
from tests.e2e import host_programs as P


def dispatches(f: tir.Function) -> list[tir.Op]:
    return [op for op in tir.walk(f.body) if op.kind == "dispatch"]


def formed(*functions: tir.Function) -> tir.Program:
    p = program(*functions)
    form_dispatches(p)
    return p


def exp_op(v: int = 0) -> Op:
    return Op("math.exp", (v,), "f32")


def test_elementwise_chain_through_a_transpose_is_one_dispatch():
    def build(b, x, y):
        t = b.generic([x], [b.empty(T(3, 2))], [amap(2, (0, 1, 0), (1, 0, 0)), identity(2)],
                      [exp_op()], [2])[0]            # t[i, j] = exp(x[j, i])
        return b.elementwise([t, y], b.empty(T(3, 2)), [Op("arith.addf", (0, 1), "f32")])
    (f,) = formed(function("main", [T(2, 3), T(3, 2)], build)).functions
    (d,) = dispatches(f)
    k = d.attrs["kernel"]
    assert k.loop_ranges == (3, 2)
    # Inputs: y (identity), then x read through the producer's transpose.
    assert d.operands[:2] == [f.args[1], f.args[0]]
    assert [i.map.rows for i in k.inputs] == [((1, 0, 0), (0, 1, 0)), ((0, 1, 0), (1, 0, 0))]
    assert sorted(op.name for op in k.ops) == ["arith.addf", "math.exp"]


def test_a_producer_with_two_users_becomes_a_second_output():
    def build(b, x):
        e = b.elementwise([x], b.empty(T(4)), [exp_op()])
        one = b.constant(1.0, S("f32"))
        u = b.elementwise([e], b.empty(T(4)), [Op("kernel.param", (), "f32"),
                                                Op("arith.addf", (0, 2), "f32")], captures=[one])
        return [e, u]
    (f,) = formed(function("main", [T(4)], build)).functions
    (d,) = dispatches(f)
    k = d.attrs["kernel"]
    assert len(k.outputs) == 2 and k.params == ()
    assert [op.name for op in k.ops] == ["math.exp", "arith.constant", "arith.addf"]
    assert k.ops[1].float_value == 1.0


def test_matmul_bias_relu_fuses_with_its_fill():
    (f,) = P.matmul_bias_relu_program(4, 3, 5).functions
    form_dispatches(program(f))
    (d,) = dispatches(f)
    k = d.attrs["kernel"]
    assert k.name == "main_dispatch_0_contraction"
    assert k.iterator_types == ("parallel", "parallel", "reduction")
    assert len(k.outputs) == 2 and d.attrs["fills"] == [0.0, None]
    assert d.attrs["reads_init"] == [True, False]
    assert [op.name for op in k.ops] == ["arith.mulf", "arith.addf", "arith.addf",
                                         "arith.constant", "arith.maximumf"]
    k.validate()


def test_fill_used_elsewhere_stays_a_dispatch():
    def build(b, x):
        z = b.fill(0.0, b.empty(T(4)))
        s = b.row_sum(x, z)
        return [s, z]
    (f,) = formed(function("main", [T(4, 6)], build)).functions
    ds = dispatches(f)
    assert len(ds) == 2
    assert ds[1].attrs["fills"] == [0.0]


def test_barrier_stops_fusion():
    def build(b, x):
        e = b.elementwise([x], b.empty(T(4)), [exp_op()])
        (held,) = b.op("barrier", [e], [T(4)]).results
        return b.elementwise([held], b.empty(T(4)), [exp_op()])
    (f,) = formed(function("main", [T(4)], build)).functions
    assert len(dispatches(f)) == 2


def test_constants_inline_unless_unfoldable_or_not_splat():
    def build(b, x):
        splat = b.constant(np.full(4, 2.5, np.float32), T(4))
        hidden = b.constant(np.full(4, 3.5, np.float32), T(4), unfoldable=True)
        table = b.constant(np.arange(4, dtype=np.float32), T(4))
        r = b.elementwise([x, splat, hidden, table], b.empty(T(4)),
                          [Op("arith.addf", (0, 1), "f32"), Op("arith.addf", (5, 2), "f32"),
                           Op("arith.addf", (6, 3), "f32")])
        return r
    (f,) = formed(function("main", [T(4)], build)).functions
    (d,) = dispatches(f)
    k = d.attrs["kernel"]
    assert len(k.inputs) == 3       # x, the unfoldable constant, the table
    consts = [op for op in k.ops if op.name == "arith.constant"]
    assert [c.float_value for c in consts] == [2.5]


def test_host_scalar_capture_becomes_a_param():
    def build(b, x, s):
        return b.elementwise([x], b.empty(T(4)), [Op("kernel.param", (), "f32"),
                                                   Op("arith.mulf", (0, 2), "f32")],
                             captures=[s])
    (f,) = formed(function("main", [T(4), S("f32")], build)).functions
    (d,) = dispatches(f)
    assert [(p.name, p.type) for p in d.attrs["kernel"].params] == [("p0", "f32")]
    assert d.operands[-1] is f.args[1]


def test_dynamic_extents_become_index_params_read_on_the_host():
    (f,) = P.dynamic_program().functions
    form_dispatches(program(f))
    (d,) = dispatches(f)
    k = d.attrs["kernel"]
    assert k.loop_ranges == ("p0", 4)
    assert [o.shape for o in k.inputs + k.outputs] == [("p0", 4)] * 3
    (dim,) = [op for op in f.body.ops if op.kind == "tensor.dim" and op.results[0] is
              d.operands[-1]]
    assert dim.operands[0] is f.args[0]


def test_generics_in_loop_bodies_fuse_within_their_region():
    (f,) = P.loop_program(3).functions
    form_dispatches(program(f))
    loop = [op for op in f.body.ops if op.kind == "scf.for"][0]
    assert [op.kind for op in loop.regions[0].ops].count("dispatch") == 1


def test_kernel_names_are_unique_across_functions():
    def build(b, x):
        return b.elementwise([x], b.empty(T(4)), [exp_op()])
    p = formed(function("f", [T(4)], build), function("g", [T(4)], build))
    names = [d.attrs["kernel"].name for f in p.functions for d in dispatches(f)]
    assert names == ["f_dispatch_0_elementwise", "g_dispatch_0_elementwise"]


def test_a_function_that_cannot_form_dispatches_is_recorded_not_fatal():
    def bad(b, x):
        # A broadcast output with no input fixing loop 1's extent: ranges cannot be inferred.
        return b.generic([x], [b.empty(T(4))], [projection(2, (0,)), projection(2, (0,))],
                         [exp_op()], [2])[0]
    good = function("good", [T(4)], lambda b, x: b.elementwise([x], b.empty(T(4)), [exp_op()]))
    p = formed(function("bad", [T(4)], bad), good)
    assert [f.name for f in p.functions] == ["good"]
    assert p.unsupported["bad"].startswith("test.mlir:")
    assert "cannot infer the loop ranges" in p.unsupported["bad"]


def test_fill_patterns():
    assert fill_pattern("f32", 1.0) == (0x3F800000, 4)
    assert fill_pattern("i8", -1) == (0xFF, 1)
    assert fill_pattern("i1", 1) == (1, 1)
    assert fill_pattern("f64", 0.0) == (0, 4)
    assert fill_pattern("f64", 1.0) is None
    assert fill_pattern("i64", -1) == (0xFFFFFFFF, 4)
    assert fill_pattern("f16", 1.0) == (0x3C00, 2)


def test_region_helper_builds_terminators():
    r = region([S("index")], lambda b, i: [])
    assert r.ops[-1].kind == "scf.yield"
    assert isinstance(identity(1), AffineMap)


def test_only_cheap_producers_fuse_into_reductions():
    def build(b, x, y):
        cheap = b.elementwise([x], b.empty(T(4, 6)), [exp_op()])
        costly = b.elementwise([y], b.empty(T(4, 6)),
                               [exp_op(), Op("math.tanh", (2,), "f32"), exp_op(3)])
        s1 = b.row_sum(cheap, b.fill(0.0, b.empty(T(4))))
        s2 = b.row_sum(costly, b.fill(0.0, b.empty(T(4))))
        return [s1, s2]
    (f,) = formed(function("main", [T(4, 6), T(4, 6)], build)).functions
    kinds = [d.attrs["kernel"].iterator_types for d in dispatches(f)]
    assert kinds == [("parallel", "parallel"), ("parallel", "reduction"),
                     ("parallel", "reduction")]


def test_loop_extents_survive_fusing_away_the_operand_that_gave_them():
    """insert_slice(strided) of exp(extract_slice(strided)): after fusion no operand indexes
    the loops directly, yet the kernel keeps the 3x3 loop nest."""
    def build(b, x, dest):
        e = b.generic([x], [b.empty(T(3, 3))], [amap(2, (2, 0, 1), (0, 3, 2)), identity(2)],
                      [exp_op()], [2])[0]
        return b.generic([e], [dest], [identity(2), amap(2, (2, 0, 1), (0, 3, 2))],
                         [], [0])[0]
    (f,) = formed(function("main", [T(8, 12), T(8, 12)], build)).functions
    (d,) = dispatches(f)
    k = d.attrs["kernel"]
    assert k.loop_ranges == (3, 3)
    assert [i.map.rows for i in k.inputs] == [((2, 0, 1), (0, 3, 2))]


def reshape(b, v, shape, groups):
    return b.op("reshape", [v], [T(*shape)], {"reassociation": groups}).result


def reshape_chains():
    """Three functions with an elementwise producer behind reshapes: through a unit-dim
    collapse into a matmul, through an expand into an add, and through a collapse of two
    non-unit dims (div and mod: not linear, so no fusion)."""
    def into_matmul(b, x, w):
        t = b.generic([x], [b.empty(T(4, 1, 3))], [amap(3, (0, 1, 0, 0), (1, 0, 0, 0),
                                                         (0, 0, 1, 0)), identity(3)],
                      [], [0])[0]                     # t[i, 0, k] = x[0, i, k]
        a = reshape(b, t, (4, 3), [[0], [1, 2]])
        return b.matmul(a, w, b.fill(0.0, b.empty(T(4, 5))))

    def through_expand(b, x, y):
        e = b.elementwise([x], b.empty(T(6)), [exp_op()])
        r = reshape(b, e, (2, 3), [[0, 1]])
        return b.elementwise([r, y], b.empty(T(2, 3)), [Op("arith.addf", (0, 1), "f32")])

    def through_collapse(b, x, y):
        e = b.elementwise([x], b.empty(T(2, 3)), [exp_op()])
        r = reshape(b, e, (6,), [[0, 1]])
        return b.elementwise([r, y], b.empty(T(6)), [Op("arith.addf", (0, 1), "f32")])
    return program(function("into_matmul", [T(1, 4, 3), T(3, 5)], into_matmul),
                   function("through_expand", [T(6), T(2, 3)], through_expand),
                   function("through_collapse", [T(2, 3), T(6)], through_collapse))


def test_producers_fuse_through_linear_reshapes():
    p = reshape_chains()
    form_dispatches(p)
    into_matmul, through_expand, through_collapse = p.functions
    (d,) = dispatches(into_matmul)
    assert not [op for op in into_matmul.body.ops if op.kind == "reshape"]
    k = d.attrs["kernel"]
    assert k.loop_ranges == (4, 5, 3)
    # x[0, i, k] read straight from the argument: the transpose and the collapse composed.
    (i,) = [n for n, v in enumerate(d.operands[:len(k.inputs)]) if v is into_matmul.args[0]]
    assert k.inputs[i].map.rows == ((0, 0, 0, 0), (1, 0, 0, 0), (0, 0, 1, 0))
    (d,) = dispatches(through_expand)
    assert d.operands[:2] == [through_expand.args[1], through_expand.args[0]]
    assert d.attrs["kernel"].inputs[1].map.rows == ((3, 1, 0),)   # x[3 i + j]
    assert len(dispatches(through_collapse)) == 2
    assert [op.kind for op in through_collapse.body.ops].count("reshape") == 1


def test_a_reshape_with_another_user_stays():
    def build(b, x, y):
        e = b.elementwise([x], b.empty(T(6)), [exp_op()])
        r = reshape(b, e, (2, 3), [[0, 1]])
        s = b.elementwise([r, y], b.empty(T(2, 3)), [Op("arith.addf", (0, 1), "f32")])
        return [s, r]
    (f,) = formed(function("main", [T(6), T(2, 3)], build)).functions
    assert len(dispatches(f)) == 2
    assert [op.kind for op in f.body.ops].count("reshape") == 1


@pytest.mark.parametrize("uri", all_device_uris())
def test_fusion_through_reshapes_computes_what_numpy_does(uri):
    m = irtk.load(compile_program(reshape_chains(), target=target_for(uri)), device=uri)
    rng = np.random.default_rng()
    x, w = rng.standard_normal((1, 4, 3)), rng.standard_normal((3, 5))
    got = m.into_matmul(x.astype(np.float32), w.astype(np.float32))
    np.testing.assert_allclose(got, x[0] @ w, rtol=1e-5, atol=1e-5)
    x6, y = rng.standard_normal(6), rng.standard_normal((2, 3))
    got = m.through_expand(x6.astype(np.float32), y.astype(np.float32))
    np.testing.assert_allclose(got, np.exp(x6).reshape(2, 3) + y, rtol=1e-5, atol=1e-6)
    got = m.through_collapse(y.astype(np.float32), x6.astype(np.float32))
    np.testing.assert_allclose(got, np.exp(y).reshape(6) + x6, rtol=1e-5, atol=1e-6)


def normalized_square(returns_square: bool = False, math: bool = False) -> tir.Program:
    """e = x * x; e / rowsum(e) (and e itself too); with `math` e = exp(x) instead."""
    def build(b, x):
        e = b.elementwise([x], b.empty(T(4, 6)),
                          [exp_op() if math else Op("arith.mulf", (0, 0), "f32")])
        s = b.row_sum(e, b.fill(0.0, b.empty(T(4))))
        q = b.generic([e, s], [b.empty(T(4, 6))], [identity(2), projection(2, (0,)), identity(2)],
                      [Op("arith.divf", (0, 1), "f32")], [3])[0]
        return [q, e] if returns_square else q
    return program(function("main", [T(4, 6)], build))


def test_a_cheap_producer_that_only_generics_read_is_recomputed_in_each():
    (f,) = formed(*normalized_square().functions).functions
    ds = dispatches(f)
    assert [d.attrs["kernel"].iterator_types for d in ds] == [("parallel", "reduction"),
                                                              ("parallel", "parallel")]
    assert all(any(v is f.args[0] for v in d.operands) for d in ds)   # both read x itself
    assert all("arith.mulf" in [op.name for op in d.attrs["kernel"].ops] for d in ds)


def test_a_producer_with_a_use_outside_generics_or_a_math_op_is_not_recomputed():
    (f,) = formed(*normalized_square(returns_square=True).functions).functions
    assert len(dispatches(f)) == 3
    (f,) = formed(*normalized_square(math=True).functions).functions
    assert len(dispatches(f)) == 3


@pytest.mark.parametrize("uri", all_device_uris())
def test_a_recomputed_producer_computes_what_numpy_does(uri):
    m = irtk.load(compile_program(normalized_square(), target=target_for(uri)), device=uri)
    x = np.random.default_rng().standard_normal((4, 6))
    e = x * x
    np.testing.assert_allclose(m.main(x.astype(np.float32)), e / e.sum(axis=1, keepdims=True),
                               rtol=1e-5, atol=1e-7)


def scaled_matmul() -> tir.Program:
    """(x @ w) * s[None, :], with s a constant reshaped to 1x3 after the matmul (as an exported
    batch norm reshapes its per-channel constants after the convolution)."""
    def build(b, x, w):
        y = b.matmul(x, w, b.fill(0.0, b.empty(T(2, 3))))
        s = b.constant(np.array([0.5, -2.0, 3.0], np.float32), T(3))
        s2 = b.op("reshape", [s], [T(1, 3)], {"reassociation": [[0, 1]]}).result
        return b.generic([y, s2], [b.empty(T(2, 3))],
                         [identity(2), amap(2, (0, 0, 0), (0, 1, 0)), identity(2)],
                         [Op("arith.mulf", (0, 1), "f32")], [3])[0]
    return program(function("main", [T(2, 4), T(4, 3)], build))


def test_a_consumer_reading_a_later_reshape_of_a_constant_fuses_and_the_reshape_moves_up():
    (f,) = formed(*scaled_matmul().functions).functions
    (d,) = dispatches(f)
    kinds = [op.kind for op in f.body.ops]
    assert kinds.index("reshape") < kinds.index("dispatch")
    assert kinds.index("constant") < kinds.index("reshape")


@pytest.mark.parametrize("uri", all_device_uris())
def test_a_fused_consumer_of_a_hoisted_reshape_computes_what_numpy_does(uri):
    m = irtk.load(compile_program(scaled_matmul(), target=target_for(uri)), device=uri)
    rng = np.random.default_rng()
    x, w = rng.standard_normal((2, 4)), rng.standard_normal((4, 3))
    np.testing.assert_allclose(m.main(x.astype(np.float32), w.astype(np.float32)),
                               (x @ w) * np.array([0.5, -2.0, 3.0]), rtol=1e-5, atol=1e-6)
