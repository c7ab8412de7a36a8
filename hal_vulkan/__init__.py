"""irtk's Vulkan HAL driver, on the `vulkan` (cffi) binding.

Files follow the HAL's concepts: `driver` (instance, enumeration) -> `device` (logical device,
queue_execute) -> `allocator`/`buffer` (suballocated, mapped memory) -> `executable`
("vulkan-spirv-fb" -> pipelines, with `executable_def` parsing and `requirements` checking) ->
`command_buffer` (command list) and `recorder` (VkCommandBuffer, descriptors) -> `semaphore`
and `queue` (timeline semaphores, submissions). The objects share a `context.DeviceContext`
that the device makes, not the device itself, so `device` is the only module that imports them
all. Importing this package does not load Vulkan; `hal_vulkan.driver.create_driver()` is what
the registry calls.
"""
from hal_vulkan.driver import VulkanDriver, create_driver

__all__ = ["VulkanDriver", "create_driver"]
