"""Read binary SPIR-V: split it into instructions, find entry points, disassemble.

This is the inspection side of the package: the runtime needs entry point names
and workgroup sizes without calling SPIRV-Tools, and tests want a readable dump
of what the builder produced. Operand layouts come from the generated tables, so
the reader understands every instruction in the grammar. Malformed input raises
SpirvParseError (a SpirvError) naming the word offset, never another exception.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntFlag

from .binary import Binary, decode_string, to_words
from .errors import SpirvParseError
from .tables import (
    COMPOSITE_KINDS,
    ENUMERANT_OPERANDS,
    ID_KINDS,
    INSTRUCTIONS,
    MAGIC,
    OPERAND_KINDS,
    RENAMED_ENUMERANTS,
    ExecutionMode,
    ExecutionModel,
    GLSLstd450,
    Op,
)

HEADER_WORDS = 5


@dataclass(frozen=True)
class Header:
    magic: int
    version: tuple[int, int]
    generator: int
    bound: int
    schema: int


@dataclass(frozen=True)
class Instruction:
    """One instruction: its opcode, the words after the first, and where it starts."""

    opcode: int
    operands: tuple[int, ...]
    offset: int

    @property
    def name(self) -> str:
        info = INSTRUCTIONS.get(self.opcode)
        return info[0] if info else f"<unknown opcode {self.opcode}>"


@dataclass(frozen=True)
class Module:
    header: Header
    instructions: tuple[Instruction, ...]


@dataclass(frozen=True)
class EntryPoint:
    execution_model: ExecutionModel | int
    name: str
    function_id: int
    local_size: tuple[int, int, int] | None
    interface: tuple[int, ...] = ()


def parse(binary: Binary) -> Module:
    """Split a module into its header and instructions, checking only the framing."""
    words = to_words(binary)
    if len(words) < HEADER_WORDS:
        raise SpirvParseError(
            f"module has {len(words)} words, fewer than the {HEADER_WORDS}-word header", len(words)
        )
    if words[0] != MAGIC:
        raise SpirvParseError(f"bad magic number 0x{words[0]:08x}, expected 0x{MAGIC:08x}", 0)
    version = ((words[1] >> 16) & 0xFF, (words[1] >> 8) & 0xFF)
    header = Header(words[0], version, words[2], words[3], words[4])
    instructions = []
    pos = HEADER_WORDS
    while pos < len(words):
        count, opcode = words[pos] >> 16, words[pos] & 0xFFFF
        if count == 0:
            raise SpirvParseError(f"instruction with opcode {opcode} has word count 0", pos)
        if pos + count > len(words):
            remain = len(words) - pos
            message = f"instruction with opcode {opcode} needs {count} words but only {remain} remain"
            raise SpirvParseError(message, pos)
        instructions.append(Instruction(opcode, tuple(words[pos + 1 : pos + count]), pos))
        pos += count
    return Module(header, tuple(instructions))


# --- operand decoding -------------------------------------------------------

# A decoded operand: (tag, value). Tags: "id", "int", "float", "str", "enum"
# (value is (kind, number)), "op" (an opcode), "extinst" ((set id, number)), "raw",
# "text" (already spelled, e.g. an infinity as a hex float).
DecodedValue = int | float | str | tuple[str, int] | tuple[int, int]
Decoded = tuple[str, DecodedValue]

# width -> (struct format, exponent bits, mantissa bits) of IEEE binary16/32/64.
_FLOAT_LAYOUT = {16: ("<e", 5, 10), 32: ("<f", 8, 23), 64: ("<d", 11, 52)}


def _hex_float(bits: int, exponent_bits: int, mantissa_bits: int) -> str:
    """An infinity or NaN as a hex float with the maximum exponent, e.g. 0x1.8p+128."""
    sign = "-" if bits >> (exponent_bits + mantissa_bits) else ""
    mantissa = bits & ((1 << mantissa_bits) - 1)
    digits = (mantissa_bits + 3) // 4
    fraction = f"{mantissa << (4 * digits - mantissa_bits):0{digits}x}".rstrip("0")
    return f"{sign}0x1{'.' + fraction if fraction else ''}p+{1 << (exponent_bits - 1)}"


class _Context:
    """What operand decoding needs to know about earlier instructions."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.scalar_types: dict[int, tuple[str, int, bool]] = {}  # id -> (int|float, width, signed)
        self.value_types: dict[int, int] = {}  # result id -> result type id
        self.imports: dict[int, str] = {}
        self.constants: dict[int, int] = {}  # single-word OpConstant values

    def learn(self, inst: Instruction) -> None:
        ops = inst.operands
        info = INSTRUCTIONS.get(inst.opcode)
        if info is None or not ops:
            return
        if info[1][:1] == (("IdResultType", ""),) and len(ops) >= 2:
            self.value_types[ops[1]] = ops[0]
            if inst.opcode == Op.Constant and len(ops) == 3:
                self.constants[ops[1]] = ops[2]
        elif inst.opcode == Op.TypeInt and len(ops) >= 3:
            self.scalar_types[ops[0]] = ("int", ops[1], ops[2] == 1)
        elif inst.opcode == Op.TypeFloat and len(ops) >= 2:
            self.scalar_types[ops[0]] = ("float", ops[1], True)
        elif inst.opcode == Op.ExtInstImport and len(ops) >= 2:
            try:
                self.imports[ops[0]] = decode_string(ops, 1, len(ops), inst.offset + 2)[0]
            except SpirvParseError:
                pass  # reported when the instruction itself is decoded


