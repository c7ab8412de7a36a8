"""What the bench/ scripts share: the timing loop, the table cells, and IREE 3.13 run in a
separate environment through bench/iree_runner.py (irtk's own environment never has IREE).

The bench scripts import this as `common` (their own folder is first on `sys.path`).
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

RUNNER = Path(__file__).with_name("iree_runner.py")


def median_time(fn: Callable[[], object], reps: int) -> float:
    """Median wall seconds of `reps` calls of `fn`, after one warm-up call (which compiles
    pipelines, fills caches and allocates pools)."""
    fn()
    times = []
    for _ in range(max(1, reps)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ms(seconds: float | None, width: int, digits: int = 2) -> str:
    """A table cell: milliseconds right-aligned, or `n/a` for a figure that was not taken."""
    if seconds is None:
        return f"{'n/a':>{width}}"
    return f"{seconds * 1e3:>{width}.{digits}f}"


def iree_backend(device: str) -> str:
    """IREE's compiler backend for an irtk device name: llvm-cpu for local-*, else Vulkan."""
    return "llvm-cpu" if device.startswith("local") else "vulkan-spirv"


def iree_device(device: str) -> str:
    """iree_runner.py's --device for an irtk device name (`vulkan://llvmpipe` -> llvmpipe)."""
    return device.split("://")[-1]


class Iree:
    """Times IREE calls with the Python of an IREE environment. Without one, or when a run
    fails, a figure is None (printed `n/a`) and the reason is said once on stderr, so a
    missing or broken IREE never stops the irtk figures."""

    def __init__(self, python: str | None, timeout: float = 900.0) -> None:
        self.python = python
        self.timeout = timeout
        self._said: set[str] = set()

    def time(self, mlir: str, device: str, shapes: str, reps: int) -> float | None:
        """Median seconds of a whole IREE call (upload, dispatch, wait, download) of @main
        in `mlir` (text) on `device`, with random f32 inputs of `shapes`
        (`512x512xf32,512x512xf32`)."""
        return self.times(mlir, device, shapes, reps)[0]

    def times(self, mlir: str, device: str, shapes: str, reps: int
              ) -> tuple[float | None, float | None]:
        """`time`'s figure, and the median of the same call with its arguments already on the
        device (what iree-benchmark-module times): (None, None) without IREE."""
        figures = self.figures(mlir, device, shapes, reps)
        if figures is None:
            return None, None
        return figures["seconds"], figures["resident"]

    def figures(self, mlir: str, device: str, shapes: str, reps: int
                ) -> dict[str, float | None] | None:
        """Every figure of one run, in seconds: "seconds" (numpy in, results read back),
        "resident" (arguments on the device), "kept" (results left there too); None without
        IREE. "seconds" and "resident" are None where IREE cannot read the results back
        (a Vulkan result whose size is not a multiple of 4096 bytes)."""
        if not self.python:
            return None
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "prog.mlir"
            path.write_text(mlir)
            cmd = [self.python, str(RUNNER), "--mlir", str(path), "--backend",
                   iree_backend(device), "--device", iree_device(device), "--shapes", shapes,
                   "--reps", str(reps)]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout)
            except OSError as e:
                return self._fail(f"cannot run '{self.python}': {e.strerror}")
            except subprocess.TimeoutExpired:
                return self._fail(f"an IREE run on {device} took over {self.timeout:.0f} s")
        if p.returncode != 0:
            lines = (p.stderr or p.stdout).strip().splitlines()
            return self._fail(f"IREE on {device} failed: {lines[-1] if lines else p.returncode}")
        try:
            figures = json.loads(p.stdout.strip().splitlines()[-1])
            return {"kept": float(figures["kept"]),
                    **{k: None if figures[k] is None else float(figures[k])
                       for k in ("seconds", "resident")}}
        except (IndexError, ValueError, KeyError, TypeError):
            return self._fail(f"IREE on {device} printed no timing: {p.stdout[-200:]!r}")

    def _fail(self, reason: str) -> None:
        if reason not in self._said:
            self._said.add(reason)
            print(f"note: IREE figure n/a: {reason}", file=sys.stderr)
        return None
