"""Buffer planning: how each dispatch output gets its initial value, and which transients share
a buffer."""
from __future__ import annotations

import numpy as np

from irtk.compiler import tir
from irtk.compiler.dispatch import form_dispatches
from irtk.compiler.kernel import Op
from irtk.compiler.stream import plan_function
from tests.compiler.tir_build import T, function, identity, program, projection


def planned(build, arg_types):
    f = function("main", arg_types, build)
    form_dispatches(program(f))
    return f, plan_function(f)


def dispatches(f: tir.Function) -> list[tir.Op]:
    return [op for op in tir.walk(f.body) if op.kind == "dispatch"]


def accumulate(b, x, acc):
    """acc[i] += x[i, j] (reads its init)."""
    return b.row_sum(x, acc)


def exp(b, x):
    return b.elementwise([x], b.empty(x.type), [Op("math.exp", (0,), "f32")])


def held(b, v):
    """An optimization barrier: keeps the dispatches on both sides apart."""
    return b.op("barrier", [v], [v.type]).result


def test_output_modes():
    def build(b, x, acc_arg):
        cst = b.constant(np.arange(4, dtype=np.float32), T(4))
        from_arg = accumulate(b, x, acc_arg)                  # argument init: copy
        from_const = accumulate(b, x, cst)                    # constant init: copy
        zeroed = accumulate(b, x, b.empty(T(4)))              # empty init, read: zero
        filled = accumulate(b, x, b.fill(1.0, b.empty(T(4))))  # fused fill
        fresh = held(b, accumulate(b, x, b.empty(T(4))))
        again = accumulate(b, x, fresh)                       # barrier result: copy
        inner = b.generic([x], [b.empty(T(4))], [identity(2), projection(2, (0,))],
                          [Op("arith.addf", (0, 1), "f32")], [2],
                          ["parallel", "reduction"])[0]
        chained = accumulate(b, x, inner)                     # dead dispatch result: in place
        return [from_arg, from_const, zeroed, filled, again, chained]
    f, plan = planned(build, [T(4, 3), T(4)])
    modes = [plan.output(d, 0).mode for d in dispatches(f)]
    assert modes == ["copy", "copy", "zero", "fill", "zero", "copy", "zero", "inplace"]
    ds = dispatches(f)
    assert plan.storage[ds[-1].results[0].id] == plan.storage[ds[-2].results[0].id]


def test_elementwise_outputs_that_cover_their_init_need_no_initial_value():
    def build(b, x, y):
        return b.elementwise([x], y, [Op("math.exp", (0,), "f32")])
    f, plan = planned(build, [T(4), T(4)])
    assert plan.output(dispatches(f)[0], 0).mode == "alloc"


def test_dead_transients_lend_their_buffers():
    def build(b, x):
        a = held(b, exp(b, x))
        c = held(b, exp(b, a))          # a dies here
        d = held(b, exp(b, c))          # may take a's buffer
        e = held(b, exp(b, d))          # may take c's buffer
        return e
    f, plan = planned(build, [T(8)])
    ds = dispatches(f)
    storages = [plan.storage[d.results[0].id] for d in ds]
    assert plan.output(ds[2], 0).reuse == storages[0]
    assert plan.output(ds[3], 0).reuse == storages[1]
    assert storages[2] == storages[0] and storages[3] == storages[1]


def test_kept_values_are_never_lent():
    def build(b, x):
        a = held(b, exp(b, x))
        c = held(b, exp(b, a))
        d = held(b, exp(b, c))
        return [a, d]                   # a is returned: its buffer stays a's
    f, plan = planned(build, [T(8)])
    ds = dispatches(f)
    assert plan.output(ds[2], 0).reuse is None
    assert len({plan.storage[d.results[0].id] for d in ds}) == 3


def test_different_sizes_do_not_share():
    def build(b, x, y):
        a = held(b, exp(b, x))
        c = held(b, exp(b, a))
        return held(b, exp(b, y)), c
    f, plan = planned(build, [T(8), T(9)])
    assert all(plan.output(d, 0).reuse is None for d in dispatches(f))
