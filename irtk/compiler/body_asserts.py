"""`cf.assert` in a generic body, as a check that can fail the call.

A device kernel cannot fail a call, and irtk does not drop a check that can fire (PyTorch's
`nn.Embedding` asserts that each index is in range, BatchNorm that the variance is not
negative). So a generic whose body asserts `cond` gains one i1 output per assert
(`assert_outputs`): at each point of its parallel loops, `cond` and-ed over its reduction
loops. For constant generics, constant evaluation reads those outputs when compiling
(consteval.py). For the rest (`lower_data_asserts`), a reduction generic and-s each output
down to one i1, the host reads it (`tensor.extract`) and a host `cf.assert` with the body's
message fails the call when it is false: the check costs one byte per point, a reduction and
a one-byte read, placed at the end of the function (or loop body), where the host waits for
the device anyway.
"""
from __future__ import annotations

import numpy as np

from irtk.compiler import kernel, tir
from irtk.errors import CompileError

Check = tuple[tir.Value, str, str]   # (i1 output of the generic, message, location)

_I1 = tir.ScalarType("i1")
_INDEX = tir.ScalarType("index")


def assert_outputs(g: tir.Op, checks: list[Check]) -> list[tir.Op]:
    """Give generic `g` one i1 output per body assert, appended to `checks`; returns the ops
    that make the outputs' initial values (to go before `g`). With only parallel loops each
    point's condition is written to an `empty`; with reduction loops it is and-ed into an
    all-true constant, which needs a static shape (CompileError otherwise)."""
    asserts = g.attrs.pop("asserts")
    ni = g.attrs["num_inputs"]
    no = len(g.results)
    k = len(asserts)
    base = ni + no
    parallel = all(t == "parallel" for t in g.attrs["iterator_types"])

    def shift(x: int) -> int:
        return x + k if x >= base else x

    ops = [kernel.Op(o.name, tuple(shift(a) for a in o.operands), o.result_type, o.predicate,
                     o.int_value, o.float_value) for o in g.attrs["ops"]]
    yields = [shift(y) for y in g.attrs["yields"]]
    first = g.results[0].tensor_type
    ok_type = tir.TensorType(first.shape, "i1")
    inits: list[tir.Op] = []
    init_values: list[tir.Value] = []
    for j, (cond, message, location) in enumerate(asserts):
        if parallel:
            yields.append(shift(cond))
            inits += _empty_like(g.operands[ni], ok_type, g.location)
        elif first.is_static:
            ops.append(kernel.Op("arith.andi", (base + j, shift(cond)), "i1"))
            yields.append(base + k + len(ops) - 1)
            inits.append(tir.Op("constant", [], [tir.Value(ok_type)],
                                {"value": np.ones(first.static_shape, np.int8),
                                 "unfoldable": False}, location=g.location))
        else:
            raise CompileError(
                f"{location}: error: cf.assert (\"{message}\") in the body of a reduction with "
                f"a dynamic result shape ({first.spelling()}) is not supported: a device "
                "kernel cannot fail the call, and irtk does not drop a check that can fire")
        init_values.append(inits[-1].result)   # the empty or the constant, made last
        result = tir.Value(ok_type)
        g.results.append(result)
        checks.append((result, message, location))
    at = ni + no
    g.operands[at:at] = init_values
    g.attrs["maps"] = list(g.attrs["maps"]) + [g.attrs["maps"][ni]] * k
    g.attrs["ops"], g.attrs["yields"] = ops, yields
    return inits


def _empty_like(like: tir.Value, t: tir.TensorType, location: str) -> list[tir.Op]:
    """Ops making an `empty` of type `t`, its dynamic dims read from `like` (same shape)."""
    made: list[tir.Op] = []
    dims = []
    for d in t.dynamic_dims:
        c = tir.Op("constant", [], [tir.Value(_INDEX)], {"value": d, "unfoldable": False},
                   location=location)
        dim = tir.Op("tensor.dim", [like, c.result], [tir.Value(_INDEX)], location=location)
        made += [c, dim]
        dims.append(dim.result)
    made.append(tir.Op("empty", dims, [tir.Value(t)], location=location))
    return made


def lower_data_asserts(f: tir.Function) -> None:
    """Every generic of `f` that still has body asserts gets its checks on the host."""
    _lower_region(f.body)


_TERMINATORS = ("return", "scf.yield", "scf.condition")


def _lower_region(region: tir.Region) -> None:
    """The checks go at the end of the region, before its terminator: reading the flag waits
    for the device, and there the call (or loop iteration) waits for its results anyway."""
    ops: list[tir.Op] = []
    host: list[tir.Op] = []
    for op in region.ops:
        for r in op.regions:
            _lower_region(r)
        if op.kind != "generic" or not op.attrs.get("asserts"):
            ops.append(op)
            continue
        checks: list[Check] = []
        ops += assert_outputs(op, checks)
        ops.append(op)
        for ok, message, location in checks:
            host += _host_check(ok, message, location)
    at = len(ops) - 1 if ops and ops[-1].kind in _TERMINATORS else len(ops)
    region.ops[:] = ops[:at] + host + ops[at:]


def _host_check(ok: tir.Value, message: str, location: str) -> list[tir.Op]:
    """Ops that and `ok` (i1 tensor) down to a scalar and assert it on the host."""
    t = ok.tensor_type
    made: list[tir.Op] = []
    if t.shape:
        n = len(t.shape)
        scalar_t = tir.TensorType((), "i1")
        init = tir.Op("constant", [], [tir.Value(scalar_t)],
                      {"value": np.ones((), np.int8), "unfoldable": False}, location=location)
        reduce = tir.Op("generic", [ok, init.result], [tir.Value(scalar_t)],
                        {"num_inputs": 1, "num_captures": 0,
                         "maps": [kernel.AffineMap.identity(n), kernel.AffineMap(n, ())],
                         "iterator_types": ["reduction"] * n,
                         "ops": [kernel.Op("arith.andi", (0, 1), "i1")], "yields": [2]},
                        location=location)
        made += [init, reduce]
        ok = reduce.result
    read = tir.Op("tensor.extract", [ok], [tir.Value(_I1)], location=location)
    made += [read, tir.Op("cf.assert", [read.result], [], {"message": message},
                          location=location)]
    return made
