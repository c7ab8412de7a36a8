"""Tracing: what a program did, when, on which thread and on which device.

IREE traces with Tracy; irtk records events in memory while a `Tracer` is active and writes them
in the Chrome trace-event JSON format, which Perfetto's UI (ui.perfetto.dev) and chrome://tracing
open. One tracer is active per process at a time: the hooks read the module-level `active`, so
tracing that is off costs one attribute read per hooked operation.

What is recorded (docs/cli.md, "Traces"):
- VM calls (`irtk.vm`'s `Context.call`), and each `hal.*` import the program calls;
- submissions on each device (`queue_execute`);
- host<->device transfers of arguments and results (`irtk.runtime`), with their bytes;
- each dispatch with its device time: Vulkan from timestamp queries written around each
  vkCmdDispatch, the CPU drivers from the host clock around each dispatch's work.

Host events sit on one track per thread; a device's dispatches on a track of their own. Times
are the host's monotonic clock; device timestamps are mapped onto it (`device_time_base`).
A module without its own dependencies: every layer may hook into it.
"""
from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Tracer", "Event", "Statistics", "active", "start", "stop", "tracing",
           "device_time_base"]

# The tracer events go to, or None (the hooks' fast path).
active: "Tracer | None" = None
_switch = threading.Lock()

HOST = "host"  # the track group of host threads; devices are named by their device name


@dataclass(frozen=True)
class Event:
    """One complete event: `start_ns`/`duration_ns` on the host's monotonic clock; `track` is
    HOST (with the thread's `thread` id) or a device name."""

    name: str
    category: str
    start_ns: int
    duration_ns: int
    track: str = HOST
    thread: int = 0
    args: dict[str, Any] = field(default_factory=dict)


class Tracer:
    """Collects events while active (`start`/`stop`, or `with irtk.tracing.tracing() as t`).

    Devices with timing still in flight register a flush (`add_flush`), run by `stop` so that
    every dispatch submitted while tracing has its device time before the trace is written."""

    def __init__(self) -> None:
        self.start_ns = time.monotonic_ns()
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self._flushes: dict[int, Callable[[], None]] = {}
        self._thread_names: dict[int, str] = {}

    # -- recording ---------------------------------------------------------------------------
    def add(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    @contextmanager
    def span(self, name: str, category: str, **args: Any) -> Iterator[dict[str, Any]]:
        """Time the `with` body on the calling thread; the yielded dict takes more args."""
        thread = threading.get_ident()
        if thread not in self._thread_names:
            self._thread_names[thread] = threading.current_thread().name
        start = time.monotonic_ns()
        try:
            yield args
        finally:
            self.add(Event(name, category, start, time.monotonic_ns() - start, HOST, thread,
                           args))

    def device_event(self, device: str, name: str, category: str, start_ns: int,
                     duration_ns: int, **args: Any) -> None:
        self.add(Event(name, category, start_ns, duration_ns, device, 0, args))

    def add_flush(self, key: object, flush: Callable[[], None]) -> None:
        """`flush()` completes what `key` (a device) still measures; run once by `stop`."""
        with self._lock:
            self._flushes.setdefault(id(key), flush)

    def flush(self) -> None:
        with self._lock:
            flushes = list(self._flushes.values())
            self._flushes.clear()
        for f in flushes:
            f()

    # -- results -----------------------------------------------------------------------------
    def statistics(self) -> "Statistics":
        with self._lock:
            return Statistics.of(list(self.events))

    def to_chrome(self) -> dict[str, Any]:
        """The Chrome trace-event JSON object (times in microseconds from the trace's start)."""
        with self._lock:
            events = sorted(self.events, key=lambda e: e.start_ns)
        pids: dict[str, int] = {HOST: 1}
        tids: dict[int, int] = {}
        out: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "irtk host"}}]
        for e in events:
            if e.track not in pids:
                pids[e.track] = len(pids) + 1
                out.append({"name": "process_name", "ph": "M", "pid": pids[e.track],
                            "args": {"name": f"device: {e.track}"}})
                out.append({"name": "thread_name", "ph": "M", "pid": pids[e.track], "tid": 1,
                            "args": {"name": "queue"}})
            if e.track == HOST and e.thread not in tids:
                tids[e.thread] = len(tids) + 1
                out.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tids[e.thread],
                            "args": {"name": self._thread_names.get(e.thread, "thread")}})
            out.append({"name": e.name, "cat": e.category, "ph": "X",
                        "ts": (e.start_ns - self.start_ns) / 1e3, "dur": e.duration_ns / 1e3,
                        "pid": pids[e.track],
                        "tid": tids[e.thread] if e.track == HOST else 1,
                        "args": e.args})
        return {"traceEvents": out, "displayTimeUnit": "ms",
                "otherData": {"producer": "irtk"}}

    def save(self, path: str | os.PathLike) -> None:
        """Write the trace; a temporary file renamed into place, so nothing is half-written."""
        text = json.dumps(self.to_chrome())
        tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def start(tracer: Tracer | None = None) -> Tracer:
    """Make `tracer` (a new one by default) the active one; RuntimeError if one already is."""
    global active
    with _switch:
        if active is not None:
            raise RuntimeError("a trace is already being recorded; stop it first")
        active = tracer if tracer is not None else Tracer()
        return active


