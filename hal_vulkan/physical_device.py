"""What one physical device is and offers, queried once; the source of DeviceInfo.

Features are read through the Vulkan 1.1/1.2/1.3 feature structs so the device can later enable
exactly the intersection of what irtk's shaders may use and what the device has.
"""
from __future__ import annotations


from dataclasses import dataclass, field
from typing import Any

import vulkan as vk

from irtk.hal import CAPABILITIES, DeviceInfo
from hal_vulkan.status import call, make_version, version_string
from schemas import VULKAN_EXECUTABLE_FORMAT as EXECUTABLE_FORMAT

PUSH_DESCRIPTOR_EXTENSION = "VK_KHR_push_descriptor"

# Features irtk's generated shaders may use, per feature struct; enabled when present. Every
# shader capability's feature (irtk.hal.CAPABILITIES) is among them.
WANTED_FEATURES: dict[str, tuple[str, ...]] = {
    "core": ("robustBufferAccess", "shaderInt16", "shaderInt64", "shaderFloat64"),
    "v11": ("storageBuffer16BitAccess", "uniformAndStorageBuffer16BitAccess",
            "storagePushConstant16", "variablePointersStorageBuffer", "variablePointers"),
    "v12": ("timelineSemaphore", "shaderFloat16", "shaderInt8", "storageBuffer8BitAccess",
            "uniformAndStorageBuffer8BitAccess", "storagePushConstant8", "vulkanMemoryModel",
            "vulkanMemoryModelDeviceScope", "scalarBlockLayout", "shaderSubgroupExtendedTypes",
            "bufferDeviceAddress", "hostQueryReset",
            "descriptorBindingStorageBufferUpdateAfterBind",
            "shaderUniformTexelBufferArrayDynamicIndexing"),
    "v13": ("subgroupSizeControl", "computeFullSubgroups", "maintenance4",
            "synchronization2"),
}

REBIND_SWITCH = "IRTK_VULKAN_REBIND"

# Feature struct per group: (binding constructor, sType constant).
FEATURE_STRUCTS = {
    f"v1{minor}": (f"VkPhysicalDeviceVulkan1{minor}Features",
                   f"VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_{minor}_FEATURES")
    for minor in (1, 2, 3)
}

_DEVICE_TYPES = {0: "other", 1: "integrated-gpu", 2: "discrete-gpu", 3: "virtual-gpu", 4: "cpu"}


@dataclass
class PhysicalDevice:
    """A physical device's handle, properties, features and limits (what the driver needs)."""

    handle: Any
    index: int
    name: str
    api_version: int
    driver_version: int
    device_uuid: bytes
    pipeline_cache_uuid: bytes
    vendor_id: int
    device_id: int
    queue_family: int
    extensions: frozenset[str]
    features: dict[str, dict[str, bool]]
    memory_types: list[tuple[int, int]]  # (propertyFlags, heapIndex)
    memory_heaps: list[tuple[int, int]]  # (size, flags)
    limits: dict[str, int | float]
    info: DeviceInfo = field(init=False, repr=False)  # made by `query` from the fields above

    def has(self, feature: str) -> bool:
        return any(group.get(feature, False) for group in self.features.values())

    @property
    def update_after_bind(self) -> bool:
        """Storage-buffer descriptors can be rewritten in a recorded (not pending) command
        buffer: then a new binding table needs no re-recording, only a descriptor update."""
        return self.has("descriptorBindingStorageBufferUpdateAfterBind")

    @property
    def push_descriptors(self) -> bool:
        return PUSH_DESCRIPTOR_EXTENSION in self.extensions


def _struct(name: str, stype: str, next_struct: Any = None) -> Any:
    return getattr(vk, name)(sType=getattr(vk, stype), pNext=next_struct)


def _string(value: Any) -> str:
    if isinstance(value, str):
        return value
    return vk.ffi.string(value).decode("utf-8", "replace")


