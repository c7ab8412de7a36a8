"""Dead code elimination on TIR, before dispatch formation.

A tensor nothing reads still costs a dispatch, its buffer and its share of every call: a model
cut short (a function that returns an inner layer's activation, an exporter's output that was
dropped) would run every layer after it. An op without effects (the kinds common
subexpression elimination treats as pure: `generic`, `empty`, `reshape`, `tensor.dim`,
`constant`, host `arith.*`/`math.*` scalars) none of whose results is read is dropped. Regions
are swept back to front, so what only a dropped op read goes with it in the same pass.

What stays though its results are unread: ops with regions (control flow), calls, checks
(`cf.assert`), casts (they check at run time), barriers, global loads and stores, a generic
whose body asserts, and host integer division and remainder, which fail on a zero divisor as
the VM's own dead-code elimination keeps them (regalloc.py).
"""
from __future__ import annotations

from irtk.compiler import tir
from irtk.compiler.cse import is_pure

_CAN_FAIL = frozenset({"arith.divsi", "arith.divui", "arith.remsi", "arith.remui",
                       "arith.ceildivsi", "arith.ceildivui", "arith.floordivsi"})


def eliminate_dead_ops(program: tir.Program) -> int:
    """Drop every function's unread pure ops (in place); returns how many went."""
    return sum(_region(f.body, set()) for f in program.functions)


def _region(region: tir.Region, read: set[int]) -> int:
    """Sweep `region` back to front; `read` holds the ids of values read by what follows (in
    this region and the enclosing ones), and gains what the kept ops read."""
    dropped = 0
    kept: list[tir.Op] = []
    for op in reversed(region.ops):
        if _removable(op) and not any(r.id in read for r in op.results):
            dropped += 1
            continue
        for inner in reversed(op.regions):
            dropped += _region(inner, read)
        read.update(v.id for v in op.operands)
        kept.append(op)
    kept.reverse()
    region.ops = kept
    return dropped


def _removable(op: tir.Op) -> bool:
    """Whether `op` may go when nothing reads its results."""
    if op.kind in _CAN_FAIL or not is_pure(op):
        return False
    return not (op.kind == "generic" and op.attrs.get("asserts"))


__all__ = ["eliminate_dead_ops"]
