"""The VM instruction set as data: every op's name, opcode byte and operand kinds.

The encoder (`writer`), decoder (`encoding`), verifier, interpreter, disassembler and the op
reference in docs/vm.md are all driven by `OPS`, so an op is added in one place. Opcodes are
part of the file format: append new ops in a free slot and never renumber one without bumping
`BYTECODE_VERSION`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# 2: every block ends in a terminator (no fall-through into a branch target); br_table,
#    cmp.type.ref and the narrow/fill/clone/compare buffer ops.
BYTECODE_VERSION = 2

BANKS = ("i32", "i64", "f32", "f64", "ref")
# What a register (or a list slot) of each bank holds before anything is written to it.
BANK_ZERO = {"i32": 0, "i64": 0, "f32": 0.0, "f64": 0.0, "ref": None}
# Bank number in the top 3 bits of a `regs` entry; index in the low 13 bits.
BANK_CODES = {name: code for code, name in enumerate(BANKS)}
REGS_INDEX_BITS = 13
REGS_MAX_INDEX = (1 << REGS_INDEX_BITS) - 1

# Operand kinds and their encoded size in bytes (None: variable length).
READ_KINDS = {bank: bank for bank in BANKS}              # u16 register read
WRITE_KINDS = {bank + ">": bank for bank in BANKS}       # u16 register write
KIND_SIZES: dict[str, int | None] = {
    **{k: 2 for k in READ_KINDS}, **{k: 2 for k in WRITE_KINDS},
    "imm_i32": 4, "imm_i64": 8, "imm_f32": 4, "imm_f64": 8,
    "rodata": 4, "global": 4, "func": 4, "import": 4, "block": 4, "type": 4,
    "regs": None, "u16list": None, "str": None, "blocks": None,
}

@dataclass(frozen=True)
class Op:
    """One instruction: `operands` are kinds in encoding order; `flags` has "T" for terminators."""

    opcode: int
    name: str
    operand_text: str
    doc: str
    flags: str = ""
    operands: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "operands", tuple(self.operand_text.split()))

    @property
    def is_terminator(self) -> bool:
        return "T" in self.flags

    @property
    def bank(self) -> str | None:
        """The bank of a `global` operand: that of the op's other register operand."""
        for kind in self.operands:
            if kind in READ_KINDS or kind in WRITE_KINDS:
                return kind.rstrip(">")
        return None


