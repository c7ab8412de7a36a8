"""Affine maps: which rows are exactly one loop index (kernel.AffineMap), and the algebra
fusion uses (affine.py)."""
from __future__ import annotations

from irtk.compiler.affine import compose, permutation_inverse, scatter_inverse
from irtk.compiler.kernel import AffineMap
from tests.compiler.tir_build import amap, identity, projection


def test_row_loop_names_the_loop_a_bare_row_indexes():
    m = AffineMap(3, ((0, 0, 1, 0), (1, 0, 0, 0)))   # (d0, d1, d2) -> (d2, d0)
    assert m.row_loop(0) == 2
    assert m.row_loop(1) == 0
    assert m.row_loops() == (2, 0)


def test_row_loop_is_none_for_rows_that_are_not_one_loop_index():
    m = AffineMap(2, (
        (0, 0, 0),     # a broadcast: the constant 0
        (0, 0, 3),     # a constant
        (2, 0, 0),     # a stride
        (1, 0, 1),     # an offset
        (1, 1, 0),     # a window: two loops
        (-1, 0, 0),    # a reversal
    ))
    assert m.row_loops() == (None,) * 6


def test_row_loop_is_none_for_a_row_with_a_symbol():
    m = AffineMap(1, ((1, 1, 0), (0, 1, 0), (1, 0, 0)), num_symbols=1)  # d0 + s0, s0, d0
    assert m.row_loops() == (None, None, 0)


def test_permutation_or_projection_allows_loops_and_broadcasts_only():
    assert AffineMap(2, ((0, 1, 0), (0, 0, 0))).is_permutation_or_projection()
    assert AffineMap.identity(3).is_permutation_or_projection()
    assert not AffineMap(2, ((1, 1, 0),)).is_permutation_or_projection()
    assert not AffineMap(2, ((0, 0, 1),)).is_permutation_or_projection()


def test_compose_and_invert_maps():
    transpose = amap(2, (0, 1, 0), (1, 0, 0))
    assert permutation_inverse(transpose) == transpose
    assert compose(transpose, transpose) == identity(2)
    shifted = amap(2, (1, 0, 3), (0, 2, 0))
    assert compose(shifted, transpose).rows == ((0, 1, 3), (2, 0, 0))
    assert permutation_inverse(projection(3, (0, 1))) is None
    assert permutation_inverse(amap(2, (1, 0, 0), (1, 0, 0))) is None   # d0 twice


def test_scatter_inverse_accepts_permutations_of_the_parallel_loops_only():
    out = amap(3, (0, 0, 1, 0), (1, 0, 0, 0))           # (d2, d0), loops 0 and 2 parallel
    assert scatter_inverse(out, (0, 2)) == out
    assert scatter_inverse(out, (0, 1)) is None
    assert scatter_inverse(amap(3, (0, 0, 1, 0), (0, 0, 0, 0)), (0, 2)) is None  # a broadcast
