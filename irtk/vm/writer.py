"""Builds module files: `FunctionBuilder` emits bytecode, `ModuleWriter` serializes a ModuleDef.

Used by the compiler's VM code generator and by tests that write programs directly. Misuse
(an unknown op, a wrong operand, an unbound label) is a bug in the caller and raises ValueError
at once, naming the op, rather than producing a file the verifier rejects later.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import flatbuffers

from irtk.vm import calling_convention, isa
from irtk.vm.encoding import encode_operand
from schemas import BYTECODE_MODULE_IDENTIFIER
from schemas import bytecode_module_generated as fb

_BYTE_VECTOR_ALIGNMENT = 16


class _OperandError(ValueError):
    """An operand of the wrong form; `emit` prefixes the op name."""


@dataclass(frozen=True)
class Reg:
    """A typed register: every register operand of `FunctionBuilder.emit`, single or in a
    `regs` list. `emit` checks the bank against the operand's kind."""

    bank: str
    index: int

    def __post_init__(self) -> None:
        if self.bank not in isa.BANKS:
            raise ValueError(f"unknown register bank '{self.bank}'; banks: {', '.join(isa.BANKS)}")


class Label:
    """A branch target; `FunctionBuilder.bind` places it, forward uses are fixed up at finish."""

    __slots__ = ("offset",)

    def __init__(self) -> None:
        self.offset: int | None = None


