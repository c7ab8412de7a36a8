"""TIR programs with host work around their dispatches (loops, branches, globals, calls,
reductions, fused matmuls, dynamic shapes), built by hand as the importer would build them,
each with its numpy reference."""
from __future__ import annotations

import numpy as np

from irtk.compiler import tir
from irtk.compiler.kernel import Op
from tests.compiler.tir_build import (S, T, Builder, function, identity, program, projection,
                                      region)

IDX = S("index")


def scaled_add(b: Builder, x: tir.Value, a: tir.Value, scale: float) -> tir.Value:
    """x * scale + a, elementwise (one generic)."""
    out = b.empty(x.type)  # type: ignore[arg-type]
    ops = [Op("arith.constant", (), "f32", float_value=scale), Op("arith.mulf", (0, 3), "f32"),
           Op("arith.addf", (4, 1), "f32")]
    return b.elementwise([x, a], out, ops)


def loop_program(n: int) -> tir.Program:
    """for i < n: x = x * 0.5 + a  (iter_arg tensor), then x + i-independent bias."""
    def build(b: Builder, x0, a):
        lb, ub, step = b.index(0), b.index(n), b.index(1)

        def body(rb: Builder, iv, x):
            return [scaled_add(rb, x, a, 0.5)]
        loop = b.op("scf.for", [lb, ub, step, x0], [x0.type],
                    regions=[region([IDX, x0.type], body)])
        return loop.result
    return program(function("main", [T(6, 5), T(6, 5)], build))


def loop_reference(x: np.ndarray, a: np.ndarray, n: int) -> np.ndarray:
    x = x.astype(np.float64)
    for _ in range(n):
        x = x * 0.5 + a
    return x


def while_program() -> tir.Program:
    """while x[0] < limit: x = x * 2 + a ; the condition is read from the device."""
    def build(b: Builder, x0, a, limit):
        def before(rb: Builder, x):
            first = rb.scalar("tensor.extract", [x, rb.index(0)], S("f32"))
            cond = rb.scalar("arith.cmpf", [first, limit], S("i1"), predicate="olt")
            return [cond, x]

        def after(rb: Builder, x):
            return [scaled_add(rb, x, a, 2.0)]
        loop = b.op("scf.while", [x0], [x0.type],
                    regions=[region([x0.type], before, "scf.condition"),
                             region([x0.type], after)])
        return loop.result
    return program(function("main", [T(8), T(8), S("f32")], build))


def while_reference(x: np.ndarray, a: np.ndarray, limit: float) -> np.ndarray:
    x = x.astype(np.float32)
    while x[0] < limit:
        x = (x * np.float32(2.0) + a).astype(np.float32)
    return x


def if_program() -> tir.Program:
    """x[1] > 0 ? x * 3 + a : x * -1 + a"""
    def build(b: Builder, x, a):
        v = b.scalar("tensor.extract", [x, b.index(1)], S("f32"))
        zero = b.constant(0.0, S("f32"))
        cond = b.scalar("arith.cmpf", [v, zero], S("i1"), predicate="ogt")
        op = b.op("scf.if", [cond], [x.type],
                  regions=[region([], lambda rb: [scaled_add(rb, x, a, 3.0)]),
                           region([], lambda rb: [scaled_add(rb, x, a, -1.0)])])
        return op.result
    return program(function("main", [T(7), T(7)], build))


def global_program() -> tir.Program:
    """@acc += a on every call (a tensor global) and @calls += 1 (a scalar global); returns
    both."""
    acc = tir.Global("acc", T(3, 4), np.arange(12, dtype=np.float32).reshape(3, 4), True)
    calls = tir.Global("calls", S("i32"), 5, True)

    def build(b: Builder, a):
        g = b.op("global.load", [], [acc.type], {"name": "acc"}).result
        out = b.empty(T(3, 4))
        s = b.elementwise([g, a], out, [Op("arith.addf", (0, 1), "f32")])
        b.op("global.store", [s], [], {"name": "acc"})
        c = b.op("global.load", [], [S("i32")], {"name": "calls"}).result
        one = b.constant(1, S("i32"))
        c2 = b.scalar("arith.addi", [c, one], S("i32"))
        b.op("global.store", [c2], [], {"name": "calls"})
        return [s, c2]
    return program(function("accumulate", [T(3, 4)], build), globals=[acc, calls])


def matmul_bias_relu_program(m: int, k: int, n: int) -> tir.Program:
    def build(b: Builder, a, w, bias):
        init = b.fill(0.0, b.empty(T(m, n)))
        mm = b.matmul(a, w, init)
        added = b.generic([mm, bias], [b.empty(T(m, n))],
                          [identity(2), projection(2, (1,)), identity(2)],
                          [Op("arith.addf", (0, 1), "f32")], [3])[0]
        zero = b.constant(0.0, S("f32"))
        return b.elementwise([added], b.empty(T(m, n)),
                             [Op("kernel.param", (), "f32", int_value=0),
                              Op("arith.maximumf", (0, 2), "f32")], captures=[zero])
    return program(function("main", [T(m, k), T(k, n), T(n)], build))


def reduction_program(rows: int, cols: int) -> tir.Program:
    """Row sums plus a constant bias row, and the column maximum of exp(x)."""
    def build(b: Builder, x):
        sums = b.row_sum(x, b.fill(0.0, b.empty(T(rows))))
        bias = b.constant(np.linspace(-1, 1, rows).astype(np.float32), T(rows))
        biased = b.elementwise([sums, bias], b.empty(T(rows)), [Op("arith.addf", (0, 1), "f32")])
        ninf = b.fill(-np.inf, b.empty(T(cols)))
        ops = [Op("math.exp", (0,), "f32"), Op("arith.maximumf", (1, 2), "f32")]
        colmax = b.generic([x], [ninf], [identity(2), projection(2, (1,))], ops, [3],
                           ["reduction", "parallel"])[0]
        return [biased, colmax]
    return program(function("main", [T(rows, cols)], build))


def dynamic_program() -> tir.Program:
    """(x + y) * 2 on tensor<?x4xf32>, the result's dim read from x."""
    def build(b: Builder, x, y):
        n = b.scalar("tensor.dim", [x, b.index(0)], IDX)
        out = b.empty(T(None, 4), n)
        ops = [Op("arith.addf", (0, 1), "f32"), Op("arith.constant", (), "f32", float_value=2.0),
               Op("arith.mulf", (3, 4), "f32")]
        return b.elementwise([x, y], out, ops)
    return program(function("main", [T(None, 4), T(None, 4)], build))


def call_program() -> tir.Program:
    """main calls a private helper twice and adds the results."""
    helper = function("twice_plus", [T(5), T(5)],
                      lambda b, x, a: scaled_add(b, x, a, 2.0), public=False)

    def build(b: Builder, x, a):
        r1 = b.op("call", [x, a], [T(5)], {"callee": "twice_plus"}).result
        r2 = b.op("call", [r1, a], [T(5)], {"callee": "twice_plus"}).result
        return b.elementwise([r1, r2], b.empty(T(5)), [Op("arith.addf", (0, 1), "f32")])
    return program(function("main", [T(5), T(5)], build), helper)
