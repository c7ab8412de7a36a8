"""Buffer bindings and binding tables: the one set of rules every driver resolves them by.

A command names a buffer range either directly (`BindingRef(buffer, offset, length)`) or through
a slot of the binding table given at submit (`BindingRef(None, offset, length, slot)`), so one
recording serves many submissions, as in IREE's reusable command buffers. The rules, shared by
all drivers through `resolve_binding`:

- a length of WHOLE_BUFFER (-1) means "to the end" of the range it is taken from;
- a direct range is taken from its buffer; a slot range from its table entry
  `(buffer, offset, length)`, and is relative to that entry (the entry itself is checked against
  its buffer);
- subspans (`Buffer.subspan`) are seen through: the result names the allocated buffer and the
  absolute offset in it;
- every range must lie inside what it is taken from; a released buffer, an empty or missing slot,
  or a buffer of another driver is an error naming the command and the binding.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from irtk.errors import RuntimeFailure
from irtk.hal.buffer import Buffer

WHOLE_BUFFER = -1

BindingTable = Sequence[tuple[Buffer | None, int, int]]


@dataclass(frozen=True)
class BindingRef:
    """A buffer range bound to a command: `buffer` directly, or binding-table `slot`."""

    buffer: Buffer | None
    offset: int
    length: int
    slot: int = -1

    @property
    def is_slot(self) -> bool:
        return self.buffer is None or self.slot >= 0


class ResolvedBinding(NamedTuple):
    """A binding after the table is applied: bytes [offset, offset+length) of an allocated
    buffer (never a subspan)."""

    buffer: Any
    offset: int
    length: int


def resolve_range(buffer: Buffer, offset: int, length: int, what: str) -> ResolvedBinding:
    """Bytes [offset, offset+length) of `buffer` (length -1: to its end), seen through subspans."""
    if offset < 0:
        raise RuntimeFailure(f"{what}: negative offset {offset}")
    if length < 0:
        length = buffer.size - offset
    if length < 0 or offset + length > buffer.size:
        raise RuntimeFailure(f"{what}: range [{offset}, {offset + length}) is outside the "
                             f"buffer of {buffer.size} bytes")
    return ResolvedBinding(buffer.allocated_buffer, buffer.byte_offset + offset, length)


def resolve_binding(ref: BindingRef, table: BindingTable | None, what: str,
                    buffer_type: type = Buffer) -> ResolvedBinding:
    """Apply the binding table to `ref`; the result's buffer is a `buffer_type`, not released."""
    if not ref.is_slot:
        assert ref.buffer is not None
        resolved = resolve_range(ref.buffer, ref.offset, ref.length, what)
    else:
        entry_range = table_entry(table, ref.slot, what, buffer_type)
        if ref.offset < 0:
            raise RuntimeFailure(f"{what}: negative offset {ref.offset}")
        length = ref.length if ref.length >= 0 else entry_range.length - ref.offset
        if length < 0 or ref.offset + length > entry_range.length:
            raise RuntimeFailure(f"{what}: range [{ref.offset}, {ref.offset + length}) is "
                                 f"outside binding-table slot {ref.slot} "
                                 f"({entry_range.length} bytes)")
        resolved = ResolvedBinding(entry_range.buffer, entry_range.offset + ref.offset, length)
    check_usable(resolved.buffer, what, buffer_type)
    return resolved


def table_entry(table: BindingTable | None, slot: int, what: str,
                buffer_type: type = Buffer) -> ResolvedBinding:
    """Binding-table entry `slot` as a checked range of its allocated buffer."""
    if table is None or not 0 <= slot < len(table):
        size = 0 if table is None else len(table)
        raise RuntimeFailure(f"{what} uses binding-table slot {slot} but the binding table has "
                             f"{size} entr{'y' if size == 1 else 'ies'}")
    entry = table[slot]
    try:
        buffer, offset, length = entry
    except (TypeError, ValueError):
        raise RuntimeFailure(f"{what}: binding-table entry {slot} is {entry!r}, expected "
                             "(buffer, offset, length)") from None
    if buffer is None:
        raise RuntimeFailure(f"{what} uses binding-table slot {slot}, which is empty")
    if not isinstance(buffer, Buffer):
        raise RuntimeFailure(f"{what}: binding-table entry {slot} holds "
                             f"{type(buffer).__name__}, not a buffer")
    resolved = resolve_range(buffer, int(offset), int(length),
                             f"{what}: binding-table entry {slot}")
    check_usable(resolved.buffer, f"{what}: binding-table entry {slot}", buffer_type)
    return resolved


def check_usable(buffer: Any, what: str, buffer_type: type = Buffer) -> None:
    """A driver's own, unreleased buffer (drivers mark released buffers with `released`)."""
    if not isinstance(buffer, buffer_type):
        raise RuntimeFailure(f"{what}: {type(buffer).__name__} is not a buffer of this "
                             f"device's driver ({buffer_type.__name__})")
    if getattr(buffer, "released", False):
        raise RuntimeFailure(f"{what}: the buffer was released")
