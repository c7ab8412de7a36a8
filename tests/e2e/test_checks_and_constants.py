"""End to end: `check.*` ops against the check module (a failed check records a message and
the function carries on), and constants that dispatches read or start from (copied first, so
calling twice gives the same answer)."""
from __future__ import annotations

import numpy as np
import pytest

from irtk.compiler.driver import compile_program
from irtk.compiler.kernel import Op
from irtk.modules.check import CheckModule
from irtk.runtime import load
from tests.compiler.tir_build import S, T, function, program
from tests.conftest import all_device_uris, target_for

DEVICES = all_device_uris()


def checks_program(x: np.ndarray) -> object:
    """exp(x) checked three ways; one check is wrong on purpose, and a later one still runs."""
    expected = np.exp(x.astype(np.float64)).astype(np.float32)

    def build(b):
        xc = b.constant(x, T(*x.shape), unfoldable=True)
        y = b.elementwise([xc], b.empty(T(*x.shape)), [Op("math.exp", (0,), "f32")])
        b.op("check.expect_almost_eq", [y, b.constant(expected, T(*x.shape))], [],
             {"atol": None, "rtol": None})
        wrong = expected.copy()
        wrong[3] += 0.25
        b.op("check.expect_almost_eq", [y, b.constant(wrong, T(*x.shape))], [],
             {"atol": None, "rtol": None})
        positive = b.elementwise([y], b.empty(T(*x.shape, et="i32")),
                                 [Op("arith.constant", (), "f32", float_value=0.0),
                                  Op("arith.cmpf", (0, 2), "i1", predicate="ogt"),
                                  Op("arith.extui", (3,), "i32")])
        b.op("check.expect_all_true", [positive])
        ints = b.constant(np.arange(6, dtype=np.int32), T(6, et="i32"))
        b.op("check.expect_eq", [ints, b.constant(np.arange(6, dtype=np.int32),
                                                  T(6, et="i32"))])
        v = b.scalar("tensor.extract", [positive, b.index(0)], S("i32"))
        b.op("check.expect_true", [v])
        b.op("check.expect_false", [v])
    return program(function("checks", [], build))


@pytest.mark.parametrize("device", DEVICES)
def test_checks_record_failures_and_carry_on(device):
    x = np.random.default_rng(7).uniform(-1, 1, 6).astype(np.float32)
    check = CheckModule()
    m = load(compile_program(checks_program(x), target=target_for(device)), device=device,
             native_modules=[check])
    m.checks()
    failures = check.take_failures()
    assert len(failures) == 2, failures
    assert "Expected near equality" in failures[0] and "atol=0.0001" in failures[0]
    assert "index 3" in failures[0]
    assert failures[1].startswith("Expected false but got 1")
    m.checks()
    assert len(check.take_failures()) == 2


@pytest.mark.parametrize("device", DEVICES)
def test_a_constant_init_is_copied_so_calls_repeat(device):
    rng = np.random.default_rng(11)
    start = rng.uniform(-3, 3, 5).astype(np.float32)

    def build(b, x):
        acc = b.constant(start, T(5))
        return b.row_sum(x, acc)
    m = load(compile_program(program(function("main", [T(5, 4)], build)),
                             target=target_for(device)), device=device)
    x = rng.uniform(-3, 3, (5, 4)).astype(np.float32)
    expected = start.astype(np.float64) + x.sum(1)
    np.testing.assert_allclose(m.main(x), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m.main(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_updates_of_dead_transients(device):
    """A chain of reductions each accumulating into the previous result, in place."""
    rng = np.random.default_rng(12)

    def build(b, x):
        acc = b.fill(1.0, b.empty(T(5)))
        for _ in range(3):
            acc = b.row_sum(x, acc)
        return acc
    m = load(compile_program(program(function("main", [T(5, 4)], build)),
                             target=target_for(device)), device=device)
    x = rng.uniform(-3, 3, (5, 4)).astype(np.float32)
    np.testing.assert_allclose(m.main(x), 1 + 3 * x.astype(np.float64).sum(1), rtol=1e-5,
                               atol=1e-5)
