"""How the Vulkan driver writes transfer commands that Vulkan constrains more than the HAL.

The HAL lets fills and updates start at any byte; vkCmdFillBuffer and vkCmdUpdateBuffer want
4-byte aligned offsets and sizes (and updates at most 64 KiB), so the recorder splits them into
an aligned part and small copies from a staging buffer. The records themselves are the shared
ones of `irtk.hal.deferred_command_buffer`.
"""
from __future__ import annotations

MAX_UPDATE_BYTES = 65536  # vkCmdUpdateBuffer's limit


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
