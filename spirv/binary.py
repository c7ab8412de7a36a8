"""Word-level helpers shared by the builder, the reader and the SPIRV-Tools binding.

SPIR-V is a stream of 32-bit words; these helpers convert between that and the
byte strings that files, drivers and ctypes deal in, in one place.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from .errors import SpirvError, SpirvParseError
from .tables import MAGIC

Binary = bytes | bytearray | memoryview | Sequence[int]
"""A module as bytes (either endianness, detected by the magic) or as a word list."""

_SWAPPED_MAGIC = int.from_bytes(MAGIC.to_bytes(4, "little"), "big")


def encode_string(text: str) -> list[int]:
    """A literal string operand: UTF-8, NUL-terminated, zero-padded to whole words."""
    data = text.encode("utf-8")
    if b"\0" in data:
        raise SpirvError(f"literal string {text!r} contains a NUL character")
    data += b"\0" * (4 - len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def decode_string(words: Sequence[int], start: int, end: int, offset: int) -> tuple[str, int]:
    """Decode the literal string at words[start:end]; return it and the index after it.

    ``offset`` is the absolute word offset of ``words[start]``, for error messages.
    """
    out = bytearray()
    for i in range(start, end):
        chunk = words[i].to_bytes(4, "little")
        nul = chunk.find(b"\0")
        if nul >= 0:
            out += chunk[:nul]
            return out.decode("utf-8", errors="replace"), i + 1
        out += chunk
    raise SpirvParseError("literal string is not NUL-terminated inside its instruction", offset)


def to_words(binary: Binary) -> list[int]:
    """Native word values of a module given as bytes of either endianness or as words."""
    if isinstance(binary, (bytes, bytearray, memoryview)):
        data = bytes(binary)
        if len(data) % 4:
            raise SpirvParseError(f"binary length {len(data)} is not a multiple of 4 bytes", len(data) // 4)
        n = len(data) // 4
        words = list(struct.unpack(f"<{n}I", data))
        if words and words[0] == _SWAPPED_MAGIC:
            words = list(struct.unpack(f">{n}I", data))
        return words
    words = list(binary)
    for i, w in enumerate(words):
        if not isinstance(w, int) or isinstance(w, bool) or not 0 <= w <= 0xFFFFFFFF:
            raise SpirvParseError(f"word {w!r} is not a 32-bit unsigned integer", i)
    return words


def words_to_bytes(words: Iterable[int]) -> bytes:
    """Little-endian bytes of a word list, the byte order drivers and tools expect."""
    ws = list(words)
    return struct.pack(f"<{len(ws)}I", *ws)
