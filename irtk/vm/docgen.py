"""Renders documentation tables from the VM's data: the op table, a native module's exports and
ref types; and rewrites the generated sections of a document.

Each generated section sits between `<!-- BEGIN name -->` and `<!-- END name -->` markers, so the
hand-written prose around it is kept. Which document holds which sections is decided where the
things documented are all known: `irtk.modules.docgen` writes docs/vm.md (the VM knows no
native module).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Callable, Iterable, Mapping

from irtk.vm import isa
from irtk.vm.native_module import NativeModule
from irtk.vm.ref_types import RefType, qualified_name

Sections = Mapping[str, Callable[[], str]]


def render_ops() -> str:
    lines = ["| opcode | op | operands | semantics |", "|---|---|---|---|"]
    for op in isa.OPS:
        operands = " ".join(f"`{k}`" for k in op.operands) or "—"
        doc = op.doc.replace("|", "\\|") + (" (terminator)" if op.is_terminator else "")
        lines.append(f"| 0x{op.opcode:02X} | `{op.name}` | {operands} | {doc} |")
    return "\n".join(lines)


def render_imports(module: type[NativeModule]) -> str:
    """The table of a native module's exports as bytecode imports them."""
    lines = ["| import | calling convention | notes |", "|---|---|---|"]
    for f in module.EXPORTS:
        lines.append(f"| `{module.name}.{f.name}` | `{f.calling_convention}` | "
                     f"{'yieldable' if f.yieldable else ''} |")
    return "\n".join(lines)


def render_ref_types(owners: Iterable[tuple[str, Iterable[RefType]]]) -> str:
    """The table of ref types, each with who registers it and the classes that carry it."""
    lines = ["| type | registered by | carried by |", "|---|---|---|"]
    for owner, types in owners:
        for t in types:
            classes = ", ".join(f"`{qualified_name(c)}`" for c in t.classes)
            lines.append(f"| `{t.name}` | {owner} | {classes} |")
    return "\n".join(lines)


def update(text: str, sections: Sections) -> str:
    """`text` with every generated section re-rendered."""
    for name, render in sections.items():
        pattern = re.compile(rf"(<!-- BEGIN {name} -->\n)(.*?\n)?(<!-- END {name} -->)", re.S)
        if not pattern.search(text):
            raise ValueError(f"the document lacks the '{name}' markers")
        text = pattern.sub(lambda m: m.group(1) + render() + "\n" + m.group(3), text)
    return text


def main(argv: list[str], path: Path, sections: Sections, command: str) -> int:
    """Rewrite the generated sections of `path`; with `--check`, exit 1 if they are stale."""
    current = path.read_text(encoding="utf-8")
    fresh = update(current, sections)
    if "--check" in argv:
        if fresh != current:
            print(f"{path.name} is stale: run {command}", file=sys.stderr)
            return 1
        return 0
    if fresh != current:
        path.write_text(fresh, encoding="utf-8")
        print(f"updated {path}")
    return 0
