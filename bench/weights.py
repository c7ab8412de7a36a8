"""Large weights: compile, module size, load (the module's initializer: executables created,
constants uploaded) and calls, for programs whose weight is 4 to 64 MiB, on every device.

    python bench/weights.py [--sizes 4,16,64] [--reps N] [--devices local-task,vulkan://0]

The weight is a `dense_resource` blob, as torch-mlir writes a model's weights, read by a
1x K @ K x 1024 matvec. A load is timed from `irtk.load(path)` (the file mapped, verified, the
initializer run) to the loaded module, best of N fresh loads; `MB/s` is the weight's size over
that time, so a load that takes time proportional to the weights shows a flat column. A call
is the median of N whole calls after one warm-up (docs/benchmarks.md).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from common import median_time, ms

import irtk

N = 1024


def program(k: int, w: np.ndarray) -> str:
    blob = "0x04000000" + w.tobytes().hex()
    return f"""func.func @main(%x: tensor<1x{k}xf32>) -> tensor<1x{N}xf32> {{
  %w = arith.constant dense_resource<w0> : tensor<{k}x{N}xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x{N}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x{N}xf32>) -> tensor<1x{N}xf32>
  %r = linalg.matmul ins(%x, %w : tensor<1x{k}xf32>, tensor<{k}x{N}xf32>)
                     outs(%f : tensor<1x{N}xf32>) -> tensor<1x{N}xf32>
  return %r : tensor<1x{N}xf32>
}}
{{-# dialect_resources: {{ builtin: {{ w0: "{blob}" }} }} #-}}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="4,16,64", help="weight sizes in MiB (comma-separated)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--devices", help="comma-separated (default: every device)")
    args = ap.parse_args()
    devices = args.devices.split(",") if args.devices else [d.uri for d in irtk.devices()]
    folder = Path(tempfile.mkdtemp(prefix="irtk-bench-weights-"))
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'weight':>8} {'compile s':>10} {'module MB':>10} {'device':<14} {'load ms':>9} "
          f"{'MB/s':>7} {'call ms':>9}")
    rng = np.random.default_rng(0)
    for mib in (int(s) for s in args.sizes.split(",")):
        k = mib * 1024 * 1024 // (4 * N)
        w = rng.standard_normal((k, N)).astype("<f4")
        start = time.perf_counter()
        data = irtk.compile_str(program(k, w), target="vulkan-spirv,cpu")
        compile_s = time.perf_counter() - start
        path = folder / f"w{mib}.vmfb"
        path.write_bytes(data)
        x = rng.standard_normal((1, k)).astype(np.float32)
        for uri in devices:
            load = float("inf")
            for _ in range(args.reps):
                start = time.perf_counter()
                module = irtk.load(str(path), device=uri)
                load = min(load, time.perf_counter() - start)
                del module
            module = irtk.load(str(path), device=uri)
            call = median_time(lambda: module.main(x), args.reps)
            rate = w.nbytes / 1e6 / load
            print(f"{mib:>5} MiB {compile_s:>10.2f} {len(data) / 1e6:>10.1f} {uri:<14} "
                  f"{ms(load, 9, 1)} {rate:>7.0f} {ms(call, 9, 1)}")
            del module
        path.unlink()
    folder.rmdir()


if __name__ == "__main__":
    main()
