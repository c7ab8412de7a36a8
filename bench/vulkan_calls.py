"""Vulkan side by side with IREE: issue-sized programs, exported models and the per-call floor.

    .venv/bin/python bench/vulkan_calls.py [--iree-python PATH] [--reps N] [--rounds R]
                                     [--device NAME] [--only NAME]

For each Vulkan device (SwiftShader and lavapipe here), two tables.

Programs (the bench/programs.py ones: matmuls, a 3x3 convolution with relu, an MLP, relu(a+b),
a row sum, a softmax; and three PyTorch models as torch-mlir exported them, the import tests'
fixtures), each compiled for the device's profile (`--vulkan-target`):
- `dev`: device time per call, the sum of its dispatches' timestamp-query times, and `n`, how
  many dispatches a call makes;
- `kept`: a resident call, arguments on the device and results left there (what
  iree-benchmark-module times), irtk then IREE, and irtk / IREE;
- `whole`: numpy in, numpy out (uploads, the wait and the read-back included), both, and the
  ratio (IREE's is n/a where its Python API cannot read a Vulkan result back: a size that is
  not a multiple of 4096 bytes);
- `err`: irtk's largest difference from numpy in float64 (from torch's own output for a model).

The floor: what one call cannot go below, against what irtk and IREE pay on top of it:
- `submit`: an empty vkQueueSubmit that signals a timeline semaphore, then vkWaitSemaphores on
  it, straight through cffi (the driver's round trip plus the least any Python caller pays);
- `dispatch`: the same with one small dispatch, recorded once (its VkCommandBuffer);
- `HAL`: that dispatch through irtk's HAL (`queue_execute` and a semaphore wait);
- `irtk call` and `IREE call`: a resident call of relu(a+b) over 1024 f32 (one dispatch), and
  irtk's cost above IREE's (`irtk - IREE`).

Each round times irtk, then IREE (alternating, so a busy phase of the shared machine hits
both); a figure is the median of the R round medians, a ratio the median of the rounds' own
ratios. IREE compiles for llvmpipe on lavapipe and for its default target elsewhere
(bench/iree_runner.py); without `--iree-python` its cells read n/a.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

import irtk  # noqa: E402
from common import Iree, median_time, ms  # noqa: E402
from programs import PROGRAMS, relu_add  # noqa: E402

FIXTURES = ROOT / "tests" / "importers" / "fixtures"
# The exported models: name -> fixture (MLIR with its weights, and an .npz of input and output).
MODELS = {"MLP (exported)": "mlp", "LeNet (exported)": "lenet",
          "encoder layer (exported)": "encoder"}
TINY = 1024  # relu(a+b) over this many f32: the per-call program


@dataclass
class Case:
    """One row: MLIR, example inputs, and the float64 answer they must give."""

    mlir: str
    inputs: list[np.ndarray]
    expected: np.ndarray

    @property
    def shapes(self) -> str:
        return ",".join("x".join(map(str, a.shape)) + "xf32" for a in self.inputs)


def cases(only: str | None) -> dict[str, Case]:
    rng = np.random.default_rng(0)
    out: dict[str, Case] = {}
    for name, (mlir, shapes, ref, _) in PROGRAMS.items():
        if only and only not in name:
            continue
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        out[name] = Case(mlir, arrays, ref(*[a.astype(np.float64) for a in arrays]))
    for name, fixture in MODELS.items():
        if only and only not in name:
            continue
        data = np.load(FIXTURES / f"{fixture}.npz")
        out[name] = Case((FIXTURES / f"{fixture}.mlir").read_text(), [data["x"]],
                         data["y0"].astype(np.float64))
    return out


@dataclass
class Figures:
    """The rounds' figures of one row (seconds)."""

    device: list[float] = field(default_factory=list)
    kept: list[float] = field(default_factory=list)
    whole: list[float] = field(default_factory=list)
    iree_kept: list[float] = field(default_factory=list)
    iree_whole: list[float] = field(default_factory=list)
    kept_ratio: list[float] = field(default_factory=list)
    whole_ratio: list[float] = field(default_factory=list)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _ratio(values: list[float], width: int) -> str:
    return f"{statistics.median(values):>{width}.2f}" if values else f"{'n/a':>{width}}"


def _iree_name(d: Any) -> str:
    """The device for bench/iree_runner.py, which picks IREE's Vulkan device by a word of its
    name (`vulkan://swiftshader`)."""
    return f"vulkan://{d.name.split()[0].lower()}"


