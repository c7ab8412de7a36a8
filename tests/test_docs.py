"""The docs' examples run: each Python block of docs/python.md, in order, in one namespace (a
block may use what an earlier one defined)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", path.read_text(), re.S | re.M)


def test_the_python_api_examples_run():
    blocks = python_blocks(ROOT / "docs" / "python.md")
    assert len(blocks) >= 6
    namespace: dict[str, object] = {}
    for i, block in enumerate(blocks):
        code = compile(block, f"docs/python.md (example {i + 1})", "exec")
        exec(code, namespace)  # noqa: S102 - the project's own documentation