def query(handle: Any, index: int) -> PhysicalDevice:
    """Read everything irtk needs from one physical device (needs Vulkan 1.1 for the chains)."""
    base = call(vk.vkGetPhysicalDeviceProperties, handle)
    api = base.apiVersion
    extensions = frozenset(e.extensionName
                           for e in call(vk.vkEnumerateDeviceExtensionProperties, handle, None))
    limits_obj = base.limits
    limits: dict[str, int | float] = {
        name: getattr(limits_obj, name) for name in (
            "maxComputeWorkGroupInvocations", "maxComputeSharedMemorySize",
            "minStorageBufferOffsetAlignment", "maxStorageBufferRange", "maxPushConstantsSize",
            "nonCoherentAtomSize", "timestampPeriod", "maxPerStageDescriptorStorageBuffers",
            "maxBoundDescriptorSets", "maxMemoryAllocationCount",
            "timestampComputeAndGraphics", "minTexelBufferOffsetAlignment",
            "maxTexelBufferElements", "maxPerStageDescriptorSampledImages")}
    features: dict[str, dict[str, bool]] = {"core": {}, "v11": {}, "v12": {}, "v13": {}}
    subgroup_size = 1
    driver_name, driver_info = "", ""
    uuid = bytes(16)
    if api >= make_version(1, 1):
        chain = _query_properties2(handle, api, extensions)
        subgroup_size = chain["subgroup"].subgroupSize
        limits["subgroupSupportedOperations"] = chain["subgroup"].supportedOperations
        limits["subgroupSupportedStages"] = chain["subgroup"].supportedStages
        uuid = bytes(chain["id"].deviceUUID)
        limits["maxMemoryAllocationSize"] = chain["maint3"].maxMemoryAllocationSize
        if "driver" in chain:
            driver_name = _string(chain["driver"].driverName)
            driver_info = _string(chain["driver"].driverInfo)
        if "timeline" in chain:
            limits["maxTimelineSemaphoreValueDifference"] = \
                chain["timeline"].maxTimelineSemaphoreValueDifference
        if "subgroup_control" in chain:
            sc = chain["subgroup_control"]
            limits["minSubgroupSize"] = sc.minSubgroupSize
            limits["maxSubgroupSize"] = sc.maxSubgroupSize
            limits["requiredSubgroupSizeStages"] = sc.requiredSubgroupSizeStages
        if "push" in chain:
            limits["maxPushDescriptors"] = chain["push"].maxPushDescriptors
        features = _query_features(handle, api)
    else:
        core = call(vk.vkGetPhysicalDeviceFeatures, handle)
        features["core"] = {n: bool(getattr(core, n)) for n in WANTED_FEATURES["core"]}
    families = call(vk.vkGetPhysicalDeviceQueueFamilyProperties, handle)
    queue_family = _pick_compute_family(families)
    if queue_family >= 0:
        limits["timestampValidBits"] = families[queue_family].timestampValidBits
    mem = call(vk.vkGetPhysicalDeviceMemoryProperties, handle)
    pd = PhysicalDevice(
        handle=handle, index=index, name=_string(base.deviceName), api_version=api,
        driver_version=base.driverVersion, device_uuid=uuid,
        pipeline_cache_uuid=bytes(base.pipelineCacheUUID), vendor_id=base.vendorID,
        device_id=base.deviceID, queue_family=queue_family, extensions=extensions,
        features=features,
        memory_types=[(mem.memoryTypes[i].propertyFlags, mem.memoryTypes[i].heapIndex)
                      for i in range(mem.memoryTypeCount)],
        memory_heaps=[(mem.memoryHeaps[i].size, mem.memoryHeaps[i].flags)
                      for i in range(mem.memoryHeapCount)],
        limits=limits)
    pd.info = _device_info(pd, base, subgroup_size, driver_name, driver_info)
    return pd


def _pick_compute_family(families: Any) -> int:
    """Prefer a compute queue without graphics (the dedicated compute queue of real GPUs)."""
    best = -1
    for i, family in enumerate(families):
        if not family.queueFlags & vk.VK_QUEUE_COMPUTE_BIT or family.queueCount == 0:
            continue
        if not family.queueFlags & vk.VK_QUEUE_GRAPHICS_BIT:
            return i
        if best < 0:
            best = i
    return best


