"""Fixtures for the CPU driver tests: a fresh device of each driver (with the suites' settings,
tests/conftest.py), and a per-test seeded RNG."""
from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np
import pytest

from hal_cpu import CpuDevice
from tests.conftest import make_device


def _make(driver: str) -> CpuDevice:
    device = make_device(driver)
    assert isinstance(device, CpuDevice)
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
