"""A numpy interpreter of TIR, for tests only: it runs imported programs, including `generic`s
and `check.*` ops, so that the importer's normalization is checked against the conformance
programs' own expected values.

Generics are evaluated vectorized over all parallel points at once, and sequentially over the
reduction points in lexicographic order (the kernel IR's semantics). Each scalar op computes
what the CPU reference backend computes (tests/op_semantics.py), so its result is rounded or
wrapped to its type; values are held as float64 arrays (floats) and int64 arrays (integers, i1
as 0/1).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from irtk.compiler import kernel, tir
from irtk.hal import numerics
from irtk.types import is_float
from tests.op_semantics import evaluate, value_type


class EvalError(Exception):
    pass


def _dtype(t: str):
    return np.float64 if is_float(t) else np.int64


def from_constant(value, t: tir.Type):
    """A constant's value in the evaluator's representation (an index is 32 bits in a tensor,
    64 in a host scalar)."""
    tensor = isinstance(t, tir.TensorType)
    elt = t.element_type if tensor else t.name  # type: ignore[union-attr]
    a = np.asarray(value, dtype=_dtype(elt))
    return held(elt, numerics.round_to(value_type(elt, "i32" if tensor else "i64"), a))


# ---- scalar ops ------------------------------------------------------------------------------
def held(t: str, value) -> np.ndarray:
    """A value of type `t` in the evaluator's representation (float64, or int64 with i1 as 0/1)."""
    return np.asarray(value).astype(_dtype(t))


def apply(name: str, args: list, types: list[str], rt: str, predicate: str = "",
          int_value: int = 0, float_value: float = 0.0, index: str = "i32"):
    """One arith/math op on numpy arrays (or scalars) of the given operand types, as the CPU
    reference computes it (tests/op_semantics.py); `index` is the type of an MLIR index (i32 in
    kernel bodies, i64 on the host)."""
    result = evaluate(name, args, types, rt, predicate=predicate, int_value=int_value,
                      float_value=float_value, index=index)
    return held(rt, result)


# ---- generics ------------------------------------------------------------------------------------
def loop_ranges(op: tir.Op, shapes: list[tuple[int, ...]]) -> list[int]:
    maps = op.attrs["maps"]
    n = len(op.attrs["iterator_types"])
    n_in = op.attrs["num_inputs"]
    order = list(range(n_in, len(maps))) + list(range(n_in))
    ranges: list[int | None] = [None] * n
    for d in range(n):
        for k in order:
            m = maps[k]
            if m is None:
                continue
            for r, row in enumerate(m.rows):
                if row[d] == 1 and all(c == 0 for j, c in enumerate(row) if j != d):
                    ranges[d] = shapes[k][r]
                    break
            if ranges[d] is not None:
                break
        if ranges[d] is None:
            raise EvalError(f"{op.location}: cannot infer the range of loop {d}")
    return ranges  # type: ignore[return-value]


_COMBINERS = {"arith.addf": np.add, "arith.addi": np.add, "arith.mulf": np.multiply,
              "arith.muli": np.multiply, "arith.maximumf": np.maximum,
              "arith.minimumf": np.minimum, "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin,
              "arith.maxsi": np.maximum, "arith.minsi": np.minimum, "arith.ori": np.bitwise_or,
              "arith.andi": np.bitwise_and}
_CHUNK = 1 << 21   # points evaluated at once


def _dependent(ops: list[kernel.Op], base: int, n_in: int) -> list[bool]:
    """Which body ops depend (transitively) on an output's current value."""
    dep = [False] * len(ops)
    for i, bop in enumerate(ops):
        dep[i] = any((n_in <= v < base) or (v >= base and dep[v - base]) for v in bop.operands)
    return dep


def _combiners(ops, yields, base, n_in, dep) -> list[int] | None:
    """If every yield is `out_k (op) v` with v independent of the outputs and out_k used only
    there, the op index of each combiner; else None (evaluate sequentially)."""
    found = []
    uses: dict[int, int] = {}
    for bop in ops:
        for v in bop.operands:
            uses[v] = uses.get(v, 0) + 1
    for k, y in enumerate(yields):
        if y < base:
            return None
        c = ops[y - base]
        out = n_in + k
        if c.name not in _COMBINERS or len(c.operands) != 2 or out not in c.operands \
                or uses.get(out, 0) != 1 or uses.get(y, 0) != 0:
            return None
        other = c.operands[1] if c.operands[0] == out else c.operands[0]
        if other == out or (other >= base and dep[other - base]) or n_in <= other < base:
            return None
        found.append(y - base)
    return found