class FunctionBuilder:
    """Accumulates one function's bytecode, register usage and source locations."""

    def __init__(self) -> None:
        self._code = bytearray()
        self._fixups: list[tuple[int, Label]] = []
        self._used = {bank: 0 for bank in isa.BANKS}
        self._explicit: dict[str, int] = {}
        self._pending_location: str | None = None
        self._last_op: isa.Op | None = None
        self.locations: list[tuple[int, str]] = []

    @property
    def offset(self) -> int:
        return len(self._code)

    def new_label(self) -> Label:
        return Label()

    def bind(self, label: Label) -> None:
        """Place `label` here. Every block must end in a terminator, so when the code before
        would fall through into the label, a `br` to it is emitted first."""
        if label.offset is not None:
            raise ValueError("label is already bound")
        if self._last_op is not None and not self._last_op.is_terminator:
            self.emit("br", label)
        label.offset = len(self._code)

    def location(self, text: str) -> None:
        """Attach a source location ("file:line:col") to the next instruction."""
        self._pending_location = text

    def set_register_counts(self, **counts: int) -> None:
        """Override the register counts derived from the registers used (e.g. to reserve more)."""
        for bank, count in counts.items():
            if bank not in isa.BANKS:
                raise ValueError(f"unknown register bank '{bank}'")
            self._explicit[bank] = count

    def register_counts(self, minimum: dict[str, int] | None = None) -> dict[str, int]:
        """Per-bank register counts: explicit counts win, else highest used + 1 (or `minimum`)."""
        counts = {}
        for bank in isa.BANKS:
            derived = max(self._used[bank], (minimum or {}).get(bank, 0))
            counts[bank] = self._explicit.get(bank, derived)
        return counts

    def emit(self, op_name: str, *operands: Any) -> None:
        """Append one instruction; operands follow the op's kinds in `isa.OPS`. A register
        operand (`i32`, `f32>`, ...) is a `Reg` of that bank, a `regs` operand a list of them,
        `block` a `Label`; immediates and ordinals are plain numbers."""
        try:
            op = isa.lookup(op_name)
        except KeyError as e:
            raise ValueError(str(e.args[0])) from None
        if len(operands) != len(op.operands):
            raise ValueError(f"'{op.name}' takes {len(op.operands)} operands "
                             f"({op.operand_text}), got {len(operands)}")
        start = len(self._code)
        out = bytearray([op.opcode])
        fixups: list[tuple[int, Label]] = []
        for position, (kind, value) in enumerate(zip(op.operands, operands)):
            try:
                out += self._operand(kind, value, start + len(out), fixups)
            except _OperandError as e:
                raise ValueError(f"'{op.name}' operand {position} ({kind}): {e}") from None
            except (TypeError, ValueError, OverflowError, struct.error) as e:
                raise ValueError(f"'{op.name}': bad {kind} operand {value!r}: {e}") from None
        if self._pending_location is not None:
            self.locations.append((start, self._pending_location))
            self._pending_location = None
        self._code += out
        self._fixups.extend(fixups)
        self._last_op = op

    def _operand(self, kind: str, value: Any, pos: int,
                 fixups: list[tuple[int, Label]]) -> bytes:
        bank = kind.rstrip(">")
        if bank in isa.BANKS:
            if not isinstance(value, Reg):
                raise _OperandError(f"expected a Reg in bank {bank}, got {value!r}")
            if value.bank != bank:
                raise _OperandError(f"expected a register in bank {bank}, got one in bank "
                                    f"{value.bank} ({value.bank}:{value.index})")
            if not 0 <= value.index <= 0xFFFF:
                raise _OperandError(f"register index {value.index} is outside [0, 65535]")
            self._use(bank, value.index)
            return encode_operand(kind, value.index)
        if kind == "block":
            if not isinstance(value, Label):
                raise _OperandError(f"expected a Label, got {value!r}")
            fixups.append((pos, value))
            return encode_operand(kind, 0)
        if kind == "blocks":
            labels = list(value)
            if not all(isinstance(label, Label) for label in labels):
                raise _OperandError("a block list holds Label values")
            if len(labels) > 0xFFFF:
                raise _OperandError(f"{len(labels)} blocks do not fit a block list")
            fixups.extend((pos + 2 + 4 * i, label) for i, label in enumerate(labels))
            return encode_operand(kind, [0] * len(labels))
        if kind == "regs":
            pairs = []
            for reg in value:
                if not isinstance(reg, Reg):
                    raise _OperandError(f"register lists hold Reg values, got {reg!r}")
                self._use(reg.bank, reg.index)
                pairs.append((reg.bank, reg.index))
            return encode_operand(kind, pairs)
        if kind in ("imm_i32", "imm_i64"):
            bits = 32 if kind == "imm_i32" else 64
            value = (int(value) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
        return encode_operand(kind, value)

    def _use(self, bank: str, index: int) -> None:
        self._used[bank] = max(self._used[bank], index + 1)

    def finish(self) -> bytes:
        """The bytecode with every label resolved."""
        code = bytearray(self._code)
        for pos, label in self._fixups:
            if label.offset is None:
                raise ValueError("branch to a label that was never bound")
            code[pos:pos + 4] = label.offset.to_bytes(4, "little")
        return bytes(code)


@dataclass
class _Function:
    name: str
    calling_convention: str
    builder: FunctionBuilder | None


class ModuleWriter:
    """Collects a module's parts and serializes them with FlatBuffers (`to_bytes`)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._imports: list[tuple[str, str]] = []
        self._import_ordinals: dict[str, int] = {}
        self._functions: list[_Function] = []
        self._exports: list[tuple[str, int, dict[str, str]]] = []
        self._rodata: list[tuple[str, str, bytes]] = []
        self._globals = {bank: 0 for bank in isa.BANKS}
        self._types: list[str] = []
        self._requirements: list[str] = []
        self._init_function = -1
        self.metadata: dict[str, str] = {}   # ModuleDef.metadata: who built it and how

    def add_import(self, full_name: str, calling_convention_text: str, *,
                   unique: bool = True) -> int:
        """Ordinal of the import `full_name` ("hal.buffer.length"), added once (unless
        `unique` is False: the assembler keeps a module's imports exactly as written)."""
        calling_convention.parse(calling_convention_text)
        if not unique:
            self._import_ordinals.setdefault(full_name, len(self._imports))
            self._imports.append((full_name, calling_convention_text))
            return len(self._imports) - 1
        if full_name in self._import_ordinals:
            ordinal = self._import_ordinals[full_name]
            if self._imports[ordinal][1] != calling_convention_text:
                raise ValueError(f"import '{full_name}' added as {self._imports[ordinal][1]} "
                                 f"and as {calling_convention_text}")
            return ordinal
        self._import_ordinals[full_name] = len(self._imports)
        self._imports.append((full_name, calling_convention_text))
        return len(self._imports) - 1

    def declare_function(self, name: str, calling_convention_text: str) -> int:
        """Reserve an ordinal so calls can precede the body (`define_function`)."""
        if calling_convention.parse(calling_convention_text).is_variadic:
            raise ValueError(f"function '{name}': internal functions cannot be variadic "
                             f"({calling_convention_text})")
        self._functions.append(_Function(name, calling_convention_text, None))
        return len(self._functions) - 1

    def define_function(self, ordinal: int, builder: FunctionBuilder) -> None:
        if self._functions[ordinal].builder is not None:
            raise ValueError(f"function '{self._functions[ordinal].name}' is already defined")
        self._functions[ordinal].builder = builder

    def add_function(self, name: str, calling_convention_text: str,
                     builder: FunctionBuilder) -> int:
        ordinal = self.declare_function(name, calling_convention_text)
        self.define_function(ordinal, builder)
        return ordinal

    def add_export(self, name: str, function_ordinal: int,
                   reflection: dict[str, str] | None = None) -> None:
        self._exports.append((name, function_ordinal, dict(reflection or {})))

    def add_rodata(self, name: str, mime_type: str, data: bytes) -> int:
        self._rodata.append((name, mime_type, bytes(data)))
        return len(self._rodata) - 1

    def add_global(self, bank: str) -> int:
        """Ordinal of a new global within its bank."""
        if bank not in isa.BANKS:
            raise ValueError(f"unknown global bank '{bank}'")
        self._globals[bank] += 1
        return self._globals[bank] - 1

    def add_type(self, name: str, *, unique: bool = True) -> int:
        if not unique:
            self._types.append(name)
            return len(self._types) - 1
        if name not in self._types:
            self._types.append(name)
        return self._types.index(name)

    def add_requirement(self, name: str) -> None:
        if name not in self._requirements:
            self._requirements.append(name)

    def set_init_function(self, ordinal: int) -> None:
        self._init_function = ordinal

    def to_bytes(self) -> bytes:
        """The module file (FlatBuffers, identifier b"IRTK", version BYTECODE_VERSION)."""
        bytecode = bytearray()
        descriptors: list[tuple[int, int, dict[str, int]]] = []
        locations: list[tuple[int, int, str]] = []
        for ordinal, fn in enumerate(self._functions):
            if fn.builder is None:
                raise ValueError(f"function '{fn.name}' was declared but never defined")
            code = fn.builder.finish()
            bytecode += b"\0" * (-len(bytecode) % 4)
            sig = calling_convention.parse(fn.calling_convention)
            need = {bank: sig.arg_banks().count(bank) for bank in isa.BANKS}
            counts = fn.builder.register_counts(need)
            descriptors.append((len(bytecode), len(code), counts))
            locations.extend((ordinal, fn_offset, text) for fn_offset, text in fn.builder.locations)
            bytecode += code
        return _serialize(self, bytes(bytecode), descriptors, locations)


def _byte_vector(builder: flatbuffers.Builder, data: bytes) -> int:
    """A [uint8] vector aligned to 16 bytes (the schema's force_align), written in one copy."""
    builder.StartVector(1, len(data), _BYTE_VECTOR_ALIGNMENT)
    builder.head = builder.head - len(data)
    builder.Bytes[builder.head:builder.head + len(data)] = data
    return builder.EndVector()


def _offsets_vector(builder: flatbuffers.Builder, offsets: list[int]) -> int:
    builder.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        builder.PrependUOffsetTRelative(off)
    return builder.EndVector()


def _strings(builder: flatbuffers.Builder, values: list[str]) -> int:
    return _offsets_vector(builder, [builder.CreateString(v) for v in values])


def _serialize(w: ModuleWriter, bytecode: bytes,
               descriptors: list[tuple[int, int, dict[str, int]]],
               locations: list[tuple[int, int, str]]) -> bytes:
    b = flatbuffers.Builder(1024 + len(bytecode) + sum(len(r[2]) for r in w._rodata))
    rodata = []
    for name, mime, data in w._rodata:
        n, m, d = b.CreateString(name), b.CreateString(mime), _byte_vector(b, data)
        fb.RodataSegmentDefStart(b)
        fb.RodataSegmentDefAddName(b, n)
        fb.RodataSegmentDefAddMimeType(b, m)
        fb.RodataSegmentDefAddData(b, d)
        rodata.append(fb.RodataSegmentDefEnd(b))
    bytecode_vec = _byte_vector(b, bytecode)

    def signature(text: str) -> int:
        s = b.CreateString(text)
        fb.FunctionSignatureDefStart(b)
        fb.FunctionSignatureDefAddCallingConvention(b, s)
        return fb.FunctionSignatureDefEnd(b)

    imports = []
    for full_name, cc in w._imports:
        n, s = b.CreateString(full_name), signature(cc)
        fb.ImportFunctionDefStart(b)
        fb.ImportFunctionDefAddFullName(b, n)
        fb.ImportFunctionDefAddSignature(b, s)
        imports.append(fb.ImportFunctionDefEnd(b))
    def attrs(pairs: dict[str, str]) -> int:
        out = []
        for key, value in pairs.items():
            k, v = b.CreateString(key), b.CreateString(value)
            fb.AttrDefStart(b)
            fb.AttrDefAddKey(b, k)
            fb.AttrDefAddValue(b, v)
            out.append(fb.AttrDefEnd(b))
        return _offsets_vector(b, out)

    exports = []
    for name, ordinal, reflection in w._exports:
        n, r = b.CreateString(name), attrs(reflection)
        fb.ExportFunctionDefStart(b)
        fb.ExportFunctionDefAddLocalName(b, n)
        fb.ExportFunctionDefAddInternalOrdinal(b, ordinal)
        fb.ExportFunctionDefAddReflection(b, r)
        exports.append(fb.ExportFunctionDefEnd(b))
    signatures = [signature(fn.calling_convention) for fn in w._functions]
    descs = []
    for offset, length, counts in descriptors:
        fb.FunctionDescriptorStart(b)
        fb.FunctionDescriptorAddBytecodeOffset(b, offset)
        fb.FunctionDescriptorAddBytecodeLength(b, length)
        fb.FunctionDescriptorAddI32RegisterCount(b, counts["i32"])
        fb.FunctionDescriptorAddI64RegisterCount(b, counts["i64"])
        fb.FunctionDescriptorAddF32RegisterCount(b, counts["f32"])
        fb.FunctionDescriptorAddF64RegisterCount(b, counts["f64"])
        fb.FunctionDescriptorAddRefRegisterCount(b, counts["ref"])
        descs.append(fb.FunctionDescriptorEnd(b))
    fb.GlobalStateDefStart(b)
    fb.GlobalStateDefAddI32Count(b, w._globals["i32"])
    fb.GlobalStateDefAddI64Count(b, w._globals["i64"])
    fb.GlobalStateDefAddF32Count(b, w._globals["f32"])
    fb.GlobalStateDefAddF64Count(b, w._globals["f64"])
    fb.GlobalStateDefAddRefCount(b, w._globals["ref"])
    global_state = fb.GlobalStateDefEnd(b)
    locs = []
    for function, offset, text in locations:
        t = b.CreateString(text)
        fb.LocationDefStart(b)
        fb.LocationDefAddFunction(b, function)
        fb.LocationDefAddBytecodeOffset(b, offset)
        fb.LocationDefAddLocation(b, t)
        locs.append(fb.LocationDefEnd(b))
    names, locs_vec = _strings(b, [fn.name for fn in w._functions]), _offsets_vector(b, locs)
    fb.DebugDatabaseDefStart(b)
    fb.DebugDatabaseDefAddFunctionNames(b, names)
    fb.DebugDatabaseDefAddLocations(b, locs_vec)
    debug = fb.DebugDatabaseDefEnd(b)

    name = b.CreateString(w.name)
    metadata = attrs(w.metadata)
    vectors = (_strings(b, w._requirements), _strings(b, w._types), _offsets_vector(b, imports),
               _offsets_vector(b, exports), _offsets_vector(b, signatures),
               _offsets_vector(b, descs), _offsets_vector(b, rodata))
    fb.ModuleDefStart(b)
    fb.ModuleDefAddName(b, name)
    fb.ModuleDefAddVersion(b, isa.BYTECODE_VERSION)
    fb.ModuleDefAddRequirements(b, vectors[0])
    fb.ModuleDefAddTypes(b, vectors[1])
    fb.ModuleDefAddImportedFunctions(b, vectors[2])
    fb.ModuleDefAddExportedFunctions(b, vectors[3])
    fb.ModuleDefAddFunctionSignatures(b, vectors[4])
    fb.ModuleDefAddFunctionDescriptors(b, vectors[5])
    fb.ModuleDefAddBytecodeData(b, bytecode_vec)
    fb.ModuleDefAddRodataSegments(b, vectors[6])
    fb.ModuleDefAddGlobalState(b, global_state)
    fb.ModuleDefAddInitFunction(b, w._init_function)
    fb.ModuleDefAddDebugDatabase(b, debug)
    fb.ModuleDefAddMetadata(b, metadata)
    b.Finish(fb.ModuleDefEnd(b), file_identifier=BYTECODE_MODULE_IDENTIFIER)
    return bytes(b.Output())
