"""Every failed Vulkan call becomes an irtk.Error subclass naming the call and the result."""
from __future__ import annotations

import pytest
import vulkan as vk

from irtk.errors import DeviceError, Error
from irtk.hal.errors import DeviceCallError, DeviceLostError, OutOfMemoryError
from hal_vulkan.status import call, check_result


def _raising(exc_type):
    def vkQueueSubmit(*args):  # named like the call it stands for
        raise exc_type()
    return vkQueueSubmit


@pytest.mark.parametrize("exc_type,cls,result", [
    (vk.VkErrorDeviceLost, DeviceLostError, "VK_ERROR_DEVICE_LOST"),
    (vk.VkErrorOutOfDeviceMemory, OutOfMemoryError, "VK_ERROR_OUT_OF_DEVICE_MEMORY"),
    (vk.VkErrorOutOfHostMemory, OutOfMemoryError, "VK_ERROR_OUT_OF_HOST_MEMORY"),
    (vk.VkErrorInitializationFailed, DeviceCallError, "VK_ERROR_INITIALIZATION_FAILED"),
    (vk.VkErrorTooManyObjects, DeviceCallError, "VK_ERROR_TOO_MANY_OBJECTS"),
])
def test_results_map_to_error_types_naming_call_and_result(exc_type, cls, result):
    with pytest.raises(cls, match=f"^vkQueueSubmit failed: {result}$") as info:
        call(_raising(exc_type))
    assert isinstance(info.value, DeviceError) and isinstance(info.value, Error)
    assert (info.value.call, info.value.result) == ("vkQueueSubmit", result)


def test_raw_result_codes_map_the_same_way():
    with pytest.raises(DeviceLostError, match="vkCmdPushDescriptorSetKHR failed: "
                                              "VK_ERROR_DEVICE_LOST"):
        check_result("vkCmdPushDescriptorSetKHR", vk.VK_ERROR_DEVICE_LOST)
    with pytest.raises(DeviceCallError, match=r"vkX failed: VkResult\(-12345\)"):
        check_result("vkX", -12345)
    check_result("vkX", vk.VK_SUCCESS)


def test_an_allocation_larger_than_the_device_is_out_of_memory(device):
    before = device.live_objects()
    with pytest.raises(OutOfMemoryError, match=r"allocate failed: VK_ERROR_OUT_OF_DEVICE_MEMORY "
                                                r"\(a buffer of 1099511627776 bytes exceeds"):
        device.allocator.allocate(1 << 40)
    assert device.live_objects() == before
