"""Front-end speed: parse (xDSL, with verification) and import (to TIR) time per conformance
file, plus two large dense constants.

    python bench/frontend.py [--repeat N] [--dir CONFORMANCE_DIR]

Each figure is the best of N runs (default 5) of `parse_mlir` and of `import_program` on its
result, by the process's CPU time, so that a busy machine does not inflate it. The first run
of all (xDSL context creation, imports) is reported separately as the cold start.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Callable

import numpy as np

SUITE = Path(__file__).resolve().parents[1] / "tests" / "conformance" / "iree_e2e"


def _best(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()
        result = fn()
        best = min(best, time.process_time() - t0)
    return best, result


def _synthetic() -> dict[str, str]:
    """Large constants: a 1x225x225x3 splat and a 256x256 explicit literal."""
    rng = np.random.default_rng(0)
    values = ", ".join("[" + ", ".join(f"{v:.6e}" for v in row) + "]"
                       for row in rng.standard_normal((256, 256)).astype(np.float32))
    splat = ("func.func @splat() -> tensor<1x225x225x3xf32> {\n"
             "  %c = arith.constant dense<0.5> : tensor<1x225x225x3xf32>\n"
             "  return %c : tensor<1x225x225x3xf32>\n}\n")
    dense = ("func.func @dense() -> tensor<256x256xf32> {\n"
             f"  %c = arith.constant dense<[{values}]> : tensor<256x256xf32>\n"
             "  return %c : tensor<256x256xf32>\n}\n")
    return {"<splat 1x225x225x3xf32>": splat, "<dense 256x256xf32>": dense}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=SUITE)
    args = ap.parse_args()

    t0 = time.process_time()
    from irtk.compiler.frontend import import_program, parse_mlir
    parse_mlir("func.func @f() {\n  return\n}\n", "warmup.mlir")
    cold = time.process_time() - t0

    inputs = {p.relative_to(args.dir).as_posix(): p.read_text()
              for p in sorted(args.dir.rglob("*.mlir"))}
    inputs |= _synthetic()
    print(f"cold start (imports, xDSL context, first parse): {cold * 1e3:.0f} ms")
    print(f"{'file':52} {'bytes':>8} {'parse ms':>9} {'import ms':>10} {'total ms':>9}")
    total_parse = total_import = 0.0
    for name, text in inputs.items():
        parse_s, (module, source_map) = _best(lambda: parse_mlir(text, name), args.repeat)
        import_s, _ = _best(lambda: import_program(module, source_map, name), args.repeat)
        total_parse += parse_s
        total_import += import_s
        print(f"{name:52} {len(text):8d} {parse_s * 1e3:9.1f} {import_s * 1e3:10.1f} "
              f"{(parse_s + import_s) * 1e3:9.1f}")
    print(f"{'all':52} {sum(map(len, inputs.values())):8d} {total_parse * 1e3:9.1f} "
          f"{total_import * 1e3:10.1f} {(total_parse + total_import) * 1e3:9.1f}")


if __name__ == "__main__":
    main()
