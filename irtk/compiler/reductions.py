"""Which kernels are plain reductions whose combining order may change, shared by the
dispatch-level split (split_reduction.py) and the SPIR-V reduction strategy.

A plain reduction: every output `o` yields `combine(current_o, x)` (either operand order) with
a combiner of `IDENTITIES`, the current value feeds nothing else, and `x` depends on no output.
It may be reordered only as kernel.py's "Reassociation" rule allows (`reassociable`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Collection

from irtk.compiler.kernel import Kernel, Op

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1

# combiner -> (identity of a float accumulator, identity of an i32 one); None: not for that kind.
# maxnumf/minnumf return the other operand of a NaN, so NaN is their identity: with -inf a row
# of NaNs would come out -inf instead of NaN.
IDENTITIES: dict[str, tuple[float | None, int | None]] = {
    "arith.addf": (0.0, None), "arith.mulf": (1.0, None),
    "arith.maximumf": (-math.inf, None), "arith.minimumf": (math.inf, None),
    "arith.maxnumf": (math.nan, None), "arith.minnumf": (math.nan, None),
    "arith.addi": (None, 0), "arith.muli": (None, 1), "arith.andi": (None, -1),
    "arith.ori": (None, 0), "arith.xori": (None, 0), "arith.maxsi": (None, INT_MIN),
    "arith.minsi": (None, INT_MAX), "arith.maxui": (None, 0), "arith.minui": (None, -1),
}


@dataclass(frozen=True)
class Combiner:
    """One output's reduction: its combiner op and the body value `x` it folds in."""

    op: Op
    x: int

    def identity(self, float_kind: bool) -> float | int:
        value = IDENTITIES[self.op.name][0 if float_kind else 1]
        assert value is not None
        return value


def reduction_terms(kernel: Kernel, float_outputs: Collection[str],
                    int_outputs: Collection[str]) -> list[Combiner] | None:
    """Each output's combiner and folded value, or None unless the kernel is a plain
    reduction that may be reordered, with outputs of the given float or integer types."""
    if not kernel.reduction_dims:
        return None
    n_in, n_out = len(kernel.inputs), len(kernel.outputs)
    base = n_in + n_out
    outputs = set(range(n_in, base))
    depends: dict[int, bool] = {v: v in outputs for v in range(base)}
    for i, op in enumerate(kernel.ops):
        depends[base + i] = any(depends[v] for v in op.operands)
    found = []
    for o, y in enumerate(kernel.yields):
        if y < base:
            return None
        op = kernel.ops[y - base]
        kind = kernel.outputs[o].element_type
        identity = IDENTITIES.get(op.name)
        if identity is None or len(op.operands) != 2:
            return None
        if kind in float_outputs:
            if identity[0] is None:
                return None
        elif kind not in int_outputs or identity[1] is None:
            return None
        acc = n_in + o
        if acc not in op.operands:
            return None
        x = op.operands[1] if op.operands[0] == acc else op.operands[0]
        if depends[x] or not reassociable(kernel, op, x):
            return None
        # The current value feeds only the combiner.
        if any(acc in other.operands for j, other in enumerate(kernel.ops) if j != y - base):
            return None
        found.append(Combiner(op, x))
    return found


def reassociable(kernel: Kernel, op: Op, x: int) -> bool:
    """Whether combining in any order is allowed (kernel.py, "Reassociation"): always for
    integers and float max/min; for a float add/mul only when the addend is an input element
    as loaded (a plain sum/product), never a value the body computes, whose sequential order
    the result must keep (each step rounded)."""
    if op.name not in ("arith.addf", "arith.mulf"):
        return True
    if x >= len(kernel.inputs) or kernel.inputs[x].map is None:
        return False
    return kernel.inputs[x].element_type == kernel.value_type(op.operands[0])
