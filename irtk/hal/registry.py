"""Driver registry and device URIs (`local-sync`, `local-task`, `vulkan`, `vulkan://N`,
`vulkan://NAME`).

Drivers are imported lazily by name, so `irtk run --device=local-sync` never loads Vulkan.
"""
from __future__ import annotations

import importlib
import threading
from typing import Any

from irtk.errors import DeviceError
from irtk.hal.device import Device, DeviceInfo
from irtk.hal.driver import Driver

# driver name -> "module:factory" returning a Driver
_FACTORIES: dict[str, str] = {
    "local-sync": "hal_cpu.driver:create_sync_driver",
    "local-task": "hal_cpu.driver:create_task_driver",
    "vulkan": "hal_vulkan.driver:create_driver",
}
_drivers: dict[str, Driver] = {}
_devices: dict[tuple[str, int], Device] = {}
_lock = threading.Lock()


def driver_names() -> list[str]:
    return list(_FACTORIES)


def get_driver(name: str) -> Driver:
    """The driver called `name`, created once per process."""
    with _lock:
        if name not in _drivers:
            _drivers[name] = create_driver(name)
        return _drivers[name]


def create_driver(name: str, **options: Any) -> Driver:
    """A new driver called `name`, made by its factory with `options` (local-task:
    `worker_count`, `min_chunk_iterations`; vulkan: `validation`), apart from the one
    `get_driver` shares."""
    if name not in _FACTORIES:
        raise DeviceError(f"unknown driver '{name}'; drivers: {', '.join(_FACTORIES)}")
    module_name, factory = _FACTORIES[name].split(":")
    return getattr(importlib.import_module(module_name), factory)(**options)


def list_devices() -> list[DeviceInfo]:
    """Every device of every driver that can be used here (a driver that fails is skipped)."""
    infos: list[DeviceInfo] = []
    for name in _FACTORIES:
        try:
            infos.extend(get_driver(name).enumerate_devices())
        except DeviceError:
            continue
    return infos


def resolve(uri: str) -> tuple[str, int]:
    """(driver, device index) for a device URI; raises DeviceError listing the devices there are."""
    driver_name, _, rest = uri.partition("://")
    if driver_name not in _FACTORIES:
        raise DeviceError(f"unknown device '{uri}'; devices: {_available()}")
    infos = _enumerate(driver_name, uri)
    if not rest:
        if not infos:
            raise DeviceError(f"no {driver_name} device found; devices: {_available()}")
        return driver_name, infos[0].index
    if rest.isdigit():
        index = int(rest)
        if index >= len(infos):
            raise DeviceError(f"no device '{uri}' ({len(infos)} {driver_name} device(s)); "
                              f"devices: {_available()}")
        return driver_name, infos[index].index
    matches = [i for i in infos if rest.lower() in i.name.lower()]
    if not matches:
        raise DeviceError(f"no device matches '{uri}'; devices: {_available()}")
    return driver_name, matches[0].index


def get_device(uri: str) -> Device:
    """The device for `uri`, created once per process and shared (as IREE's shared device)."""
    key = resolve(uri)
    with _lock:
        dev = _devices.get(key)
        if dev is None:
            dev = _drivers[key[0]].create_device(key[1])
            _devices[key] = dev
        return dev


def release_devices() -> None:
    with _lock:
        for dev in _devices.values():
            dev.release()
        _devices.clear()


def _enumerate(driver_name: str, uri: str) -> list[DeviceInfo]:
    try:
        return get_driver(driver_name).enumerate_devices()
    except DeviceError as e:
        raise DeviceError(f"device '{uri}' is not available: {e}") from None


def _available() -> str:
    names = []
    for info in list_devices():
        if info.driver == "vulkan":
            names.append(f"vulkan://{info.index} ({info.name})")
        else:
            names.append(info.driver)
    return ", ".join(names) if names else "none"