OPS: tuple[Op, ...] = (
    Op(0x01, "const.i32", "i32> imm_i32", "dst = immediate"),
    Op(0x02, "const.i64", "i64> imm_i64", "dst = immediate"),
    Op(0x03, "const.f32", "f32> imm_f32", "dst = immediate"),
    Op(0x04, "const.f64", "f64> imm_f64", "dst = immediate"),
    Op(0x05, "const.ref.null", "ref>", "dst = null"),
    Op(0x06, "const.ref.rodata", "ref> rodata", "dst = read-only !vm.buffer over the segment"),
    Op(0x07, "mov.i32", "i32> i32", "dst = src"),
    Op(0x08, "mov.i64", "i64> i64", "dst = src"),
    Op(0x09, "mov.f32", "f32> f32", "dst = src"),
    Op(0x0A, "mov.f64", "f64> f64", "dst = src"),
    Op(0x0B, "mov.ref", "ref> ref", "dst = src"),
    Op(0x0C, "discard.refs", "regs", "set the listed ref registers to null (early release)"),

    Op(0x10, "br", "block", "jump to block", "T"),
    Op(0x11, "cond_br", "i32 block block", "to the first block if cond != 0, else the second", "T"),
    Op(0x12, "return", "regs", "return the listed registers as the function's results", "T"),
    Op(0x13, "fail", "i32 str", "raise RuntimeFailure(message) with the status code", "T"),
    Op(0x14, "call", "func regs regs", "call an internal function: args, results"),
    Op(0x15, "call.import", "import regs regs", "call an imported function: args, results"),
    Op(0x16, "call.import.variadic", "import u16list regs regs",
       "call a variadic import: tuples per segment, flat args, results"),
    Op(0x17, "br_table", "i32 block blocks",
       "to blocks[index] if 0 <= index < len(blocks), else to the default block", "T"),

    Op(0x18, "global.load.i32", "i32> global", "dst = global"),
    Op(0x19, "global.load.i64", "i64> global", "dst = global"),
    Op(0x1A, "global.load.f32", "f32> global", "dst = global"),
    Op(0x1B, "global.load.f64", "f64> global", "dst = global"),
    Op(0x1C, "global.load.ref", "ref> global", "dst = global"),
    Op(0x1D, "global.store.i32", "global i32", "global = src"),
    Op(0x1E, "global.store.i64", "global i64", "global = src"),
    Op(0x1F, "global.store.f32", "global f32", "global = src"),

    Op(0x20, "global.store.f64", "global f64", "global = src"),
    Op(0x21, "global.store.ref", "global ref", "global = src"),
    Op(0x22, "select.i32", "i32> i32 i32 i32", "dst = a if cond != 0 else b"),
    Op(0x23, "select.i64", "i64> i32 i64 i64", "dst = a if cond != 0 else b"),
    Op(0x24, "select.f32", "f32> i32 f32 f32", "dst = a if cond != 0 else b"),
    Op(0x25, "select.f64", "f64> i32 f64 f64", "dst = a if cond != 0 else b"),
    Op(0x26, "select.ref", "ref> i32 ref ref", "dst = a if cond != 0 else b"),

    Op(0x30, "add.i32", "i32> i32 i32", "a + b (wrapping)"),
    Op(0x31, "sub.i32", "i32> i32 i32", "a - b (wrapping)"),
    Op(0x32, "mul.i32", "i32> i32 i32", "a * b (wrapping)"),
    Op(0x33, "div.s.i32", "i32> i32 i32", "a / b, signed, truncating"),
    Op(0x34, "div.u.i32", "i32> i32 i32", "a / b, unsigned"),
    Op(0x35, "rem.s.i32", "i32> i32 i32", "a % b, signed (sign of a)"),
    Op(0x36, "rem.u.i32", "i32> i32 i32", "a % b, unsigned"),
    Op(0x37, "and.i32", "i32> i32 i32", "a & b"),
    Op(0x38, "or.i32", "i32> i32 i32", "a | b"),
    Op(0x39, "xor.i32", "i32> i32 i32", "a ^ b"),
    Op(0x3A, "not.i32", "i32> i32", "~a"),
    Op(0x3B, "shl.i32", "i32> i32 i32", "a << (b mod width) (wrapping)"),
    Op(0x3C, "shr.s.i32", "i32> i32 i32", "a >> (b mod width), arithmetic"),
    Op(0x3D, "shr.u.i32", "i32> i32 i32", "a >> (b mod width), logical"),
    Op(0x3E, "neg.i32", "i32> i32", "-a (wrapping)"),
    Op(0x3F, "abs.i32", "i32> i32", "|a| (wrapping)"),

    Op(0x40, "min.s.i32", "i32> i32 i32", "signed minimum"),
    Op(0x41, "max.s.i32", "i32> i32 i32", "signed maximum"),
    Op(0x42, "min.u.i32", "i32> i32 i32", "unsigned minimum"),
    Op(0x43, "max.u.i32", "i32> i32 i32", "unsigned maximum"),

    Op(0x48, "add.i64", "i64> i64 i64", "a + b (wrapping)"),
    Op(0x49, "sub.i64", "i64> i64 i64", "a - b (wrapping)"),
    Op(0x4A, "mul.i64", "i64> i64 i64", "a * b (wrapping)"),
    Op(0x4B, "div.s.i64", "i64> i64 i64", "a / b, signed, truncating"),
    Op(0x4C, "div.u.i64", "i64> i64 i64", "a / b, unsigned"),
    Op(0x4D, "rem.s.i64", "i64> i64 i64", "a % b, signed (sign of a)"),
    Op(0x4E, "rem.u.i64", "i64> i64 i64", "a % b, unsigned"),
    Op(0x4F, "and.i64", "i64> i64 i64", "a & b"),

    Op(0x50, "or.i64", "i64> i64 i64", "a | b"),
    Op(0x51, "xor.i64", "i64> i64 i64", "a ^ b"),
    Op(0x52, "not.i64", "i64> i64", "~a"),
    Op(0x53, "shl.i64", "i64> i64 i64", "a << (b mod width) (wrapping)"),
    Op(0x54, "shr.s.i64", "i64> i64 i64", "a >> (b mod width), arithmetic"),
    Op(0x55, "shr.u.i64", "i64> i64 i64", "a >> (b mod width), logical"),
    Op(0x56, "neg.i64", "i64> i64", "-a (wrapping)"),
    Op(0x57, "abs.i64", "i64> i64", "|a| (wrapping)"),
    Op(0x58, "min.s.i64", "i64> i64 i64", "signed minimum"),
    Op(0x59, "max.s.i64", "i64> i64 i64", "signed maximum"),
    Op(0x5A, "min.u.i64", "i64> i64 i64", "unsigned minimum"),
    Op(0x5B, "max.u.i64", "i64> i64 i64", "unsigned maximum"),

    Op(0x60, "cmp.eq.i32", "i32> i32 i32", "a == b -> 0/1"),
    Op(0x61, "cmp.ne.i32", "i32> i32 i32", "a != b -> 0/1"),
    Op(0x62, "cmp.lt.s.i32", "i32> i32 i32", "a < b, signed -> 0/1"),
    Op(0x63, "cmp.lte.s.i32", "i32> i32 i32", "a <= b, signed -> 0/1"),
    Op(0x64, "cmp.lt.u.i32", "i32> i32 i32", "a < b, unsigned -> 0/1"),
    Op(0x65, "cmp.lte.u.i32", "i32> i32 i32", "a <= b, unsigned -> 0/1"),
    Op(0x66, "cmp.nz.i32", "i32> i32", "a != 0 -> 0/1"),
    Op(0x67, "cmp.eq.i64", "i32> i64 i64", "a == b -> 0/1"),
    Op(0x68, "cmp.ne.i64", "i32> i64 i64", "a != b -> 0/1"),
    Op(0x69, "cmp.lt.s.i64", "i32> i64 i64", "a < b, signed -> 0/1"),
    Op(0x6A, "cmp.lte.s.i64", "i32> i64 i64", "a <= b, signed -> 0/1"),
    Op(0x6B, "cmp.lt.u.i64", "i32> i64 i64", "a < b, unsigned -> 0/1"),
    Op(0x6C, "cmp.lte.u.i64", "i32> i64 i64", "a <= b, unsigned -> 0/1"),
    Op(0x6D, "cmp.nz.i64", "i32> i64", "a != 0 -> 0/1"),

    Op(0x70, "add.f32", "f32> f32 f32", "a + b"),
    Op(0x71, "sub.f32", "f32> f32 f32", "a - b"),
    Op(0x72, "mul.f32", "f32> f32 f32", "a * b"),
    Op(0x73, "div.f32", "f32> f32 f32", "a / b (IEEE)"),
    Op(0x74, "rem.f32", "f32> f32 f32", "fmod(a, b)"),
    Op(0x75, "neg.f32", "f32> f32", "-a"),
    Op(0x76, "abs.f32", "f32> f32", "|a|"),
    Op(0x77, "min.f32", "f32> f32 f32", "minimum (NaN if either is NaN)"),
    Op(0x78, "max.f32", "f32> f32 f32", "maximum (NaN if either is NaN)"),
    Op(0x79, "fma.f32", "f32> f32 f32 f32", "a * b + c, one rounding"),
    Op(0x7A, "exp.f32", "f32> f32", "e**a"),
    Op(0x7B, "exp2.f32", "f32> f32", "2**a"),
    Op(0x7C, "log.f32", "f32> f32", "ln a"),
    Op(0x7D, "log2.f32", "f32> f32", "log2 a"),
    Op(0x7E, "sqrt.f32", "f32> f32", "square root"),
    Op(0x7F, "rsqrt.f32", "f32> f32", "1 / sqrt(a)"),

    Op(0x80, "tanh.f32", "f32> f32", "tanh a"),
    Op(0x81, "sin.f32", "f32> f32", "sin a"),
    Op(0x82, "cos.f32", "f32> f32", "cos a"),
    Op(0x83, "pow.f32", "f32> f32 f32", "a ** b"),
    Op(0x84, "floor.f32", "f32> f32", "round down"),
    Op(0x85, "ceil.f32", "f32> f32", "round up"),
    Op(0x86, "round.f32", "f32> f32", "round half away from zero"),

    Op(0x88, "add.f64", "f64> f64 f64", "a + b"),
    Op(0x89, "sub.f64", "f64> f64 f64", "a - b"),
    Op(0x8A, "mul.f64", "f64> f64 f64", "a * b"),
    Op(0x8B, "div.f64", "f64> f64 f64", "a / b (IEEE)"),
    Op(0x8C, "rem.f64", "f64> f64 f64", "fmod(a, b)"),
    Op(0x8D, "neg.f64", "f64> f64", "-a"),
    Op(0x8E, "abs.f64", "f64> f64", "|a|"),
    Op(0x8F, "min.f64", "f64> f64 f64", "minimum (NaN if either is NaN)"),

    Op(0x90, "max.f64", "f64> f64 f64", "maximum (NaN if either is NaN)"),
    Op(0x91, "fma.f64", "f64> f64 f64 f64", "a * b + c, one rounding"),
    Op(0x92, "exp.f64", "f64> f64", "e**a"),
    Op(0x93, "exp2.f64", "f64> f64", "2**a"),
    Op(0x94, "log.f64", "f64> f64", "ln a"),
    Op(0x95, "log2.f64", "f64> f64", "log2 a"),
    Op(0x96, "sqrt.f64", "f64> f64", "square root"),
    Op(0x97, "rsqrt.f64", "f64> f64", "1 / sqrt(a)"),
    Op(0x98, "tanh.f64", "f64> f64", "tanh a"),
    Op(0x99, "sin.f64", "f64> f64", "sin a"),
    Op(0x9A, "cos.f64", "f64> f64", "cos a"),
    Op(0x9B, "pow.f64", "f64> f64 f64", "a ** b"),
    Op(0x9C, "floor.f64", "f64> f64", "round down"),
    Op(0x9D, "ceil.f64", "f64> f64", "round up"),
    Op(0x9E, "round.f64", "f64> f64", "round half away from zero"),

    Op(0xA0, "cmp.eq.f32", "i32> f32 f32", "a == b (ordered) -> 0/1"),
    Op(0xA1, "cmp.ne.f32", "i32> f32 f32", "a != b (unordered: true if NaN) -> 0/1"),
    Op(0xA2, "cmp.lt.f32", "i32> f32 f32", "a < b (ordered) -> 0/1"),
    Op(0xA3, "cmp.lte.f32", "i32> f32 f32", "a <= b (ordered) -> 0/1"),
    Op(0xA4, "cmp.nan.f32", "i32> f32", "a is NaN -> 0/1"),
    Op(0xA5, "cmp.eq.f64", "i32> f64 f64", "a == b (ordered) -> 0/1"),
    Op(0xA6, "cmp.ne.f64", "i32> f64 f64", "a != b (unordered: true if NaN) -> 0/1"),
    Op(0xA7, "cmp.lt.f64", "i32> f64 f64", "a < b (ordered) -> 0/1"),
    Op(0xA8, "cmp.lte.f64", "i32> f64 f64", "a <= b (ordered) -> 0/1"),
    Op(0xA9, "cmp.nan.f64", "i32> f64", "a is NaN -> 0/1"),
    Op(0xAA, "cmp.eq.ref", "i32> ref ref", "a is b -> 0/1"),
    Op(0xAB, "cmp.nz.ref", "i32> ref", "a is not null -> 0/1"),
    Op(0xAC, "cmp.type.ref", "i32> ref type",
       "a is not null and its type is the module's types[t] -> 0/1"),

    Op(0xB0, "ext.i8.i32.s", "i32> i32", "sign-extend the low 8 bits"),
    Op(0xB1, "ext.i8.i32.u", "i32> i32", "zero-extend the low 8 bits"),
    Op(0xB2, "ext.i16.i32.s", "i32> i32", "sign-extend the low 16 bits"),
    Op(0xB3, "ext.i16.i32.u", "i32> i32", "zero-extend the low 16 bits"),
    Op(0xB4, "trunc.i32.i8", "i32> i32", "keep the low 8 bits (zero-extended)"),
    Op(0xB5, "trunc.i32.i16", "i32> i32", "keep the low 16 bits (zero-extended)"),
    Op(0xB6, "ext.i32.i64.s", "i64> i32", "sign-extend"),
    Op(0xB7, "ext.i32.i64.u", "i64> i32", "zero-extend"),
    Op(0xB8, "trunc.i64.i32", "i32> i64", "keep the low 32 bits"),
    Op(0xB9, "cast.si32.f32", "f32> i32", "signed integer to float, round to nearest"),
    Op(0xBA, "cast.si32.f64", "f64> i32", "signed integer to float, round to nearest"),
    Op(0xBB, "cast.ui32.f32", "f32> i32", "unsigned integer to float, round to nearest"),
    Op(0xBC, "cast.ui32.f64", "f64> i32", "unsigned integer to float, round to nearest"),
    Op(0xBD, "cast.si64.f32", "f32> i64", "signed integer to float, round to nearest"),
    Op(0xBE, "cast.si64.f64", "f64> i64", "signed integer to float, round to nearest"),
    Op(0xBF, "cast.ui64.f32", "f32> i64", "unsigned integer to float, round to nearest"),

    Op(0xC0, "cast.ui64.f64", "f64> i64", "unsigned integer to float, round to nearest"),
    Op(0xC1, "cast.f32.si32", "i32> f32", "float to signed int: truncate, saturate, NaN -> 0"),
    Op(0xC2, "cast.f32.ui32", "i32> f32", "float to unsigned int: truncate, saturate, NaN -> 0"),
    Op(0xC3, "cast.f32.si64", "i64> f32", "float to signed int: truncate, saturate, NaN -> 0"),
    Op(0xC4, "cast.f32.ui64", "i64> f32", "float to unsigned int: truncate, saturate, NaN -> 0"),
    Op(0xC5, "cast.f64.si32", "i32> f64", "float to signed int: truncate, saturate, NaN -> 0"),
    Op(0xC6, "cast.f64.ui32", "i32> f64", "float to unsigned int: truncate, saturate, NaN -> 0"),
    Op(0xC7, "cast.f64.si64", "i64> f64", "float to signed int: truncate, saturate, NaN -> 0"),
    Op(0xC8, "cast.f64.ui64", "i64> f64", "float to unsigned int: truncate, saturate, NaN -> 0"),
    Op(0xC9, "cast.f32.f64", "f64> f32", "widen"),
    Op(0xCA, "cast.f64.f32", "f32> f64", "round to nearest f32"),
    Op(0xCB, "bitcast.i32.f32", "f32> i32", "reinterpret bits"),
    Op(0xCC, "bitcast.f32.i32", "i32> f32", "reinterpret bits"),
    Op(0xCD, "bitcast.i64.f64", "f64> i64", "reinterpret bits"),
    Op(0xCE, "bitcast.f64.i64", "i64> f64", "reinterpret bits"),

    Op(0xD0, "list.alloc", "ref> i32", "dst = new empty !vm.list with the given initial capacity"),
    Op(0xD1, "list.size", "i32> ref", "number of elements"),
    Op(0xD2, "list.resize", "ref i32", "grow (with zeros/nulls) or shrink to the size"),
    Op(0xD3, "list.get.i32", "i32> ref i32", "dst = list[index]"),
    Op(0xD4, "list.get.i64", "i64> ref i32", "dst = list[index]"),
    Op(0xD5, "list.get.f32", "f32> ref i32", "dst = list[index]"),
    Op(0xD6, "list.get.f64", "f64> ref i32", "dst = list[index]"),
    Op(0xD7, "list.get.ref", "ref> ref i32", "dst = list[index]"),
    Op(0xD8, "list.set.i32", "ref i32 i32", "list[index] = value"),
    Op(0xD9, "list.set.i64", "ref i32 i64", "list[index] = value"),
    Op(0xDA, "list.set.f32", "ref i32 f32", "list[index] = value"),
    Op(0xDB, "list.set.f64", "ref i32 f64", "list[index] = value"),
    Op(0xDC, "list.set.ref", "ref i32 ref", "list[index] = value"),

    Op(0xE0, "buffer.alloc", "ref> i64", "dst = new zero-filled writable !vm.buffer"),
    Op(0xE1, "buffer.length", "i64> ref", "byte length"),
    Op(0xE2, "buffer.copy", "ref i64 ref i64 i64", "copy: source, offset, target, offset, length"),
    Op(0xE3, "buffer.load.i32", "i32> ref i64", "dst = little-endian value at the byte offset"),
    Op(0xE4, "buffer.load.i64", "i64> ref i64", "dst = little-endian value at the byte offset"),
    Op(0xE5, "buffer.load.f32", "f32> ref i64", "dst = little-endian value at the byte offset"),
    Op(0xE6, "buffer.load.f64", "f64> ref i64", "dst = little-endian value at the byte offset"),
    Op(0xE7, "buffer.store.i32", "ref i64 i32", "store little-endian at the byte offset"),
    Op(0xE8, "buffer.store.i64", "ref i64 i64", "store little-endian at the byte offset"),
    Op(0xE9, "buffer.store.f32", "ref i64 f32", "store little-endian at the byte offset"),
    Op(0xEA, "buffer.store.f64", "ref i64 f64", "store little-endian at the byte offset"),
    Op(0xEB, "buffer.clone", "ref> ref i64 i64",
       "dst = new writable !vm.buffer holding a copy of [offset, offset + length) of the source"),
    Op(0xEC, "buffer.fill.i8", "ref i64 i64 i32",
       "fill [offset, offset + length) with the low 8 bits of the value"),
    Op(0xED, "buffer.fill.i16", "ref i64 i64 i32",
       "fill with the low 16 bits (offset and length multiples of 2)"),
    Op(0xEE, "buffer.fill.i32", "ref i64 i64 i32", "fill (offset and length multiples of 4)"),
    Op(0xEF, "buffer.fill.i64", "ref i64 i64 i64", "fill (offset and length multiples of 8)"),
    Op(0xF0, "buffer.fill.f32", "ref i64 i64 f32", "fill (offset and length multiples of 4)"),
    Op(0xF1, "buffer.fill.f64", "ref i64 i64 f64", "fill (offset and length multiples of 8)"),
    Op(0xF2, "buffer.compare", "i32> ref i64 ref i64 i64",
       "1 if the two byte ranges (buffer, offset; buffer, offset; length) are equal, else 0"),
    Op(0xF3, "buffer.load.i8.s", "i32> ref i64", "dst = sign-extended byte at the offset"),
    Op(0xF4, "buffer.load.i8.u", "i32> ref i64", "dst = zero-extended byte at the offset"),
    Op(0xF5, "buffer.load.i16.s", "i32> ref i64", "dst = sign-extended little-endian 16 bits"),
    Op(0xF6, "buffer.load.i16.u", "i32> ref i64", "dst = zero-extended little-endian 16 bits"),
    Op(0xF7, "buffer.store.i8", "ref i64 i32", "store the low 8 bits at the byte offset"),
    Op(0xF8, "buffer.store.i16", "ref i64 i32", "store the low 16 bits, little-endian"),
)

BY_NAME: dict[str, Op] = {op.name: op for op in OPS}
BY_OPCODE: dict[int, Op] = {op.opcode: op for op in OPS}


def _iree_spelling(name: str) -> str | None:
    """`div.s.i32` is also accepted as IREE spells it, `div.i32.s`."""
    parts = name.split(".")
    if len(parts) >= 3 and parts[-2] in ("s", "u") and parts[-1] in BANKS:
        return ".".join(parts[:-2] + [parts[-1], parts[-2]])
    return None


ALIASES: dict[str, str] = {
    alias: op.name for op in OPS if (alias := _iree_spelling(op.name)) is not None}


def lookup(name: str) -> Op:
    """The op called `name` (or its IREE spelling); KeyError names the unknown op."""
    op = BY_NAME.get(name) or BY_NAME.get(ALIASES.get(name, ""))
    if op is None:
        raise KeyError(f"unknown VM op '{name}'")
    return op
