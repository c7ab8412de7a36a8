"""Building TIR programs by hand in tests (what the importer produces from MLIR text)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from irtk.compiler import tir
from irtk.compiler.kernel import AffineMap, Op
from irtk.types import is_float

F32 = "f32"


def T(*shape: int | None, et: str = F32) -> tir.TensorType:
    return tir.TensorType(tuple(shape), et)


def S(name: str) -> tir.ScalarType:
    return tir.ScalarType(name)


def amap(num_dims: int, *rows: Sequence[int]) -> AffineMap:
    """Rows as in kernel.AffineMap: coefficients per loop, then the constant."""
    return AffineMap(num_dims, tuple(tuple(r) for r in rows))


def identity(n: int) -> AffineMap:
    return AffineMap.identity(n)


def projection(n: int, dims: Sequence[int]) -> AffineMap:
    return AffineMap(n, tuple(tuple(1 if j == d else 0 for j in range(n + 1)) for d in dims))


class Builder:
    """Appends ops to a region; `region()` nests a builder for an op's region."""

    def __init__(self, region: tir.Region | None = None, location: str = "test.mlir") -> None:
        self.body = region if region is not None else tir.Region()
        self.location = location
        self.line = 1

    def op(self, kind: str, operands: Sequence[tir.Value] = (), result_types=(),
           attrs: dict | None = None, regions: Sequence[tir.Region] = ()) -> tir.Op:
        self.line += 1
        op = tir.Op(kind, list(operands), [tir.Value(t) for t in result_types], dict(attrs or {}),
                    list(regions), f"{self.location}:{self.line}:3")
        self.body.ops.append(op)
        return op

    def constant(self, value, t: tir.Type, unfoldable: bool = False) -> tir.Value:
        if isinstance(t, tir.TensorType):
            value = np.asarray(value)
        return self.op("constant", [], [t], {"value": value, "unfoldable": unfoldable}).result

    def index(self, value: int) -> tir.Value:
        return self.constant(value, S("index"))

    def empty(self, t: tir.TensorType, *dyn: tir.Value) -> tir.Value:
        return self.op("empty", list(dyn), [t]).result

    def generic(self, ins: Sequence[tir.Value], outs: Sequence[tir.Value],
                maps: Sequence[AffineMap | None], ops: Sequence[Op], yields: Sequence[int],
                iterators: Sequence[str] | None = None,
                captures: Sequence[tir.Value] = ()) -> list[tir.Value]:
        n = (maps[-1] or maps[0]).num_dims
        op = self.op("generic", [*ins, *outs, *captures], [o.type for o in outs],
                     {"num_inputs": len(ins), "num_captures": len(captures), "maps": list(maps),
                      "iterator_types": list(iterators or ["parallel"] * n),
                      "ops": list(ops), "yields": list(yields)})
        return op.results

    def elementwise(self, ins: Sequence[tir.Value], out: tir.Value, ops: Sequence[Op],
                    yields: int | None = None, captures: Sequence[tir.Value] = ()) -> tir.Value:
        rank = len(out.type.shape)  # type: ignore[union-attr]
        n = len(ins) + 1 + len(ops) - 1
        return self.generic(ins, [out], [identity(rank)] * (len(ins) + 1), ops,
                            [n if yields is None else yields], captures=captures)[0]

    def fill(self, value: float, out: tir.Value) -> tir.Value:
        et = out.type.element_type  # type: ignore[union-attr]
        const = Op("arith.constant", (), et, float_value=value) if is_float(et) \
            else Op("arith.constant", (), et, int_value=int(value))
        rank = len(out.type.shape)  # type: ignore[union-attr]
        return self.generic([], [out], [identity(rank)], [const], [1])[0]

    def matmul(self, a: tir.Value, b: tir.Value, c: tir.Value) -> tir.Value:
        """C[i, j] += A[i, k] * B[k, j], loops (i, j, k)."""
        maps = [projection(3, (0, 2)), projection(3, (2, 1)), projection(3, (0, 1))]
        ops = [Op("arith.mulf", (0, 1), F32), Op("arith.addf", (2, 3), F32)]
        return self.generic([a, b], [c], maps, ops, [4],
                            ["parallel", "parallel", "reduction"])[0]

    def row_sum(self, x: tir.Value, acc: tir.Value) -> tir.Value:
        """acc[i] += x[i, j]."""
        ops = [Op("arith.addf", (0, 1), F32)]
        return self.generic([x], [acc], [identity(2), projection(2, (0,))], ops, [2],
                            ["parallel", "reduction"])[0]

    def scalar(self, kind: str, operands: Sequence[tir.Value], t: tir.Type,
               **attrs) -> tir.Value:
        return self.op(kind, operands, [t], attrs).result

    def ret(self, *values: tir.Value) -> None:
        self.op("return", values)


def function(name: str, arg_types: Sequence[tir.Type], build, public: bool = True,
             location: str = "test.mlir") -> tir.Function:
    """`build(builder, *args)` fills the body and returns the result values (or None)."""
    args = [tir.Value(t) for t in arg_types]
    b = Builder(location=location)
    results = build(b, *args) or []
    if not isinstance(results, (list, tuple)):
        results = [results]
    b.ret(*results)
    return tir.Function(name, args, [r.type for r in results], b.body, public,
                        f"{location}:1:1")


def region(arg_types: Sequence[tir.Type], build, terminator: str = "scf.yield"
           ) -> tir.Region:
    """A nested region whose `build(builder, *args)` returns the values its terminator passes."""
    r = tir.Region([tir.Value(t) for t in arg_types])
    b = Builder(r)
    values = build(b, *r.args) or []
    b.op(terminator, values)
    return r


def program(*functions: tir.Function, globals: Sequence[tir.Global] = ()) -> tir.Program:
    return tir.Program(list(functions), list(globals), "test.mlir")
