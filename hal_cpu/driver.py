"""The local-sync and local-task drivers, as the HAL registry creates them.

Each enumerates exactly one device (index 0), the host CPU. local-task's worker count is
os.cpu_count() unless IRTK_TASK_WORKERS says otherwise; it is read when devices are enumerated
or created, so a test or a user can set it before the first use.
"""
from __future__ import annotations

import os

import numpy as np

from hal_cpu.device import CpuDevice
from schemas import CPU_EXECUTABLE_FORMAT as EXECUTABLE_FORMAT
from hal_cpu.task_system import MIN_CHUNK_ITERATIONS
from irtk.errors import DeviceError
from irtk.hal.device import DeviceInfo
from irtk.hal.driver import Driver

WORKERS_ENV = "IRTK_TASK_WORKERS"


class CpuDriver(Driver):
    def __init__(self, name: str, asynchronous: bool, worker_count: int | None = None,
                 min_chunk_iterations: int = MIN_CHUNK_ITERATIONS) -> None:
        self.name = name
        self.asynchronous = asynchronous
        self._worker_count = worker_count
        self._min_chunk_iterations = min_chunk_iterations

    def worker_count(self) -> int:
        if not self.asynchronous:
            return 1
        if self._worker_count is not None:
            return self._worker_count
        text = os.environ.get(WORKERS_ENV, "").strip()
        if not text:
            return os.cpu_count() or 1
        try:
            count = int(text)
        except ValueError:
            count = 0
        if count < 1:
            raise DeviceError(f"{WORKERS_ENV} must be a positive integer, got '{text}'")
        return count

    def enumerate_devices(self) -> list[DeviceInfo]:
        workers = self.worker_count()
        plural = "" if workers == 1 else "s"
        return [DeviceInfo(
            driver=self.name,
            name=f"CPU ({self.name}, {workers} worker{plural})",
            index=0,
            api_version="irtk-cpu 1",
            driver_version="numpy " + np.__version__,
            subgroup_size=1,
            max_workgroup_invocations=2 ** 31 - 1,
            max_workgroup_size=(2 ** 31 - 1, 1, 1),
            max_workgroup_count=(2 ** 31 - 1, 2 ** 31 - 1, 2 ** 31 - 1),
            shared_memory_bytes=0,
            worker_count=workers,
            executable_formats=(EXECUTABLE_FORMAT,),
        )]

    def create_device(self, index: int = 0) -> CpuDevice:
        infos = self.enumerate_devices()
        if index != 0:
            raise DeviceError(f"{self.name} has one device (index 0), not index {index}")
        return CpuDevice(infos[0], self.asynchronous, self._min_chunk_iterations)


def create_sync_driver() -> CpuDriver:
    """local-sync: everything runs inline on the caller's thread."""
    return CpuDriver("local-sync", asynchronous=False)


def create_task_driver(worker_count: int | None = None,
                       min_chunk_iterations: int = MIN_CHUNK_ITERATIONS) -> CpuDriver:
    """local-task: a queue thread and a pool of `worker_count` workers per device, which share
    a dispatch in chunks of at least `min_chunk_iterations` iterations."""
    if worker_count is not None and worker_count < 1:
        raise DeviceError(f"local-task needs at least one worker, got {worker_count}")
    if min_chunk_iterations < 1:
        raise DeviceError(f"local-task needs chunks of at least one iteration, got "
                          f"{min_chunk_iterations}")
    return CpuDriver("local-task", asynchronous=True, worker_count=worker_count,
                     min_chunk_iterations=min_chunk_iterations)
