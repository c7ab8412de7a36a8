"""Table-driven instruction encoding and decoding (see docs/vm.md, "Encoding").

An instruction is its opcode byte followed by its operands in `isa.OPS` order, little-endian.
Both directions walk the op's operand kinds, so neither knows any op by name.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Sequence

from irtk.vm import isa

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_FIXED = {
    "imm_i32": struct.Struct("<i"), "imm_i64": struct.Struct("<q"),
    "imm_f32": struct.Struct("<f"), "imm_f64": struct.Struct("<d"),
    "rodata": _U32, "global": _U32, "func": _U32, "import": _U32, "block": _U32,
    "type": _U32,
}
for _kind in list(isa.READ_KINDS) + list(isa.WRITE_KINDS):
    _FIXED[_kind] = _U16


class DecodeError(Exception):
    """Malformed bytecode at `offset`; the verifier adds the function name."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(message)
        self.offset = offset
        self.message = message


@dataclass(frozen=True, slots=True)
class Instr:
    """One decoded instruction: `regs` operands are tuples of (bank, index)."""

    offset: int
    op: isa.Op
    operands: tuple[Any, ...]
    size: int


def encode_operand(kind: str, value: Any) -> bytes:
    """Bytes of one operand; `regs` values are (bank, index) pairs, `block` a byte offset."""
    fixed = _FIXED.get(kind)
    if fixed is not None:
        return fixed.pack(value)
    if kind == "regs":
        out = bytearray(_U16.pack(len(value)))
        for bank, index in value:
            if not 0 <= index <= isa.REGS_MAX_INDEX:
                raise ValueError(f"register {bank}:{index} cannot be encoded in a register list")
            out += _U16.pack(isa.BANK_CODES[bank] << isa.REGS_INDEX_BITS | index)
        return bytes(out)
    if kind == "u16list":
        return _U16.pack(len(value)) + b"".join(_U16.pack(v) for v in value)
    if kind == "blocks":
        return _U16.pack(len(value)) + b"".join(_U32.pack(v) for v in value)
    if kind == "str":
        data = value.encode("utf-8")
        return _U16.pack(len(data)) + data
    raise ValueError(f"unknown operand kind '{kind}'")


def encode(op: isa.Op, operands: Sequence[Any]) -> bytes:
    """Bytes of a whole instruction."""
    return bytes([op.opcode]) + b"".join(
        encode_operand(kind, value) for kind, value in zip(op.operands, operands))


def decode_at(code: bytes | memoryview, pos: int) -> Instr:
    """The instruction starting at byte `pos` of `code`; DecodeError when malformed."""
    end = len(code)
    start = pos
    op = isa.BY_OPCODE.get(code[pos])
    if op is None:
        raise DecodeError(pos, f"unknown opcode 0x{code[pos]:02X}")
    pos += 1
    operands: list[Any] = []
    for kind in op.operands:
        fixed = _FIXED.get(kind)
        if fixed is not None:
            if pos + fixed.size > end:
                raise DecodeError(start, f"truncated instruction '{op.name}'")
            operands.append(fixed.unpack_from(code, pos)[0])
            pos += fixed.size
            continue
        if pos + 2 > end:
            raise DecodeError(start, f"truncated instruction '{op.name}'")
        count = _U16.unpack_from(code, pos)[0]
        pos += 2
        width = 1 if kind == "str" else 4 if kind == "blocks" else 2
        if pos + count * width > end:
            raise DecodeError(start, f"truncated instruction '{op.name}'")
        if kind == "str":
            try:
                operands.append(bytes(code[pos:pos + count]).decode("utf-8"))
            except UnicodeDecodeError:
                raise DecodeError(start, f"'{op.name}' string is not valid UTF-8") from None
        elif kind == "u16list":
            operands.append(tuple(_U16.unpack_from(code, pos + 2 * i)[0] for i in range(count)))
        elif kind == "blocks":
            operands.append(tuple(_U32.unpack_from(code, pos + 4 * i)[0] for i in range(count)))
        else:
            regs = []
            for i in range(count):
                word = _U16.unpack_from(code, pos + 2 * i)[0]
                bank = word >> isa.REGS_INDEX_BITS
                if bank >= len(isa.BANKS):
                    raise DecodeError(start, f"'{op.name}' register list has bad bank {bank}")
                regs.append((isa.BANKS[bank], word & isa.REGS_MAX_INDEX))
            operands.append(tuple(regs))
        pos += count * width
    return Instr(start, op, tuple(operands), pos - start)


def decode_function(code: bytes | memoryview) -> list[Instr]:
    """Every instruction of a function's bytecode, in order."""
    instrs = []
    pos = 0
    while pos < len(code):
        instr = decode_at(code, pos)
        instrs.append(instr)
        pos += instr.size
    return instrs
