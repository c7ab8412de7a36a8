"""Generates the tables in docs/vm.md from the op table and the `hal` module's export table.

    python -m irtk.vm.docgen            # rewrite the generated sections of docs/vm.md
    python -m irtk.vm.docgen --check    # exit 1 if they are stale (the tests do this too)

Each generated section sits between `<!-- BEGIN name -->` and `<!-- END name -->` markers, so the
hand-written prose around it is kept.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from irtk.vm import isa

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "vm.md"


def render_ops() -> str:
    lines = ["| opcode | op | operands | semantics |", "|---|---|---|---|"]
    for op in isa.OPS:
        operands = " ".join(f"`{k}`" for k in op.operands) or "—"
        doc = op.doc.replace("|", "\\|") + (" (terminator)" if op.is_terminator else "")
        lines.append(f"| 0x{op.opcode:02X} | `{op.name}` | {operands} | {doc} |")
    return "\n".join(lines)


def render_hal_imports() -> str:
    from irtk.modules.hal import HalModule
    lines = ["| import | calling convention | notes |", "|---|---|---|"]
    for f in HalModule.EXPORTS:
        lines.append(f"| `hal.{f.name}` | `{f.calling_convention}` | "
                     f"{'yieldable' if f.yieldable else ''} |")
    return "\n".join(lines)


SECTIONS = {"OPS": render_ops, "HAL IMPORTS": render_hal_imports}


def update(text: str) -> str:
    """`text` with every generated section re-rendered."""
    for name, render in SECTIONS.items():
        pattern = re.compile(rf"(<!-- BEGIN {name} -->\n)(.*?\n)?(<!-- END {name} -->)", re.S)
        if not pattern.search(text):
            raise ValueError(f"docs/vm.md lacks the '{name}' markers")
        text = pattern.sub(lambda m: m.group(1) + render() + "\n" + m.group(3), text)
    return text


def main(argv: list[str]) -> int:
    current = DOC_PATH.read_text(encoding="utf-8")
    fresh = update(current)
    if "--check" in argv:
        if fresh != current:
            print("docs/vm.md is stale: run python -m irtk.vm.docgen", file=sys.stderr)
            return 1
        return 0
    if fresh != current:
        DOC_PATH.write_text(fresh, encoding="utf-8")
        print(f"updated {DOC_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
