"""Affine maps: which rows are exactly one loop index (kernel.AffineMap), and the algebra
fusion uses (affine.py)."""
from __future__ import annotations

from irtk.compiler import tir
from irtk.compiler.affine import compose, permutation_inverse, reshape_map, scatter_inverse
from irtk.compiler.kernel import AffineMap
from tests.compiler.tir_build import T, amap, identity, projection


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


def _reshape(src: tuple, res: tuple, groups: list) -> tir.Op:
    return tir.Op("reshape", [tir.Value(T(*src))], [tir.Value(T(*res))],
                  {"reassociation": groups})


def test_reshape_map_of_an_expand_is_the_row_major_offset_within_each_group():
    m = reshape_map(_reshape((8, 96), (1, 8, 1, 3, 32), [[0, 1], [2, 3, 4]]))
    assert m == AffineMap(5, ((8, 1, 0, 0, 0, 0), (0, 0, 96, 32, 1, 0)))


def test_reshape_map_of_a_collapse_of_unit_dims_picks_the_dim_above_one():
    m = reshape_map(_reshape((8, 1, 32), (8, 32), [[0], [1, 2]]))
    assert m == AffineMap(2, ((1, 0, 0), (0, 0, 0), (0, 1, 0)))
    m = reshape_map(_reshape((1, 1), (1,), [[0, 1]]))
    assert m == AffineMap(1, ((0, 0), (0, 0)))


def test_reshape_map_is_none_where_it_needs_div_and_mod_or_a_dim_is_dynamic():
    assert reshape_map(_reshape((2, 3), (6,), [[0, 1]])) is None
    assert reshape_map(_reshape((None, 3), (None, 3, 1), [[0], [1, 2]])) is None
