"""The recorded form of a HAL command buffer: plain data, independent of any binding table.

A HAL command buffer keeps this list; the recorder turns it into a VkCommandBuffer once the
binding table is known (at submit). Keeping the list also lets one HAL command buffer serve
several binding tables, each with its own VkCommandBuffer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from irtk.errors import RuntimeFailure
from irtk.hal import BindingRef

if TYPE_CHECKING:
    from hal_vulkan.buffer import VulkanBuffer
    from hal_vulkan.executable import EntryPoint, VulkanExecutable

MAX_UPDATE_BYTES = 65536  # vkCmdUpdateBuffer's limit

BindingTable = list[tuple[Any, int, int]]  # (buffer, offset, length) per slot


@dataclass(frozen=True)
class Dispatch:
    executable: VulkanExecutable
    entry: EntryPoint
    workgroups: tuple[int, int, int]
    constants: bytes
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
class Resolved:
    """A binding after the binding table is applied: a byte range of one buffer."""

    buffer: VulkanBuffer
    offset: int
    length: int


def resolve(ref: BindingRef, table: BindingTable | None, what: str) -> Resolved:
    """Apply the binding table to a ref; a negative length means "to the end of the range"."""
    if ref.buffer is None or ref.slot >= 0:
        if table is None or not 0 <= ref.slot < len(table):
            size = 0 if table is None else len(table)
            raise RuntimeFailure(f"{what} uses binding-table slot {ref.slot} but the binding table "
                                 f"has {size} entr{'y' if size == 1 else 'ies'}")
        buffer, base, span = table[ref.slot]
        if ref.offset < 0 or (span >= 0 and ref.offset > span):
            raise RuntimeFailure(f"{what}: offset {ref.offset} is outside slot {ref.slot} "
                                 f"({span} bytes)")
        if span < 0:
            span = buffer.size - base
        length = ref.length if ref.length >= 0 else span - ref.offset
        if ref.offset + length > span:
            raise RuntimeFailure(f"{what}: range [{ref.offset}, {ref.offset + length}) exceeds "
                              f"slot {ref.slot} ({span} bytes)")
        offset = base + ref.offset
    else:
        buffer = ref.buffer
        offset = ref.offset
        length = ref.length if ref.length >= 0 else buffer.size - offset
    _check_buffer(buffer, offset, length, what)
    return Resolved(buffer, offset, length)


def _check_buffer(buffer: Any, offset: int, length: int, what: str) -> None:
    from hal_vulkan.buffer import VulkanBuffer

    if not isinstance(buffer, VulkanBuffer):
        raise RuntimeFailure(f"{what}: {type(buffer).__name__} is not a Vulkan buffer")
    if buffer.released:
        raise RuntimeFailure(f"{what}: the buffer was released")
    if offset < 0 or length < 0 or offset + length > buffer.size:
        raise RuntimeFailure(f"{what}: range [{offset}, {offset + length}) is outside the buffer "
                          f"of {buffer.size} bytes")


def _refs(cmd: Command) -> tuple[BindingRef, ...]:
    """The buffer ranges a command touches."""
    if isinstance(cmd, Dispatch):
        return cmd.bindings
    if isinstance(cmd, (Fill, Update)):
        return (cmd.target,)
    if isinstance(cmd, Copy):
        return (cmd.source, cmd.target)
    return ()


def slots_used(commands: list[Command]) -> tuple[int, ...]:
    """The binding-table slots the commands read, in order (what a recording depends on)."""
    slots: set[int] = set()
    for cmd in commands:
        slots.update(r.slot for r in _refs(cmd) if r.buffer is None or r.slot >= 0)
    return tuple(sorted(slots))


def direct_buffers(commands: list[Command]) -> list[Any]:
    """Buffers the commands name directly (not through a slot)."""
    seen: dict[int, Any] = {}
    for cmd in commands:
        for r in _refs(cmd):
            if r.buffer is not None and r.slot < 0:
                seen[id(r.buffer)] = r.buffer
    return list(seen.values())


def fill_plan(offset: int, length: int,
              pattern: bytes) -> tuple[int, int, int, list[tuple[int, int, int]]]:
    """How to fill [offset, offset+length) with `pattern` using vkCmdFillBuffer.

    vkCmdFillBuffer needs a 4-byte aligned offset and size, so the range splits into an aligned
    middle (start, size, 32-bit word with the pattern's phase at that start) and up to two
    unaligned ends copied from a small staging area holding the pattern repeated to 8 bytes:
    (staging offset, target offset, size) each.
    """
    plen = len(pattern)
    end = offset + length
    start = (offset + 3) // 4 * 4
    stop = end // 4 * 4
    if start >= stop:
        return offset, 0, 0, [(0, offset, length)] if length else []
    phase = (start - offset) % plen
    word = int.from_bytes(fill_staging(pattern)[phase:phase + 4], "little")
    ends: list[tuple[int, int, int]] = []
    if start > offset:
        ends.append((0, offset, start - offset))
    if end > stop:
        ends.append(((stop - offset) % plen, stop, end - stop))
    return start, stop - start, word, ends


def fill_staging(pattern: bytes) -> bytes:
    """The 8 staging bytes `fill_plan` copies unaligned ends from."""
    return pattern * (8 // len(pattern))
