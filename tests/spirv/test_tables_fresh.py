"""spirv/tables.py must be exactly what the generator makes from the installed grammar."""

from __future__ import annotations

from pathlib import Path

import pytest

from spirv import tables
from spirv.grammar import generate_tables


def test_committed_tables_match_a_fresh_generation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(generate_tables.GRAMMAR_ENV, raising=False)
    monkeypatch.delenv(generate_tables.TOOLS_INCLUDE_ENV, raising=False)
    out = tmp_path / "tables.py"
    assert generate_tables.main(["--out", str(out)]) == 0
    committed = Path(tables.__file__).read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8") == committed, (
        "spirv/tables.py is stale: run `python -m spirv.grammar.generate_tables` and commit it"
    )


def test_aliases_share_the_first_enumerant() -> None:
    assert tables.Op.SDotKHR is tables.Op.SDot
    assert tables.MemorySemantics.None_ is tables.MemorySemantics.Relaxed
    assert tables.StorageClass.CallableDataNV is tables.StorageClass.CallableDataKHR
    assert tables.StorageClass(5328).name == "CallableDataKHR"


def test_enumerants_with_extra_operands_are_listed() -> None:
    literal = ("LiteralInteger", "")
    assert tables.ENUMERANT_OPERANDS["ExecutionMode"][tables.ExecutionMode.LocalSize] == (literal,) * 3
    assert tables.ENUMERANT_OPERANDS["Decoration"][tables.Decoration.ArrayStride] == (literal,)
    assert tables.ENUMERANT_OPERANDS["MemoryAccess"][tables.MemoryAccess.Aligned] == (literal,)
    assert tables.Decoration.Block not in tables.ENUMERANT_OPERANDS["Decoration"]


def test_instruction_layouts_come_from_the_grammar() -> None:
    name, operands = tables.INSTRUCTIONS[tables.Op.FAdd]
    assert name == "OpFAdd"
    assert [kind for kind, _ in operands] == ["IdResultType", "IdResult", "IdRef", "IdRef"]
    assert tables.INSTRUCTIONS[tables.Op.EntryPoint][1][-1] == ("IdRef", "*")
    assert tables.INSTRUCTION_CLASSES[tables.Op.TypeInt] == "Type-Declaration"


def test_bit_enums_are_flags_and_value_enums_are_not() -> None:
    assert issubclass(tables.MemoryAccess, tables.IntFlag)
    assert tables.MemoryAccess.Volatile | tables.MemoryAccess.Aligned == 3
    assert not issubclass(tables.StorageClass, tables.IntFlag)
    assert tables.Dim.Dim2D == 1 and tables.RENAMED_ENUMERANTS["Dim"]["Dim2D"] == "2D"
    assert tables.GLSLstd450.Exp == 27
    assert tables.MAGIC == 0x07230203
