"""The importer's normalization, proved on the conformance programs' own expected values: each
zero-argument test function is imported and run by the numpy TIR evaluator (tir_eval.py), and
every one of its `check.*` ops must pass."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from irtk.compiler.frontend import parse_program
from tests.compiler.frontend import suite
from tests.compiler.frontend.tir_eval import run_function


@functools.cache
def _program(name: str):
    return parse_program(suite.read(name), name)


def _cases() -> list:
    cases = []
    for name in suite.files():
        program = _program(name)
        for fn in program.functions:
            if fn.args or not fn.public:
                continue
            marks = []
            if fn.name in suite.TOO_LARGE:
                marks.append(pytest.mark.skip(reason="too large for the numpy evaluator"))
            if fn.name in suite.SLOW:
                marks.append(pytest.mark.slow)
            cases.append(pytest.param(name, fn.name, marks=marks, id=f"{name}::{fn.name}"))
    return cases


CASES = _cases()


def test_every_test_function_is_evaluated_or_accounted_for():
    evaluated = {c.values[1] for c in CASES}
    assert len(evaluated | set(suite.UNSUPPORTED)) == 128


@pytest.mark.parametrize(("name", "function"), CASES)
def test_checks_pass(name, function):
    results, run = run_function(_program(name), function,
                                reassociate=function in suite.REASSOCIATED)
    assert not run.failures, "\n".join(run.failures)
    if function in suite.RESULTS:
        assert run.checks == 0
        assert len(results) == len(suite.RESULTS[function])
        for got, want in zip(results, suite.RESULTS[function]):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    else:
        assert run.checks > 0
