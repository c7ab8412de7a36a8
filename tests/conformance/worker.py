"""A worker process of the conformance suite: compiles suite files for one target and runs
their functions on that target's devices, writing one JSON line per event to stdout.

    python -m tests.conformance.worker < job.json

Job: {"target": "vulkan-spirv", "root": SUITE_FOLDER, "devices": {"swiftshader": "vulkan://0",
...}, "cases": [[file, device, function], ...]}. For each file (in the order its cases come),
the file is compiled once, then for each device the file's listed functions are run in order:
    {"event": "compiled", "file": F}
    {"event": "result", "file": F, "device": D, "function": N, "status": S, "message": M,
     "seconds": how long since the previous result of the file on that device}
The suite (suite.py) kills a worker that goes silent for too long and starts another one for
the cases left, so one slow or crashing function costs only itself.
"""
from __future__ import annotations

import json
import os
import sys
import time
import zlib
from collections.abc import Callable

from irtk.check_runner import FAIL, CheckResult, compile_checks, describe, run_compiled


def run_job(job: dict, emit: Callable[[dict], None]) -> None:
    plan: dict[str, dict[str, list[str]]] = {}   # file -> device -> functions, in job order
    for file, device, function in job["cases"]:
        plan.setdefault(file, {}).setdefault(device, []).append(function)
    for file, by_device in plan.items():
        try:
            compiled = compile_checks(os.path.join(job["root"], file), job["target"])
            problem = ""
        except Exception as e:  # noqa: BLE001 - the whole file fails; the worker goes on
            compiled, problem = None, f"does not compile: {describe(e)}"
        emit({"event": "compiled", "file": file})
        for device, functions in by_device.items():
            clock = [time.monotonic()]

            def send(result: CheckResult, device: str = device, clock: list = clock) -> None:
                now = time.monotonic()
                emit({"event": "result", "file": file, "device": device,
                      "function": result.function, "status": result.status,
                      "message": result.message, "seconds": round(now - clock[0], 3)})
                clock[0] = now
            if compiled is None:
                for name in functions:
                    send(CheckResult(name, FAIL, problem))
                continue
            seed = zlib.crc32(f"{file}:{device}".encode())
            try:
                run_compiled(compiled, job["devices"][device], include_args=True, seed=seed,
                             on_result=send, only=set(functions))
            except Exception as e:  # noqa: BLE001 - e.g. the device cannot be created
                emit({"event": "device_error", "file": file, "device": device,
                      "message": describe(e)})


def main() -> int:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr   # only protocol lines go to the real stdout

    def emit(event: dict) -> None:
        out.write(json.dumps(event) + "\n")
        out.flush()

    run_job(json.load(sys.stdin), emit)
    emit({"event": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
