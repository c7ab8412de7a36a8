"""The conformance suite: IREE's end-to-end check tests run on each device, with results cached
so that each file is compiled once per target and run once per device.

The work happens in one worker process per target (worker.py), which compiles each file once
and runs it on each device of that target, streaming results; the workers of both targets run
at the same time, beside the test process, which only waits. A function that takes longer
than IRTK_CONFORMANCE_TIMEOUT seconds (default 90) fails as timed out and a fresh worker goes on
with the rest, so a slow kernel or a crashing driver costs one test, not the suite.

Used by test_conformance.py (one pytest test per file x function x device) and by
scripts/conformance_report.py (counts per device; regenerates expectations.py).
"""
from __future__ import annotations

import atexit
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from irtk.check_runner import FAIL, PASS, CheckResult, find_functions
from tests.conformance import expectations

SUITE_ENV = "IRTK_CONFORMANCE_DIR"     # another copy of the suite (same layout) to run instead
SUITE_DIR = Path(__file__).resolve().parent / "iree_e2e"
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_ENV = "IRTK_CONFORMANCE_TIMEOUT"
DEFAULT_TIMEOUT = 90.0   # seconds one function (with its file's compilation) may take

# Device keys of the expectations table, the driver they need and the target they run.
DEVICES = {
    "local-task": ("local-task", "cpu"),
    "swiftshader": ("swiftshader", "vulkan-spirv"),
    "lavapipe": ("llvmpipe", "vulkan-spirv"),
}
ALL_DEVICES = "*"   # the expectations table's key for every device


def expected(case_id: str, device: str) -> tuple[str, str]:
    """(status, reason) that expectations.py records for the test `case_id` on `device`."""
    entry = expectations.EXPECTED.get(case_id, {})
    return entry.get(device) or entry.get(ALL_DEVICES) or (PASS, "")

# Files whose programs are large (big matmuls and reductions): marked slow.
SLOW_FILES = frozenset({
    "linalg/large_linalg_matmul.mlir",
    "regression/large_reduction.mlir",
    "regression/transpose.mlir",
})

REASON_LIMIT = 200   # characters of a message kept in the expectations table


@dataclass(frozen=True)
class Case:
    """One test: a function of a suite file (`file` relative to the suite folder)."""

    file: str
    function: str
    takes_args: bool

    @property
    def id(self) -> str:
        return f"{self.file}::{self.function}"


def suite_dir() -> Path:
    return Path(os.environ.get(SUITE_ENV) or SUITE_DIR)


def suite_files() -> list[str]:
    root = suite_dir()
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.mlir"))


def cases() -> list[Case]:
    """Every public function of every suite file, in file order: the zero-argument test
    functions, and the ones taking arguments (pass: they run on random inputs)."""
    found = []
    for name in suite_files():
        text = (suite_dir() / name).read_text()
        found.extend(Case(name, f.name, f.takes_args) for f in find_functions(text) if f.public)
    return found


def device_uris() -> dict[str, str]:
    """URI of each device key present on this machine ("local-task" always)."""
    uris = {"local-task": "local-task"}
    try:
        from irtk.hal import registry
        infos = registry.get_driver("vulkan").enumerate_devices()
    except Exception:  # noqa: BLE001 - no Vulkan at all: only the CPU runs the suite
        return uris
    for key, (name_part, _) in DEVICES.items():
        for info in infos:
            if key != "local-task" and name_part in info.name.lower():
                uris[key] = f"vulkan://{info.index}"
                break
    return uris


def normalize(message: str, file: str) -> str:
    """A message as the table keeps it: first line, suite paths made relative, clipped."""
    line = message.split("\n", 1)[0]
    line = line.replace(str(suite_dir() / file), file).replace(str(suite_dir()) + os.sep, "")
    line = re.sub(r"\s+", " ", line).strip()
    return line if len(line) <= REASON_LIMIT else line[:REASON_LIMIT - 3] + "..."


def timeout() -> float:
    """Seconds a worker may go without reporting before its current function fails."""
    return float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT)


Key = tuple[str, str, str]   # (file, device key, function)


class _Worker:
    """One worker process, the lines it has written (a thread reads them as they come) and
    when it last wrote one."""

    def __init__(self, job: dict) -> None:
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.conformance.worker"], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.lines: queue.Queue = queue.Queue()
        self.last_seen = time.monotonic()
        threading.Thread(target=self._read, daemon=True).start()
        self.proc.stdin.write(json.dumps(job))
        self.proc.stdin.close()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.last_seen = time.monotonic()
            self.lines.put(line)
        self.lines.put(None)

    def next_line(self, limit: float) -> str | None:
        """The next line; None at the end; raises queue.Empty once the worker has been silent
        for `limit` seconds."""
        while True:
            remaining = self.last_seen + limit - time.monotonic()
            try:
                return self.lines.get(timeout=max(remaining, 0.05))
            except queue.Empty:
                if time.monotonic() - self.last_seen >= limit:
                    raise

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.wait()

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        text = self.stderr.read().decode("utf-8", "replace").strip()
        return text[-500:] or "no message"


