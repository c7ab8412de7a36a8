"""CPU drivers: the native executor against the numpy reference, numpy itself and IREE's llvm-cpu.

For each program of issue-sized CPU work (matmuls, a 3x3 convolution with relu, an MLP, an
elementwise add + relu, a row sum, a softmax), compiled for the `cpu` target:
- irtk local-task and local-sync, native executor, resident call (arguments already on the
  device and the result left there, `device_results=True`: what iree-benchmark-module times),
  and local-task's speed-up over local-sync;
- irtk local-task on the numpy reference executor (`--reference`; slow on the big matmuls);
- numpy computing the same thing (OpenBLAS for the matmuls: what this CPU can do);
- IREE 3.13 llvm-cpu on local-task, resident with its results left on the device, when `--iree-python` names an IREE environment
  (bench/iree_runner.py), and irtk / IREE;
- what LLVM cost the first load of each module (a fresh cache folder).

    .venv/bin/python bench/cpu.py [--iree-python PATH] [--reps N] [--rounds R] [--reference]
                                  [--only NAME]

Figures are in milliseconds: each round times N calls of irtk local-task, then IREE, then
irtk local-sync (alternating, so a busy phase of a shared machine hits both), and a figure is
the median of its R round medians; irtk/IREE is the median of the R rounds' own ratios. The
machine's load average is printed with the table.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import irtk  # noqa: E402
from common import Iree, median_time, ms  # noqa: E402
from programs import PROGRAMS  # noqa: E402
from irtk import hal  # noqa: E402


def _resident(module: Any, arrays: list[np.ndarray]) -> list[hal.BufferView]:
    device = module.device
    return [hal.BufferView(device.allocator.allocate_with_data(a.tobytes()), a.shape,
                           hal.ElementType.from_numpy(a.dtype)) for a in arrays]


def _loaded(vmfb: bytes, device: str, arrays: list[np.ndarray]
            ) -> tuple[Callable[[], Any], Any]:
    """A resident call of @main on `device` (arguments on the device, results left there), and
    the result of a whole call (numpy back) to check."""
    module = irtk.load(vmfb, device=device)
    views = _resident(module.main.module, arrays)
    result = np.asarray(module.main(*arrays))
    return (lambda: module.main(*views, device_results=True)), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iree-python", help="Python of an environment with IREE 3.13")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating rounds of irtk and IREE (medians over them)")
    ap.add_argument("--reference", action="store_true",
                    help="also time the numpy reference executor (slow)")
    ap.add_argument("--only", help="run only the programs whose name contains this")
    args = ap.parse_args()
    iree = Iree(args.iree_python)
    rng = np.random.default_rng(0)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"{os.cpu_count()} cores")
    head = (f"{'program':<26} {'native task':>11} {'native sync':>11} {'task/sync':>9} "
            f"{'reference':>10} {'numpy':>8} {'IREE':>8} {'irtk/IREE':>9} {'LLVM':>7} "
            f"{'max err':>8}")
    print(head)
    print("-" * len(head))
    for name, (mlir, shapes, ref, quick) in PROGRAMS.items():
        if args.only and args.only not in name:
            continue
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        vmfb = irtk.compile_str(mlir, target="cpu", filename="bench-cpu.mlir")
        os.environ["IRTK_CPU_EXECUTOR"] = "native"
        from hal_cpu import llvm_jit
        with tempfile.TemporaryDirectory() as cache:
            before = llvm_jit.STATS.seconds
            os.environ["IRTK_CACHE_DIR"] = cache
            irtk.load(vmfb, device="local-sync")
            llvm_cost = llvm_jit.STATS.seconds - before
            task_call, result = _loaded(vmfb, "local-task", arrays)
            sync_call, _ = _loaded(vmfb, "local-sync", arrays)
        shape_text = ",".join("x".join(map(str, s)) + "xf32" for s in shapes)
        tasks, syncs, irees, ratios = [], [], [], []
        for _ in range(max(1, args.rounds)):
            tasks.append(median_time(task_call, args.reps))
            figures = iree.figures(mlir, "local-task", shape_text, args.reps)
            if figures is not None:
                irees.append(figures["kept"])
                ratios.append(tasks[-1] / figures["kept"])
            syncs.append(median_time(sync_call, max(1, args.reps // 2)))
        task, sync = float(np.median(tasks)), float(np.median(syncs))
        iree_resident = float(np.median(irees)) if irees else None
        reference = None
        if args.reference and quick:
            os.environ["IRTK_CPU_EXECUTOR"] = "reference"
            ref_call, _ = _loaded(vmfb, "local-task", arrays)
            reference = median_time(ref_call, max(1, args.reps // 5))
            os.environ["IRTK_CPU_EXECUTOR"] = "native"
        numpy_time = median_time(lambda: ref(*arrays), args.reps)
        ratio = f"{float(np.median(ratios)):>9.2f}" if ratios else f"{'n/a':>9}"
        err = float(np.max(np.abs(result.astype(np.float64) - ref(
            *[a.astype(np.float64) for a in arrays]))))
        print(f"{name:<26} {ms(task, 11)} {ms(sync, 11)} {sync / task:>9.2f} "
              f"{ms(reference, 10)} {ms(numpy_time, 8)} {ms(iree_resident, 8)} {ratio} "
              f"{ms(llvm_cost, 7, 0)} {err:>8.1e}")


if __name__ == "__main__":
    main()
