"""A Vulkan logical device: one compute queue, the features irtk uses, and everything it owns.

The device makes the VkDevice and the `DeviceContext` its objects share (context.py: the handle,
the lock that serialises the externally-synchronised Vulkan objects, the queue and command pool,
the registry of live resources and the garbage queue that finalizers feed, the validation
log), then the device-wide services (descriptor pools, pipeline cache, staging transfers,
allocator). Each object it creates gets the context and the services it uses, never the device,
so this module sits above them all (only the driver imports it). Every HAL entry point calls
`check()`, which raises pending validation messages and destroys resources whose last
submission has completed.
"""
from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any

import vulkan as vk

from irtk import tracing
from irtk.errors import DeviceError, Error, RuntimeFailure
from irtk.hal import BindingRef, Buffer, CommandBuffer, Device, Fence
from hal_vulkan.allocator import VulkanAllocator
from hal_vulkan.buffer import VulkanBuffer
from hal_vulkan.command_buffer import VulkanCommandBuffer
from hal_vulkan.context import DeviceContext
from hal_vulkan.descriptor_pool import DescriptorPoolCache
from hal_vulkan.dispatch_timing import DispatchTiming
from hal_vulkan.executable import VulkanExecutable
from hal_vulkan.physical_device import (EXECUTABLE_FORMAT, FEATURE_STRUCTS,
                                        PUSH_DESCRIPTOR_EXTENSION, REBIND_SWITCH,
                                        WANTED_FEATURES)
from hal_vulkan.executable_cache import ExecutableCache
from hal_vulkan.pipeline_cache import PipelineCache
from hal_vulkan.queue import Queue
from hal_vulkan.semaphore import VulkanSemaphore
from hal_vulkan.status import call, device_function, make_version
from hal_vulkan.tracker import ObjectTracker
from hal_vulkan.transfer import HostTransfer

if TYPE_CHECKING:
    from hal_vulkan.instance import VulkanInstance
    from hal_vulkan.physical_device import PhysicalDevice
    from hal_vulkan.recorder import Recording
    from hal_vulkan.resource import Resource


