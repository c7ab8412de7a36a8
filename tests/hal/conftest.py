"""The HAL conformance suite runs every test on local-sync, local-task and each Vulkan device.

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
from tests.conftest import all_device_uris

_devices: dict[str, Device] = {}


def make_device(uri: str) -> Device:
    """A new device for `uri` (the caller releases it)."""
    if uri == "local-sync":
        from hal_cpu import create_sync_driver
        return create_sync_driver().create_device(0)
    if uri == "local-task":
        from hal_cpu import create_task_driver
        device = create_task_driver(worker_count=3).create_device(0)
        # Small chunks, so even small test dispatches spread over the workers.
        device.task_system.min_chunk_iterations = 64  # type: ignore[attr-defined]
        return device
    from hal_vulkan.driver import create_driver
    scheme, _, index = uri.partition("://")
    return create_driver().create_device(int(index), host_mapped=False if scheme == STAGED else None)


STAGED = "vulkan-staged"


def _uri_id(uri: str) -> str:
    if uri.startswith(STAGED):
        return STAGED
    if not uri.startswith("vulkan://"):
        return uri
    from irtk.hal import registry
    index = int(uri.partition("://")[2])
    info = next(i for i in registry.get_driver("vulkan").enumerate_devices() if i.index == index)
    return "vulkan-" + info.name.split(" (")[0].replace(" ", "_")


URIS = all_device_uris()
if any(u.startswith("vulkan://") for u in URIS):
    URIS.append(next(u for u in URIS if u.startswith("vulkan://")).replace("vulkan", STAGED))


@pytest.fixture(scope="session", params=URIS, ids=[_uri_id(u) for u in URIS])
def shared_device(request: pytest.FixtureRequest) -> Iterator[Device]:
    device = make_device(request.param)
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
