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
