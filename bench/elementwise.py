"""Elementwise throughput and per-call latency: irtk on every device, numpy, and IREE 3.13 on
the same drivers when an IREE environment is given (`--iree-python`, e.g. a venv made with
`pip install iree-base-compiler==3.13.0 iree-base-runtime==3.13.0`).

    .venv/bin/python bench/elementwise.py [--iree-python PATH] [--reps N]

Prints one table: median seconds per call, inputs already on the host (irtk and IREE time a
whole call: argument upload, dispatch, wait, result download). On Vulkan, irtk's module is
compiled for the device's profile (`--vulkan-target swiftshader` / `llvmpipe`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import irtk  # noqa: E402
from common import Iree, median_time  # noqa: E402

ROWS = [4, 1024, 16384]   # x 1024 columns: 4K, 1M and 16M elements
COLS = 1024
DEVICES = ["local-sync", "local-task", "vulkan://swiftshader", "vulkan://llvmpipe"]


def program(rows: int) -> str:
    t = f"tensor<{rows}x{COLS}xf32>"
    return f"""func.func @main(%x: {t}, %w: tensor<{COLS}xf32>) -> {t} {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {t}
  %y = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>,
                                        affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%x, %w : {t}, tensor<{COLS}xf32>) outs(%e : {t}) {{
  ^bb0(%a: f32, %b: f32, %out: f32):
    %sq = arith.mulf %a, %a : f32
    %neg = arith.negf %sq : f32
    %g = math.exp %neg : f32
    %gw = arith.mulf %g, %b : f32
    %relu = arith.maximumf %a, %zero : f32
    %r = arith.addf %gw, %relu : f32
    linalg.yield %r : f32
  }} -> {t}
  return %y : {t}
}}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iree-python", help="Python of an environment with IREE 3.13")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    iree = Iree(args.iree_python, timeout=600)
    rng = np.random.default_rng(0)
    columns = ["numpy"] + [f"irtk {d}" for d in DEVICES]
    if args.iree_python:
        columns += [f"IREE {d}" for d in DEVICES]
    print(f"{'elements':>10} | " + " | ".join(f"{c:>22}" for c in columns))
    print("-" * (13 + 25 * len(columns)))
    for rows in ROWS:
        x = rng.standard_normal((rows, COLS)).astype(np.float32)
        w = rng.standard_normal(COLS).astype(np.float32)
        cells = [median_time(lambda: np.exp(-x * x) * w + np.maximum(x, 0), args.reps)]
        text = program(rows)
        portable = irtk.compile_str(text, target="vulkan-spirv,cpu")
        for device in DEVICES:
            try:
                # Vulkan devices run code compiled for their profile (`--vulkan-target`), as
                # IREE compiles for llvmpipe on lavapipe; the CPU drivers the portable module.
                vmfb = portable if device.startswith("local") else irtk.compile_str(
                    text, target="vulkan-spirv", vulkan_target=device.split("://")[1])
                m = irtk.load(vmfb, device=device)
            except irtk.Error:
                cells.append(None)
                continue
            cells.append(median_time(lambda: m.main(x, w), args.reps))
        if args.iree_python:
            cells += [iree.time(text, device, f"{rows}x{COLS}xf32,{COLS}xf32", args.reps)
                      for device in DEVICES]
        print(f"{rows * COLS:>10} | " + " | ".join(
            f"{'n/a':>22}" if c is None else f"{c * 1e3:>19.3f} ms" for c in cells))


if __name__ == "__main__":
    main()
