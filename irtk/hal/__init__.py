"""The hardware abstraction layer: the contract every driver implements.

Modelled on IREE's HAL: driver -> device; allocator -> buffer; buffer_view; command_buffer;
semaphore and fence; executable. Drivers (`hal_vulkan`, `hal_cpu`) subclass these and register
themselves in `irtk.hal.registry`; the VM's `hal` module only ever talks to this interface.
"""
from irtk.hal.element_type import ElementType
from irtk.hal.buffer import Buffer, BufferUsage, RangeError, SubspanBuffer
from irtk.hal.buffer_view import BufferView
from irtk.hal.allocator import Allocator
from irtk.hal.semaphore import Semaphore, Fence, wait_all, wait_any
from irtk.hal.errors import DeviceCallError, DeviceLostError, OutOfMemoryError
from irtk.hal.capabilities import CAPABILITIES, Capability, ShaderCapabilities
from irtk.hal.executable import Executable, ExecutableRequirements
from irtk.hal.command_buffer import CommandBuffer, BindingRef
from irtk.hal.device import Device, DeviceInfo
from irtk.hal.driver import Driver
from irtk.hal import registry

__all__ = [
    "ElementType", "Buffer", "BufferUsage", "BufferView", "Allocator", "Semaphore", "Fence",
    "Executable", "ExecutableRequirements", "CommandBuffer", "BindingRef", "Device",
    "DeviceInfo", "Driver", "registry", "RangeError", "SubspanBuffer", "wait_all", "wait_any",
    "DeviceCallError", "DeviceLostError", "OutOfMemoryError", "CAPABILITIES", "Capability",
    "ShaderCapabilities",
]
