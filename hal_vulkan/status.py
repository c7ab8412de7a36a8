"""Turning Vulkan results into irtk errors.

The `vulkan` binding raises one exception class per VkResult; the HAL promises `DeviceError`
naming the call and the result (`vkAllocateMemory failed: VK_ERROR_OUT_OF_DEVICE_MEMORY`), so
every Vulkan call that can fail goes through `call`.
"""
from __future__ import annotations

import re
from typing import Any, Callable

import vulkan as vk

from irtk.errors import DeviceError
from irtk.hal.errors import DeviceCallError, DeviceLostError, OutOfMemoryError

_CLASS_OF_RESULT: dict[str, type[DeviceCallError]] = {
    "VK_ERROR_DEVICE_LOST": DeviceLostError,
    "VK_ERROR_OUT_OF_HOST_MEMORY": OutOfMemoryError,
    "VK_ERROR_OUT_OF_DEVICE_MEMORY": OutOfMemoryError,
    "VK_ERROR_OUT_OF_POOL_MEMORY": OutOfMemoryError,
    "VK_ERROR_FRAGMENTED_POOL": OutOfMemoryError,
}


def result_name(error: BaseException) -> str:
    """`VkErrorOutOfDeviceMemory` -> `VK_ERROR_OUT_OF_DEVICE_MEMORY` (the spec's spelling)."""
    name = type(error).__name__
    if not name.startswith("Vk"):
        return name
    return "VK_" + re.sub(r"(?<!^)(?=[A-Z])", "_", name[2:]).upper()


def vk_error(call_name: str, error: BaseException | str, detail: str = "") -> DeviceCallError:
    """The irtk error for a failed Vulkan call: DeviceLostError, OutOfMemoryError or
    DeviceCallError, naming the call and the result."""
    result = error if isinstance(error, str) else result_name(error)
    return _CLASS_OF_RESULT.get(result, DeviceCallError)(call_name, result, detail)


def call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a Vulkan function; a non-success result becomes a DeviceCallError naming both."""
    try:
        return fn(*args)
    except (vk.VkError, vk.VkException) as e:
        raise vk_error(getattr(fn, "__name__", "vulkan call"), e) from None


def check_result(name: str, result: int) -> None:
    """For the few functions called straight through `vk.lib` (the binding lacks a wrapper)."""
    if result != vk.VK_SUCCESS:
        exc = vk.exception_codes.get(result)
        raise vk_error(name, exc() if exc is not None else f"VkResult({result})")


def device_function(device: Any, name: str) -> Callable[..., Any]:
    """An extension (or core 1.2+) device function, looked up once through vkGetDeviceProcAddr."""
    try:
        return vk.vkGetDeviceProcAddr(device, name)
    except (vk.ProcedureNotFoundError, vk.ExtensionNotSupportedError):
        raise DeviceError(f"the Vulkan driver does not provide {name}") from None


def instance_function(instance: Any, name: str) -> Callable[..., Any]:
    try:
        return vk.vkGetInstanceProcAddr(instance, name)
    except (vk.ProcedureNotFoundError, vk.ExtensionNotSupportedError):
        raise DeviceError(f"the Vulkan loader does not provide {name}") from None


def version_string(version: int) -> str:
    """A packed VK_MAKE_API_VERSION value as `major.minor.patch` (the variant bits dropped)."""
    return f"{(version >> 22) & 0x7F}.{(version >> 12) & 0x3FF}.{version & 0xFFF}"


def make_version(major: int, minor: int, patch: int = 0) -> int:
    return (major << 22) | (minor << 12) | patch
