"""Long sequential reductions on every device: llvmpipe leaves loops once an invocation has
taken 65535 back-edges, so the fallback must unroll long reduction loops (argmax over 131072
values gave the maximum of the first 65535 ones). Checked against numpy with the extreme value
last, where a loop that stops early cannot see it."""
from __future__ import annotations

import numpy as np
import pytest

from irtk.compiler.codegen.spirv.fallback import LOOP_TRIP_BUDGET, MAX_UNROLL, innermost_unroll
from irtk.compiler.kernel import Kernel, Op, Operand
from irtk.errors import CompileError

from .kernels import identity, projection


def argmax(parallel: int, n: int) -> Kernel:
    """(max, first index of max) of each row: two outputs updated by selects (fallback)."""
    dims = 2
    row = projection(dims, [0])
    return Kernel("argmax_rows", (parallel, n), [Operand(0, "f32", (parallel, n), identity(2))],
                  [Operand(1, "f32", (parallel,), row), Operand(2, "i32", (parallel,), row)],
                  [Op("arith.maximumf", (0, 1), "f32"),
                   Op("arith.cmpf", (0, 1), "i1", predicate="ogt"),
                   Op("linalg.index", (), "index", int_value=1),
                   Op("arith.index_cast", (5,), "i32"),
                   Op("arith.select", (4, 6, 2), "i32")], [3, 7], ("parallel", "reduction"))


@pytest.mark.slow
@pytest.mark.parametrize("n", [131072, 70001])
def test_long_argmax_sees_every_element(vulkan, rng, n: int) -> None:
    rows = 2
    x = rng.standard_normal((rows, n)).astype(np.float32)
    x[0, -1] = 50.0                       # the maximum is the last element of row 0
    x[1, n // 2] = 40.0
    kernel = argmax(rows, n)
    assert vulkan.compile(kernel).strategy == "fallback"
    values, indices = vulkan.run(kernel, [x], initial=[np.full(rows, -np.inf, np.float32),
                                                       np.zeros(rows, np.int32)])
    np.testing.assert_array_equal(values, x.max(axis=1).astype(np.float64))
    np.testing.assert_array_equal(indices, x.argmax(axis=1))


def test_unroll_fits_the_budget() -> None:
    assert innermost_unroll(argmax(4, 1000)) == (1, True)
    factor, exact = innermost_unroll(argmax(1, 131072))
    assert 131072 // factor <= LOOP_TRIP_BUDGET and exact
    factor, exact = innermost_unroll(argmax(1, 70001))
    assert -(-70001 // factor) <= LOOP_TRIP_BUDGET and not exact


def test_nest_beyond_the_budget_is_refused() -> None:
    n = (LOOP_TRIP_BUDGET + 1) * MAX_UNROLL
    with pytest.raises(CompileError, match="65535"):
        innermost_unroll(argmax(1, n))
