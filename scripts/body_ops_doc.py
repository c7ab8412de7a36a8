"""Generates the op table of docs/body_ops.md from `irtk.body_ops` and every backend's claims.

    python scripts/body_ops_doc.py            # rewrite the generated section
    python scripts/body_ops_doc.py --check    # exit 1 if it is stale (the tests do this too)

It sits outside the packages because it reads all three backends (the numpy executor of
hal_cpu, the SPIR-V generator and the VM code generator), which no package may import together.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hal_cpu.native_ops import NATIVE  # noqa: E402
from hal_cpu.ops import NUMPY  # noqa: E402
from irtk import body_ops  # noqa: E402
from irtk.body_ops import Backend  # noqa: E402
from irtk.compiler.codegen.spirv import SPIRV_OPS  # noqa: E402
from irtk.compiler.host_arith import HOST_OPS  # noqa: E402
from irtk.types import SCALAR_TYPE_NAMES  # noqa: E402
from irtk.vm import docgen  # noqa: E402

DOC_PATH = ROOT / "docs" / "body_ops.md"
COMMAND = "python scripts/body_ops_doc.py"
BACKENDS: tuple[tuple[str, Backend], ...] = (("cpu", NUMPY), ("cpu native", NATIVE),
                                              ("vulkan-spirv", SPIRV_OPS),
                                              ("host (VM)", HOST_OPS))


def _key(operands: tuple[str, ...], result: str) -> str:
    """The type a signature is named by: its first operand's (the result's for constants)."""
    return operands[0] if operands else result


def _names(types: list[str]) -> str:
    return ", ".join(sorted(types, key=SCALAR_TYPE_NAMES.index))


def coverage(backend: Backend, name: str) -> str:
    """Which of the op's signatures `backend` implements, named by their first type."""
    if body_ops.OPS[name].rule.name == "executor":
        return "yes" if name in backend.names else "—"
    signatures = list(body_ops.signatures(name))
    claimed = [s for s in signatures if backend.supports(name, *s)]
    if len(claimed) == len(signatures):
        return "all"
    if not claimed:
        return "—"
    keys = {_key(*s) for s in signatures}
    full = {k for k in keys if all(s in claimed for s in signatures if _key(*s) == k)}
    partial = {_key(*s) for s in claimed} - full
    missing = keys - full - partial
    parts = []
    if full:
        parts.append(f"all but {_names(list(missing | partial))}" if len(full) > len(missing)
                     else _names(list(full)))
    if partial:
        parts.append(f"partly {_names(list(partial))}")
    return "; ".join(parts)


def render() -> str:
    """One row per run of ops declared together that every backend covers alike."""
    head = "| ops | types | meaning | " + " | ".join(b for b, _ in BACKENDS) + " |"
    lines = [head, "|" + "---|" * (3 + len(BACKENDS))]
    rows: list[tuple[list[str], tuple[str, ...]]] = []
    for op in body_ops.OPS.values():
        meaning = op.semantics.replace("|", "\\|")
        if op.attributes:
            meaning += f" (reads `{op.attributes}`)"
        cells = (f"`{op.rule.text}`", meaning,
                 *(coverage(backend, op.name) for _, backend in BACKENDS))
        if rows and rows[-1][1] == cells:
            rows[-1][0].append(op.name)
        else:
            rows.append(([op.name], cells))
    for names, cells in rows:
        lines.append("| " + " ".join(f"`{n}`" for n in names) + " | " + " | ".join(cells) + " |")
    return "\n".join(lines)


SECTIONS: docgen.Sections = {"BODY OPS": render}


def update(text: str) -> str:
    return docgen.update(text, SECTIONS)


if __name__ == "__main__":
    raise SystemExit(docgen.main(sys.argv[1:], DOC_PATH, SECTIONS, COMMAND))
