"""Regression corpus: small programs that once crashed the front end (most found by
test_fuzz.py) or that break linalg's rules. Each file's first line says what must happen:

    // expect-error: LINE:COL: TEXT

`parse_program` must raise an irtk.Error whose message starts with `NAME:LINE:COL: error:` and
contains TEXT, or, for a function-level problem, record that message in Program.unsupported.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import irtk
from irtk.compiler.frontend import parse_program

CORPUS = Path(__file__).parent / "corpus"
FILES = sorted(p.name for p in CORPUS.glob("*.mlir"))
EXPECT = re.compile(r"// expect-error: (\d+):(\d+): (.+)")


def test_the_corpus_is_there():
    assert len(FILES) >= 10


@pytest.mark.parametrize("name", FILES)
def test_corpus_file_gives_a_located_error(name):
    text = (CORPUS / name).read_text()
    m = EXPECT.match(text)
    assert m, f"{name} lacks its '// expect-error: LINE:COL: TEXT' first line"
    line, col, fragment = m.groups()
    try:
        program = parse_program(text, name)
    except irtk.Error as e:
        message = str(e)
    else:
        assert program.unsupported, f"{name} imported without an error"
        message = next(iter(program.unsupported.values()))
    assert message.startswith(f"{name}:{line}:{col}: error: "), message
    assert fragment in message, message
    assert "internal error" not in message, message
