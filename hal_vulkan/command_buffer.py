"""HAL command buffers: a checked command list, recorded into VkCommandBuffers at submit.

Arguments are checked when a command is added, so mistakes surface where they are made. The
VkCommandBuffer is recorded at the first submit, once per distinct binding table (keyed by the
buffers, offsets and lengths of the slots the commands use) and reused when the same table comes
again; a few recordings are kept so alternating tables do not re-record every time.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from irtk import tracing
from irtk.errors import DeviceError, RuntimeFailure
from irtk.hal import BindingRef, Executable
from irtk.hal.binding import BindingTable, ResolvedBinding, table_entry
from irtk.hal.buffer import RangeError
from irtk.hal.deferred_command_buffer import DeferredCommandBuffer, Dispatch, command_refs
from hal_vulkan.buffer import VulkanBuffer
from hal_vulkan.executable import EntryPoint, VulkanExecutable
from hal_vulkan.descriptors import binding_ranges
from hal_vulkan.recorder import Recorder, Recording
from hal_vulkan.resource import Resource

if TYPE_CHECKING:
    from hal_vulkan.allocator import VulkanAllocator
    from hal_vulkan.context import DeviceContext
    from hal_vulkan.descriptor_pool import DescriptorPoolCache

MAX_RECORDINGS = 4  # idle recordings kept per command buffer


class VulkanCommandBuffer(DeferredCommandBuffer):
    """Recordings take their descriptor sets from `descriptor_pools` and the bytes of fills and
    updates that need a staging buffer from `staging_allocator()` (the device's)."""

    buffer_type = VulkanBuffer

    def __init__(self, context: DeviceContext, descriptor_pools: DescriptorPoolCache,
                 staging_allocator: Callable[[], VulkanAllocator], binding_capacity: int = 0,
                 timestamps: bool = False) -> None:
        super().__init__(binding_capacity)
        self.context = context
        self.descriptor_pools = descriptor_pools
        self.staging_allocator = staging_allocator
        self.timestamps = timestamps
        self._last: Recording | None = None  # the recording submitted last
        self._recordings: list[Recording] = []  # most recently used last
        self._staging: dict[int, VulkanBuffer] = {}  # command index -> staging buffer
        self._slots: tuple[int, ...] = ()
        self._recorded_slots: set[int] = set()
        self._rebindable = False
        self._static: list[Resource] = []  # resources every submit uses
        self._direct: list[VulkanBuffer] = []

    # -- recording hooks (the shared recorder does the rest) ----------------------------------
    def check_live(self) -> None:
        self.context.check()

    def lookup_export(self, executable: Executable, ordinal: int) -> tuple[EntryPoint, str]:
        if not isinstance(executable, VulkanExecutable) or executable.context is not self.context:
            raise RuntimeFailure("dispatch needs an executable created on this Vulkan device")
        if executable.released:
            raise RuntimeFailure("dispatch of a released executable")
        try:
            entry = executable.entry_point(ordinal)
        except ValueError as e:
            raise RangeError(f"dispatch: {e}") from None
        return entry, entry.name

    def check_dispatch(self, entry: EntryPoint, name: str, workgroups: tuple[int, int, int],
                       constants: list[int], bindings: list[BindingRef]) -> None:
        what = f"dispatch of '{name}'"
        limits = self.context.info.max_workgroup_count
        if any(c > m for c, m in zip(workgroups, limits)):
            raise DeviceError(f"{what}: workgroup count {tuple(workgroups)} is outside "
                              f"{tuple(limits)} (maxComputeWorkGroupCount)")
        if len(constants) != entry.push_constant_count:
            raise RuntimeFailure(f"{what}: {len(constants)} push constants given, the entry "
                                 f"point takes {entry.push_constant_count}")
        if len(bindings) != len(entry.binding_numbers):
            raise RuntimeFailure(f"{what}: {len(bindings)} bindings given, the entry point "
                                 f"takes {len(entry.binding_numbers)}")

    def check_direct_binding(self, entry: EntryPoint, index: int, binding: ResolvedBinding,
                             what: str) -> None:
        binding_ranges(self.context, entry, entry.binding_numbers[index], binding, what)

    def finalize(self) -> None:
        if self.finalized:
            return
        super().finalize()
        self._slots = self.slots_used()
        # Slots whose buffers the recorded commands name (transfers always; dispatches unless
        # their descriptors can be rewritten after bind): a new entry there means re-recording.
        self._rebindable = self.context.update_after_bind
        self._recorded_slots = {r.slot for c in self.commands for r in command_refs(c)
                                if r.is_slot and not (self._rebindable
                                                      and isinstance(c, Dispatch)
                                                      and c.entry.update_after_bind)}
        self._direct = self.direct_buffers()
        # The executables dispatched (lookup_export lets in only this device's VulkanExecutables).
        executables = {id(c.executable): c.executable for c in self.commands
                       if isinstance(c, Dispatch) and isinstance(c.executable, VulkanExecutable)}
        self._static = [e.resource for e in executables.values()]
        self._static += [b.resource for b in self._direct]

    # -- submit-time --------------------------------------------------------------------------
    def prepare(self, table: BindingTable | None) -> tuple[Recording, list[Resource]]:
        """The recording for `table` (recorded now if needed) and every resource it uses.

        Called by queue_execute with the device lock held.
        """
        self.check_executable()
        for buffer in self._direct:
            if buffer.released:
                raise RuntimeFailure("command buffer uses a buffer that was released")
        key_parts: list[tuple[int, ...]] = []
        content_parts: list[tuple[int, ...]] = []
        table_resources: list[Resource] = []
        for slot in self._slots:
            entry = table_entry(table, slot, "command buffer", VulkanBuffer)
            if entry.buffer.context is not self.context:
                raise RuntimeFailure(f"binding-table slot {slot} holds a buffer of another device")
            part = (*entry.buffer.resource.location(entry.offset), entry.length)
            (key_parts if slot in self._recorded_slots else content_parts).append(part)
            table_resources.append(entry.buffer.resource)
        recording = self._find_recording(tuple(key_parts), tuple(content_parts), table)
        # Busy from now on (the coming submit's serial), so a second use of this command
        # buffer in the same submit cannot evict and re-record it.
        recording.last_use = max(recording.last_use, self.context.queue.serial + 1)
        self._last = recording
        staging = [b.resource for b in self._staging.values()]
        return recording, self._static + table_resources + staging + [recording]

    def _find_recording(self, key: tuple, content: tuple,
                        table: BindingTable | None) -> Recording:
        """A recording for the table: one made for it; else an idle one whose commands fit
        and whose descriptor sets are rewritten (update-after-bind); else a re-recorded idle
        one or a new one. `key` is what the recorded commands depend on, `content` what only
        the descriptor sets do (empty unless the device updates descriptors after bind)."""
        context = self.context
        completed = context.queue.poll()
        # While a trace is recorded every recording times its dispatches, and one still in
        # flight is not submitted again (its timestamps are read once it completes).
        traced = tracing.active is not None
        timed = self.timestamps or traced

        def usable(r: Recording) -> bool:
            return (r.timestamps is not None or not timed) and \
                (not traced or r.last_use <= completed)
        found = next((r for r in self._recordings
                      if r.key == key and r.content == content and usable(r)), None)
        if found is None and self._rebindable:
            found = next((r for r in self._recordings
                          if r.key == key and r.last_use <= completed and usable(r)), None)
            if found is not None:
                found.rebind(self.resolve(table), content)
        if found is not None:
            self._recordings.remove(found)
            self._recordings.append(found)
            self._drop_extra(completed)
            return found
        idle = [r for r in self._recordings if r.last_use <= completed and usable(r)]
        if len(self._recordings) >= MAX_RECORDINGS and idle:
            rec = idle[0]
            self._recordings.remove(rec)
            rec.reset(key)
        else:
            dispatches = sum(isinstance(c, Dispatch) for c in self.commands) if timed else -1
            rec = Recording(context, self.descriptor_pools, key, dispatches)
            context.adopt(rec)
        try:
            Recorder(context, rec, self._staging_for).record(self.resolve(table))
        except BaseException:
            context.retire(rec)
            raise
        rec.content = content
        self._recordings.append(rec)
        self._drop_extra(completed)
        return rec

    def _drop_extra(self, completed: int) -> None:
        """Beyond MAX_RECORDINGS (made while the others were in flight), retire the least
        recently used idle ones; the last one is the one about to be submitted."""
        extra = len(self._recordings) - MAX_RECORDINGS
        if extra <= 0:
            return
        for old in [r for r in self._recordings[:-1] if r.last_use <= completed][:extra]:
            self._recordings.remove(old)
            self.context.retire(old)

    def _staging_for(self, index: int, data: bytes) -> VulkanBuffer:
        """A staging buffer with the bytes a fill's ends or an unaligned update of command
        `index` copy from (the same bytes whatever the binding table)."""
        buffer = self._staging.get(index)
        if buffer is None:
            with self.context.lock:
                buffer = self.staging_allocator().allocate_with_data(data)
            self._staging[index] = buffer
        return buffer

    def dispatch_labels(self) -> list[tuple[str, tuple[int, int, int]]]:
        """(entry point name, workgroup count) of each dispatch, in recorded order."""
        return [(c.name, c.workgroups) for c in self.commands if isinstance(c, Dispatch)]

    def dispatch_times(self) -> list[float]:
        """Device seconds of each dispatch in the last submission (needs `timestamps=True`
        and a completed submission)."""
        if not self.timestamps:
            raise RuntimeFailure("command buffer was not created with timestamps=True")
        rec = self._last
        if rec is None:
            raise RuntimeFailure("command buffer has not been submitted")
        self.context.check()
        with self.context.lock:
            if rec.last_use > self.context.queue.poll():
                raise RuntimeFailure("the submission has not completed; wait on its fence")
            count = sum(isinstance(c, Dispatch) for c in self.commands)
            assert rec.timestamps is not None, "recorded by a command buffer with timestamps"
            return rec.timestamps.read(count)

    def release(self) -> None:
        """Free the recordings and staging buffers once submitted work is done; idempotent."""
        if self.released:
            return
        self.released = True
        if self.context.released:
            return
        for rec in self._recordings:
            self.context.retire(rec)
        for buffer in self._staging.values():
            buffer.release()
        self._recordings.clear()
        self._last = None
        self._staging.clear()
        self.commands = []
        self._static, self._direct = [], []

    def __del__(self) -> None:
        # Recordings are plain resources; queue them for destruction (no Vulkan call here).
        if not getattr(self, "released", True) and not self.context.released:
            self.released = True
            for rec in self._recordings:
                self.context.garbage.append(rec)

