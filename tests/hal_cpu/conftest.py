"""Fixtures for the CPU driver tests: a fresh device of each driver, and a per-test seeded RNG."""
from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np
import pytest

from hal_cpu import CpuDevice, create_sync_driver, create_task_driver


def _make(driver: str) -> CpuDevice:
    if driver == "local-sync":
        return create_sync_driver().create_device(0)
    device = create_task_driver(worker_count=3).create_device(0)
    # Small chunks, so even the tests' small dispatches spread over the workers.
    device.task_system.min_chunk_iterations = 64
    return device


@pytest.fixture(params=["local-sync", "local-task"])
def device(request: pytest.FixtureRequest) -> Iterator[CpuDevice]:
    dev = _make(request.param)
    yield dev
    dev.release()


@pytest.fixture
def task_device() -> Iterator[CpuDevice]:
    dev = _make("local-task")
    yield dev
    dev.release()


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """Seeded from the test's id: reproducible, and different per test."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