class _TargetRun:
    """The worker that compiles for one target and runs on its devices, and the results it
    has sent. A worker silent for longer than `timeout()` is killed: the function it was
    running fails as timed out, and a new worker takes the cases left."""

    def __init__(self, target: str, order: list[Key], uris: dict[str, str]) -> None:
        self.target = target
        self.order = order
        self.uris = uris
        self.results: dict[Key, CheckResult] = {}
        self.seconds: dict[Key, float] = {}   # how long each function ran
        self.worker: _Worker | None = None

    def start(self) -> None:
        """Start a worker for the cases without a result, unless one runs or none are left."""
        pending = self._pending()
        if self.worker is None and pending:
            devices = dict.fromkeys(k[1] for k in self.order)
            self.worker = _Worker({"target": self.target, "root": str(suite_dir()),
                                   "devices": {d: self.uris[d] for d in devices},
                                   "cases": [list(k) for k in pending]})
            _live.add(self)

    def result(self, key: Key) -> CheckResult:
        while key not in self.results:
            self.start()
            assert self.worker is not None
            try:
                line = self.worker.next_line(timeout())
            except queue.Empty:
                self._blame(f"timed out: no result within {timeout():g} s ({TIMEOUT_ENV})")
                continue
            if line is None:
                tail = self.worker.stderr_tail()
                code = self.stop()
                self._blame(f"the worker process died (exit status {code}): {tail}")
                continue
            self._take(json.loads(line))
        return self.results[key]

    def _take(self, event: dict) -> None:
        if event["event"] == "result":
            key = (event["file"], event["device"], event["function"])
            self.results[key] = CheckResult(event["function"], event["status"],
                                            event["message"])
            self.seconds[key] = event["seconds"]
        elif event["event"] == "device_error":
            for key in self._pending():
                if key[:2] == (event["file"], event["device"]):
                    self.results[key] = CheckResult(key[2], FAIL, event["message"])
        elif event["event"] == "done":
            self.stop()
            for key in self._pending():   # a function the runner did not report
                self.results[key] = CheckResult(key[2], FAIL, "no result was reported")

    def _pending(self) -> list[Key]:
        return [k for k in self.order if k not in self.results]

    def _blame(self, message: str) -> None:
        """Fail the function the worker was running with `message`; stop the worker."""
        self.stop()
        pending = self._pending()
        if pending:
            self.results[pending[0]] = CheckResult(pending[0][2], FAIL, message)

    def stop(self) -> int | None:
        code = None
        if self.worker is not None:
            code = self.worker.stop()
            self.worker = None
        _live.discard(self)
        return code


_live: set[_TargetRun] = set()


@atexit.register
def _stop_workers() -> None:
    for run in list(_live):
        run.stop()


class Runner:
    """Results of `cases` on the devices `uris` names, one worker per target."""

    def __init__(self, cases: list[Case], uris: dict[str, str],
                 wanted: set[tuple[str, str]] | None = None) -> None:
        """`wanted`: the (case id, device key) pairs to run, when not all of them."""
        self.runs: dict[str, _TargetRun] = {}
        for device_key in uris:
            target = DEVICES[device_key][1]
            if target not in self.runs:
                self.runs[target] = _TargetRun(target, [], uris)
        by_file: dict[str, list[Case]] = {}
        for case in cases:
            by_file.setdefault(case.file, []).append(case)
        for file, file_cases in by_file.items():
            for device_key in uris:
                run = self.runs[DEVICES[device_key][1]]
                run.order.extend((file, device_key, c.function) for c in file_cases
                                 if wanted is None or (c.id, device_key) in wanted)

    def result(self, case: Case, device_key: str) -> CheckResult:
        for run in self.runs.values():   # every target's worker runs from the first request
            run.start()
        return self.runs[DEVICES[device_key][1]].result((case.file, device_key, case.function))

    def seconds(self, case: Case, device_key: str) -> float | None:
        """How long the case ran (None: timed out or not reported)."""
        return self.runs[DEVICES[device_key][1]].seconds.get(
            (case.file, device_key, case.function))


_default: Runner | None = None


def select(wanted: set[tuple[str, str]]) -> None:
    """Run only these (case id, device key) pairs: the tests pytest selected, so that a
    deselected test (`-m "not slow"`, `-k`) costs nothing."""
    global _default
    _default = Runner(cases(), device_uris(), wanted)


def result(case: Case, device_key: str) -> CheckResult:
    """The result of `case` on the device, from the whole-suite runner (made once)."""
    global _default
    if _default is None:
        _default = Runner(cases(), device_uris())
    return _default.result(case, device_key)
