"""Constant evaluation: what depends only on constants is computed once, when compiling.

As IREE's const-eval does, a generic that reads only constants (BatchNorm's
`1 / sqrt(var + eps)`, a transposed weight) is run at compile time and replaced by a
`constant`, so a call runs only what depends on its inputs. The constant expressions are
gathered into a small program of their own, compiled for the CPU target and run on the
local-sync driver: irtk's reference implementation, so a folded value is exactly what the
program would compute on the CPU driver (IREE also runs its const-eval programs on its own
CPU runtime).

Which values are folded: a value is constant when a `constant` (not `unfoldable`), an `empty`
or a `generic`/`reshape` whose operands are all constant defines it. Where a constant value is
used by an op that is not (a dispatch that reads the call's inputs, a return), the generic
that computes it is evaluated, unless its result is larger than the tensor constants it is
computed from (a broadcast, or a fill, which reads none: IREE's const-eval skips those too,
since folding would grow the module rather than save work); then its own operands are
considered instead. One exception: a broadcast of at most `HOST_INIT_BYTES` whose every use is
as the initial value of another generic's output (an exported convolution accumulating onto its
bias) is folded, since the host then writes it into the output's new buffer as it allocates it
(host_dispatch.py), as it does a small fill, and the call saves a dispatch; the module grows by
at most that much. A `reshape` stays where it is (it is free) and its source is considered.

Body asserts: a `cf.assert` in a generic body that the front end could not prove is recorded
on its generic (`attrs["asserts"]`). A generic that reads only constants is always evaluated,
its asserts with it (each becomes an i1 output, and-reduced over reduction loops:
body_asserts.py); one that fails is a located error. A generic that still has asserts
afterwards reads the call's data: its asserts become host checks that fail the call.
"""
from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable

import numpy as np

from irtk.compiler import tir
from irtk.compiler.body_asserts import assert_outputs, lower_data_asserts
from irtk.compiler.constants import HOST_INIT_BYTES
from irtk.compiler.frontend.convert import constant_dtype
from irtk.errors import CompileError, Error
from irtk.runtime import load
from irtk.types import SCALAR_TYPES

log = logging.getLogger("irtk.compiler")

_PURE = ("constant", "empty", "generic", "reshape")


# Compiles a constant-evaluation program for the CPU target (the driver's compile_program).
CompileCpu = Callable[[tir.Program], bytes]


def evaluate_constants(program: tir.Program, compile_cpu: CompileCpu, fold: bool = True
                       ) -> None:
    """Fold every function's constant expressions (in place), then give the generics whose
    asserts depend on a call's data their checks on the host (body_asserts.py). With `fold=False` only the asserts of constant generics
    are evaluated (and checked); every value is still computed at run time. A function that
    fails moves to `program.unsupported`."""
    for f in list(program.functions):
        try:
            _FunctionEvaluator(f, compile_cpu).run(fold)
            lower_data_asserts(f)
        except CompileError as e:
            program.unsupported[f.name] = str(e)
            program.failed[f.name] = f
            program.functions.remove(f)