def _query_properties2(handle: Any, api: int, extensions: frozenset[str]) -> dict[str, Any]:
    chain: dict[str, Any] = {}
    nxt = None
    specs = [("subgroup", "VkPhysicalDeviceSubgroupProperties",
              "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES"),
             ("id", "VkPhysicalDeviceIDProperties",
              "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES"),
             ("maint3", "VkPhysicalDeviceMaintenance3Properties",
              "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES")]
    if api >= make_version(1, 2):
        specs += [("driver", "VkPhysicalDeviceDriverProperties",
                   "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES"),
                  ("timeline", "VkPhysicalDeviceTimelineSemaphoreProperties",
                   "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_PROPERTIES")]
    if api >= make_version(1, 3):
        specs.append(("subgroup_control", "VkPhysicalDeviceSubgroupSizeControlProperties",
                      "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES"))
    if PUSH_DESCRIPTOR_EXTENSION in extensions:
        specs.append(("push", "VkPhysicalDevicePushDescriptorPropertiesKHR",
                      "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR"))
    for key, name, stype in specs:
        nxt = chain[key] = _struct(name, stype, nxt)
    props2 = _struct("VkPhysicalDeviceProperties2",
                     "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2", nxt)
    vk.vkGetPhysicalDeviceProperties2(handle, vk.ffi.addressof(props2))
    return chain


def _query_features(handle: Any, api: int) -> dict[str, dict[str, bool]]:
    structs: dict[str, Any] = {}
    nxt = None
    for key, (name, stype) in FEATURE_STRUCTS.items():
        if key == "v13" and api < make_version(1, 3):
            continue
        if key in ("v11", "v12") and api < make_version(1, 2):
            continue
        nxt = structs[key] = _struct(name, stype, nxt)
    features2 = _struct("VkPhysicalDeviceFeatures2",
                        "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2", nxt)
    vk.vkGetPhysicalDeviceFeatures2(handle, vk.ffi.addressof(features2))
    result = {"core": {n: bool(getattr(features2.features, n)) for n in WANTED_FEATURES["core"]},
              "v11": {}, "v12": {}, "v13": {}}
    for key, struct in structs.items():
        result[key] = {n: bool(getattr(struct, n)) for n in WANTED_FEATURES[key]}
    return result


def _xyz(values: Any) -> tuple[int, int, int]:
    """A Vulkan uint32_t[3] (x, y, z)."""
    x, y, z = values
    return int(x), int(y), int(z)


def _device_info(pd: PhysicalDevice, base: Any, subgroup_size: int, driver_name: str,
                 driver_info: str) -> DeviceInfo:
    lim = pd.limits
    extra = {
        "driver_name": driver_name,
        "driver_info": driver_info,
        "device_type": _DEVICE_TYPES.get(base.deviceType, str(base.deviceType)),
        "vendor_id": f"0x{pd.vendor_id:04x}",
        "device_id": f"0x{pd.device_id:04x}",
        "device_uuid": pd.device_uuid.hex(),
        "minStorageBufferOffsetAlignment": str(lim["minStorageBufferOffsetAlignment"]),
        "maxStorageBufferRange": str(lim["maxStorageBufferRange"]),
        "maxPushConstantsSize": str(lim["maxPushConstantsSize"]),
        "maxPerStageDescriptorStorageBuffers": str(lim["maxPerStageDescriptorStorageBuffers"]),
        "maxPerStageDescriptorSampledImages": str(lim["maxPerStageDescriptorSampledImages"]),
        "maxTexelBufferElements": str(lim["maxTexelBufferElements"]),
        "timelineSemaphore": str(pd.has("timelineSemaphore")).lower(),
    }
    extra["subgroupSizeControl"] = str(
        pd.has("subgroupSizeControl")
        and bool(int(lim.get("requiredSubgroupSizeStages", 0)) & vk.VK_SHADER_STAGE_COMPUTE_BIT)
    ).lower()
    for key in ("minSubgroupSize", "maxSubgroupSize", "subgroupSupportedOperations",
                "subgroupSupportedStages"):
        if key in lim:
            extra[key] = str(lim[key])
    return DeviceInfo(
        driver="vulkan",
        name=pd.name,
        index=pd.index,
        api_version=version_string(pd.api_version),
        driver_version=driver_info or version_string(pd.driver_version),
        subgroup_size=subgroup_size,
        max_workgroup_invocations=int(lim["maxComputeWorkGroupInvocations"]),
        max_workgroup_size=_xyz(base.limits.maxComputeWorkGroupSize),
        max_workgroup_count=_xyz(base.limits.maxComputeWorkGroupCount),
        shared_memory_bytes=int(lim["maxComputeSharedMemorySize"]),
        **{c.name: pd.has(c.vulkan_feature) for c in CAPABILITIES},
        push_descriptors=pd.push_descriptors,
        binding_alignment=int(lim["minStorageBufferOffsetAlignment"]),
        max_binding_bytes=int(lim["maxStorageBufferRange"]),
        executable_formats=(EXECUTABLE_FORMAT,),
        extra=extra,
    )
