"""Codegen speed on contractions and reductions: a 512x512x512 f32 matmul and a 1024x1024 f32
row sum on lavapipe and SwiftShader, two ways, next to numpy and IREE 3.13 on the same drivers
when an IREE environment is given (`--iree-python`, see bench/iree_runner.py):
- the kernel alone: compiled from the kernel a linalg.generic matmul / row sum gives, and
  dispatched through the HAL directly (one recorded command buffer re-submitted);
- a whole irtk call: the same computation written as MLIR (linalg.fill + linalg.matmul; a
  linalg.generic row sum), compiled by irtk's compiler for the device's profile
  (`--vulkan-target`) and called through the runtime's Python API with numpy inputs, the
  result read back: arguments uploaded, dispatches, wait, download. IREE's figure is the same
  whole call;
- a resident call: the same call with its arguments already on the device (buffer views made
  once), the result still read back: what iree-benchmark-module times, and IREE's second
  figure.

    .venv/bin/python bench/linalg.py [--iree-python PATH] [--reps N] [--runs R] [--devices a,b]
                                     [--only matmul|row-sum]

Prints one table: the best over R runs (on a shared machine the slowest runs measure the load,
not the code) of the median over N calls of the kernel's device time (timestamp queries around
the dispatch) and wall time (submit, wait), and of the whole call; the strategy codegen chose
for the kernel; the largest error of both results against numpy in float64. Kernel and call
runs alternate: on the 2-core machine a process that takes a core for a while makes the
software drivers' dispatches up to twice as slow, and measuring all kernel runs before all call
runs once read as a gap between the two that the code did not have.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import irtk  # noqa: E402
from irtk import hal  # noqa: E402
from common import Iree, median_time, ms  # noqa: E402
from irtk.compiler.codegen.spirv import (EXECUTABLE_FORMAT, compile_kernel,  # noqa: E402
                                         pack_executable)
from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand  # noqa: E402
from irtk.compiler.targets import VULKAN_PROFILES  # noqa: E402

DEVICES = ("llvmpipe", "swiftshader")


def _map(num_dims: int, dims: list[int]) -> AffineMap:
    return AffineMap(num_dims, tuple(tuple(1 if j == d else 0 for j in range(num_dims + 1))
                                     for d in dims))


def matmul_kernel(m: int, n: int, k: int) -> Kernel:
    """C[m, n] += A[m, k] * B[k, n], as dispatch formation builds it from linalg.matmul."""
    return Kernel("matmul", (m, n, k),
                  [Operand(0, "f32", (m, k), _map(3, [0, 2])),
                   Operand(1, "f32", (k, n), _map(3, [2, 1]))],
                  [Operand(2, "f32", (m, n), _map(3, [0, 1]))],
                  [Op("arith.mulf", (0, 1), "f32"), Op("arith.addf", (2, 3), "f32")], [4],
                  ("parallel", "parallel", "reduction"))


def row_sum_kernel(rows: int, cols: int) -> Kernel:
    """S[r] += X[r, c]: a linalg.generic sum over the last dimension."""
    return Kernel("row_sum", (rows, cols), [Operand(0, "f32", (rows, cols), _map(2, [0, 1]))],
                  [Operand(1, "f32", (rows,), _map(2, [0]))],
                  [Op("arith.addf", (1, 0), "f32")], [2], ("parallel", "reduction"))


MATMUL_MLIR = """func.func @main(%a: tensor<512x512xf32>, %b: tensor<512x512xf32>) -> tensor<512x512xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<512x512xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<512x512xf32>) -> tensor<512x512xf32>
  %r = linalg.matmul ins(%a, %b : tensor<512x512xf32>, tensor<512x512xf32>)
                     outs(%c : tensor<512x512xf32>) -> tensor<512x512xf32>
  return %r : tensor<512x512xf32>
}
"""

ROW_SUM_MLIR = """func.func @main(%x: tensor<1024x1024xf32>) -> tensor<1024xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<1024xf32>) -> tensor<1024xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<1024x1024xf32>) outs(%c : tensor<1024xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<1024xf32>
  return %r : tensor<1024xf32>
}
"""


def run_on_device(device_name: str, kernel: Kernel, inputs: list[np.ndarray], reps: int
                  ) -> tuple[str, float, float, np.ndarray]:
    """(strategy, median device seconds, median wall seconds, result) of one kernel."""
    from irtk.hal import registry
    from irtk.hal.command_buffer import BindingRef
    from irtk.hal.semaphore import Fence

    profile = VULKAN_PROFILES[device_name]
    compiled = compile_kernel(kernel, profile)
    device = registry.get_device(f"vulkan://{device_name}")
    executable = device.create_executable(EXECUTABLE_FORMAT, pack_executable([compiled], profile))
    buffers = {o.binding: device.allocator.allocate_with_data(np.ascontiguousarray(a).tobytes())
               for o, a in zip(kernel.inputs, inputs)}
    output = kernel.outputs[0]
    buffers[output.binding] = device.allocator.allocate_with_data(bytes(output.byte_size))
    refs = [BindingRef(buffers[b], 0, buffers[b].size) for b, _ in compiled.bindings]
    command_buffer = device.create_command_buffer(timestamps=True)
    command_buffer.dispatch(executable, executable.lookup(compiled.entry_point),
                            compiled.workgroup_count, [], refs)
    command_buffer.finalize()
    semaphore = device.create_semaphore(0)
    device_times, wall_times = [], []
    for rep in range(reps + 1):
        # Outputs accumulate: clear before each call so the last result is checkable.
        buffers[output.binding].write(bytes(output.byte_size), 0)
        start = time.perf_counter()
        device.queue_execute(Fence(), Fence([(semaphore, rep + 1)]), [command_buffer])
        assert semaphore.wait(rep + 1, timeout=600.0), "dispatch did not finish"
        wall = time.perf_counter() - start
        if rep:  # the first call warms caches and compiles the pipeline
            wall_times.append(wall)
            device_times.append(command_buffer.dispatch_times()[0])
    result = np.frombuffer(buffers[output.binding].read(), np.float32).reshape(output.shape)
    command_buffer.release()
    executable.release()
    for buffer in buffers.values():
        buffer.release()
    return (compiled.strategy, statistics.median(device_times), statistics.median(wall_times),
            result.copy())


def load_call(device_name: str, mlir: str) -> Any:
    """@main of `mlir`, compiled for the device's profile and loaded through the runtime's
    Python API (called with numpy arguments or buffer views, it returns the result read
    back)."""
    vmfb = irtk.compile_str(mlir, target="vulkan-spirv", vulkan_target=device_name,
                            filename=f"bench-{device_name}.mlir")
    return irtk.load(vmfb, device=f"vulkan://{device_name}").main


def on_device(call: Any, arrays: list[np.ndarray]) -> list[hal.BufferView]:
    """The arrays as buffer views on the call's device (uploaded once)."""
    device = call.module.device
    return [hal.BufferView(device.allocator.allocate_with_data(a.tobytes()), a.shape,
                           hal.ElementType.from_numpy(a.dtype)) for a in arrays]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iree-python", help="Python of an environment with IREE 3.13")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--runs", type=int, default=1, help="runs per figure; the best is shown")
    ap.add_argument("--devices", default=",".join(DEVICES))
    ap.add_argument("--only", choices=("matmul", "row-sum"),
                    help="time one of the two computations only")
    args = ap.parse_args()
    iree = Iree(args.iree_python)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)
    x = rng.standard_normal((1024, 1024)).astype(np.float32)
    cases = [
        ("matmul 512x512x512 f32", matmul_kernel(512, 512, 512), [a, b],
         a.astype(np.float64) @ b.astype(np.float64), lambda: a @ b, MATMUL_MLIR,
         "512x512xf32,512x512xf32"),
        ("row sum 1024x1024 f32", row_sum_kernel(1024, 1024), [x],
         x.astype(np.float64).sum(axis=1), lambda: x.sum(axis=1), ROW_SUM_MLIR,
         "1024x1024xf32"),
    ]
    if args.only:
        cases = [c for c in cases if c[0].startswith(args.only.replace("-", " "))]
    header = (f"{'kernel':<24} | {'device':<12} | {'strategy':<10} | {'device ms':>10} | "
              f"{'wall ms':>9} | {'call ms':>8} | {'resident':>8} | {'numpy ms':>9} | "
              f"{'IREE call':>9} | {'IREE res.':>9} | {'max error':>9}")
    print(header)
    print("-" * len(header))
    runs = max(1, args.runs)
    for title, kernel, inputs, expected, np_fn, mlir, shapes in cases:
        np_s = median_time(np_fn, args.reps)
        for device in args.devices.split(","):
            try:
                call = load_call(device, mlir)
                views = on_device(call, inputs)
                kernel_runs, call_runs, resident_runs = [], [], []
                for _ in range(runs):  # alternating, so that a change of load hits all
                    kernel_runs.append(run_on_device(device, kernel, inputs, args.reps))
                    call_runs.append(median_time(lambda: call(*inputs), args.reps))
                    resident_runs.append(median_time(lambda: call(*views), args.reps))
                strategy, dev_s, wall_s, result = min(kernel_runs, key=lambda r: r[1])
                call_s, resident_s = min(call_runs), min(resident_runs)
                call_results = [np.asarray(call(*inputs)), np.asarray(call(*views))]
            except Exception as exc:  # noqa: BLE001 - a missing driver is reported, not fatal
                print(f"{title:<24} | {device:<12} | unavailable: {type(exc).__name__}: {exc}")
                continue
            error = max(float(np.abs(r - expected).max()) for r in [result, *call_results])
            iree_s, iree_resident_s = iree.times(mlir, f"vulkan://{device}", shapes, args.reps)
            print(f"{title:<24} | {device:<12} | {strategy:<10} | {ms(dev_s, 10)} | "
                  f"{ms(wall_s, 9)} | {ms(call_s, 8)} | {ms(resident_s, 8)} | {ms(np_s, 9)} | "
                  f"{ms(iree_s, 9)} | {ms(iree_resident_s, 9)} | {error:>9.2e}")


if __name__ == "__main__":
    main()