def stop() -> Tracer:
    """Complete the device timings in flight and deactivate the tracer; returns it."""
    global active
    tracer = active
    if tracer is None:
        raise RuntimeError("no trace is being recorded")
    try:
        tracer.flush()
    finally:
        with _switch:
            active = None
    return tracer


@contextmanager
def tracing(path: str | os.PathLike | None = None) -> Iterator[Tracer]:
    """Trace the `with` body; the trace is written to `path` (if given) at the end."""
    tracer = start()
    try:
        yield tracer
    finally:
        stop()
        if path is not None:
            tracer.save(path)


def device_time_base(submit_ns: int, first_device_ns: int, now_ns: int) -> int:
    """What to add to a submission's device timestamps to put them on the host's monotonic
    clock. Software drivers (lavapipe, SwiftShader) stamp with that clock itself: a first
    timestamp between the submit and now is taken as it is. Any other clock is aligned so the
    submission's first dispatch starts when it was submitted."""
    if submit_ns - 1_000_000 <= first_device_ns <= now_ns:
        return 0
    return submit_ns - first_device_ns


@dataclass
class DispatchStatistics:
    device: str
    name: str
    times_s: list[float] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.device}: {self.name}"

    @property
    def count(self) -> int:
        return len(self.times_s)

    def to_dict(self) -> dict[str, Any]:
        t = self.times_s
        return {"device": self.device, "name": self.name, "count": len(t), "total_ms": 1e3 * sum(t),
                "median_ms": 1e3 * statistics.median(t), "min_ms": 1e3 * min(t),
                "max_ms": 1e3 * max(t)}


@dataclass
class Statistics:
    """Counts and times over a trace's events (`irtk run --print_statistics`)."""

    calls: int = 0
    call_s: float = 0.0
    submissions: int = 0
    dispatches: dict[tuple[str, str], DispatchStatistics] = field(default_factory=dict)
    bytes_uploaded: int = 0
    bytes_downloaded: int = 0
    hal_calls: Counter = field(default_factory=Counter)

    @classmethod
    def of(cls, events: list[Event]) -> "Statistics":
        s = cls()
        for e in events:
            if e.category == "call":
                s.calls += 1
                s.call_s += e.duration_ns / 1e9
            elif e.category == "submit":
                s.submissions += 1
            elif e.category == "dispatch":
                key = (e.track, e.name)
                s.dispatches.setdefault(key, DispatchStatistics(*key)).times_s.append(
                    e.duration_ns / 1e9)
            elif e.category == "transfer":
                if e.args.get("direction") == "upload":
                    s.bytes_uploaded += int(e.args.get("bytes", 0))
                else:
                    s.bytes_downloaded += int(e.args.get("bytes", 0))
            elif e.category == "hal":
                s.hal_calls[e.name] += 1
        return s

    @property
    def dispatch_count(self) -> int:
        return sum(d.count for d in self.dispatches.values())

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "call_ms": 1e3 * self.call_s,
                "submissions": self.submissions, "dispatch_count": self.dispatch_count,
                "dispatches": [d.to_dict() for d in self.dispatches.values()],
                "bytes_uploaded": self.bytes_uploaded, "bytes_downloaded": self.bytes_downloaded,
                "hal_calls": dict(sorted(self.hal_calls.items()))}

    def table(self) -> str:
        """What `--print_statistics` prints."""
        lines = [f"calls: {self.calls} ({1e3 * self.call_s:.3f} ms)",
                 f"submissions: {self.submissions}",
                 f"dispatches: {self.dispatch_count}",
                 f"bytes uploaded: {self.bytes_uploaded}",
                 f"bytes downloaded: {self.bytes_downloaded}"]
        if self.dispatches:
            width = max(len(d.label) for d in self.dispatches.values())
            lines.append(f"  {'dispatch':<{width}} {'count':>6} {'total ms':>10} "
                         f"{'median ms':>10} {'min ms':>10} {'max ms':>10}")
            for d in self.dispatches.values():
                r = d.to_dict()
                lines.append(f"  {d.label:<{width}} {r['count']:>6} {r['total_ms']:>10.4f} "
                             f"{r['median_ms']:>10.4f} {r['min_ms']:>10.4f} "
                             f"{r['max_ms']:>10.4f}")
        if self.hal_calls:
            lines.append("hal calls: " + ", ".join(f"{n} {c}" for n, c in
                                                    sorted(self.hal_calls.items())))
        return "\n".join(lines)
