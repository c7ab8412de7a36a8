"""Where the conformance programs (IREE's end-to-end check tests) are, and what the front-end
tests expect of each."""
from __future__ import annotations

import os
from pathlib import Path

SUITE_DIR = Path(os.environ.get("IRTK_CONFORMANCE_DIR")
                 or Path(__file__).resolve().parents[2] / "conformance" / "iree_e2e")

# Functions the importer rightly refuses, with the reason (checked against its message).
UNSUPPORTED: dict[str, str] = {}

# Too large for the numpy evaluator (about 1e9 and 7e9 multiply-adds, one step at a time).
TOO_LARGE = {"matmul_2048x512x1024_f32_f32", "matmul_3456x1024x2048_f16_f16"}

# Their expected values are those of a reassociated (tree) reduction: 40960 additions of 0.001
# in f32, one at a time, drift too far. The evaluator runs them with `reassociate=True`.
REASSOCIATED = {"reduction_aligned_larger", "half_reduction_aligned"}

# Functions that take several seconds in the evaluator.
SLOW = {"argmax_1d", "operand_fusion", "dynamic_batch_matmul_transposed_rhs",
        "reduction_aligned_larger", "half_reduction_aligned"}


def files() -> list[str]:
    return sorted(p.relative_to(SUITE_DIR).as_posix() for p in SUITE_DIR.rglob("*.mlir"))


def read(name: str) -> str:
    return (SUITE_DIR / name).read_text()

# Test functions without check ops, which IREE checks by their printed results (FileCheck).
RESULTS = {"inc": [3.0], "scalar": [42], "two_dispatch": [[3.0] * 15]}
