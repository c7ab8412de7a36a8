"""A loaded module file as plain Python data (what the loader reads out of the FlatBuffer).

Reading FlatBuffers lazily would let a mangled offset surface anywhere; the loader copies every
table into these records once, under one error handler, and keeps only byte ranges (bytecode,
rodata) as zero-copy views of the mapped file.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from irtk.vm.calling_convention import Signature
from irtk.vm.encoding import Instr


@dataclass
class ImportDef:
    full_name: str
    calling_convention: str
    signature: Signature | None = None     # set by the verifier


@dataclass
class ExportDef:
    name: str
    function: int
    reflection: dict[str, str]


@dataclass
class RodataSegment:
    name: str
    mime_type: str
    data: memoryview


@dataclass
class FunctionDef:
    name: str
    calling_convention: str
    bytecode_offset: int
    code: memoryview
    register_counts: dict[str, int]
    signature: Signature | None = None     # set by the verifier
    instructions: list[Instr] | None = None  # decoded, set by the verifier


@dataclass
class BytecodeModule:
    """A verified module, ready to be instantiated by `irtk.vm.Context`."""

    name: str
    version: int
    requirements: list[str]
    types: list[str]
    imports: list[ImportDef]
    exports: list[ExportDef]
    functions: list[FunctionDef]
    rodata: list[RodataSegment]
    global_counts: dict[str, int]
    init_function: int
    locations: dict[tuple[int, int], str] = field(default_factory=dict)
    backing: Any = None   # the mmap (or bytes) the views above point into; kept alive here
    metadata: dict[str, str] = field(default_factory=dict)   # who built it (informational)

    def export(self, name: str) -> ExportDef | None:
        for e in self.exports:
            if e.name == name:
                return e
        return None

    def location(self, function: int, offset: int) -> str | None:
        """The source location recorded for an instruction, if any."""
        return self.locations.get((function, offset))
