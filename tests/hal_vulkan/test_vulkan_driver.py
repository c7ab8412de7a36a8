"""The driver: enumeration and device properties, missing drivers, the validation switch."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from irtk.errors import DeviceError
from irtk.hal import registry
from hal_vulkan.driver import VulkanDriver, create_driver

from tests.hal_vulkan.conftest import vulkan_driver


def test_registry_names_this_driver():
    assert registry._FACTORIES["vulkan"] == "hal_vulkan.driver:create_driver"
    driver = create_driver()
    assert isinstance(driver, VulkanDriver) and driver.name == "vulkan"


def test_every_device_reports_its_properties(driver):
    infos = driver.enumerate_devices()
    assert [i.index for i in infos] == list(range(len(infos)))
    for info in infos:
        assert info.driver == "vulkan" and info.uri == f"vulkan://{info.index}"
        assert info.api_version.startswith("1.") and int(info.api_version.split(".")[1]) >= 2
        assert info.driver_version
        assert info.executable_formats == ("vulkan-spirv-fb",)
        assert info.subgroup_size >= 1 and info.subgroup_size & (info.subgroup_size - 1) == 0
        assert info.max_workgroup_invocations >= 128
        assert len(info.max_workgroup_size) == 3 and len(info.max_workgroup_count) == 3
        assert info.shared_memory_bytes >= 16384
        for key in ("driver_name", "minStorageBufferOffsetAlignment", "maxStorageBufferRange",
                    "maxPushConstantsSize"):
            assert key in info.extra
        assert int(info.extra["maxPushConstantsSize"]) >= 128


def _named(driver, fragment: str):
    return next((i for i in driver.enumerate_devices() if fragment in i.name), None)


def test_swiftshader_properties(driver):
    info = _named(driver, "SwiftShader")
    if info is None:
        pytest.skip("SwiftShader is not installed here")
    assert info.name == "SwiftShader Device (Subzero)"
    assert info.api_version.startswith("1.3")
    assert info.subgroup_size == 4
    assert info.max_workgroup_invocations == 256
    assert not (info.float16 or info.float64 or info.int8 or info.int64)
    assert not (info.storage_buffer_8bit or info.storage_buffer_16bit)
    assert info.texel_array_indexing
    assert not info.push_descriptors
    assert info.extra["minStorageBufferOffsetAlignment"] == "256"
    assert info.extra["driver_name"] == "SwiftShader driver"


def test_lavapipe_properties(driver):
    info = _named(driver, "llvmpipe")
    if info is None:
        pytest.skip("lavapipe is not installed here")
    assert info.subgroup_size == 8
    assert info.max_workgroup_invocations == 1024
    assert info.float16 and info.float64 and info.int8 and info.int16 and info.int64
    assert info.storage_buffer_8bit and info.storage_buffer_16bit
    assert not info.texel_array_indexing  # lavapipe 22.3
    assert info.push_descriptors
    assert info.extra["maxStorageBufferRange"] == str(128 << 20)
    assert info.extra["driver_name"] == "llvmpipe"
    assert info.driver_version.startswith("Mesa")


def test_unknown_device_index_names_the_devices(driver):
    with pytest.raises(DeviceError, match="no Vulkan device with index 99; devices: 0: "):
        driver.create_device(99)


def test_no_driver_installed_is_a_device_error(tmp_path):
    """With the loader pointed at nothing, enumeration fails with a DeviceError, not a crash."""
    script = ("from irtk.errors import DeviceError\n"
              "from hal_vulkan.driver import create_driver\n"
              "try:\n"
              "    create_driver().enumerate_devices()\n"
              "except DeviceError as e:\n"
              "    print('DeviceError:', e)\n")
    env = dict(os.environ, VK_DRIVER_FILES=str(tmp_path / "missing_icd.json"),
               VK_ICD_FILENAMES=str(tmp_path / "missing_icd.json"))
    env.pop("IRTK_VULKAN_VALIDATION", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("DeviceError:")
    assert "no Vulkan physical device" in out.stdout or "vkCreateInstance failed" in out.stdout


def test_missing_loader_is_a_device_error():
    """Without libvulkan the binding's import fails; the driver says so as a DeviceError."""
    script = ("import builtins\n"
              "real = builtins.__import__\n"
              "def fake(name, *args, **kwargs):\n"
              "    if name == 'vulkan':\n"
              "        raise OSError('Cannot find Vulkan SDK version')\n"
              "    return real(name, *args, **kwargs)\n"
              "builtins.__import__ = fake\n"
              "from irtk.errors import DeviceError\n"
              "from irtk.hal import registry\n"
              "try:\n"
              "    registry.get_driver('vulkan').enumerate_devices()\n"
              "except DeviceError as e:\n"
              "    print('DeviceError:', e)\n"
              "print('listed:', [i.driver for i in registry.list_devices()])\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "DeviceError: the Vulkan loader (libvulkan.so.1) is not installed" in out.stdout
    assert "'vulkan'" not in out.stdout.split("listed:")[1]


def _validation_available() -> bool:
    try:
        import vulkan as vk

        return any(layer.layerName == "VK_LAYER_KHRONOS_validation"
                   for layer in vk.vkEnumerateInstanceLayerProperties())
    except Exception:
        return False


def test_validation_message_fails_the_next_hal_call(device_index):
    """A validation error (here a raw zero-size vkCreateBuffer) surfaces as a DeviceError."""
    if vulkan_driver() is None or not _validation_available():
        pytest.skip("VK_LAYER_KHRONOS_validation is not installed")
    import vulkan as vk

    driver = create_driver(validation=True)
    try:
        assert driver.validation_enabled
        device = driver.create_device(device_index)
        sem = device.create_semaphore(5)
        bad = vk.vkCreateBuffer(device.handle, vk.VkBufferCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=0,
            usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT), None)
        vk.vkDestroyBuffer(device.handle, bad, None)
        with pytest.raises(DeviceError,
                           match="Vulkan validation reported.*VUID-VkBufferCreateInfo-size"):
            sem.query()
        assert sem.query() == 5  # raised once; the device is usable again
        sem.release()
    finally:
        driver.release()


def test_validation_off_records_nothing(device_index):
    driver = create_driver(validation=False)
    try:
        assert not driver.validation_enabled
        device = driver.create_device(device_index)
        assert device.log is None
    finally:
        driver.release()


def test_released_device_refuses_calls(fresh_device):
    fresh_device.release()
    fresh_device.release()  # idempotent
    with pytest.raises(DeviceError, match="was released"):
        fresh_device.allocator.allocate(16)
    assert fresh_device.tracker.live() == {}
