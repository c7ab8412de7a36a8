"""Affine map algebra for fusion: composing index maps and inverting permutations.

Fusion moves a body from one loop nest into another; these give the map from the new nest's
points to the old one's, over `kernel.AffineMap` (MLIR's `AffineMap::compose` and
`inversePermutation`).
"""
from __future__ import annotations

from irtk.compiler import tir
from irtk.compiler.kernel import AffineMap


def compose(outer: AffineMap, inner: AffineMap) -> AffineMap:
    """outer ∘ inner: `inner` maps points to outer's loop indices."""
    n = inner.num_dims
    rows = []
    for row in outer.rows:
        acc = [0] * (n + 1)
        for j, c in enumerate(row[:outer.num_dims]):
            if c:
                for t, v in enumerate(inner.rows[j]):
                    acc[t] += c * v
        acc[n] += row[-1]
        rows.append(tuple(acc))
    return AffineMap(n, tuple(rows))


def permutation_inverse(m: AffineMap) -> AffineMap | None:
    """The inverse of a permutation map (square, one coefficient 1 per row and column)."""
    n = m.num_dims
    perm = m.loop_per_row()
    if perm is None or sorted(perm) != list(range(n)):
        return None
    row_of = {j: r for r, j in enumerate(perm)}   # loop j is index row_of[j] of the operand
    return AffineMap(n, tuple(tuple(1 if t == row_of[j] else 0 for t in range(n + 1))
                              for j in range(n)))


def scatter_inverse(out_map: AffineMap, parallel: tuple[int, ...]) -> AffineMap | None:
    """For an output map that is a permutation of the parallel loops: the map from the loop
    nest's points to the output's index space (the map itself, when it is such a bijection)."""
    used = out_map.loop_per_row()
    if used is None or sorted(used) != sorted(parallel):
        return None
    return out_map


def reshape_map(op: tir.Op) -> AffineMap | None:
    """For a static `reshape` op: the map from its result's index to its source's (row-major
    buffers, so a reshape keeps every element's offset). Linear for an expand (a source index
    is a sum of result indices times their strides in the group) and for a collapse whose
    groups have at most one dim above 1 (that dim is the result index, the others 0); None for
    any other collapse (it needs div and mod) or a dynamic shape."""
    src, res = op.operands[0].tensor_type, op.result.tensor_type
    if not src.is_static or not res.is_static:
        return None
    groups: list[list[int]] = op.attrs["reassociation"]
    n = len(res.shape)
    rows: list[list[int]] = []
    if len(res.shape) >= len(src.shape):      # expand: groups of result dims
        for group in groups:
            row = [0] * (n + 1)
            stride = 1
            for j in reversed(group):
                row[j] = stride
                stride *= int(res.shape[j])   # type: ignore[arg-type]
            rows.append(row)
    else:                                      # collapse: groups of source dims
        for k, group in enumerate(groups):
            big = [j for j in group if src.shape[j] != 1]
            if len(big) > 1:
                return None
            for j in group:
                row = [0] * (n + 1)
                if j in big:
                    row[k] = 1
                rows.append(row)
    if len(rows) != len(src.shape):
        return None
    return AffineMap(n, tuple(tuple(r) for r in rows))
