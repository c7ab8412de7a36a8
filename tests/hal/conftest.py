"""The HAL conformance suite runs every test on each device of every registered driver
(local-sync, local-task and each Vulkan device).

One device per URI for the whole session (Vulkan device creation is slow); a Vulkan test must
leave no validation message (IRTK_VULKAN_VALIDATION=1 turns them into errors) and no live
Vulkan object behind it. The first Vulkan device also runs as "vulkan-staged": buffers in memory
the host does not map (`host_mapped=False`), so the staging path that GPUs without host-visible
memory need is held to the same contract on the software drivers, which always have it.
"""
from __future__ import annotations

import gc
import zlib
from collections.abc import Iterator

import numpy as np
import pytest

from irtk.hal import Device
from tests.conftest import all_device_uris, device_info, make_device, vulkan_device_uris

STAGED = "vulkan-staged"


def _uri_id(uri: str) -> str:
    """The URI, or for a device of a driver with several: the driver and the device's name."""
    if "://" not in uri:
        return uri
    info = device_info(uri)
    return f"{info.driver}-" + info.name.split(" (")[0].replace(" ", "_")


# (id, URI, create_device options)
DEVICES = [(_uri_id(uri), uri, {}) for uri in all_device_uris()]
DEVICES += [(STAGED, uri, {"host_mapped": False}) for uri in vulkan_device_uris()[:1]]


@pytest.fixture(scope="session", params=[d[1:] for d in DEVICES], ids=[d[0] for d in DEVICES])
def shared_device(request: pytest.FixtureRequest) -> Iterator[Device]:
    uri, options = request.param
    device = make_device(uri, **options)
    yield device
    device.release()


@pytest.fixture
def device(shared_device: Device) -> Iterator[Device]:
    live = getattr(shared_device, "live_objects", None)
    if live is None:
        yield shared_device
        return
    gc.collect()
    before = live()
    yield shared_device
    if shared_device.released:  # type: ignore[attr-defined]
        return
    # Work the test left in flight (a host queue operation still returning after it signalled)
    # holds its fences until it finishes: a loaded machine gets there after the test does.
    shared_device.wait_idle(30.0)  # type: ignore[attr-defined]
    gc.collect()
    after = live()
    assert after == before, f"Vulkan objects leaked: before {before}, after {after}"


@pytest.fixture
def uri(shared_device: Device) -> str:
    return shared_device.info.driver


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """Seeded from the test's id: reproducible, and different per test."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def signal_later(fence_or_semaphore, value: int | None = None, delay: float = 0.05):
    """Signal from another thread after `delay` seconds (so local-sync, which waits inline,
    can still be handed a wait fence that is not reached yet). Returns the thread."""
    import threading
    import time

    def run() -> None:
        time.sleep(delay)
        if value is None:
            fence_or_semaphore.signal()
        else:
            fence_or_semaphore.signal(value)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread
