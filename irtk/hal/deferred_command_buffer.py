"""The one command recorder every driver shares (IREE's deferred command buffer).

Recording appends plain records (`Dispatch`, `Barrier`, `Fill`, `Copy`, `Update`) after checking
what can be known then, so a bad recording fails where it was made. At each submit, `resolve`
applies the binding table to every record with `resolve_binding`'s rules and makes the checks
that need the table, giving the driver a list of resolved commands over allocated buffers. The
CPU driver runs that list; the Vulkan driver records it into a VkCommandBuffer. So the
conformance suite tests one set of semantics, whatever the driver.

Semantics (all drivers): commands between two barriers carry no order among themselves; a
barrier orders everything before it before everything after it; the command buffers of one
submission run in order. Fill patterns are 1, 2 or 4 bytes and the length a multiple of it;
a copy's length is its source range's, its ranges must not overlap within one buffer; an
update's data (captured at record time) must fit its target range.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Union

from irtk.errors import RuntimeFailure
from irtk.hal.binding import BindingRef, BindingTable, ResolvedBinding, resolve_binding
from irtk.hal.buffer import Buffer
from irtk.hal.command_buffer import CommandBuffer
from irtk.hal.executable import Executable


@dataclass(frozen=True)
class Dispatch:
    executable: Executable
    ordinal: int
    entry: Any  # what the driver needs to run the export (its kernel, its pipeline)
    name: str
    workgroups: tuple[int, int, int]
    constants: bytes  # little-endian u32 words
    bindings: tuple[BindingRef, ...]


@dataclass(frozen=True)
class Barrier:
    pass


@dataclass(frozen=True)
class Fill:
    target: BindingRef
    pattern: bytes  # 1, 2 or 4 bytes


@dataclass(frozen=True)
class Copy:
    source: BindingRef
    target: BindingRef


@dataclass(frozen=True)
class Update:
    data: bytes
    target: BindingRef


Command = Union[Dispatch, Barrier, Fill, Copy, Update]


@dataclass(frozen=True)
class ResolvedDispatch:
    command: Dispatch
    bindings: tuple[ResolvedBinding, ...]


@dataclass(frozen=True)
class ResolvedFill:
    target: ResolvedBinding
    pattern: bytes


@dataclass(frozen=True)
class ResolvedCopy:
    source: ResolvedBinding
    target: ResolvedBinding  # as long as the source


@dataclass(frozen=True)
class ResolvedUpdate:
    target: ResolvedBinding  # as long as the data
    data: bytes


ResolvedCommand = Union[ResolvedDispatch, Barrier, ResolvedFill, ResolvedCopy, ResolvedUpdate]


def command_refs(cmd: Command) -> tuple[BindingRef, ...]:
    """The buffer ranges a command touches."""
    if isinstance(cmd, Dispatch):
        return cmd.bindings
    if isinstance(cmd, (Fill, Update)):
        return (cmd.target,)
    if isinstance(cmd, Copy):
        return (cmd.source, cmd.target)
    return ()


def _whole_allocation(table: BindingTable | None, slot: int,
                      buffer_type: type) -> ResolvedBinding | None:
    """Slot `slot` when it holds the whole of a live allocated buffer of `buffer_type` (what
    the VM passes for every tensor): its resolution without the general checks, which give
    the same answer. None for anything else (the caller then runs them)."""
    if table is None or not 0 <= slot < len(table):
        return None
    entry = table[slot]
    if entry.__class__ is not tuple or len(entry) != 3:
        return None
    buffer, offset, length = entry
    if offset != 0 or buffer is None or not isinstance(buffer, buffer_type):
        return None
    if buffer.allocated_buffer is not buffer or getattr(buffer, "released", False):
        return None
    size = buffer.size
    if length.__class__ is not int or (length >= 0 and length != size):
        return None
    return ResolvedBinding(buffer, 0, size)


class DeferredCommandBuffer(CommandBuffer):
    """A checked command list; drivers subclass it and supply the hooks below."""

    buffer_type: type = Buffer  # the driver's buffer class

    def __init__(self, binding_capacity: int = 0) -> None:
        if binding_capacity < 0:
            raise RuntimeFailure(f"binding_capacity must be >= 0, got {binding_capacity}")
        super().__init__(binding_capacity)
        self.commands: list[Command] = []
        self.released = False

    # -- driver hooks -------------------------------------------------------------------------
    def check_live(self) -> None:
        """Raise when the device can no longer take commands."""

    def lookup_export(self, executable: Executable, ordinal: int) -> tuple[Any, str]:
        """(driver entry, export name) for a dispatch of `ordinal`; raises on a foreign or
        released executable or an ordinal out of range."""
        raise NotImplementedError

    def check_dispatch(self, entry: Any, name: str, workgroups: tuple[int, int, int],
                       constants: list[int], bindings: list[BindingRef]) -> None:
        """Driver-specific checks of a dispatch (binding and constant counts, limits)."""

    def check_direct_binding(self, entry: Any, index: int, binding: ResolvedBinding,
                             what: str) -> None:
        """Driver-specific checks of direct binding `index` of a dispatch of `entry`
        (alignment, range limits)."""

    # -- recording ----------------------------------------------------------------------------
    @property
    def command_count(self) -> int:
        return len(self.commands)

    def dispatch(self, executable: Executable, ordinal: int, workgroups: tuple[int, int, int],
                 constants: list[int], bindings: list[BindingRef]) -> None:
        self._check_recording("dispatch")
        entry, name = self.lookup_export(executable, ordinal)
        what = f"dispatch of '{name}'"
        grid = tuple(int(n) for n in workgroups)
        if len(grid) != 3 or any(n < 0 for n in grid):
            raise RuntimeFailure(f"{what}: workgroup count {tuple(workgroups)} must be three "
                                 "non-negative integers")
        self.check_dispatch(entry, name, grid, list(constants), list(bindings))
        for i, ref in enumerate(bindings):
            resolved = self._check_ref(ref, f"{what}: binding {i}")
            if resolved is not None:
                self.check_direct_binding(entry, i, resolved, f"{what}: binding {i}")
        packed = struct.pack(f"<{len(constants)}I", *[int(c) & 0xFFFFFFFF for c in constants])
        self.commands.append(Dispatch(executable, ordinal, entry, name, grid,
                                      packed, tuple(bindings)))

    def execution_barrier(self) -> None:
        self._check_recording("execution_barrier")
        if self.commands and not isinstance(self.commands[-1], Barrier):
            self.commands.append(Barrier())

    def fill_buffer(self, target: BindingRef, pattern: bytes) -> None:
        self._check_recording("fill_buffer")
        pattern = bytes(pattern)
        if len(pattern) not in (1, 2, 4):
            raise RuntimeFailure(f"fill_buffer: the pattern must be 1, 2 or 4 bytes, got "
                                 f"{len(pattern)}")
        resolved = self._check_ref(target, "fill_buffer: target")
        length = resolved.length if resolved is not None else target.length
        if length >= 0 and length % len(pattern):
            raise RuntimeFailure(f"fill_buffer: length {length} is not a multiple of the "
                                 f"{len(pattern)}-byte pattern")
        self.commands.append(Fill(target, pattern))

    def copy_buffer(self, source: BindingRef, target: BindingRef) -> None:
        self._check_recording("copy_buffer")
        src = self._check_ref(source, "copy_buffer: source")
        dst = self._check_ref(target, "copy_buffer: target")
        if src is not None and dst is not None:
            _check_copy(src, dst, "copy_buffer")
        self.commands.append(Copy(source, target))

    def update_buffer(self, data: bytes, target: BindingRef) -> None:
        self._check_recording("update_buffer")
        data = bytes(data)
        resolved = self._check_ref(target, "update_buffer: target")
        length = resolved.length if resolved is not None else target.length
        if 0 <= length < len(data):
            raise RuntimeFailure(f"update_buffer: {len(data)} bytes do not fit in the "
                                 f"{length}-byte target range")
        self.commands.append(Update(data, target))

    def finalize(self) -> None:
        if self.finalized:
            return
        self.check_live()
        while self.commands and isinstance(self.commands[-1], Barrier):
            self.commands.pop()  # a trailing barrier orders nothing
        super().finalize()

    def release(self) -> None:
        self.released = True
        self.commands = []

    def _check_recording(self, what: str) -> None:
        if self.released:
            raise RuntimeFailure(f"{what}: the command buffer was released")
        if self.finalized:
            raise RuntimeFailure(f"{what}: the command buffer is finalized; record a new one")
        self.check_live()

    def _check_ref(self, ref: BindingRef, what: str) -> ResolvedBinding | None:
        """A direct ref resolved now; a slot ref checked against the capacity (None)."""
        if ref.is_slot:
            if ref.slot < 0:
                raise RuntimeFailure(f"{what}: a binding needs a buffer or a slot")
            if ref.slot >= self.binding_capacity:
                raise RuntimeFailure(f"{what}: binding-table slot {ref.slot} is beyond the "
                                     f"command buffer's binding capacity of "
                                     f"{self.binding_capacity}")
            if ref.offset < 0:
                raise RuntimeFailure(f"{what}: negative offset {ref.offset}")
            return None
        return resolve_binding(ref, None, what, self.buffer_type)

    # -- submit time --------------------------------------------------------------------------
    def slots_used(self) -> tuple[int, ...]:
        """The binding-table slots the commands read, sorted (what a submission depends on)."""
        return tuple(sorted({r.slot for c in self.commands for r in command_refs(c)
                             if r.is_slot}))

    def direct_buffers(self) -> list[Any]:
        """Allocated buffers the commands name directly (not through a slot)."""
        seen: dict[int, Any] = {}
        for cmd in self.commands:
            for r in command_refs(cmd):
                if not r.is_slot:
                    assert r.buffer is not None, "a ref that is not a slot names its buffer"
                    buffer = r.buffer.allocated_buffer
                    seen[id(buffer)] = buffer
        return list(seen.values())

    def check_executable(self) -> None:
        if self.released:
            raise RuntimeFailure("queue_execute: the command buffer was released")
        if not self.finalized:
            raise RuntimeFailure("queue_execute: the command buffer was not finalized")

    def _dispatch_binding(self, index: int, cmd: Dispatch, i: int, ref: BindingRef,
                          table: BindingTable | None,
                          whole_slots: dict[int, ResolvedBinding]) -> ResolvedBinding:
        """Binding `i` of dispatch command `index`. A whole-slot reference (what the VM
        records) resolves once per slot and submit; the message naming the command is only
        formatted when something is wrong (checks run again with it, and fail the same way)."""
        whole = ref.is_slot and ref.offset == 0 and ref.length < 0
        if whole and ref.slot in whole_slots:
            return whole_slots[ref.slot]
        if ref.is_slot and ref.offset >= 0:
            entry = _whole_allocation(table, ref.slot, self.buffer_type)
            if entry is not None:
                length = entry.length - ref.offset if ref.length < 0 else ref.length
                if ref.offset + length <= entry.length and length >= 0:
                    found = ResolvedBinding(entry.buffer, ref.offset, length)
                    if whole:
                        whole_slots[ref.slot] = found
                    return found
        try:
            resolved = resolve_binding(ref, table, "", self.buffer_type)
        except RuntimeFailure:
            resolve_binding(ref, table, f"command {index} (dispatch of '{cmd.name}'): "
                            f"binding {i}", self.buffer_type)
            raise
        if whole:
            whole_slots[ref.slot] = resolved
        return resolved

    def resolve(self, table: BindingTable | None) -> list[ResolvedCommand]:
        """Every command with the binding table applied and checked; errors name the command."""
        self.check_executable()
        out: list[ResolvedCommand] = []
        bt = self.buffer_type
        whole_slots: dict[int, ResolvedBinding] = {}   # slot -> its resolution, reused
        for index, cmd in enumerate(self.commands):
            if isinstance(cmd, Dispatch):
                out.append(ResolvedDispatch(cmd, tuple(
                    self._dispatch_binding(index, cmd, i, ref, table, whole_slots)
                    for i, ref in enumerate(cmd.bindings))))
            elif isinstance(cmd, Barrier):
                out.append(cmd)
            elif isinstance(cmd, Fill):
                what = f"command {index} (fill)"
                target = _writable(resolve_binding(cmd.target, table, f"{what}: target", bt),
                                   what)
                if target.length % len(cmd.pattern):
                    raise RuntimeFailure(f"{what}: length {target.length} is not a multiple of "
                                         f"the {len(cmd.pattern)}-byte pattern")
                out.append(ResolvedFill(target, cmd.pattern))
            elif isinstance(cmd, Copy):
                what = f"command {index} (copy)"
                src = resolve_binding(cmd.source, table, f"{what}: source", bt)
                dst = _writable(resolve_binding(cmd.target, table, f"{what}: target", bt), what)
                _check_copy(src, dst, what)
                out.append(ResolvedCopy(src, ResolvedBinding(dst.buffer, dst.offset,
                                                             src.length)))
            else:
                what = f"command {index} (update)"
                target = _writable(resolve_binding(cmd.target, table, f"{what}: target", bt),
                                   what)
                if target.length < len(cmd.data):
                    raise RuntimeFailure(f"{what}: {len(cmd.data)} bytes do not fit in the "
                                         f"{target.length}-byte target range")
                out.append(ResolvedUpdate(ResolvedBinding(target.buffer, target.offset,
                                                          len(cmd.data)), cmd.data))
        return out


def _writable(target: ResolvedBinding, what: str) -> ResolvedBinding:
    if not target.buffer.writable:
        raise RuntimeFailure(f"{what}: the target is a read-only buffer (imported host memory: "
                             "a module constant)")
    return target


def _check_copy(src: ResolvedBinding, dst: ResolvedBinding, what: str) -> None:
    if dst.length < src.length:
        raise RuntimeFailure(f"{what}: {src.length} source bytes do not fit in the "
                             f"{dst.length}-byte target range")
    if src.buffer is dst.buffer and src.offset < dst.offset + src.length and \
            dst.offset < src.offset + src.length and src.length:
        raise RuntimeFailure(f"{what}: source [{src.offset}, {src.offset + src.length}) and "
                             f"target [{dst.offset}, {dst.offset + src.length}) overlap in "
                             "one buffer")


__all__ = ["Barrier", "Command", "Copy", "DeferredCommandBuffer", "Dispatch", "Fill",
           "ResolvedCommand", "ResolvedCopy", "ResolvedDispatch", "ResolvedFill",
           "ResolvedUpdate", "Update", "command_refs"]
