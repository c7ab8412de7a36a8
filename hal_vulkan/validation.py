"""The validation switch: VK_LAYER_KHRONOS_validation plus a messenger that keeps its messages.

Synchronization validation is on too (VK_EXT_validation_features), so a missing barrier between
dependent commands or submissions is reported as a hazard, like any other misuse.

With `IRTK_VULKAN_VALIDATION=1` every warning or error the layer reports is a bug in irtk; the
messages are collected here and the next HAL call (or the next queue completion) raises them as a
DeviceError, so tests fail at the operation that misused Vulkan instead of passing silently.
"""
from __future__ import annotations

import os
import threading
from typing import Any

import vulkan as vk

from irtk.errors import DeviceError

LAYER_NAME = "VK_LAYER_KHRONOS_validation"
ENV_SWITCH = "IRTK_VULKAN_VALIDATION"

_SEVERITIES = (vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
               | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
_TYPES = (vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
          | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
          | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT)


def enabled_by_environment() -> bool:
    return os.environ.get(ENV_SWITCH, "").strip().lower() not in ("", "0", "false", "no", "off")


class ValidationLog:
    """Messages the layer reported and nobody has raised yet."""

    def __init__(self) -> None:
        self._messages: list[str] = []
        self._lock = threading.Lock()
        self.total = 0  # every message ever recorded, for tests
        self.handle = vk.ffi.new_handle(self)  # pUserData; kept alive as long as the log

    def record(self, text: str) -> None:
        with self._lock:
            self._messages.append(text)
            self.total += 1

    def raise_pending(self) -> None:
        """Raise (once) everything recorded since the last call."""
        if not self._messages:
            return
        with self._lock:
            messages, self._messages = self._messages, []
        if not messages:
            return  # another thread raised them first
        more = f" (and {len(messages) - 1} more)" if len(messages) > 1 else ""
        raise DeviceError(f"Vulkan validation reported{more}: " + "\n".join(messages))


# Messages the layer itself calls its own bug: its timeline tracking gives up waiting for a
# semaphore value the driver already reports reached (seen with host waits on a thread while
# another thread signals). Nothing irtk does is wrong there, so they are not errors.
IGNORED_MESSAGES = ("UNASSIGNED-VkSemaphore-state-timeout",)


def _on_message(severity: int, types: int, data: Any, user_data: Any) -> int:
    """The one debug-utils callback; pUserData says which log the message belongs to."""
    try:
        log = vk.ffi.from_handle(user_data)
        text = vk.ffi.string(data.pMessage).decode("utf-8", "replace") if data.pMessage else ""
        if any(ignored in text for ignored in IGNORED_MESSAGES):
            return vk.VK_FALSE
        error = severity & vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT
        level = "error" if error else "warning"
        log.record(f"[{level}] {text}")
    except Exception:  # an exception must never unwind into the driver
        pass
    return vk.VK_FALSE


def messenger_create_info(log: ValidationLog) -> Any:
    """Chained into VkInstanceCreateInfo (covers instance creation) and used for the messenger."""
    return vk.VkDebugUtilsMessengerCreateInfoEXT(
        sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        messageSeverity=_SEVERITIES, messageType=_TYPES,
        pfnUserCallback=_on_message, pUserData=log.handle)


FEATURES_EXTENSION = "VK_EXT_validation_features"


def features_info(next_struct: Any) -> Any:
    """Chained into VkInstanceCreateInfo: turn on synchronization validation."""
    return vk.VkValidationFeaturesEXT(
        sType=vk.VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT, pNext=next_struct,
        pEnabledValidationFeatures=[
            vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT])
