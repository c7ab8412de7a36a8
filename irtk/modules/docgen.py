"""Generates the tables in docs/vm.md: the instruction set, the ref types and the `hal` imports.

    python -m irtk.modules.docgen            # rewrite the generated sections of docs/vm.md
    python -m irtk.modules.docgen --check    # exit 1 if they are stale (the tests do this too)

It lives here, not in `irtk.vm`, because the VM knows no native module: this is the layer that
sees both the VM and the modules whose imports and ref types the page documents.
"""
from __future__ import annotations

import sys
from pathlib import Path

from irtk.modules.hal import HalModule
from irtk.vm import docgen
from irtk.vm.refs import VM_TYPES

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "vm.md"
COMMAND = "python -m irtk.modules.docgen"

SECTIONS: docgen.Sections = {
    "OPS": docgen.render_ops,
    "REF TYPES": lambda: docgen.render_ref_types(
        [("the VM", VM_TYPES), (f"`{HalModule.name}` module", HalModule.REF_TYPES)]),
    "HAL IMPORTS": lambda: docgen.render_imports(HalModule),
}


def update(text: str) -> str:
    """`text` (docs/vm.md) with every generated section re-rendered."""
    return docgen.update(text, SECTIONS)


if __name__ == "__main__":
    raise SystemExit(docgen.main(sys.argv[1:], DOC_PATH, SECTIONS, COMMAND))
