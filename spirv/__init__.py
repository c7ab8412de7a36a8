"""SPIR-V for irtk: a binary module builder, a reader/disassembler and SPIRV-Tools.

Self-contained on purpose (it imports nothing from irtk) so the Vulkan codegen,
the runtime and tests can all share it. Names are imported lazily: the table
generator (``python -m spirv.grammar.generate_tables``) must run even when the
committed ``spirv/tables.py`` is stale or missing, so importing the package
must not import the tables.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import SpirvBuildError, SpirvError, SpirvParseError, SpirvValidationError

_SUBMODULES = frozenset({"binary", "builder", "errors", "reader", "reflect", "tables", "tools"})
_NAMES = {
    "ModuleBuilder": "builder",
    "EntryPoint": "reader",
    "Header": "reader",
    "Instruction": "reader",
    "Module": "reader",
    "disassemble": "reader",
    "entry_points": "reader",
    "parse": "reader",
    **{
        name: "tables"
        for name in (
            "INSTRUCTIONS",
            "AddressingModel",
            "BuiltIn",
            "Capability",
            "Decoration",
            "Dim",
            "ExecutionMode",
            "ExecutionModel",
            "FunctionControl",
            "GLSLstd450",
            "GroupOperation",
            "LoopControl",
            "MemoryAccess",
            "MemoryModel",
            "MemorySemantics",
            "Op",
            "Scope",
            "SelectionControl",
            "SourceLanguage",
            "StorageClass",
        )
    },
}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    elif name in _NAMES:
        value = getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from . import tables, tools
    from .builder import ModuleBuilder
    from .reader import EntryPoint, Header, Instruction, Module, disassemble, entry_points, parse
    from .tables import (
        INSTRUCTIONS,
        AddressingModel,
        BuiltIn,
        Capability,
        Decoration,
        Dim,
        ExecutionMode,
        ExecutionModel,
        FunctionControl,
        GLSLstd450,
        GroupOperation,
        LoopControl,
        MemoryAccess,
        MemoryModel,
        MemorySemantics,
        Op,
        Scope,
        SelectionControl,
        SourceLanguage,
        StorageClass,
    )

__all__ = sorted(
    {*_NAMES, "tables", "tools", "SpirvBuildError", "SpirvError", "SpirvParseError", "SpirvValidationError"}
)
