"""HAL command buffers: a checked command list, recorded into VkCommandBuffers at submit.

Arguments are checked when a command is added, so mistakes surface where they are made. The
VkCommandBuffer is recorded at the first submit, once per distinct binding table (keyed by the
buffers, offsets and lengths of the slots the commands use) and reused when the same table comes
again; a few recordings are kept so alternating tables do not re-record every time.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from irtk.errors import DeviceError, RuntimeFailure
from irtk.hal import BindingRef, CommandBuffer, Executable
from hal_vulkan import commands as cmds
from hal_vulkan.executable import VulkanExecutable
from hal_vulkan.recorder import Recorder, Recording, descriptor_range
from hal_vulkan.resource import Resource

if TYPE_CHECKING:
    from hal_vulkan.buffer import VulkanBuffer
    from hal_vulkan.device import VulkanDevice

MAX_RECORDINGS = 4  # idle recordings kept per command buffer


class VulkanCommandBuffer(CommandBuffer):
    def __init__(self, device: VulkanDevice, binding_capacity: int = 0,
                 timestamps: bool = False) -> None:
        if binding_capacity < 0:
            raise RuntimeFailure(f"binding_capacity must be >= 0, got {binding_capacity}")
        super().__init__(binding_capacity)
        self.device = device
        self.timestamps = timestamps
        self._last: Recording | None = None  # the recording submitted last
        self.commands: list[cmds.Command] = []
        self._recordings: list[Recording] = []  # most recently used last
        self._staging: dict[int, VulkanBuffer] = {}  # command index -> staging buffer
        self._slots: tuple[int, ...] = ()
        self._static: list[Resource] = []  # resources every submit uses
        self._direct: list[VulkanBuffer] = []
        self._released = False

    # -- recording ----------------------------------------------------------------------------
    def _add(self, command: cmds.Command) -> None:
        if self.finalized:
            raise RuntimeFailure("command buffer is finalized; record into a new one")
        if self._released:
            raise RuntimeFailure("command buffer was released")
        self.device.check()
        self.commands.append(command)

    def _check_ref(self, ref: BindingRef, what: str) -> None:
        if ref.buffer is None or ref.slot >= 0:
            if ref.slot < 0:
                raise RuntimeFailure(f"{what}: a binding needs a buffer or a slot")
            if self.binding_capacity and ref.slot >= self.binding_capacity:
                raise RuntimeFailure(f"{what}: slot {ref.slot} is beyond the binding capacity "
                                     f"{self.binding_capacity}")
            return
        cmds.resolve(ref, None, what)

    def dispatch(self, executable: Executable, ordinal: int, workgroups: tuple[int, int, int],
                 constants: list[int], bindings: list[BindingRef]) -> None:
        if not isinstance(executable, VulkanExecutable) or executable.device is not self.device:
            raise RuntimeFailure("dispatch needs an executable created on this Vulkan device")
        if executable.released:
            raise RuntimeFailure("dispatch of a released executable")
        entry = executable.entry_point(ordinal)
        what = f"dispatch '{entry.name}'"
        counts = tuple(int(w) for w in workgroups)
        limits = self.device.info.max_workgroup_count
        if len(counts) != 3 or any(c < 0 for c in counts) or \
                any(c > m for c, m in zip(counts, limits)):
            raise DeviceError(f"{what}: workgroup count {tuple(workgroups)} is outside "
                              f"{tuple(limits)} (maxComputeWorkGroupCount)")
        if len(constants) != entry.push_constant_count:
            raise RuntimeFailure(f"{what}: {len(constants)} push constants given, the entry point "
                                 f"takes {entry.push_constant_count}")
        if len(bindings) != len(entry.binding_numbers):
            raise RuntimeFailure(f"{what}: {len(bindings)} bindings given, the entry point "
                                 f"takes {len(entry.binding_numbers)}")
        for number, ref in zip(entry.binding_numbers, bindings):
            self._check_ref(ref, f"{what} binding {number}")
            if ref.buffer is not None and ref.slot < 0:
                descriptor_range(self.device, cmds.resolve(ref, None, what),
                                 f"{what} binding {number}")
        packed = struct.pack(f"<{len(constants)}I", *[int(c) & 0xFFFFFFFF for c in constants])
        self._add(cmds.Dispatch(executable, entry, counts, packed, tuple(bindings)))  # type: ignore

    def execution_barrier(self) -> None:
        self._add(cmds.Barrier())

    def fill_buffer(self, target: BindingRef, pattern: bytes) -> None:
        pattern = bytes(pattern)
        if len(pattern) not in (1, 2, 4):
            raise RuntimeFailure(f"fill pattern must be 1, 2 or 4 bytes, not {len(pattern)}")
        self._check_ref(target, "fill")
        if target.length >= 0 and target.length % len(pattern):
            raise RuntimeFailure(f"fill: length {target.length} is not a multiple of the "
                                 f"{len(pattern)}-byte pattern")
        self._add(cmds.Fill(target, pattern))

    def copy_buffer(self, source: BindingRef, target: BindingRef) -> None:
        self._check_ref(source, "copy source")
        self._check_ref(target, "copy target")
        self._add(cmds.Copy(source, target))

    def update_buffer(self, data: bytes, target: BindingRef) -> None:
        data = bytes(data)
        self._check_ref(target, "update")
        if target.buffer is not None and target.slot < 0 and target.length >= 0 and \
                len(data) > target.length:
            raise RuntimeFailure(f"update: {len(data)} bytes do not fit the {target.length}-byte "
                                 f"target range")
        self._add(cmds.Update(data, target))

    def finalize(self) -> None:
        if self.finalized:
            return
        self.device.check()
        super().finalize()
        self._slots = cmds.slots_used(self.commands)
        self._direct = cmds.direct_buffers(self.commands)
        executables = {id(c.executable): c.executable for c in self.commands
                       if isinstance(c, cmds.Dispatch)}
        self._static = [e.resource for e in executables.values()]
        self._static += [b.resource for b in self._direct]

    # -- submit-time --------------------------------------------------------------------------
    def prepare(self, table: cmds.BindingTable | None) -> tuple[Recording, list[Resource]]:
        """The recording for `table` (recorded now if needed) and every resource it uses.

        Called by queue_execute with the device lock held.
        """
        if not self.finalized:
            raise RuntimeFailure("command buffer must be finalized before it is executed")
        if self._released:
            raise RuntimeFailure("command buffer was released")
        for buffer in self._direct:
            if buffer.released:
                raise RuntimeFailure("command buffer uses a buffer that was released")
        key_parts = []
        table_resources: list[Resource] = []
        for slot in self._slots:
            if table is None or slot >= len(table):
                size = 0 if table is None else len(table)
                raise RuntimeFailure(f"command buffer uses binding-table slot {slot}; the binding "
                                     f"table has {size} entries")
            buffer, offset, length = table[slot]
            resource = getattr(buffer, "resource", None)
            if resource is None or getattr(buffer, "device", None) is not self.device:
                raise RuntimeFailure(f"binding-table slot {slot} holds a buffer of another device")
            if buffer.released:
                raise RuntimeFailure(f"binding-table slot {slot} holds a released buffer")
            key_parts.append((resource.serial, offset, length))
            table_resources.append(resource)
        key = tuple(key_parts)
        recording = self._find_recording(key, table)
        # Busy from now on (the coming submit's serial), so a second use of this command
        # buffer in the same submit cannot evict and re-record it.
        recording.last_use = max(recording.last_use, self.device.queue.serial + 1)
        self._last = recording
        staging = [b.resource for b in self._staging.values()]
        return recording, self._static + table_resources + staging + [recording]

    def _find_recording(self, key: tuple, table: cmds.BindingTable | None) -> Recording:
        device = self.device
        completed = device.queue.poll()
        for rec in self._recordings:
            if rec.key == key:
                self._recordings.remove(rec)
                self._recordings.append(rec)
                self._drop_extra(completed)
                return rec
        idle = [r for r in self._recordings if r.last_use <= completed]
        if len(self._recordings) >= MAX_RECORDINGS and idle:
            rec = idle[0]
            self._recordings.remove(rec)
            rec.reset(key)
        else:
            timed = sum(isinstance(c, cmds.Dispatch) for c in self.commands) \
                if self.timestamps else -1
            rec = Recording(device, key, timed)
            device.adopt(rec)
        try:
            Recorder(device, rec, table, self._staging_for).record(self.commands)
        except BaseException:
            device.retire(rec)
            raise
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
            self.device.retire(old)

    def _staging_for(self, command: cmds.Command) -> VulkanBuffer:
        """A staging buffer with the bytes a fill's ends or an unaligned update copy from."""
        index = next(i for i, c in enumerate(self.commands) if c is command)
        buffer = self._staging.get(index)
        if buffer is None:
            if isinstance(command, cmds.Fill):
                data = cmds.fill_staging(command.pattern)
            else:
                data = command.data  # type: ignore[union-attr]
            buffer = self.device.allocator.allocate_with_data(data)  # type: ignore[assignment]
            self._staging[index] = buffer  # type: ignore[assignment]
        return buffer  # type: ignore[return-value]

    def dispatch_times(self) -> list[float]:
        """Device seconds of each dispatch in the last submission (needs `timestamps=True`
        and a completed submission)."""
        if not self.timestamps:
            raise RuntimeFailure("command buffer was not created with timestamps=True")
        rec = self._last
        if rec is None:
            raise RuntimeFailure("command buffer has not been submitted")
        self.device.check()
        with self.device.lock:
            if rec.last_use > self.device.queue.poll():
                raise RuntimeFailure("the submission has not completed; wait on its fence")
            count = sum(isinstance(c, cmds.Dispatch) for c in self.commands)
            return rec.timestamps.read(count)  # type: ignore[union-attr]

    def release(self) -> None:
        """Free the recordings and staging buffers once submitted work is done; idempotent."""
        if self._released:
            return
        self._released = True
        if self.device.released:
            return
        for rec in self._recordings:
            self.device.retire(rec)
        for buffer in self._staging.values():
            buffer.release()
        self._recordings.clear()
        self._last = None
        self._staging.clear()
        self.commands.clear()
        self._static, self._direct = [], []

    def __del__(self) -> None:
        # Recordings are plain resources; queue them for destruction (no Vulkan call here).
        if not getattr(self, "_released", True) and not self.device.released:
            self._released = True
            for rec in self._recordings:
                self.device.garbage.append(rec)

