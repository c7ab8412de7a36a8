"""Turning a command list plus a binding table into a VkCommandBuffer.

Each recording starts with a barrier against everything earlier in submission order (so the
command buffers of one queue_execute run in order) and ends with a barrier that makes all
shader and transfer writes visible to the host, so a fence wait is enough before reading.
Recordings are marked simultaneous-use: one may be resubmitted while still in flight.
On devices with update-after-bind storage descriptors, an idle recording is pointed at a new
binding table by rewriting its descriptor sets (`Recording.rebind`) instead of re-recording.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import vulkan as vk

from irtk.hal.deferred_command_buffer import (Barrier, ResolvedCommand, ResolvedCopy,
                                              ResolvedDispatch, ResolvedFill, ResolvedUpdate)
from hal_vulkan import commands as cmds
from hal_vulkan.descriptor_pool import DescriptorArena, DescriptorPoolCache
from hal_vulkan.descriptors import (binding_ranges, create_texel_view, fill_descriptor_write,
                                    fill_texel_write)
from hal_vulkan.resource import Resource
from hal_vulkan.status import call, check_result
from hal_vulkan.timestamps import TimestampQueries

if TYPE_CHECKING:
    from hal_vulkan.buffer import VulkanBuffer
    from hal_vulkan.context import DeviceContext

_COMPUTE_STAGE = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
_WORK_STAGES = _COMPUTE_STAGE | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
_WRITES = vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
_READS_WRITES = (vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
                 | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)


class Recording(Resource):
    """One VkCommandBuffer (and its descriptor sets) for one binding table."""

    kind = "recording"

    def __init__(self, context: DeviceContext, descriptor_pools: DescriptorPoolCache, key: tuple,
                 timed_dispatches: int = -1) -> None:
        super().__init__()
        self.context = context
        self.key = key  # the table entries the recorded commands themselves depend on
        self.content: tuple = ()  # the table entries the descriptor sets hold now
        # (command index, descriptor set, binding numbers) of each dispatch with a set, so
        # `rebind` can rewrite them (devices with update-after-bind descriptors only).
        self.sets: list[tuple[int, Any, tuple[int, ...]]] = []
        # Buffer views of its texel-buffer bindings: made when recording, destroyed with it
        # (never while it may be submitted: it is reset or destroyed only when idle).
        self.views: list[Any] = []
        self.timestamps: TimestampQueries | None = None
        info = vk.VkCommandBufferAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
            commandPool=context.command_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
            commandBufferCount=1)
        self.handle = call(vk.vkAllocateCommandBuffers, context.handle, info)[0]
        context.tracker.created("VkCommandBuffer")
        # Pools are taken on first use, so push-descriptor recordings cost nothing here; an
        # entry point with more bindings than maxPushDescriptors still needs sets.
        self.arena = DescriptorArena(descriptor_pools)
        if timed_dispatches >= 0:
            try:
                self.timestamps = TimestampQueries(context, timed_dispatches)
            except BaseException:
                self.destroy_handles()
                raise

    def reset(self, key: tuple) -> None:
        """Reuse an idle recording for another binding table."""
        call(vk.vkResetCommandBuffer, self.handle, 0)
        self.arena.reset()
        self._destroy_views()
        self.key = key
        self.content = ()
        self.sets = []

    def rebind(self, commands: list[ResolvedCommand], content: tuple) -> None:
        """Point the descriptor sets at a new table's buffers, without re-recording. Only for
        an idle recording on a device with update-after-bind descriptors."""
        count = sum(len(numbers) for _, _, numbers in self.sets)
        if count:
            # One vkUpdateDescriptorSets for every set, its structs filled through cffi (as in
            # `_dispatch`; the binding's generic constructors made rebinding slower than
            # recording again); `infos` outlives the call that reads it through pBufferInfo.
            infos = vk.ffi.new("VkDescriptorBufferInfo[]", count)
            writes = vk.ffi.new("VkWriteDescriptorSet[]", count)
            i = 0
            for index, dst_set, numbers in self.sets:
                d = commands[index]
                assert isinstance(d, ResolvedDispatch)
                for number, resolved in zip(numbers, d.bindings):
                    what = f"dispatch '{d.command.name}' (command {index}) binding {number}"
                    fill_descriptor_write(self.context, infos, writes, i, dst_set, number,
                                          resolved, what)
                    i += 1
            vk.lib.vkUpdateDescriptorSets(self.context.handle, count, writes, 0, vk.ffi.NULL)
            del infos
        self.content = content

    def buffer_view(self, buffer: Any, offset: int, size: int) -> Any:
        """A new texel view of `size` bytes at `offset`, owned by this recording."""
        view = create_texel_view(self.context, buffer, offset, size)
        self.views.append(view)
        return view

    def _destroy_views(self) -> None:
        for view in self.views:
            vk.lib.vkDestroyBufferView(self.context.handle, view, vk.ffi.NULL)
            self.context.tracker.destroyed("VkBufferView")
        self.views = []

    def destroy_handles(self) -> None:
        self.arena.reset()
        self._destroy_views()
        if self.timestamps is not None:
            self.timestamps.destroy()
        vk.vkFreeCommandBuffers(self.context.handle, self.context.command_pool, 1, [self.handle])
        self.context.tracker.destroyed("VkCommandBuffer")


_BARRIERS: dict[tuple[int, int], Any] = {}


def _global_barrier(cb: Any, src_stage: int, dst_stage: int, src_access: int,
                    dst_access: int) -> None:
    # Every recording makes a few of these: the structs are built once per access pair and
    # the call goes straight through cffi (see fast.py for why).
    barrier = _BARRIERS.get((src_access, dst_access))
    if barrier is None:
        barrier = vk.ffi.new("VkMemoryBarrier*")
        barrier.sType = vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER
        barrier.srcAccessMask = src_access
        barrier.dstAccessMask = dst_access
        _BARRIERS[(src_access, dst_access)] = barrier
    vk.lib.vkCmdPipelineBarrier(cb, src_stage, dst_stage, 0, 1, barrier, 0, vk.ffi.NULL, 0,
                                vk.ffi.NULL)


def execution_barrier(cb: Any) -> None:
    """Compute/transfer work before, its writes visible to compute/transfer work after."""
    _global_barrier(cb, _WORK_STAGES, _WORK_STAGES, _WRITES, _READS_WRITES)


_BEGIN_INFO = vk.ffi.new("VkCommandBufferBeginInfo*")
_BEGIN_INFO.sType = vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO
_BEGIN_INFO.flags = vk.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT


class Recorder:
    """Writes one resolved command list (`DeferredCommandBuffer.resolve`) into one recording."""

    def __init__(self, context: DeviceContext, recording: Recording,
                 staging: Callable[[int, bytes], VulkanBuffer]) -> None:
        self.context = context
        self.recording = recording
        self.cb = recording.handle
        self.staging = staging  # (command index, bytes) -> the command's staging buffer
        self.bound_pipeline: Any = None
        self.dispatch_count = 0

    def record(self, command_list: list[ResolvedCommand]) -> None:
        check_result("vkBeginCommandBuffer", vk.lib.vkBeginCommandBuffer(self.cb, _BEGIN_INFO))
        if self.recording.timestamps is not None:
            self.recording.timestamps.reset(self.cb)
        execution_barrier(self.cb)
        for i, command in enumerate(command_list):
            if isinstance(command, ResolvedDispatch):
                self._dispatch(command, i)
            elif isinstance(command, Barrier):
                execution_barrier(self.cb)
            elif isinstance(command, ResolvedFill):
                self._fill(command, i)
            elif isinstance(command, ResolvedCopy):
                self._copy(command)
            elif isinstance(command, ResolvedUpdate):
                self._update(command, i)
        _global_barrier(self.cb, _WORK_STAGES, vk.VK_PIPELINE_STAGE_HOST_BIT, _WRITES,
                        vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_HOST_WRITE_BIT)
        check_result("vkEndCommandBuffer", vk.lib.vkEndCommandBuffer(self.cb))

    def _dispatch(self, d: ResolvedDispatch, index: int) -> None:
        ep, cb = d.command.entry, self.cb
        if ep.pipeline is not self.bound_pipeline:
            vk.lib.vkCmdBindPipeline(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, ep.pipeline)
            self.bound_pipeline = ep.pipeline
        if ep.binding_numbers:
            # The structs are filled through cffi (see fast.py); `infos` outlives the calls
            # that read it through the writes' pBufferInfo.
            count = len(ep.binding_numbers)
            infos = vk.ffi.new("VkDescriptorBufferInfo[]", count)
            writes = vk.ffi.new("VkWriteDescriptorSet[]", count)
            views = vk.ffi.new("VkBufferView[]", ep.texel_descriptors) \
                if ep.texel_bindings else None
            view = 0  # next free slot of `views`
            dst_set = None if ep.push_descriptors else \
                self.recording.arena.allocate(ep.set_layout)
            target = vk.ffi.NULL if dst_set is None else dst_set
            for i, (number, resolved) in enumerate(zip(ep.binding_numbers, d.bindings)):
                what = f"dispatch '{ep.name}' (command {index}) binding {number}"
                if number in ep.texel_bindings:
                    ranges = binding_ranges(self.context, ep, number, resolved, what)
                    view = fill_texel_write(self.context, self.recording, views, view, writes,
                                            i, target, number, ranges, resolved)
                else:
                    fill_descriptor_write(self.context, infos, writes, i, target, number,
                                          resolved, what)
            push_descriptor_set = self.context.push_descriptor_set
            if ep.push_descriptors:
                assert push_descriptor_set is not None, "only made on a device that has it"
                push_descriptor_set(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE,
                                    ep.pipeline_layout, 0, count, writes)
            else:
                vk.lib.vkUpdateDescriptorSets(self.context.handle, count, writes, 0,
                                              vk.ffi.NULL)
                sets = vk.ffi.new("VkDescriptorSet[1]", [dst_set])
                vk.lib.vkCmdBindDescriptorSets(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE,
                                               ep.pipeline_layout, 0, 1, sets, 0, vk.ffi.NULL)
                if ep.update_after_bind:
                    self.recording.sets.append((index, dst_set, ep.binding_numbers))
            del infos, views
        constants = d.command.constants
        if constants:
            vk.vkCmdPushConstants(cb, ep.pipeline_layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                  len(constants), vk.ffi.from_buffer(constants))
        queries = self.recording.timestamps
        if queries is not None:
            queries.before(cb, self.dispatch_count)
        vk.lib.vkCmdDispatch(cb, *d.command.workgroups)
        if queries is not None:
            queries.after(cb, self.dispatch_count)
        self.dispatch_count += 1

    def _copy_region(self, src: Any, src_offset: int, dst: Any, dst_offset: int,
                     size: int) -> None:
        region = vk.VkBufferCopy(srcOffset=src_offset, dstOffset=dst_offset, size=size)
        vk.vkCmdCopyBuffer(self.cb, src, dst, 1, [region])

    def _fill(self, f: ResolvedFill, index: int) -> None:
        target = f.target
        if not target.length:
            return
        start, size, word, ends = cmds.fill_plan(target.buffer.device_offset(target.offset),
                                                 target.length, f.pattern)
        dst = target.buffer.vk_buffer
        if size:
            vk.vkCmdFillBuffer(self.cb, dst, start, size, word)
        if ends:
            staging = self.staging(index, cmds.fill_staging(f.pattern))
            for src_offset, dst_offset, n in ends:
                self._copy_region(staging.vk_buffer, staging.device_offset(src_offset), dst,
                                  dst_offset, n)

    def _copy(self, c: ResolvedCopy) -> None:
        if not c.source.length:
            return
        self._copy_region(c.source.buffer.vk_buffer, c.source.buffer.device_offset(c.source.offset),
                          c.target.buffer.vk_buffer, c.target.buffer.device_offset(c.target.offset),
                          c.source.length)

    def _update(self, u: ResolvedUpdate, index: int) -> None:
        target, n = u.target, len(u.data)
        if not n:
            return
        dst_off = target.buffer.device_offset(target.offset)
        if dst_off % 4 == 0 and n % 4 == 0 and n <= cmds.MAX_UPDATE_BYTES:
            vk.vkCmdUpdateBuffer(self.cb, target.buffer.vk_buffer, dst_off, n,
                                 vk.ffi.from_buffer(u.data))
        else:
            staging = self.staging(index, u.data)
            self._copy_region(staging.vk_buffer, staging.device_offset(0),
                              target.buffer.vk_buffer, dst_off, n)
