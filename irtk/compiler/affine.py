"""Affine map algebra for fusion: composing index maps and inverting permutations.

Fusion moves a body from one loop nest into another; these give the map from the new nest's
points to the old one's, over `kernel.AffineMap` (MLIR's `AffineMap::compose` and
`inversePermutation`).
"""
from __future__ import annotations

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
    perm = m.row_loops()
    if len(perm) != n or None in perm or sorted(perm) != list(range(n)):  # type: ignore[type-var]
        return None
    rows = [None] * n
    for r, j in enumerate(perm):
        rows[j] = tuple(1 if t == r else 0 for t in range(n + 1))
    return AffineMap(n, tuple(rows))  # type: ignore[arg-type]


def scatter_inverse(out_map: AffineMap, parallel: tuple[int, ...]) -> AffineMap | None:
    """For an output map that is a permutation of the parallel loops: the map from the loop
    nest's points to the output's index space (the map itself, when it is such a bijection)."""
    used = out_map.row_loops()
    if None in used or sorted(used) != sorted(parallel):  # type: ignore[type-var]
        return None
    return out_map