def program_table(d: Any, rows: dict[str, Case], iree: Iree, reps: int, rounds: int) -> None:
    uri, profile = d.uri, d.vulkan_target
    head = (f"{'program':<26} {'dev':>8} {'n':>3} {'kept':>8} {'IREE':>8} {'ratio':>6} "
            f"{'whole':>8} {'IREE':>8} {'ratio':>6} {'err':>8}")
    print(f"\n{uri} ({d.name}): programs (ms; ratio = irtk / IREE)")
    print(head)
    print("-" * len(head))
    for name, case in rows.items():
        module = irtk.load(irtk.compile_str(case.mlir, target="vulkan-spirv",
                                            vulkan_target=profile), device=uri)
        got = np.asarray(module.main(*case.inputs))
        err = float(np.max(np.abs(got.astype(np.float64) - case.expected)))
        f = Figures()
        dispatches = 0.0
        for _ in range(max(1, rounds)):
            result = module.main.benchmark(*case.inputs, repetitions=reps, min_time=0.0,
                                           warmup=1)
            f.kept.append(statistics.median(result.times))
            f.device.append(sum(d["total_ms"] for d in result.dispatches) / 1e3 / reps)
            dispatches = sum(d["count"] for d in result.dispatches) / reps
            f.whole.append(median_time(lambda: np.asarray(module.main(*case.inputs)), reps))
            figures = iree.figures(case.mlir, _iree_name(d), case.shapes, reps)
            if figures is not None:
                kept, whole = figures["kept"], figures["seconds"]
                assert kept is not None
                f.iree_kept.append(kept)
                f.kept_ratio.append(f.kept[-1] / kept)
                if whole is not None:   # n/a where IREE cannot read the results back
                    f.iree_whole.append(whole)
                    f.whole_ratio.append(f.whole[-1] / whole)
        print(f"{name:<26} {ms(_median(f.device), 8)} {dispatches:>3.0f} "
              f"{ms(_median(f.kept), 8)} {ms(_median(f.iree_kept), 8)} "
              f"{_ratio(f.kept_ratio, 6)} {ms(_median(f.whole), 8)} "
              f"{ms(_median(f.iree_whole), 8)} {_ratio(f.whole_ratio, 6)} {err:>8.1e}")
        del module


def _raw_submit(device: Any, command_buffers: list[Any]) -> Callable[[], None]:
    """A submission of these VkCommandBuffers signalling a private timeline semaphore, and the
    wait on it, through cffi with nothing of irtk's in between: the floor of one submit + wait
    from Python."""
    from hal_vulkan import fast
    semaphore = fast.create_timeline(device.handle, 0)
    value = [0]

    def call() -> None:
        value[0] += 1
        fast.queue_submit(device.queue.handle, [], [(semaphore, value[0])], command_buffers)
        if not fast.SemaphoreWait([(semaphore, value[0])]).wait(device.handle, 10**10):
            raise RuntimeError("an empty submission did not finish in 10 s")
    return call


def _hal_dispatch(device: Any) -> tuple[Callable[[], None], Any]:
    """One small dispatch through the HAL, recorded once and resubmitted (bench/hal.py), and
    the VkCommandBuffer it submits."""
    from irtk.hal import BindingRef, Fence
    from tests.hal import programs
    program = programs.load(device, TINY)
    buffers = [device.allocator.allocate(4 * TINY) for _ in range(3)]
    cb = device.create_command_buffer(0)
    cb.dispatch(program.executable, program.executable.lookup("mul_add"), program.workgroups,
                program.mul_add_constants, [BindingRef(b, 0, -1) for b in buffers])
    cb.finalize()

    def call() -> None:
        semaphore = device.create_semaphore(0)
        device.queue_execute(Fence(), Fence([(semaphore, 1)]), [cb])
        semaphore.wait(1)
    return call, cb.prepare(None)[0].handle


def floor_table(d: Any, iree: Iree, reps: int, rounds: int) -> None:
    uri, profile = d.uri, d.vulkan_target
    rng = np.random.default_rng(1)
    mlir = relu_add(TINY)
    arrays = [rng.standard_normal(TINY).astype(np.float32) for _ in range(2)]
    module = irtk.load(irtk.compile_str(mlir, target="vulkan-spirv", vulkan_target=profile),
                       device=uri)
    device = module.main.module.device
    hal_dispatch, handle = _hal_dispatch(device)
    calls = {"submit": _raw_submit(device, []), "dispatch": _raw_submit(device, [handle]),
             "HAL": hal_dispatch}
    figures: dict[str, list[float]] = {k: [] for k in (*calls, "irtk", "IREE", "over")}
    for _ in range(max(1, rounds)):
        for key, call in calls.items():
            figures[key].append(median_time(call, reps * 5))
        result = module.main.benchmark(*arrays, repetitions=reps * 5, min_time=0.0,
                                       device_times=False)
        figures["irtk"].append(statistics.median(result.times))
        theirs = iree.figures(mlir, _iree_name(d), f"{TINY}xf32,{TINY}xf32", reps * 5)
        if theirs is not None:
            kept = theirs["kept"]
            assert kept is not None
            figures["IREE"].append(kept)
            figures["over"].append(figures["irtk"][-1] - kept)
    print(f"\n{uri} ({d.name}): the per-call floor (ms)")
    head = (f"{'submit':>8} {'dispatch':>8} {'HAL':>8} {'irtk call':>9} {'IREE call':>9} "
            f"{'irtk - IREE':>11}")
    print(head)
    print("-" * len(head))
    print(" ".join(ms(_median(figures[k]), w, 3) for k, w in
                   (("submit", 8), ("dispatch", 8), ("HAL", 8), ("irtk", 9), ("IREE", 9), ("over", 11))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iree-python", help="Python of an environment with IREE 3.13")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating rounds of irtk and IREE (medians over them)")
    ap.add_argument("--device", help="only the Vulkan devices whose name contains this")
    ap.add_argument("--only", help="only the programs whose name contains this")
    args = ap.parse_args()
    iree = Iree(args.iree_python)
    rows = cases(args.only)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"{os.cpu_count()} cores")
    vulkan = [d for d in irtk.devices() if d.driver == "vulkan"]
    if not vulkan:
        raise SystemExit("no Vulkan device")
    for d in vulkan:
        if args.device and args.device not in d.uri and args.device not in d.name:
            continue
        floor_table(d, iree, args.reps, args.rounds)
        program_table(d, rows, iree, args.reps, args.rounds)


if __name__ == "__main__":
    main()
