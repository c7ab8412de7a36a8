"""The VkInstance: the loader's view of the installed drivers (ICDs) and their physical devices.

Which drivers are visible is the loader's business (VK_DRIVER_FILES / VK_ICD_FILENAMES set by the
caller); irtk never names a driver path itself.
"""
from __future__ import annotations

import os
from typing import Any

import vulkan as vk

from irtk.errors import DeviceError
from hal_vulkan import validation
from hal_vulkan.status import call, instance_function, make_version, vk_error

# The newest API irtk uses; older loaders get what they offer (1.2 is the minimum for devices).
TARGET_API = make_version(1, 3)


class VulkanInstance:
    """A VkInstance with the validation messenger when asked for."""

    def __init__(self, enable_validation: bool) -> None:
        self.log: validation.ValidationLog | None = None
        self._messenger: Any = None
        self._destroy_messenger: Any = None
        try:
            loader_version = vk.vkEnumerateInstanceVersion()
        except Exception:
            loader_version = make_version(1, 0)
        self.api_version = min(loader_version, TARGET_API)
        layers: list[str] = []
        extensions: list[str] = []
        available_ext = {e.extensionName for e in call(vk.vkEnumerateInstanceExtensionProperties,
                                                       None)}
        flags = 0
        if "VK_KHR_portability_enumeration" in available_ext:  # MoltenVK-style drivers
            extensions.append("VK_KHR_portability_enumeration")
            flags |= vk.VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
        next_chain = None
        if enable_validation:
            available_layers = {layer.layerName
                                for layer in call(vk.vkEnumerateInstanceLayerProperties)}
            if validation.LAYER_NAME not in available_layers:
                raise DeviceError(
                    f"{validation.ENV_SWITCH}=1 but {validation.LAYER_NAME} is not installed "
                    f"(layers: {', '.join(sorted(available_layers)) or 'none'})")
            if "VK_EXT_debug_utils" not in available_ext:
                raise DeviceError(f"{validation.ENV_SWITCH}=1 needs VK_EXT_debug_utils")
            layers.append(validation.LAYER_NAME)
            extensions.append("VK_EXT_debug_utils")
            self.log = validation.ValidationLog()
            messenger_info = validation.messenger_create_info(self.log)
            layer_ext = {e.extensionName for e in call(
                vk.vkEnumerateInstanceExtensionProperties, validation.LAYER_NAME)}
            if validation.FEATURES_EXTENSION not in layer_ext:
                raise DeviceError(f"{validation.ENV_SWITCH}=1 needs "
                                  f"{validation.FEATURES_EXTENSION} for synchronization "
                                  "validation")
            extensions.append(validation.FEATURES_EXTENSION)
            next_chain = validation.features_info(messenger_info)
        app = vk.VkApplicationInfo(
            sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO, pApplicationName="irtk",
            applicationVersion=make_version(0, 1), pEngineName="irtk",
            engineVersion=make_version(0, 1), apiVersion=self.api_version)
        info = vk.VkInstanceCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, pNext=next_chain, flags=flags,
            pApplicationInfo=app, ppEnabledLayerNames=layers or None,
            ppEnabledExtensionNames=extensions or None)
        try:
            self.handle = vk.vkCreateInstance(info, None)
        except (vk.VkError, vk.VkException) as e:
            raise vk_error(
                "vkCreateInstance", e, " (no usable Vulkan driver; "
                f"VK_DRIVER_FILES={os.environ.get('VK_DRIVER_FILES', '<unset>')})") from None
        if self.log is not None:
            create = instance_function(self.handle, "vkCreateDebugUtilsMessengerEXT")
            self._destroy_messenger = instance_function(self.handle,
                                                        "vkDestroyDebugUtilsMessengerEXT")
            self._messenger = call(create, self.handle, messenger_info, None)
        self.physical_devices: list[Any] = list(call(vk.vkEnumeratePhysicalDevices, self.handle))

    def destroy(self) -> None:
        if self.handle is None:
            return
        if self._messenger is not None:
            self._destroy_messenger(self.handle, self._messenger, None)
            self._messenger = None
        vk.vkDestroyInstance(self.handle, None)
        self.handle = None
