"""Mangled module files raise irtk errors only: never a Python exception, a crash or a hang.

Each input goes through `fuzzing.exercise`: load (parse, verify), link, decode, run `__init`
and every export (with a step limit), disassemble, and reassemble the disassembly. The sample
module uses every part of the format (imports incl. variadic and yieldable ones, exports with
reflection, rodata, globals of every bank, `__init`, strings, locations, types, br_table,
lists, buffers). Hypothesis runs are derandomized so failures reproduce; files that ever
escaped are kept in `corpus/` and replayed here.
"""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from irtk.errors import ParseError
from irtk.vm import Context, load_module
from irtk.vm.assembler import assemble
from irtk.vm.disassembler import disassemble_module
from tests.vm.fuzzing import (CORPUS, HAL_SAMPLE, HAL_SAMPLE_TEXT, SAMPLE, SAMPLE_TEXT, Sink,
                              exercise, exercise_text, hal_natives, mutate_text)

CORPUS_FILES = sorted(CORPUS.glob("*.vmfb")) + sorted(CORPUS.glob("*.vmasm"))


def test_sample_module_is_valid_and_runs():
    ctx = Context(load_module(SAMPLE), [Sink()])
    assert ctx.call("main", [0, 0]) == [2]
    assert ctx.call("data") == [-1]   # the i16 load of -2 plus the compare's 1
    assert "sink.put" in disassemble_module(SAMPLE)
    exercise(SAMPLE)


def test_hal_sample_runs_a_dispatch_on_the_in_memory_device():
    natives, view = hal_natives()
    (result,) = Context(load_module(HAL_SAMPLE), natives).call("main", [view])
    assert result.to_numpy().tolist() == [1.0, 1.0, 1.0, 1.0]   # the recorded fill of 1.0f
    exercise(HAL_SAMPLE, with_hal=True)


def test_the_sample_uses_every_part_of_the_format():
    for fragment in ("type ", "import ", "rodata ", "globals i32 1, i64 1, f32 1, f64 1, ref 1",
                     "init ", "{abi.args", "loc(", "br_table", "call.import.variadic",
                     "@sink.wait", "cmp.type.ref", "list.", "buffer.", "fail", "discard.refs"):
        assert fragment in SAMPLE_TEXT, fragment


FUZZ = settings(max_examples=150, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(SAMPLE) - 1), st.integers(1, 255)),
                min_size=1, max_size=6))
def test_byte_flips_raise_only_irtk_errors(flips):
    data = bytearray(SAMPLE)
    for position, mask in flips:
        data[position] ^= mask
    exercise(bytes(data))


@FUZZ
@given(st.integers(0, len(SAMPLE) - 1))
def test_truncations_raise_only_irtk_errors(length):
    exercise(SAMPLE[:length])


@FUZZ
@given(st.integers(0, len(SAMPLE) - 1), st.integers(0, len(SAMPLE) - 1), st.integers(1, 16))
def test_spliced_byte_runs_raise_only_irtk_errors(source, target, length):
    data = bytearray(SAMPLE)
    chunk = data[source:source + length]
    data[target:target + len(chunk)] = chunk
    exercise(bytes(data))


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(HAL_SAMPLE) - 1), st.integers(1, 255)),
                min_size=1, max_size=4))
def test_byte_flips_of_a_hal_program_raise_only_irtk_errors(flips):
    data = bytearray(HAL_SAMPLE)
    for position, mask in flips:
        data[position] ^= mask
    exercise(bytes(data), with_hal=True)


@FUZZ
@given(st.integers(0, 2 ** 32 - 1))
def test_mangled_assembly_text_raises_only_parse_errors(seed):
    rng = random.Random(seed)
    exercise_text(mutate_text(HAL_SAMPLE_TEXT if seed % 2 else SAMPLE_TEXT, rng))


@pytest.mark.slow
@pytest.mark.parametrize("value", [0x00, 0xFF, 0x7F, 0x80])
def test_every_byte_set_to_an_extreme_raises_only_irtk_errors(value):
    for position in range(value % 5, len(SAMPLE), 5):
        data = bytearray(SAMPLE)
        data[position] = value
        exercise(bytes(data))


@pytest.mark.parametrize("path", CORPUS_FILES, ids=[p.name for p in CORPUS_FILES])
def test_corpus_files_that_once_escaped_now_raise_only_irtk_errors(path):
    """Module files replay through `exercise` (`hal-*` with the hal module linked); assembly
    files must be refused with a ParseError naming the place."""
    if path.suffix == ".vmasm":
        with pytest.raises(ParseError, match=r"^<assembly>:\d+:\d+: error: "):
            assemble(path.read_text(encoding="utf-8"))
    else:
        exercise(path.read_bytes(), with_hal=path.name.startswith("hal-"))


def test_the_corpus_is_kept():
    assert CORPUS_FILES, "tests/vm/corpus holds the mangled files that found bugs"
