"""Fuzzing the front end: mangled conformance programs (mutations.py) must either import or
fail with an irtk.Error that starts with `file:line:col: error:`; never another exception, an
"internal error" record, or a hang. Inputs that found bugs live on in corpus/ (test_corpus.py).
"""
from __future__ import annotations

import re
import signal
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import irtk
from irtk.compiler.frontend import parse_program
from tests.compiler.frontend import mutations, suite

LOCATED = re.compile(r"fuzz\.mlir:\d+:\d+: error: \S")
FRONTEND = str(Path(irtk.__file__).parent / "compiler" / "frontend")


class Hang(Exception):
    pass


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def expire(*_: object) -> None:
        raise Hang(f"no answer within {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@st.composite
def mangled(draw: st.DrawFn, max_mutations: int = 3) -> str:
    text = suite.read(draw(st.sampled_from(suite.files())))
    for _ in range(draw(st.integers(1, max_mutations))):
        mutation = draw(st.sampled_from(mutations.MUTATIONS))
        text = mutation(text, lambda n: draw(st.integers(0, max(n - 1, 0))))
    return text


def check_front_end(text: str) -> None:
    """The front end's contract on any input text."""
    with time_limit(30):
        try:
            program = parse_program(text, "fuzz.mlir")
        except irtk.Error as e:
            assert LOCATED.match(str(e)), f"not located: {e}"
            return
    for name, message in program.unsupported.items():
        assert LOCATED.match(message), f"@{name}: not located: {message}"
        assert "internal error" not in message, f"@{name}: {message}"


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(mangled())
def test_mangled_programs_fail_cleanly(text):
    check_front_end(text)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(mangled(max_mutations=5))
def test_many_mangled_programs_fail_cleanly(text):
    check_front_end(text)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(mangled())
def test_compile_str_fails_cleanly_in_the_front_end(text):
    """Through the public API: an exception that is not an irtk.Error must not come from the
    front end (later phases have their own tests)."""
    with time_limit(60):
        try:
            irtk.compile_str(text, target="cpu", filename="fuzz.mlir")
        except irtk.Error:
            pass
        except Exception as e:  # noqa: BLE001 - classified by where it was raised
            where = traceback.extract_tb(e.__traceback__)[-1].filename
            assert not where.startswith(FRONTEND), "".join(traceback.format_exception(e))
