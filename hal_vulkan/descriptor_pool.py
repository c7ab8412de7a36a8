"""Descriptor sets for devices without VK_KHR_push_descriptor.

Sets are allocated per recording from an arena; the arena takes whole pools from a device-wide
cache and, when its recording is re-recorded or destroyed, resets them (one call frees all their
sets) and hands them back. No set is ever freed on its own, so pools never fragment.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import vulkan as vk

from hal_vulkan.status import call, vk_error

if TYPE_CHECKING:
    from hal_vulkan.context import DeviceContext

# VK_DESCRIPTOR_POOL_CREATE_UPDATE_AFTER_BIND_BIT (Vulkan 1.2 core; the binding has only a
# None alias for it).
POOL_UPDATE_AFTER_BIND = 0x2
SETS_PER_POOL = 64
DESCRIPTORS_PER_POOL = 512


class DescriptorPoolCache:
    """Idle descriptor pools of one device, ready to be handed to an arena."""

    def __init__(self, context: DeviceContext) -> None:
        self.context = context
        self._idle: list[Any] = []
        self._all: list[Any] = []

    def acquire(self) -> Any:
        if self._idle:
            return self._idle.pop()
        flags = POOL_UPDATE_AFTER_BIND if self.context.update_after_bind else 0
        pool = call(vk.vkCreateDescriptorPool, self.context.handle, vk.VkDescriptorPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, flags=flags,
            maxSets=SETS_PER_POOL,
            pPoolSizes=[vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                descriptorCount=DESCRIPTORS_PER_POOL),
                        vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER,
                                                descriptorCount=DESCRIPTORS_PER_POOL)]), None)
        self.context.tracker.created("VkDescriptorPool")
        self._all.append(pool)
        return pool

    def give_back(self, pools: list[Any]) -> None:
        for pool in pools:
            call(vk.vkResetDescriptorPool, self.context.handle, pool, 0)
            self._idle.append(pool)

    def trim(self) -> None:
        """Destroy the idle pools (the ones no recording holds)."""
        for pool in self._idle:
            vk.vkDestroyDescriptorPool(self.context.handle, pool, None)
            self.context.tracker.destroyed("VkDescriptorPool")
            self._all.remove(pool)
        self._idle.clear()

    def destroy(self) -> None:
        for pool in self._all:
            vk.vkDestroyDescriptorPool(self.context.handle, pool, None)
            self.context.tracker.destroyed("VkDescriptorPool")
        self._all.clear()
        self._idle.clear()


class DescriptorArena:
    """The descriptor sets of one recording; all released together by `reset`."""

    def __init__(self, cache: DescriptorPoolCache) -> None:
        self.cache = cache
        self._pools: list[Any] = []

    def allocate(self, layout: Any) -> Any:
        context = self.cache.context
        for attempt in range(2):
            if not self._pools or attempt:
                self._pools.append(self.cache.acquire())
            info = vk.VkDescriptorSetAllocateInfo(
                sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                descriptorPool=self._pools[-1], pSetLayouts=[layout])
            try:
                return vk.vkAllocateDescriptorSets(context.handle, info)[0]
            except (vk.VkErrorOutOfPoolMemory, vk.VkErrorFragmentedPool) as e:
                if attempt:
                    raise vk_error("vkAllocateDescriptorSets", e) from None
        raise AssertionError("unreachable")

    def reset(self) -> None:
        pools, self._pools = self._pools, []
        if pools:
            self.cache.give_back(pools)
