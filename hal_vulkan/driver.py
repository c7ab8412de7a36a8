"""The `vulkan` driver: one VkInstance (created on first use) and its physical devices.

Importing this module does not touch Vulkan, so the registry can list drivers on a machine
without a loader; the first `enumerate_devices` or `create_device` loads it and raises
DeviceError when there is no loader or no device.
"""
from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from irtk.errors import DeviceError
from irtk.hal import Device, DeviceInfo, Driver

if TYPE_CHECKING:
    from hal_vulkan.device import VulkanDevice
    from hal_vulkan.instance import VulkanInstance
    from hal_vulkan.physical_device import PhysicalDevice


class VulkanDriver(Driver):
    """Enumerates Vulkan physical devices and creates logical devices on them."""

    name = "vulkan"

    def __init__(self, validation: bool | None = None) -> None:
        self._validation = validation
        self._instance: VulkanInstance | None = None
        self._physical: list[PhysicalDevice] = []
        self._devices: list[VulkanDevice] = []
        self._lock = threading.Lock()

    @property
    def validation_enabled(self) -> bool:
        return self._ensure_instance().log is not None

    def enumerate_devices(self) -> list[DeviceInfo]:
        self._ensure_instance()
        return [pd.info for pd in self._physical]

    def physical_device(self, index: int) -> PhysicalDevice:
        self._ensure_instance()
        if not 0 <= index < len(self._physical):
            names = ", ".join(f"{pd.index}: {pd.name}" for pd in self._physical)
            raise DeviceError(f"no Vulkan device with index {index}; devices: {names}")
        return self._physical[index]

    def create_device(self, index: int = 0, **options: Any) -> Device:
        """A logical device on physical device `index`; options go to VulkanDevice."""
        from hal_vulkan.device import VulkanDevice

        pd = self.physical_device(index)
        instance = self._ensure_instance()
        device = VulkanDevice(instance, pd, **options)
        with self._lock:
            self._devices = [d for d in self._devices if not d.released] + [device]
        return device

    def release(self) -> None:
        """Release every device this driver created, then the instance; idempotent."""
        with self._lock:
            devices, self._devices = self._devices, []
            instance, self._instance = self._instance, None
            self._physical = []
        errors: list[BaseException] = []
        for device in devices:
            try:
                device.release()
            except DeviceError as e:  # a lost device still gets its objects destroyed
                errors.append(e)
        if instance is not None:
            instance.destroy()
        if errors:
            raise errors[0]

    def _ensure_instance(self) -> VulkanInstance:
        with self._lock:
            if self._instance is None:
                self._instance, self._physical = _create_instance(self._validation)
            return self._instance


def _create_instance(validation: bool | None) -> tuple[VulkanInstance, list[PhysicalDevice]]:
    try:
        import vulkan  # noqa: F401  (the binding dlopens libvulkan at import)
    except OSError as e:
        raise DeviceError(f"the Vulkan loader (libvulkan.so.1) is not installed: {e}") from None
    from hal_vulkan import validation as validation_mod
    from hal_vulkan.instance import VulkanInstance
    from hal_vulkan.physical_device import query

    if validation is None:
        validation = validation_mod.enabled_by_environment()
    instance = VulkanInstance(validation)
    try:
        physical = [query(handle, i) for i, handle in enumerate(instance.physical_devices)]
        if not physical:
            raise DeviceError(
                "no Vulkan physical device found (VK_DRIVER_FILES="
                f"{os.environ.get('VK_DRIVER_FILES', '<unset>')}); install a driver such as "
                "Mesa's lavapipe or SwiftShader")
        if instance.log is not None:
            instance.log.raise_pending()
    except BaseException:
        instance.destroy()
        raise
    return instance, physical


def create_driver(validation: bool | None = None) -> VulkanDriver:
    """The registry's factory; `validation=None` follows IRTK_VULKAN_VALIDATION."""
    return VulkanDriver(validation)
