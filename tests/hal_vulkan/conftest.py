"""Fixtures for the Vulkan driver tests: one device per Vulkan physical device found.

Tests taking `device` run once per device (SwiftShader and lavapipe on the project's machines)
and are skipped, with the reason, where there is no Vulkan at all. The driver follows
IRTK_VULKAN_VALIDATION, so the same tests run with the validation layer on.
"""
from __future__ import annotations

import gc
import zlib
from collections.abc import Iterator

import numpy as np
import pytest

from irtk.errors import DeviceError

_state: dict[str, object] = {}


def vulkan_driver():
    """The session's driver, or None with the reason recorded (no loader, no device)."""
    if "driver" not in _state:
        from hal_vulkan.driver import create_driver

        driver = create_driver()
        try:
            driver.enumerate_devices()
            _state["driver"] = driver
        except DeviceError as e:
            _state["driver"] = None
            _state["reason"] = f"no Vulkan device: {e}"
    return _state["driver"]


def device_params() -> list:
    driver = vulkan_driver()
    if driver is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason=str(_state["reason"])),
                             id="no-vulkan")]
    return [pytest.param(info.index, id=info.name.split(" (")[0].replace(" ", "_"))
            for info in driver.enumerate_devices()]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device_index" in metafunc.fixturenames:
        metafunc.parametrize("device_index", device_params(), scope="session")


@pytest.fixture(scope="session")
def driver():
    drv = vulkan_driver()
    if drv is None:
        pytest.skip(str(_state["reason"]))
    yield drv
    drv.release()


@pytest.fixture(scope="session")
def shared_device(driver, device_index: int):
    """One device per physical device for the whole session (creating one per test is slow)."""
    dev = driver.create_device(device_index)
    yield dev
    dev.release()


@pytest.fixture
def device(shared_device):
    """The shared device; the test must leave no validation message and no leaked object."""
    gc.collect()
    before = shared_device.live_objects()
    yield shared_device
    if shared_device.released:
        return
    shared_device.wait_idle(timeout=30)
    gc.collect()
    after = shared_device.live_objects()
    assert after == before, f"Vulkan objects leaked: before {before}, after {after}"


@pytest.fixture
def fresh_device(driver, device_index: int) -> Iterator:
    """A device of its own, for tests that release it or change its set-up."""
    dev = driver.create_device(device_index)
    yield dev
    dev.release()


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """Seeded from the test's id: reproducible, and different per test."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
