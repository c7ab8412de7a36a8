"""Device failures as types, so callers can tell a lost device from exhausted memory.

Every failed driver call becomes a `DeviceCallError` naming the call and the result
(`vkAllocateMemory failed: VK_ERROR_OUT_OF_DEVICE_MEMORY`); the two a program may want to handle
differently have their own subclasses. All are `irtk.errors.DeviceError`, hence `irtk.Error`.
"""
from __future__ import annotations

from irtk.errors import DeviceError


class DeviceCallError(DeviceError):
    """A driver call that failed: `call` is its name, `result` the driver's result code name."""

    def __init__(self, call: str, result: str, detail: str = "") -> None:
        self.call = call
        self.result = result
        super().__init__(f"{call} failed: {result}{detail}")


class DeviceLostError(DeviceCallError):
    """The device stopped working (a crash, a reset, a removed GPU); it must be recreated."""


class OutOfMemoryError(DeviceCallError):
    """Host or device memory ran out; freeing buffers (or `trim`) may let a retry succeed."""