class _Decoder:
    """Decodes one instruction's operands following its grammar entry."""

    def __init__(self, inst: Instruction, ctx: _Context) -> None:
        self.inst = inst
        self.words = inst.operands
        self.ctx = ctx
        self.pos = 0
        self.out: list[Decoded] = []

    def where(self) -> int:
        return self.inst.offset + 1 + self.pos

    def fail(self, message: str) -> SpirvParseError:
        return SpirvParseError(f"{self.inst.name}: {message}", self.where())

    def take(self, what: str) -> int:
        if self.pos >= len(self.words):
            raise self.fail(f"missing {what} operand")
        word = self.words[self.pos]
        self.pos += 1
        return word

    def run(self) -> list[Decoded]:
        info = INSTRUCTIONS.get(self.inst.opcode)
        if info is None:
            return [("raw", w) for w in self.words]
        self.specs(info[1])
        if self.pos < len(self.words):
            raise self.fail(f"{len(self.words) - self.pos} unexpected trailing words")
        return self.out

    def specs(self, specs: Sequence[tuple[str, str]]) -> None:
        for kind, quantifier in specs:
            if quantifier == "":
                self.one(kind)
            elif quantifier == "?":
                if self.pos < len(self.words):
                    self.one(kind)
            else:
                while self.pos < len(self.words):
                    self.one(kind)

    def one(self, kind: str) -> None:
        if kind in ID_KINDS:
            value = self.take(kind)
            if not 0 < value < self.ctx.bound:
                self.pos -= 1
                raise self.fail(f"id %{value} is out of range (bound {self.ctx.bound})")
            self.out.append(("id", value))
        elif kind in COMPOSITE_KINDS:
            for part in COMPOSITE_KINDS[kind]:
                self.one(part)
        elif kind in OPERAND_KINDS:
            self.enum(kind)
        elif kind == "LiteralString":
            text, self.pos = decode_string(self.words, self.pos, len(self.words), self.where())
            self.out.append(("str", text))
        elif kind == "LiteralContextDependentNumber":  # OpConstant, OpSpecConstant
            self.number(self.words[0] if self.words else 0, rest=True)
        elif kind == "LiteralInteger" and self.inst.opcode == Op.Switch:
            self.number(self.ctx.value_types.get(self.words[0], 0), rest=False)
        elif kind == "LiteralFloat":
            self.out.append(("float", struct.unpack("<f", struct.pack("<I", self.take(kind)))[0]))
        elif kind == "LiteralExtInstInteger":
            set_id = self.words[self.pos - 1] if self.pos else 0
            self.out.append(("extinst", (set_id, self.take(kind))))
        elif kind == "LiteralSpecConstantOpInteger":
            self.out.append(("op", self.take(kind)))
        else:  # LiteralInteger and anything newer than this decoder
            self.out.append(("int", self.take(kind)))

    def number(self, type_id: int, rest: bool) -> None:
        """A literal whose width and meaning come from a scalar type.

        With an unknown type, ``rest`` says whether it spans the rest of the instruction.
        """
        tag, width, signed = self.ctx.scalar_types.get(type_id, ("raw", 32, False))
        if not 0 < width <= 64:
            tag, width = "raw", 32
        if tag == "raw" and rest:
            self.out += [("raw", self.take("literal number")) for _ in range(len(self.words) - self.pos)]
            return
        words = [self.take("literal number") for _ in range(2 if width > 32 else 1)]
        bits = sum(w << (32 * i) for i, w in enumerate(words)) & ((1 << width) - 1)
        if tag == "int":
            if signed and bits >> (width - 1):
                bits -= 1 << width
            self.out.append(("int", bits))
        elif tag == "float" and width in _FLOAT_LAYOUT:
            fmt, exponent_bits, mantissa_bits = _FLOAT_LAYOUT[width]
            value = struct.unpack(fmt, bits.to_bytes(width // 8, "little"))[0]
            if math.isfinite(value):
                self.out.append(("float", value))
            else:  # SPIRV-Tools' spelling, so the bits (NaN payload included) survive reassembly
                self.out.append(("text", _hex_float(bits, exponent_bits, mantissa_bits)))
        else:
            self.out += [("raw", w) for w in words]

    def enum(self, kind: str) -> None:
        value = self.take(kind)
        self.out.append(("enum", (kind, value)))
        params = ENUMERANT_OPERANDS.get(kind, {})
        if not params:
            return
        if issubclass(OPERAND_KINDS[kind], IntFlag):
            for bit in range(32):
                if value & (1 << bit) and (1 << bit) in params:
                    self.specs(params[1 << bit])
        elif value in params:
            self.specs(params[value])


def _context(module: Module) -> _Context:
    ctx = _Context(module.header.bound)
    for inst in module.instructions:
        ctx.learn(inst)
    return ctx


def decoded(module: Module) -> Iterator[tuple[Instruction, list[Decoded]]]:
    """Each instruction with its typed operands (see the Decoded tags), in order."""
    ctx = _context(module)
    for inst in module.instructions:
        yield inst, _Decoder(inst, ctx).run()


# --- entry points -------------------------------------------------------------


def entry_points(binary: Binary) -> list[EntryPoint]:
    """Entry points in module order, with LocalSize (or constant LocalSizeId) if declared."""
    module = parse(binary)
    ctx = _context(module)
    found: list[tuple[int, str, int, tuple[int, ...]]] = []
    sizes: dict[int, tuple[int, int, int]] = {}
    for inst in module.instructions:
        if inst.opcode not in (Op.EntryPoint, Op.ExecutionMode, Op.ExecutionModeId):
            continue
        # The decoder has checked the operands against the grammar, so the patterns match.
        match _Decoder(inst, ctx).run():
            case [("enum", (_, int() as model)), ("id", int() as fn), ("str", str() as name),
                  *rest]:
                found.append((model, name, fn, tuple(_numbers(rest))))
            case [("id", int() as fn), ("enum", (_, int() as mode)), *rest]:
                match _numbers(rest):
                    case [x, y, z] if mode == ExecutionMode.LocalSize:
                        sizes[fn] = (x, y, z)
                    case [x, y, z] if mode == ExecutionMode.LocalSizeId and all(
                        a in ctx.constants for a in (x, y, z)
                    ):
                        sizes[fn] = (ctx.constants[x], ctx.constants[y], ctx.constants[z])
    result = []
    for model, name, fn_id, interface in found:
        try:
            exec_model: ExecutionModel | int = ExecutionModel(model)
        except ValueError:
            exec_model = model
        result.append(EntryPoint(exec_model, name, fn_id, sizes.get(fn_id), interface))
    return result


# --- disassembly ------------------------------------------------------------------


def _numbers(ops: Sequence[Decoded]) -> list[int]:
    """The values of operands that are single numbers (ids, integer literals)."""
    return [value for _, value in ops if isinstance(value, int)]


def _enum_text(kind: str, value: int) -> str:
    cls = OPERAND_KINDS[kind]
    renamed = RENAMED_ENUMERANTS.get(kind, {})

    def spell(v: int) -> str:
        try:
            name = cls(v).name or str(v)
        except ValueError:
            return str(v)
        return renamed.get(name, name)

    if not issubclass(cls, IntFlag) or value == 0:
        return spell(value)
    return "|".join(spell(1 << bit) for bit in range(32) if value & (1 << bit))


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _names(module: Module) -> dict[int, str]:
    """Unique assembler-safe names from OpName, for friendly disassembly."""
    names: dict[int, str] = {}
    used: set[str] = set()
    for inst in module.instructions:
        if inst.opcode != Op.Name or not inst.operands:
            continue
        try:
            text = decode_string(inst.operands, 1, len(inst.operands), inst.offset + 2)[0]
        except SpirvParseError:
            continue
        name = re.sub(r"[^A-Za-z0-9_.]", "_", text)
        if name and not name.isdigit() and name not in used and inst.operands[0] not in names:
            names[inst.operands[0]] = name
            used.add(name)
    return names


def _operand_text(operand: Decoded, ctx: _Context, names: dict[int, str]) -> str:
    match operand:
        case ("id", int() as value):
            return "%" + names.get(value, str(value))
        case ("str", str() as text):
            return _quote(text)
        case ("enum", (str() as kind, int() as value)):
            return _enum_text(kind, value)
        case ("float", value):
            return repr(value)
        case ("op", int() as value):
            info = INSTRUCTIONS.get(value)
            return info[0].removeprefix("Op") if info else str(value)
        case ("extinst", (int() as set_id, int() as number)):
            if ctx.imports.get(set_id) == "GLSL.std.450":
                try:
                    return GLSLstd450(number).name
                except ValueError:
                    pass
            return str(number)
    return str(operand[1])


def disassemble(binary: Binary, *, friendly_names: bool = False) -> str:
    """Readable text in SPIRV-Tools' assembly syntax (with numeric ids it reassembles).

    ``friendly_names`` shows ids by their OpName where that is unique.
    """
    module = parse(binary)
    ctx = _context(module)
    names = _names(module) if friendly_names else {}
    h = module.header
    lines = [
        "; SPIR-V",
        f"; Version: {h.version[0]}.{h.version[1]}",
        f"; Generator: 0x{h.generator:08x}",
        f"; Bound: {h.bound}",
        f"; Schema: {h.schema}",
    ]
    for inst in module.instructions:
        info = INSTRUCTIONS.get(inst.opcode)
        if info is None:
            raw = " ".join(f"0x{w:08x}" for w in inst.operands)
            lines.append(f"; {inst.name} at word {inst.offset}: {raw}".rstrip())
            continue
        ops = _Decoder(inst, ctx).run()
        kinds = [k for k, _ in info[1]]
        result = None
        if "IdResult" in kinds:
            index = kinds.index("IdResult")  # 0, or 1 after IdResultType
            result = ops.pop(index)
        text = " ".join([info[0], *(_operand_text(op, ctx, names) for op in ops)])
        if result is None:
            lines.append(" " * 15 + text)
        else:
            lines.append(f"{_operand_text(result, ctx, names):>12} = {text}")
    return "\n".join(lines) + "\n"


__all__ = ["EntryPoint", "Header", "Instruction", "Module", "decoded", "disassemble", "entry_points", "parse"]