class VulkanDevice(Device):
    def __init__(self, instance: VulkanInstance, physical: PhysicalDevice,
                 host_mapped: bool | None = None) -> None:
        self.instance = instance
        self.physical = physical
        self.log = instance.log
        self.lock = threading.RLock()
        self.tracker = ObjectTracker()
        self._check_usable(physical)
        # Rebinding recordings through update-after-bind descriptors (a new binding table
        # rewrites an idle recording's descriptor sets instead of re-recording) is the default
        # where the device can, unless it has push descriptors, which stay the default there;
        # IRTK_VULKAN_REBIND=0 turns it off, =1 prefers it to push descriptors.
        switch = os.environ.get(REBIND_SWITCH, "")
        self.update_after_bind = physical.update_after_bind and switch != "0" and \
            (switch == "1" or not physical.push_descriptors)
        self.push_descriptors = physical.push_descriptors and not self.update_after_bind
        self.handle = self._create_device(physical)
        try:
            push_descriptor_set = device_function(self.handle, "vkCmdPushDescriptorSetKHR") \
                if self.push_descriptors else None
            self.queue = Queue(self.handle, physical, self.tracker, self.lock)
            pool_info = vk.VkCommandPoolCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                queueFamilyIndex=physical.queue_family)
            command_pool = call(vk.vkCreateCommandPool, self.handle, pool_info, None)
            self.tracker.created("VkCommandPool")
            self.context = DeviceContext(
                handle=self.handle, physical=physical, log=self.log, tracker=self.tracker,
                lock=self.lock, queue=self.queue, command_pool=command_pool,
                update_after_bind=self.update_after_bind, push_descriptors=self.push_descriptors,
                push_descriptor_set=push_descriptor_set)
            self.descriptor_pools = DescriptorPoolCache(self.context)
            self.pipeline_cache = PipelineCache(self.context)
            self.executables = ExecutableCache(self.context)
            self.transfer = HostTransfer(self.context)
            self.dispatch_timing = DispatchTiming(self.queue, physical.info.name)
            allocator = VulkanAllocator(self.context, self.transfer, host_mapped=host_mapped)
        except BaseException:
            vk.vkDestroyDevice(self.handle, None)
            raise
        super().__init__(physical.info, allocator)
        self.allocator: VulkanAllocator = allocator
        self.check()

    # -- creation -----------------------------------------------------------------------------
    @staticmethod
    def _check_usable(pd: PhysicalDevice) -> None:
        if pd.queue_family < 0:
            raise DeviceError(f"device '{pd.name}' has no compute queue")
        if pd.api_version < make_version(1, 2) or not pd.has("timelineSemaphore"):
            raise DeviceError(f"device '{pd.name}' (Vulkan {pd.info.api_version}) lacks "
                              "timeline semaphores, which irtk requires (Vulkan 1.2)")

    def _create_device(self, pd: PhysicalDevice) -> Any:
        """Enable every wanted feature the device has; robustBufferAccess is always on."""
        structs: dict[str, Any] = {}
        nxt = None
        for key, (name, stype) in FEATURE_STRUCTS.items():
            if key == "v13" and pd.api_version < make_version(1, 3):
                continue
            enabled = {n: vk.VK_TRUE for n in WANTED_FEATURES[key] if pd.features[key].get(n)}
            nxt = structs[key] = getattr(vk, name)(sType=getattr(vk, stype), pNext=nxt, **enabled)
        core = vk.VkPhysicalDeviceFeatures(**{n: vk.VK_TRUE for n in WANTED_FEATURES["core"]
                                              if pd.features["core"].get(n)})
        features2 = vk.VkPhysicalDeviceFeatures2(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=nxt, features=core)
        queue_info = vk.VkDeviceQueueCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
            queueFamilyIndex=pd.queue_family, queueCount=1, pQueuePriorities=[1.0])
        extensions = [PUSH_DESCRIPTOR_EXTENSION] if self.push_descriptors else []
        info = vk.VkDeviceCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, pNext=features2,
            pQueueCreateInfos=[queue_info], ppEnabledExtensionNames=extensions or None)
        handle = call(vk.vkCreateDevice, pd.handle, info, None)
        if self.log is not None:
            self.log.raise_pending()
        return handle

    # -- bookkeeping ----------------------------------------------------------------------------
    @property
    def released(self) -> bool:
        return self.context.released

    def check(self) -> None:
        """Entry point of every HAL call: raise validation messages, free finished resources."""
        self.context.check()

    def collect(self) -> None:
        """Destroy collected or released resources that no pending submission uses."""
        self.context.collect()

    def trim(self) -> None:
        """Destroy finished resources and free the memory and pools kept for reuse."""
        self.check()
        with self.lock:
            self.executables.trim()
            self.collect()
            self.allocator.trim()
            self.transfer.trim()
            self.descriptor_pools.trim()

    def live_objects(self, timeout: float | None = 10.0) -> dict[str, int]:
        """Live Vulkan handles by kind once the queue is idle and trimmed (for leak tests)."""
        self.wait_idle(timeout)
        self.trim()
        return self.tracker.live()

    # -- HAL ------------------------------------------------------------------------------------
    def create_executable(self, executable_format: str, data: bytes) -> VulkanExecutable:
        self.check()
        if executable_format != EXECUTABLE_FORMAT:
            raise DeviceError(f"device '{self.info.name}' cannot load executable format "
                              f"'{executable_format}' (supported: {EXECUTABLE_FORMAT})")
        return VulkanExecutable(self.context, self.pipeline_cache, self.executables, data)

    def create_command_buffer(self, binding_capacity: int = 0, *,
                              timestamps: bool = False) -> VulkanCommandBuffer:
        """`timestamps=True` times each dispatch (see VulkanCommandBuffer.dispatch_times)."""
        self.check()
        return VulkanCommandBuffer(self.context, self.descriptor_pools,
                                   self.transfer.staging_allocator, binding_capacity, timestamps)

    def create_semaphore(self, initial_value: int = 0) -> VulkanSemaphore:
        self.check()
        with self.lock:
            return VulkanSemaphore(self.context, initial_value)

    def queue_execute(self, wait: Fence, signal: Fence, command_buffers: list[CommandBuffer],
                      binding_tables: list[list[tuple[Buffer, int, int]]] | None = None) -> None:
        """One vkQueueSubmit: wait on `wait`'s points, run the command buffers in order, signal
        `signal`'s points. A failed wait (or signal) semaphore fails `signal` instead."""
        self.check()
        waits = self._points(wait, "wait")
        signals = self._points(signal, "signal")
        failed = next((s.error for s, _ in waits + signals if s.error is not None), None)
        if failed is not None:
            for s, _ in signals:
                s.fail(failed)
            return
        if binding_tables is not None and len(binding_tables) != len(command_buffers):
            raise RuntimeFailure(f"{len(command_buffers)} command buffers but "
                                 f"{len(binding_tables)} binding tables")
        tracer = tracing.active
        start = time.monotonic_ns() if tracer is not None else 0
        with self.lock:
            handles: list[Any] = []
            used: list[Resource] = [s.resource for s, _ in waits + signals]
            timed: list[tuple[Recording, list[tuple[str, tuple[int, int, int]]]]] = []
            try:
                for i, cb in enumerate(command_buffers):
                    if not isinstance(cb, VulkanCommandBuffer) or cb.context is not self.context:
                        raise RuntimeFailure(f"queue_execute: command buffer {i} is not of "
                                             f"device '{self.info.name}'")
                    table = binding_tables[i] if binding_tables is not None else None
                    recording, resources = cb.prepare(table)
                    handles.append(recording.handle)
                    used.extend(resources)
                    if tracer is not None and recording.timestamps is not None:
                        timed.append((recording, cb.dispatch_labels()))
                self.check()
                serial = self.queue.submit(waits, signals, handles,
                                           [command_buffers, binding_tables])
            except Error as e:
                for s, _ in signals:
                    s.fail(e)
                raise
            for resource in used:
                resource.last_use = serial
            for s, value in signals:
                s.resource.gpu_signal = max(s.resource.gpu_signal, value)
            if tracer is not None:
                self.dispatch_timing.submitted(tracer, serial, start, timed)
                tracer.add_flush(self, self._trace_flush)
        if tracer is not None:
            tracer.add(tracing.Event("queue_execute", "submit", start,
                                     time.monotonic_ns() - start, tracing.HOST,
                                     threading.get_ident(),
                                     {"device": self.info.name, "serial": serial,
                                      "command_buffers": len(command_buffers)}))
        self.check()

    def queue_alloca(self, wait: Fence, signal: Fence, size: int) -> Buffer:
        """The buffer exists at once; `signal` (reached after `wait`, on the GPU's timeline)
        says when queued work may use it."""
        self.check()
        buffer = self.allocator.allocate(size)
        self.queue_execute(wait, signal, [])
        return buffer

    def queue_write(self, wait: Fence, signal: Fence, source: bytes | bytearray | memoryview,
                    target: Buffer, offset: int) -> None:
        """The bytes go into a host-mapped staging buffer now and are copied on the queue,
        ordered by the fences (so unmapped memory never needs a blocking transfer)."""
        self.check()
        data = memoryview(source).tobytes()
        self._check_transfer("queue_write", signal, target, offset, len(data))
        if not data:
            self.queue_execute(wait, signal, [])
            return
        with self.lock:
            staging = self.transfer.staging_allocator().allocate_with_data(data)
        self._queue_commands(wait, signal, "queue_write", lambda cb: cb.copy_buffer(
            BindingRef(staging, 0, len(data)), BindingRef(target, offset, len(data))))
        staging.release()  # freed once the copy has completed

    def queue_read(self, wait: Fence, signal: Fence, source: Buffer, offset: int,
                   target: bytearray | memoryview, length: int) -> None:
        """Copy on the queue into a host-mapped staging buffer (ordered by `wait`), then, on
        the host queue, from there into `target` before `signal` is signalled."""
        self.check()
        view = memoryview(target)
        view = view if view.format == "B" and view.ndim == 1 else view.cast("B")
        if view.readonly or view.nbytes < length:
            super().queue_read(wait, signal, source, offset, target, length)  # raises
            return
        self._check_transfer("queue_read", signal, source, offset, length)
        with self.lock:
            staging = self.transfer.staging_allocator().allocate(max(length, 1))
        copied = Fence([(self.create_semaphore(0), 1)])
        try:
            self._queue_commands(wait, copied, "queue_read", lambda cb: cb.copy_buffer(
                BindingRef(source, offset, length), BindingRef(staging, 0, length)))
        except Exception as e:
            signal.fail(e)
            staging.release()
            raise

        def finish() -> None:
            try:
                view[:length] = staging.read(0, length)
            finally:
                staging.release()
        self._host_submit(copied, signal, finish)

    def queue_dealloca(self, wait: Fence, signal: Fence, buffer: Buffer) -> None:
        """Release the buffer once `wait` is reached (waiting here, on the caller's thread);
        its range returns to the allocator when the GPU work using it has completed."""
        self.check()
        allocated = buffer.allocated_buffer
        if not isinstance(allocated, VulkanBuffer) or allocated.context is not self.context:
            error = RuntimeFailure(f"queue_dealloca: the buffer is not of device "
                                   f"'{self.info.name}'")
            signal.fail(error)
            raise error
        try:
            wait.wait()
        except Exception as e:
            signal.fail(e)
            raise
        allocated.release()
        self.queue_execute(Fence(), signal, [])

    def _points(self, fence: Fence, what: str) -> list[tuple[VulkanSemaphore, int]]:
        points = []
        for semaphore, value in fence.points:
            if not isinstance(semaphore, VulkanSemaphore) or \
                    semaphore.context is not self.context:
                raise RuntimeFailure(f"{what} fence holds a semaphore that is not of device "
                                     f"'{self.info.name}'")
            points.append((semaphore, int(value)))
        return points

    def _trace_flush(self) -> None:
        """Wait for the traced submissions so their dispatch times are read (tracing.stop)."""
        try:
            self.wait_idle()
        except Error:
            self.dispatch_timing.clear()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait for every submission so far, host queue operations (queue_read/queue_write)
        included; True when both drained."""
        self.check()
        # Host operations first: one may submit device work when it runs (queue_write).
        start = time.monotonic()
        drained = self._drain_host_queue(timeout)
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
        ns = (1 << 62) if left is None else int(left * 1e9)
        with self.lock:
            if self.queue.serial > self.queue.barrier:
                self.queue.submit_barrier()  # so the last submission's resources settle too
        done = self.queue.wait_serial(self.queue.serial, ns) and drained
        self.collect()
        # The private timeline is signalled before the caller's semaphores: released ones the
        # same submissions signal are destroyed once that lands (SemaphoreResource.idle), a
        # moment later. Poll briefly (no driver wait: these are microseconds) so an idle
        # queue leaves nothing retiring.
        deadline = time.monotonic() + min(1.0, ns / 1e9)
        while done and self.context.awaits_signals():
            if time.monotonic() >= deadline:
                break
            time.sleep(1e-4)
            self.collect()
        return done

    def release(self) -> None:
        """Wait for the queue, then destroy every object the device still owns; idempotent."""
        if self.released:
            return
        self._shutdown_host_queue_nowait()
        with self.lock:
            if self.released:
                return
            try:
                self.queue.abandon_blocked()
                call(vk.vkDeviceWaitIdle, self.handle)
                self.queue.poll()  # a trace's timings of the last submissions are read
            finally:
                self.dispatch_timing.clear()
                self.queue.on_complete = None
                self.executables.clear()
                self.context.release_resources()
                self.transfer.destroy()
                self.allocator.destroy()
                self.descriptor_pools.destroy()
                self.pipeline_cache.destroy()
                vk.vkDestroyCommandPool(self.handle, self.context.command_pool, None)
                self.tracker.destroyed("VkCommandPool")
                self.queue.destroy()
                vk.vkDestroyDevice(self.handle, None)
        if self.log is not None:
            self.log.raise_pending()

    def _shutdown_host_queue_nowait(self) -> None:
        """Host transfers still waiting on fences that will never be reached would block the
        release: fail their waits first (as abandon_blocked does for GPU waits)."""
        with self.lock:
            if not self.released:
                self.queue.abandon_blocked()
        self._shutdown_host_queue()

    def __repr__(self) -> str:
        return f"VulkanDevice({self.info.name!r})"
