"""Timing an exported function as `iree-benchmark-module` does: inputs resident on the device.

The arguments are converted and uploaded once; each call then passes the same buffer views, so
what is timed is the call itself (host code, submissions, the device's work and the wait for
it), not moving numpy arrays. A repetition calls the function until `min_time` seconds have
passed and reports the mean time per call; the summary is over the repetitions.

Then, unless `device_times=False`, a few more calls run traced (`irtk.tracing`) for the device
time of each dispatch: Vulkan's timestamp queries, the CPU drivers' host clock. They are kept
apart from the timed calls, which tracing would slow down.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from irtk import tracing
from irtk.errors import InputError


class Benchmarked(Protocol):
    """What `benchmark` needs of an exported function (`irtk.runtime.module.ExportedFunction`;
    a protocol, so this module does not import that one)."""

    name: str

    @property
    def module(self) -> Any: ...

    def prepare(self, args: tuple[Any, ...] | list[Any]) -> list[Any]: ...


@dataclass(frozen=True)
class BenchmarkResult:
    """Seconds per call of each repetition (`times`), with how many calls each made."""

    function: str
    device: str
    times: list[float]
    iterations: list[int]
    min_time: float
    warmup: int
    # Per dispatch (in the order first seen): name, count, total/median/min/max ms of device time.
    dispatches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return 1e3 * statistics.median(self.times)

    @property
    def min_ms(self) -> float:
        return 1e3 * min(self.times)

    @property
    def max_ms(self) -> float:
        return 1e3 * max(self.times)

    @property
    def mean_ms(self) -> float:
        return 1e3 * statistics.fmean(self.times)

    def to_dict(self) -> dict[str, Any]:
        """What `irtk benchmark --json` prints."""
        return {"function": self.function, "device": self.device,
                "repetitions": len(self.times), "iterations": list(self.iterations),
                "min_time_s": self.min_time, "warmup": self.warmup,
                "median_ms": self.median_ms, "min_ms": self.min_ms, "max_ms": self.max_ms,
                "mean_ms": self.mean_ms, "times_ms": [1e3 * t for t in self.times],
                "dispatches": list(self.dispatches)}

    def table(self) -> str:
        """A Google-benchmark-like table: one row per repetition, then median, min, max."""
        name = f"BM_{self.function}"
        width = max(len(name) + 16, 28)
        rows = [f"{'Benchmark':<{width}} {'Time (ms)':>12} {'Iterations':>11}",
                "-" * (width + 25)]
        for i, (t, n) in enumerate(zip(self.times, self.iterations)):
            rows.append(f"{name + f'/repetition:{i + 1}':<{width}} {1e3 * t:>12.4f} {n:>11}")
        for label, value in (("median", self.median_ms), ("min", self.min_ms),
                             ("max", self.max_ms)):
            rows.append(f"{name + '_' + label:<{width}} {value:>12.4f}")
        if self.dispatches:
            rows.append("")
            rows.append(f"device time per dispatch (median of {self.dispatches[0]['count']} "
                        "traced calls):")
            for d in self.dispatches:
                rows.append(f"  {d['name']:<{max(width - 2, 1)}} {d['median_ms']:>12.4f}")
        return "\n".join(rows)


def benchmark(function: Benchmarked, args: tuple[Any, ...] | list[Any], *,
              repetitions: int = 5, min_time: float = 0.1, warmup: int = 1,
              device_times: bool = True) -> BenchmarkResult:
    """Time `function(*args)` with the arguments made resident once (module docstring)."""
    if repetitions < 1:
        raise InputError(f"benchmark repetitions must be at least 1, got {repetitions}")
    if not min_time >= 0:
        raise InputError(f"benchmark min time must be a number of seconds >= 0, got {min_time}")
    if warmup < 0:
        raise InputError(f"benchmark warm-up calls must be at least 0, got {warmup}")
    context = function.module.context
    vm_args = function.prepare(args)
    for _ in range(warmup):
        context.call(function.name, list(vm_args))
    times, iterations = [], []
    for _ in range(repetitions):
        count = 0
        start = time.perf_counter()
        while True:
            context.call(function.name, list(vm_args))
            count += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        times.append(elapsed / count)
        iterations.append(count)
    dispatches = _dispatch_times(function, vm_args, repetitions) if device_times else []
    return BenchmarkResult(function.name, function.module.device.info.name, times, iterations,
                           min_time, warmup, dispatches)


def _dispatch_times(function: Benchmarked, vm_args: list[Any],
                    calls: int) -> list[dict[str, Any]]:
    """Device time of each dispatch over `calls` traced calls (into the active trace if there
    is one, else a private one)."""
    context = function.module.context
    own = tracing.active is None
    tracer = tracing.start() if own else tracing.active
    assert tracer is not None
    # Device times of the timed calls may still be pending in the active trace: in now, so
    # they are not counted as these calls'.
    tracer.flush()
    first = len(tracer.events)
    try:
        for _ in range(calls):
            context.call(function.name, list(vm_args))
    finally:
        if own:
            tracing.stop()
        else:
            tracer.flush()
    stats = tracing.Statistics.of(tracer.events[first:])
    return [d.to_dict() for d in stats.dispatches.values()]
