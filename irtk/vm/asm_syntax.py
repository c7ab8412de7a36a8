"""The lexical side of irtk's VM assembly, shared by the assembler and the disassembler.

Symbols are `@name` (or `@"any text"` when the name has other characters), ordinals `#3`,
registers `i32:4`, block labels `^loop`, strings JSON-quoted, rodata bytes `x"00ff"`. Floats are
printed so that reading them back gives the same bits: the shortest decimal that round-trips at
the value's width, `inf`/`-inf`, and `bits(0x7FC00000)` for a NaN (which keeps its payload).
See docs/vm.md, "Assembly".
"""
from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass

import numpy as np

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.$\-]+")

TOKEN = re.compile(r"""
  (?P<ws>\s+)
| (?P<comment>//.*)
| (?P<string>"(?:[^"\\]|\\.)*")
| (?P<hex>x"[0-9A-Fa-f]*")
| (?P<reg>(?:i32|i64|f32|f64|ref):\d+)
| (?P<label>\^[A-Za-z0-9_.$\-]+)
| (?P<sym>@(?:"(?:[^"\\]|\\.)*"|[A-Za-z0-9_.$\-]+))
| (?P<ordinal>\#\d+)
| (?P<number>[-+]?(?:0[xX][0-9A-Fa-f]+|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?
               |(?:inf|nan)\b))
| (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
| (?P<punct>[(){}\[\],=:])
""", re.X)


@dataclass(frozen=True)
class Token:
    kind: str     # string, hex, reg, label, sym, ordinal, number, word, punct
    text: str
    column: int   # 1-based

    @property
    def value(self) -> str:
        """A string's or symbol's text, unquoted."""
        if self.kind == "string":
            return json.loads(self.text)
        if self.kind == "sym":
            body = self.text[1:]
            return json.loads(body) if body.startswith('"') else body
        return self.text


class LexError(ValueError):
    def __init__(self, column: int, message: str) -> None:
        super().__init__(message)
        self.column = column


def tokenize(line: str) -> list[Token]:
    """The tokens of one line; comments are dropped."""
    out = []
    pos = 0
    while pos < len(line):
        m = TOKEN.match(line, pos)
        if m is None:
            raise LexError(pos + 1, f"unexpected character {line[pos]!r}")
        kind = m.lastgroup or ""
        if kind == "comment":
            break
        if kind in ("string", "sym"):
            _check_quoted(m.group(), pos + 1)
        if kind != "ws":
            out.append(Token(kind, m.group(), pos + 1))
        pos = m.end()
    return out


def _check_quoted(text: str, column: int) -> None:
    """A quoted string must be valid JSON text of valid Unicode (no lone surrogates)."""
    body = text[1:] if text.startswith("@") else text
    if not body.startswith('"'):
        return
    try:
        json.loads(body).encode("utf-8")
    except ValueError as e:   # JSONDecodeError, UnicodeEncodeError
        reason = e.msg if isinstance(e, json.JSONDecodeError) else "not valid Unicode"
        raise LexError(column, f"malformed string {body}: {reason}") from None


def symbol(name: str) -> str:
    """`@name`, quoted when the name is not plain."""
    return "@" + (name if _PLAIN_NAME.fullmatch(name) else json.dumps(name))


def string(text: str) -> str:
    return json.dumps(text)


def format_float(value: float, bank: str) -> str:
    """Shortest text that reads back to the same bits at `bank`'s width (f32 or f64)."""
    if math.isnan(value):
        if bank == "f32":
            bits = struct.unpack("<I", struct.pack("<f", value))[0]
            return f"bits(0x{bits:08X})"
        return f"bits(0x{struct.unpack('<Q', struct.pack('<d', value))[0]:016X})"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if bank == "f32":
        f = np.float32(value)
        text = (np.format_float_positional(f, unique=True, trim="0")
                if value == 0 or 1e-5 <= abs(value) < 1e16
                else np.format_float_scientific(f, unique=True, trim="0"))
        if struct.pack("<f", float(text)) != struct.pack("<f", value):   # double rounding
            return f"bits(0x{struct.unpack('<I', struct.pack('<f', value))[0]:08X})"
        return text
    return repr(value)


def float_from_bits(bits: int, bank: str) -> float:
    if bank == "f32":
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
    return struct.unpack("<d", struct.pack("<Q", bits & 0xFFFFFFFFFFFFFFFF))[0]
