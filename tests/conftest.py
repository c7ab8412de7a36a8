"""Shared test set-up: a private shader/pipeline cache folder, the devices to run on, and how
the suites make devices and pick the compiler target for one.

Every end-to-end test runs on each device of every driver in the HAL registry (local-sync,
local-task and each Vulkan device: SwiftShader and lavapipe once set-up has run).
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from typing import Any

from irtk.hal import Device, DeviceInfo, registry

_CACHE = tempfile.mkdtemp(prefix="irtk-test-cache-")
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
os.environ.setdefault("MESA_SHADER_CACHE_DIR", os.path.join(_CACHE, "mesa"))
os.environ.setdefault("IRTK_CACHE_DIR", os.path.join(_CACHE, "irtk"))
# A kernel the native CPU code generator takes but LLVM then rejects is an irtk bug: users get
# the numpy executor and a warning, the tests a failure.
os.environ.setdefault("IRTK_CPU_NATIVE_STRICT", "1")

# How the suites make a driver where that differs from its defaults: local-task with three
# workers and small chunks, so even small test dispatches spread over the workers.
DRIVER_OPTIONS: dict[str, dict[str, Any]] = {
    "local-task": {"worker_count": 3, "min_chunk_iterations": 64},
}


def device_uris(driver: str) -> list[str]:
    """A URI per device of `driver`, empty when it is unavailable here: the driver's name
    where it has one device, `driver://N` per device where it has several."""
    try:
        infos = registry.get_driver(driver).enumerate_devices()
    except Exception:  # noqa: BLE001 - any failure means the driver cannot be used here
        return []
    if len(infos) == 1:
        return [driver]
    return [f"{driver}://{info.index}" for info in infos]


def vulkan_device_uris() -> list[str]:
    """Every Vulkan device's URI (for tests about Vulkan); empty when there is no Vulkan."""
    return device_uris("vulkan")


def all_device_uris() -> list[str]:
    return [uri for driver in registry.driver_names() for uri in device_uris(driver)]


def make_device(uri: str, **options: Any) -> Device:
    """A new device for `uri` (the caller releases it), of a new driver made with
    DRIVER_OPTIONS; `options` go to the driver's `create_device`."""
    driver, index = registry.resolve(uri)
    return registry.create_driver(driver, **DRIVER_OPTIONS.get(driver, {})).create_device(
        index, **options)


def device_info(uri: str) -> DeviceInfo:
    """What the device at `uri` is, from its driver's enumeration (no device is created)."""
    driver, index = registry.resolve(uri)
    return next(i for i in registry.get_driver(driver).enumerate_devices() if i.index == index)


def target_for(uri: str) -> str:
    """The compiler target whose executables the device at `uri` loads."""
    from irtk.compiler import target_backends
    info = device_info(uri)
    backend = target_backends.for_formats(info.executable_formats)
    assert backend is not None, f"no compiler target for {uri} {info.executable_formats}"
    return backend.name


def pytest_sessionstart(session) -> None:
    """With IRTK_REQUIRE_VULKAN=1 (the test script sets it), a machine without SwiftShader and
    lavapipe is an error, not a reason to skip every Vulkan test."""
    if os.environ.get("IRTK_REQUIRE_VULKAN") != "1":
        return
    import pytest
    try:
        from irtk.hal import registry
        names = [i.name.lower() for i in registry.get_driver("vulkan").enumerate_devices()]
    except Exception as e:  # noqa: BLE001 - any failure means Vulkan is missing
        pytest.exit(f"IRTK_REQUIRE_VULKAN=1 but Vulkan is unavailable: {e}", returncode=1)
    for wanted in ("swiftshader", "llvmpipe"):
        if not any(wanted in n for n in names):
            pytest.exit(f"IRTK_REQUIRE_VULKAN=1 but no {wanted} device (found: {names})",
                        returncode=1)
