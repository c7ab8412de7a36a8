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
from irtk import hal  # noqa: E402


def _matmul(m: int, n: int, k: int) -> str:
    return f"""
func.func @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)
                     outs(%f : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}"""


CONV = """
func.func @main(%x: tensor<1x58x58x64xf32>, %w: tensor<3x3x64x64xf32>) -> tensor<1x56x56x64xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x56x56x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w : tensor<1x58x58x64xf32>, tensor<3x3x64x64xf32>) outs(%f : tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
       ins(%c : tensor<1x56x56x64xf32>) outs(%e : tensor<1x56x56x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.maximumf %v, %z : f32
    linalg.yield %m : f32
  } -> tensor<1x56x56x64xf32>
  return %r : tensor<1x56x56x64xf32>
}"""

MLP = """
func.func @main(%x: tensor<1x784xf32>, %w1: tensor<784x256xf32>, %w2: tensor<256x10xf32>) -> tensor<1x10xf32> {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<1x256xf32>
  %f1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<1x784xf32>, tensor<784x256xf32>) outs(%f1 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>],
       iterator_types = ["parallel", "parallel"]} ins(%h : tensor<1x256xf32>) outs(%e1 : tensor<1x256xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.maximumf %v, %z : f32
    linalg.yield %m : f32
  } -> tensor<1x256xf32>
  %e2 = tensor.empty() : tensor<1x10xf32>
  %f2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<1x10xf32>) -> tensor<1x10xf32>
  %y = linalg.matmul ins(%r, %w2 : tensor<1x256xf32>, tensor<256x10xf32>) outs(%f2 : tensor<1x10xf32>) -> tensor<1x10xf32>
  return %y : tensor<1x10xf32>
}"""

RELU_ADD = """
func.func @main(%a: tensor<1048576xf32>, %b: tensor<1048576xf32>) -> tensor<1048576xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1048576xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d) -> (d)>, affine_map<(d) -> (d)>, affine_map<(d) -> (d)>],
       iterator_types = ["parallel"]} ins(%a, %b : tensor<1048576xf32>, tensor<1048576xf32>) outs(%e : tensor<1048576xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %m = arith.maximumf %s, %z : f32
    linalg.yield %m : f32
  } -> tensor<1048576xf32>
  return %r : tensor<1048576xf32>
}"""

ROW_SUM = """
func.func @main(%x: tensor<1024x1024xf32>) -> tensor<1024xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1024xf32>) -> tensor<1024xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
       iterator_types = ["parallel", "reduction"]} ins(%x : tensor<1024x1024xf32>) outs(%f : tensor<1024xf32>) {
  ^bb0(%v: f32, %a: f32):
    %t = arith.addf %a, %v : f32
    linalg.yield %t : f32
  } -> tensor<1024xf32>
  return %r : tensor<1024xf32>
}"""

SOFTMAX = """
func.func @main(%x: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %e = tensor.empty() : tensor<256x1024xf32>
  %r = linalg.softmax dimension(1) ins(%x : tensor<256x1024xf32>) outs(%e : tensor<256x1024xf32>) -> tensor<256x1024xf32>
  return %r : tensor<256x1024xf32>
}"""


def _conv_relu(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """NHWC x HWCF, stride 1, no padding, then relu (as CONV)."""
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))  # n,h,w,c,kh,kw
    return np.maximum(np.einsum("nhwcij,ijcf->nhwf", windows, w, optimize=True), 0)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# name -> (MLIR, input shapes, numpy's computation, reference executor is quick enough)
PROGRAMS: dict[str, tuple[str, list[tuple[int, ...]], Callable[..., Any], bool]] = {
    "matmul 512^3": (_matmul(512, 512, 512), [(512, 512), (512, 512)], np.matmul, True),
    "matmul 1024^3": (_matmul(1024, 1024, 1024), [(1024, 1024), (1024, 1024)], np.matmul,
                      False),
    "conv 3x3 56x56x64 + relu": (CONV, [(1, 58, 58, 64), (3, 3, 64, 64)], _conv_relu, True),
    "MLP 1x784->256->10": (MLP, [(1, 784), (784, 256), (256, 10)],
                           lambda x, a, b: np.maximum(x @ a, 0) @ b, True),
    "relu(a+b) 1M": (RELU_ADD, [(1048576,), (1048576,)], lambda a, b: np.maximum(a + b, 0),
                     True),
    "row sum 1024^2": (ROW_SUM, [(1024, 1024)], lambda x: x.sum(axis=1), True),
    "softmax 256x1024": (SOFTMAX, [(256, 1024)], _softmax, True),
}


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
