"""Shared test set-up: a private shader/pipeline cache folder, and the list of devices to run on.

Every end-to-end test runs on local-sync, local-task and each Vulkan device found (SwiftShader
and lavapipe once set-up has run).
"""
from __future__ import annotations

import os
import tempfile

_CACHE = tempfile.mkdtemp(prefix="irtk-test-cache-")
os.environ.setdefault("MESA_SHADER_CACHE_DIR", os.path.join(_CACHE, "mesa"))
os.environ.setdefault("IRTK_CACHE_DIR", os.path.join(_CACHE, "irtk"))


def vulkan_device_uris() -> list[str]:
    """`vulkan://N` for every Vulkan device; empty when there is no Vulkan at all."""
    try:
        from irtk.hal import registry
        infos = registry.get_driver("vulkan").enumerate_devices()
    except Exception:
        return []
    return [f"vulkan://{info.index}" for info in infos]


def all_device_uris() -> list[str]:
    return ["local-sync", "local-task", *vulkan_device_uris()]


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
