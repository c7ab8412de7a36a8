"""Run a one-function MLIR program through the importer and the TIR evaluator."""
from __future__ import annotations

import os

import numpy as np

from irtk.compiler import tir
from irtk.compiler.frontend import parse_program
from irtk.types import is_float
from tests.compiler.frontend.tir_eval import run_function

# Fresh data every run; IRTK_TEST_SEED=<seed> replays a failing one (the seed is in messages).
SEED = int(os.environ.get("IRTK_TEST_SEED") or np.random.SeedSequence().entropy % 2**32)
RNG = np.random.default_rng(SEED)


def run(text: str, *args, name: str = "main") -> list:
    """Import `text` and run @name on `args` (numpy arrays or Python scalars)."""
    program = parse_program(text, "test.mlir")
    assert not program.unsupported, program.unsupported
    fn = program.function(name)
    values = []
    for a, v in zip(args, fn.args):
        if isinstance(v.type, tir.TensorType):
            values.append(np.asarray(a, dtype=np.float64 if is_float(v.type.element_type)
                                     else np.int64))
        else:
            values.append(a)
    results, record = run_function(program, name, values)
    assert not record.failures, record.failures
    return results


def f32(*shape: int) -> np.ndarray:
    """Random float32 values (as float64), never all zeros."""
    return RNG.standard_normal(shape).astype(np.float32).astype(np.float64)


def ints(lo: int, hi: int, *shape: int) -> np.ndarray:
    return RNG.integers(lo, hi, size=shape, dtype=np.int64)


def close(got, want, tol: float = 1e-5) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=tol, atol=tol,
                               err_msg=f"IRTK_TEST_SEED={SEED}")
