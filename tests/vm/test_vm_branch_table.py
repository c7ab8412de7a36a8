"""`br_table`: a multi-way branch with a default, in and out of range."""
from __future__ import annotations

import numpy as np
import pytest

from tests.vm.helpers import run_asm

SWITCH = """
module @m
export @main = @main
func @main "0i_i" {
    br_table i32:0, ^default, [^zero, ^one, ^two, ^one]
  ^zero:
    i32:1 = const.i32 100
    return (i32:1)
  ^one:
    i32:1 = const.i32 101
    return (i32:1)
  ^two:
    i32:1 = const.i32 102
    return (i32:1)
  ^default:
    i32:1 = const.i32 -1
    return (i32:1)
}
"""


@pytest.mark.parametrize("fuse", [True, False])
def test_br_table_picks_the_indexed_block_or_the_default(fuse):
    expected = {0: 100, 1: 101, 2: 102, 3: 101}
    rng = np.random.default_rng(7)
    indices = [0, 1, 2, 3, 4, -1, -2 ** 31, 2 ** 31 - 1] + [int(i) for i in
                                                          rng.integers(-10, 10, 12)]
    for index in indices:
        assert run_asm(SWITCH, [index], fuse=fuse) == [expected.get(index, -1)], index


def test_br_table_with_no_entries_always_takes_the_default():
    text = """module @m
export @main = @main
func @main "0i_i" {
    br_table i32:0, ^out, []
  ^out:
    return (i32:0)
}
"""
    assert run_asm(text, [5]) == [5]


def test_a_loop_dispatching_through_br_table_sums_by_case():
    # for i in 0..n: acc += [1, 10, 100][i % 3]
    text = """module @m
export @main = @main
func @main "0i_i" registers(i32 8) {
    i32:1 = const.i32 0
    i32:2 = const.i32 0
    i32:3 = const.i32 3
    i32:4 = const.i32 1
    br ^head
  ^head:
    i32:5 = cmp.lt.s.i32 i32:1, i32:0
    cond_br i32:5, ^body, ^done
  ^body:
    i32:6 = rem.s.i32 i32:1, i32:3
    i32:1 = add.i32 i32:1, i32:4
    br_table i32:6, ^head, [^c0, ^c1, ^c2]
  ^c0:
    i32:7 = const.i32 1
    i32:2 = add.i32 i32:2, i32:7
    br ^head
  ^c1:
    i32:7 = const.i32 10
    i32:2 = add.i32 i32:2, i32:7
    br ^head
  ^c2:
    i32:7 = const.i32 100
    i32:2 = add.i32 i32:2, i32:7
    br ^head
  ^done:
    return (i32:2)
}
"""
    for n in (0, 1, 7, 50):
        assert run_asm(text, [n]) == [sum([1, 10, 100][i % 3] for i in range(n))]