def eval_generic(op: tir.Op, operands: list[np.ndarray], reassociate: bool = False) -> list[np.ndarray]:
    """Evaluate a generic. Body ops that do not read an output are computed for many points at
    once; those that do run point by point along the reduction loops, in order (the kernel IR's
    semantics). With `reassociate`, a reduction whose yields are `out (op) v` for one
    associative op is instead summed (maxed, ...) in float64/int64, combined with the output
    once and rounded: the accurate result that a tree reduction approaches."""
    n_in = op.attrs["num_inputs"]
    n_cap = op.attrs["num_captures"]
    n_out = len(op.operands) - n_in - n_cap
    tensors = operands[:n_in + n_out]
    captures = operands[n_in + n_out:]
    maps: list[kernel.AffineMap | None] = op.attrs["maps"]
    types = [v.type.element_type for v in op.operands[:n_in + n_out]]  # type: ignore[union-attr]
    ranges = loop_ranges(op, [t.shape for t in tensors])
    iters = op.attrs["iterator_types"]
    par = [d for d in range(len(ranges)) if iters[d] == "parallel"]
    red = [d for d in range(len(ranges)) if iters[d] == "reduction"]
    outs = [np.array(t, copy=True) for t in tensors[n_in:]]
    if any(r == 0 for r in ranges):
        return outs
    base = n_in + n_out
    ops: list[kernel.Op] = op.attrs["ops"]
    yields: list[int] = op.attrs["yields"]
    dep = _dependent(ops, base, n_in)
    combiners = _combiners(ops, yields, base, n_in, dep) if red and reassociate else None

    def value_type(v: int) -> str:
        return types[v] if v < base else ops[v - base].result_type

    pgrid = [g.reshape(-1) for g in np.indices([ranges[d] for d in par])] if par else []
    npar = int(np.prod([ranges[d] for d in par])) if par else 1
    nred = int(np.prod([ranges[d] for d in red])) if red else 1

    def at(m: kernel.AffineMap, idx, npts):
        return tuple(sum((c * idx[j] for j, c in enumerate(row[:-1]) if c),
                         start=np.int64(row[-1])) * np.ones(npts, dtype=np.int64)
                     for row in m.rows)

    pidx: list[Any] = [None] * len(ranges)
    for j, d in enumerate(par):
        pidx[d] = pgrid[j]
    for d in red:
        pidx[d] = np.zeros(npar, dtype=np.int64)
    out_idx = [at(maps[n_in + k], pidx, npar) for k in range(n_out)]  # type: ignore[arg-type]
    acc: list[Any] = [None] * n_out
    chunk = max(1, min(nred, _CHUNK // npar))
    for r0 in range(0, nred, chunk):
        r1 = min(nred, r0 + chunk)
        c = r1 - r0
        npts = npar * c
        ridx = np.unravel_index(np.arange(r0, r1), [ranges[d] for d in red]) if red else ()
        idx: list[Any] = [None] * len(ranges)
        for j, d in enumerate(par):
            idx[d] = np.repeat(pgrid[j], c)
        for j, d in enumerate(red):
            idx[d] = np.tile(ridx[j], npar)
        vals: list[Any] = []
        for k in range(n_in):
            if maps[k] is None:
                vals.append(None)
            elif maps[k].rows:  # type: ignore[union-attr]
                vals.append(tensors[k][at(maps[k], idx, npts)])  # type: ignore[arg-type]
            else:
                vals.append(np.full(npts, tensors[k][()]))
        vals.extend([None] * n_out)
        for i, bop in enumerate(ops):
            if dep[i]:
                vals.append(None)
                continue
            vals.append(_body_op(op, bop, vals, value_type, idx, captures, tensors, npts))
        if combiners is not None:
            for k, ci in enumerate(combiners):
                cop = ops[ci]
                other = cop.operands[1] if cop.operands[0] == n_in + k else cop.operands[0]
                v = np.asarray(vals[other]).reshape(npar, c)
                part = _COMBINERS[cop.name].reduce(v, axis=1)
                acc[k] = part if acc[k] is None else _COMBINERS[cop.name](acc[k], part)
            continue
        # Sequential part: the ops that read outputs, one reduction point at a time.
        cols = [np.asarray(x).reshape(npar, c) if x is not None else None for x in vals]
        for j in range(c):
            step = [x[:, j] if x is not None else None for x in cols]
            pidx_j = [x.reshape(npar, c)[:, j] if x is not None else None for x in idx]
            for k in range(n_out):
                step[n_in + k] = outs[k][out_idx[k]] if out_idx[k] else \
                    np.full(npar, outs[k][()])
            for i, bop in enumerate(ops):
                if dep[i]:
                    step[base + i] = _body_op(op, bop, step, value_type, pidx_j, captures,
                                              tensors, npar)
            for k, y in enumerate(yields):
                if out_idx[k]:
                    outs[k][out_idx[k]] = step[y]
                else:
                    outs[k][()] = np.asarray(step[y]).reshape(-1)[0]
    if combiners is not None:
        for k, ci in enumerate(combiners):
            cop = ops[ci]
            cur = outs[k][out_idx[k]] if out_idx[k] else outs[k][()]
            t = types[n_in + k]
            total = held(t, numerics.round_to(t, acc[k])) if is_float(t) else acc[k]
            new = apply(cop.name, [cur, total], [t, t], t)
            if out_idx[k]:
                outs[k][out_idx[k]] = new
            else:
                outs[k][()] = np.asarray(new).reshape(-1)[0]
    return outs


def _body_op(op, bop: kernel.Op, vals, value_type, idx, captures, tensors, npts):
    if bop.name == "linalg.index":
        return idx[bop.int_value]
    if bop.name == "kernel.param":
        return np.full(npts, captures[bop.int_value])
    if bop.name == "tensor.extract":
        src = tensors[bop.int_value]
        ind = tuple(np.asarray(vals[v]) * np.ones(npts, dtype=np.int64) for v in bop.operands)
        for i, (x, s) in enumerate(zip(ind, src.shape)):
            if np.any((x < 0) | (x >= s)):
                raise EvalError(f"{op.location}: gather index out of bounds in dim {i}")
        return src[ind]
    r = apply(bop.name, [vals[v] for v in bop.operands], [value_type(v) for v in bop.operands],
              bop.result_type, bop.predicate, bop.int_value, bop.float_value)
    r = np.asarray(r)
    return r if r.shape == (npts,) else r * np.ones(npts, dtype=r.dtype)


# ---- programs --------------------------------------------------------------------------------
@dataclass
class Run:
    failures: list[str] = field(default_factory=list)
    checks: int = 0


class Interpreter:
    def __init__(self, program: tir.Program, reassociate: bool = False) -> None:
        self.program = program
        self.reassociate = reassociate
        self.globals = {g.name: (from_constant(g.initial, g.type) if g.initial is not None
                                 else np.zeros(g.type.shape, _dtype(g.type.element_type)))  # type: ignore[union-attr]
                        for g in program.globals}
        self.run_state = Run()

    def call(self, name: str, args: list) -> list:
        fn = self.program.function(name)
        env = {a.id: v for a, v in zip(fn.args, args)}
        return self.region(fn.body, env) or []

    def region(self, region: tir.Region, env: dict) -> list | None:
        for op in region.ops:
            if op.kind in ("return", "scf.yield", "scf.condition"):
                return [env[v.id] for v in op.operands]
            results = self.op(op, env)
            for r, v in zip(op.results, results):
                env[r.id] = v
        return None

    def op(self, op: tir.Op, env: dict) -> list:
        args = [env[v.id] for v in op.operands]
        k = op.kind
        if k == "constant":
            return [from_constant(op.attrs["value"], op.result.type)]
        if k == "empty":
            t = op.result.type
            dyn = iter(args)
            shape = [d if d is not None else int(next(dyn)) for d in t.shape]  # type: ignore[union-attr]
            # Fresh contents are undefined: poison them so that reading one shows up.
            fill = np.nan if is_float(t.element_type) else -12345  # type: ignore[union-attr]
            return [np.full(shape, fill, dtype=_dtype(t.element_type))]  # type: ignore[union-attr]
        if k == "generic":
            return eval_generic(op, args, self.reassociate)
        if k in ("barrier",):
            return args
        if k == "tie_shape":
            return [args[0]]
        if k == "cast":
            t = op.result.type
            for d, s in zip(t.shape, args[0].shape):  # type: ignore[union-attr]
                if d is not None and d != s:
                    raise EvalError(f"{op.location}: tensor.cast to {t.spelling()} of shape {s}")
            return [args[0]]
        if k == "reshape":
            t = op.result.type
            dyn = iter(args[1:])
            shape = [d if d is not None else int(next(dyn)) for d in t.shape]  # type: ignore[union-attr]
            return [args[0].reshape(shape)]
        if k == "tensor.extract":
            return [args[0][tuple(int(i) for i in args[1:])]]
        if k == "tensor.dim":
            return [np.int64(args[0].shape[int(args[1])])]
        if k == "call":
            return self.call(op.attrs["callee"], args)
        if k == "global.load":
            return [self.globals[op.attrs["name"]]]
        if k == "global.store":
            self.globals[op.attrs["name"]] = args[0]
            return []
        if k.startswith("check."):
            self.check(op, args)
            return []
        if k == "scf.for":
            lb, ub, step = (int(x) for x in args[:3])
            iters = list(args[3:])
            body = op.regions[0]
            for i in range(lb, ub, step):
                env2 = dict(env)
                env2.update({a.id: v for a, v in zip(body.args, [np.int64(i)] + iters)})
                iters = self.region(body, env2)
            return iters
        if k == "scf.if":
            region = op.regions[0] if int(args[0]) else op.regions[1]
            return self.region(region, dict(env)) or []
        if k == "scf.while":
            values = args
            while True:
                env2 = dict(env)
                env2.update({a.id: v for a, v in zip(op.regions[0].args, values)})
                cond, *values = self.region(op.regions[0], env2)
                if not int(cond):
                    return values
                env3 = dict(env)
                env3.update({a.id: v for a, v in zip(op.regions[1].args, values)})
                values = self.region(op.regions[1], env3)
        if k.startswith(("arith.", "math.")):
            types = [v.type.name for v in op.operands]  # type: ignore[union-attr]
            r = apply(k, args, types, op.result.type.name, op.attrs.get("predicate", ""),  # type: ignore[union-attr]
                      index="i64")
            return [np.asarray(r)[()]]
        raise EvalError(f"{op.location}: evaluator lacks TIR op {k}")

    def check(self, op: tir.Op, args: list) -> None:
        self.run_state.checks += 1
        k = op.kind
        fail = None
        if k == "check.expect_true" and int(args[0]) == 0:
            fail = "expected true"
        elif k == "check.expect_false" and int(args[0]) != 0:
            fail = "expected false"
        elif k == "check.expect_all_true" and not np.all(args[0] != 0):
            fail = "expected all true"
        elif k in ("check.expect_eq", "check.expect_almost_eq"):
            lhs, rhs = np.asarray(args[0]), np.asarray(args[1])
            lt, rt = op.operands[0].type, op.operands[1].type
            if lhs.shape != rhs.shape or lt.element_type != rt.element_type:  # type: ignore[union-attr]
                fail = f"shape/type mismatch {lhs.shape} vs {rhs.shape}"
            else:
                same = (lhs == rhs)
                if is_float(lt.element_type):  # type: ignore[union-attr]
                    same |= np.isnan(lhs) & np.isnan(rhs)
                    if k == "check.expect_almost_eq":
                        with np.errstate(invalid="ignore"):
                            same |= np.abs(lhs - rhs) <= op.attrs["atol"] + op.attrs["rtol"] * np.abs(rhs)
                    else:   # bitwise: -0.0 differs from 0.0
                        same &= (np.signbit(lhs) == np.signbit(rhs)) | np.isnan(lhs)
                if not np.all(same):
                    bad = np.argwhere(~same)[0]
                    fail = (f"first mismatch at {tuple(int(i) for i in bad)}: "
                            f"{lhs[tuple(bad)]} vs {rhs[tuple(bad)]}")
        if fail:
            self.run_state.failures.append(f"{op.location}: {k}: {fail}")


def run_function(program: tir.Program, name: str, args: list | None = None,
                 reassociate: bool = False) -> tuple[list, Run]:
    """Run one function; returns its results and the checks' record."""
    interp = Interpreter(program, reassociate)
    results = interp.call(name, list(args or []))
    return results, interp.run_state