class _FunctionEvaluator:
    """Constant evaluation in one function."""

    def __init__(self, function: tir.Function, compile_cpu: CompileCpu) -> None:
        self.function = function
        self.compile_cpu = compile_cpu
        self.order: list[tir.Op] = []            # constant ops, in program order
        self.defs: dict[int, tir.Op] = {}        # constant value id -> its op
        self.needed: list[tir.Value] = []        # constant values that other ops use
        self._leaf_bytes: dict[int, dict[int, int]] = {}
        # value id -> (the op using it, the operand's index there)
        self._uses: dict[int, list[tuple[tir.Op, int]]] = {}
        for op in tir.walk(function.body):
            for i, v in enumerate(op.operands):
                self._uses.setdefault(v.id, []).append((op, i))
            if self._is_constant(op):
                self.order.append(op)
                for r in op.results:
                    self.defs[r.id] = op
                continue
            for v in op.operands:
                if v.id in self.defs and v not in self.needed:
                    self.needed.append(v)

    def _is_constant(self, op: tir.Op) -> bool:
        if op.kind not in _PURE or not all(_static(r.type) for r in op.results):
            return False
        if op.kind == "constant":
            return not op.attrs.get("unfoldable")
        if op.kind == "empty":
            return not op.operands
        return bool(op.operands) and all(v.id in self.defs for v in op.operands)

    def run(self, fold: bool) -> None:
        roots: list[tir.Op] = []
        if fold:
            for v in self.needed:
                self._choose(v, roots)
        # Every constant generic with asserts is evaluated, so its asserts are checked.
        included = {id(op) for op in self._closure(roots)}
        roots += [op for op in self.order if op.kind == "generic" and op.attrs.get("asserts")
                  and id(op) not in included]
        if not roots:
            return
        try:
            values, failures = _evaluate(self._closure(roots), roots, self.compile_cpu)
        except Error as e:   # the program still computes them at run time
            log.warning("constant evaluation in '%s' skipped: %s", self.function.name, e)
            return
        if failures:
            raise CompileError("\n".join(failures))
        for op in self._closure(roots):
            op.attrs.pop("asserts", None)   # checked
        if fold:
            for op in roots:
                self._replace(op, values[id(op)])
            self._drop_dead(roots)

    def _choose(self, v: tir.Value, roots: list[tir.Op]) -> None:
        """Evaluate the generic that defines `v`, or look further up when that does not pay."""
        op = self.defs[v.id]
        if op in roots or op.kind in ("constant", "empty"):
            return
        if op.kind == "generic" and self._worth_folding(op):
            roots.append(op)
            return
        sources = op.operands[:1] if op.kind == "reshape" else op.operands
        for s in sources:
            if isinstance(s.type, tir.TensorType):
                self._choose(s, roots)

    def _worth_folding(self, op: tir.Op) -> bool:
        """Folding `op` gives results no larger than the dense constants it reads, or small
        ones that only start other generics' outputs (module docstring)."""
        leaves = self._leaves(op)
        out = sum(_nbytes(r.tensor_type) for r in op.results)
        if not leaves:
            return False
        return out <= sum(leaves.values()) or (
            out <= HOST_INIT_BYTES and all(self._only_inits(r) for r in op.results))

    def _only_inits(self, v: tir.Value) -> bool:
        """Whether `v` is used, at least once, and only as an output's initial value of a
        generic."""
        uses = self._uses.get(v.id, [])
        return bool(uses) and all(
            user.kind == "generic"
            and user.attrs["num_inputs"] <= i < user.attrs["num_inputs"] + len(user.results)
            for user, i in uses)

    def _leaves(self, op: tir.Op) -> dict[int, int]:
        """The tensor constants `op` is computed from: value id -> bytes."""
        key = id(op)
        if key not in self._leaf_bytes:
            found: dict[int, int] = {}
            if op.kind == "constant":
                if isinstance(op.result.type, tir.TensorType):
                    found[op.result.id] = _nbytes(op.result.type)
            else:
                for v in op.operands:
                    if v.id in self.defs:
                        found.update(self._leaves(self.defs[v.id]))
            self._leaf_bytes[key] = found
        return self._leaf_bytes[key]

    def _closure(self, roots: Iterable[tir.Op]) -> list[tir.Op]:
        """The constant ops `roots` are computed from (roots included), in program order."""
        seen: set[int] = set()
        stack = list(roots)
        while stack:
            op = stack.pop()
            if id(op) in seen:
                continue
            seen.add(id(op))
            stack.extend(self.defs[v.id] for v in op.operands)
        return [op for op in self.order if id(op) in seen]

    def _replace(self, op: tir.Op, arrays: list[np.ndarray]) -> None:
        """`op` becomes one `constant` per result, at its place, defining the same values."""
        region = _regions(self.function.body)[id(op)]
        at = region.ops.index(op)
        region.ops[at:at + 1] = [
            tir.Op("constant", [], [r], {"value": a, "unfoldable": False}, [], op.location)
            for r, a in zip(op.results, arrays)]

    def _drop_dead(self, roots: list[tir.Op]) -> None:
        """Remove the ops the folded values were computed from that nothing uses now."""
        candidates = [op for op in self._closure(roots) if op not in roots]
        while candidates:
            used = {v.id for op in tir.walk(self.function.body) for v in op.operands}
            dead = [op for op in candidates if not any(r.id in used for r in op.results)]
            if not dead:
                return
            regions = _regions(self.function.body)
            for op in dead:
                regions[id(op)].ops.remove(op)
                candidates.remove(op)


def _evaluate(ops: list[tir.Op], roots: list[tir.Op], compile_cpu: CompileCpu
              ) -> tuple[dict[int, list[np.ndarray]], list[str]]:
    """Compile `ops` (copied) as a program returning the roots' results and run it on the CPU
    reference driver: (root id -> result arrays, a located message per failed assert)."""

    memo: dict[int, object] = {}
    body: list[tir.Op] = []
    returned: list[tir.Value] = []
    checks: list[tuple[tir.Value, str, str]] = []
    copies: dict[int, tir.Op] = {}
    for op in ops:
        c = copy.deepcopy(op, memo)
        copies[id(op)] = c
        if c.attrs.get("asserts"):
            body.extend(assert_outputs(c, checks))
        body.append(c)
    for root in roots:
        # Not the assert outputs the copy may have gained: those are returned as checks.
        returned.extend(copies[id(root)].results[:len(root.results)])
    results = returned + [v for v, _, _ in checks]
    body.append(tir.Op("return", list(results), []))
    name = "consteval"
    program = tir.Program([tir.Function(name, [], [v.type for v in results], tir.Region([], body),
                                        location=ops[0].location)])
    raw = load(compile_cpu(program), device="local-sync")[name]()
    arrays = list(raw) if isinstance(raw, tuple) else [raw]
    failures = []
    for (_, message, location), ok in zip(checks, arrays[len(returned):]):
        values = np.asarray(ok)
        if not values.all():
            failures.append(
                f"{location}: error: cf.assert (\"{message}\") in a generic body fails for the "
                f"constants it reads (at {values.size - np.count_nonzero(values)} of "
                f"{values.size} points)")
    out: dict[int, list[np.ndarray]] = {}
    k = 0
    for root in roots:
        out[id(root)] = []
        for r in root.results:
            out[id(root)].append(_as_constant(arrays[k], r.tensor_type))
            k += 1
    return out, failures


def _as_constant(value: object, t: tir.TensorType) -> np.ndarray:
    """A result as the TIR holds a constant of `t` (convert.constant_dtype)."""
    values = getattr(value, "values", value)   # a TypedArray's decoded values
    # np.array, not np.ascontiguousarray: that makes a 0-d result 1-d.
    return np.array(np.asarray(values).astype(constant_dtype(t.element_type))
                    .reshape(t.static_shape), order="C")


def _static(t: tir.Type) -> bool:
    return not isinstance(t, tir.TensorType) or t.is_static


def _nbytes(t: tir.TensorType) -> int:
    return int(np.prod(t.static_shape, dtype=np.int64)) * \
        max(1, SCALAR_TYPES[t.element_type].storage_bits // 8)


def _regions(region: tir.Region) -> dict[int, tir.Region]:
    """id(op) -> the region (`region` or one nested in it) that holds the op."""
    found = {id(op): region for op in region.ops}
    for op in region.ops:
        for r in op.regions:
            found.update(_regions(r))
    return found
