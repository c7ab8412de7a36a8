"""Split reductions: a long reduction over few parallel points becomes two kernels.

With one workgroup per parallel point, a 2 x 40960 sum keeps two invocation groups busy and
the rest of the device idle, and each group reads 40960 values on its own. Splitting the
reduction loop `r` of extent N into S chunks of C = N / S points (r = s * C + c) gives:
- the partial kernel: loops (parallel..., s, c), s parallel and c the reduction; each output
  becomes a partial tensor [parallel extents..., S] of the same type that starts at the
  combiner's identity (a fill) and accumulates its chunk with the original body;
- the final kernel: loops (parallel..., s), s the reduction; each output folds its S partials
  into its initial value with the same combiner, `combine(current, partial as loaded)`.
Both are plain reductions, so code generators treat them as any other. The result equals the
unsplit one up to reassociation, so only kernels that may be reordered split
(kernel.py, "Reassociation"; reductions.py): integer combiners, float max/min, and float
add/mul of an input element as loaded. Atomics are never used: the result does not depend on
scheduling.

Which kernels split (`split`): static, no params, one reduction loop and it is the innermost,
no `linalg.index` of it, every output a plain reduction (reductions.py) on f32 or i32/index,
at most `MAX_POINTS` parallel points and a reduction of at least `MIN_LENGTH` points. S is the largest divisor of N with S * points <= `TARGET_GROUPS` and
N / S >= `MIN_CHUNK` (no split when that leaves S < 2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from irtk.compiler import reductions
from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand
from irtk.compiler.reductions import Combiner

MIN_LENGTH = 16384
MAX_POINTS = 32
TARGET_GROUPS = 64
MIN_CHUNK = 2048


@dataclass(frozen=True)
class Split:
    """The two kernels that replace one; `identities[o]` fills partial tensor o first."""

    partial: Kernel
    final: Kernel
    chunks: int
    identities: list[float | int]

    def partial_shape(self, o: int) -> tuple[int, ...]:
        return self.partial.outputs[o].static_shape


def split(kernel: Kernel) -> Split | None:
    """The split form of `kernel`, or None when it should stay one kernel (module docstring)."""
    terms = _terms(kernel)
    if terms is None:
        return None
    ranges = kernel.static_ranges
    r = len(ranges) - 1
    length = ranges[r]
    points = math.prod(ranges[:r])
    if length < MIN_LENGTH or points > MAX_POINTS or points == 0:
        return None
    chunks = _chunks(length, points)
    if chunks < 2:
        return None
    chunk = length // chunks
    parallel = ranges[:r]
    n_in, n_out = len(kernel.inputs), len(kernel.outputs)

    # Partial kernel: loops (parallel..., s, c); r = s * C + c in every input map.
    def split_map(m: AffineMap) -> AffineMap:
        rows = tuple(row[:r] + (row[r] * chunk, row[r]) + row[r + 1:] for row in m.rows)
        return AffineMap(r + 2, rows)
    inputs = [Operand(o.binding, o.element_type, o.shape,
                      None if o.map is None else split_map(o.map)) for o in kernel.inputs]
    partial_map = AffineMap(r + 2, tuple(
        tuple(1 if j == d else 0 for j in range(r + 3)) for d in range(r + 1)))
    partials = [Operand(n_in + o, out.element_type, tuple(parallel) + (chunks,), partial_map)
                for o, out in enumerate(kernel.outputs)]
    partial = Kernel(f"{kernel.name}_partial", tuple(parallel) + (chunks, chunk), inputs,
                     partials, list(kernel.ops), list(kernel.yields),
                     ("parallel",) * (r + 1) + ("reduction",))

    # Final kernel: loops (parallel..., s); output o = combine(o, partial o as loaded).
    final_inputs = [Operand(o, out.element_type, tuple(parallel) + (chunks,),
                            AffineMap.identity(r + 1)) for o, out in enumerate(kernel.outputs)]
    final_outputs = [Operand(n_out + o, out.element_type, out.shape, out.map)
                     for o, out in enumerate(kernel.outputs)]
    ops = [Op(t.op.name, (n_out + o, o), kernel.outputs[o].element_type)
           for o, t in enumerate(terms)]
    final = Kernel(kernel.name, tuple(parallel) + (chunks,), final_inputs, final_outputs, ops,
                   [2 * n_out + o for o in range(n_out)],
                   ("parallel",) * r + ("reduction",))
    partial.validate()
    final.validate()
    return Split(partial, final, chunks,
                 [t.identity(kernel.outputs[o].element_type == "f32")
                  for o, t in enumerate(terms)])


def _chunks(length: int, points: int) -> int:
    best = 1
    for s in range(2, TARGET_GROUPS // points + 1):
        if length % s == 0 and length // s >= MIN_CHUNK:
            best = s
    return best


def _terms(kernel: Kernel) -> list[Combiner] | None:
    """Each output's combiner and folded value when the kernel may split, else None."""
    r = len(kernel.loop_ranges) - 1
    if r < 0 or not kernel.is_static or kernel.params \
            or kernel.iterator_types != ("parallel",) * r + ("reduction",):
        return None
    if any(op.name == "linalg.index" and op.int_value == r for op in kernel.ops):
        return None
    return reductions.reduction_terms(kernel, ("f32",), ("i32", "index"))
