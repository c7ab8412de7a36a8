"""The reader finds entry points, disassembles like SPIRV-Tools, and rejects bad input cleanly."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from spirv import (
    AddressingModel,
    Capability,
    EntryPoint,
    ExecutionMode,
    ExecutionModel,
    MemoryModel,
    ModuleBuilder,
    Op,
    SpirvError,
    SpirvParseError,
    disassemble,
    entry_points,
    parse,
    tools,
)

if TYPE_CHECKING:
    from conftest import ComputeShader


def _words(binary: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(binary) // 4}I", binary))


def _code_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith(";")]


def test_entry_points_report_name_model_and_local_size(shader: ComputeShader) -> None:
    assert entry_points(shader.binary) == [
        EntryPoint(ExecutionModel.GLCompute, "main", shader.main, (64, 1, 1), (shader.gid,))
    ]


def test_local_size_follows_the_execution_mode(make_shader: Callable[..., ComputeShader]) -> None:
    (ep,) = entry_points(make_shader(local_size=(8, 4, 2)).binary)
    assert ep.local_size == (8, 4, 2)


def test_local_size_id_is_resolved_from_its_constants() -> None:
    b = ModuleBuilder(version=(1, 2))
    b.capability(Capability.Shader)
    b.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
    void, u32 = b.type_void(), b.type_int(32, False)
    fn_type = b.type_function(void)
    fns = []
    for name in ("with_id", "without_size"):
        fn = b.begin_function(void, fn_type)
        b.label()
        b.op_void(Op.Return)
        b.end_function()
        b.entry_point(ExecutionModel.GLCompute, fn, name)
        fns.append(fn)
    sizes = [b.constant(u32, n) for n in (32, 2, 1)]
    b.op_void(Op.ExecutionModeId, fns[0], ExecutionMode.LocalSizeId, *sizes)
    tools.validate(b.to_bytes(), "spv1.2")
    assert [(ep.name, ep.function_id, ep.local_size) for ep in entry_points(b.to_bytes())] == [
        ("with_id", fns[0], (32, 2, 1)),
        ("without_size", fns[1], None),
    ]


def test_disassembly_matches_spirv_tools_line_for_line(shader: ComputeShader) -> None:
    ours = disassemble(shader.binary)
    assert _code_lines(ours) == _code_lines(tools.disassemble(shader.binary))
    assert f"OpExecutionMode %{shader.main} LocalSize 64 1 1" in ours
    assert 'OpExtInstImport "GLSL.std.450"' in ours
    assert "BuiltIn GlobalInvocationId" in ours
    assert "OpSelectionMerge" in ours and " Exp " in ours


def test_disassembly_reassembles_to_the_same_module(shader: ComputeShader) -> None:
    again = _words(tools.assemble(disassemble(shader.binary)))
    original = _words(shader.binary)
    assert again[:2] + again[3:] == original[:2] + original[3:]


def test_friendly_names_use_op_name(shader: ComputeShader) -> None:
    text = disassemble(shader.binary, friendly_names=True)
    assert "%main = OpFunction" in text
    assert "OpDecorate %src NonWritable" in text


def test_switch_literals_follow_the_selector_width() -> None:
    b = ModuleBuilder()
    for cap in (Capability.Shader, Capability.Linkage, Capability.Int64):
        b.capability(cap)
    b.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
    void, i64 = b.type_void(), b.type_int(64, True)
    b.begin_function(void, b.type_function(void))
    b.label()
    selector = b.constant(i64, -5)
    default, case, merge = b.new_id(), b.new_id(), b.new_id()
    b.op_void(Op.SelectionMerge, merge, 0)
    b.op_void(Op.Switch, selector, default, [0xFFFFFFFB, 0xFFFFFFFF], case)  # case -5 as two words
    for label in (default, case):
        b.label(label)
        b.op_void(Op.Branch, merge)
    b.label(merge)
    b.op_void(Op.Return)
    b.end_function()
    data = b.to_bytes()
    tools.validate(data, "spv1.3")
    text = disassemble(data)
    assert f"OpSwitch %{selector} %{default} -5 %{case}" in text
    assert _code_lines(text) == _code_lines(tools.disassemble(data, "spv1.3"))


def test_big_endian_modules_read_the_same(shader: ComputeShader) -> None:
    swapped = struct.pack(f">{len(shader.binary) // 4}I", *_words(shader.binary))
    assert parse(swapped) == parse(shader.binary)
    assert entry_points(swapped) == entry_points(shader.binary)


def test_word_lists_are_accepted_too(shader: ComputeShader) -> None:
    assert parse(_words(shader.binary)) == parse(shader.binary)


def _replace(words: list[int], index: int, value: int) -> bytes:
    changed = list(words)
    changed[index] = value
    return struct.pack(f"<{len(changed)}I", *changed)


def _first(shader: ComputeShader, opcode: Op) -> int:
    return next(i.offset for i in parse(shader.binary).instructions if i.opcode == opcode)


@pytest.mark.parametrize(
    ("mangle", "message", "offset"),
    [
        (lambda w, s: b"", "fewer than the 5-word header", 0),
        (lambda w, s: s.binary[:18], "not a multiple of 4", 4),
        (lambda w, s: _replace(w, 0, 0xDEADBEEF), "bad magic", 0),
        (lambda w, s: _replace(w, 5, 0), "word count 0", 5),
        (lambda w, s: _replace(w, 5, (0xFFFF << 16) | Op.Capability), "only", 5),
    ],
)
def test_malformed_framing_raises_with_the_word_offset(
    shader: ComputeShader, mangle: Callable[[list[int], ComputeShader], bytes], message: str, offset: int
) -> None:
    with pytest.raises(SpirvParseError, match=message) as info:
        parse(mangle(_words(shader.binary), shader))
    assert info.value.offset == offset
    assert f"word offset {offset}" in str(info.value)


def test_ids_beyond_the_bound_are_rejected(shader: ComputeShader) -> None:
    words = _words(shader.binary)
    words[3] = shader.main  # bound too small for the ids that follow
    with pytest.raises(SpirvParseError, match="out of range"):
        disassemble(struct.pack(f"<{len(words)}I", *words))


def test_unterminated_string_is_rejected(shader: ComputeShader) -> None:
    words = _words(shader.binary)
    at = _first(shader, Op.ExtInstImport)  # "GLSL.std.450" = 12 bytes + NUL pad word
    words[at + 5] = 0x41414141
    with pytest.raises(SpirvParseError, match="NUL-terminated") as info:
        disassemble(struct.pack(f"<{len(words)}I", *words))
    assert info.value.offset >= at


def test_missing_and_trailing_operands_are_rejected(shader: ComputeShader) -> None:
    words = _words(shader.binary)
    at = _first(shader, Op.MemoryModel)
    words[at] = (2 << 16) | Op.MemoryModel  # drop the memory model operand
    short = list(words)
    short.pop(at + 2)
    with pytest.raises(SpirvParseError, match="missing"):
        disassemble(short)
    words[at] = (4 << 16) | Op.MemoryModel  # swallow the next instruction's first word
    with pytest.raises(SpirvParseError, match="trailing|missing|out of range|count"):
        disassemble(words)


def _mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        if choice < 0.4 and buf:
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        elif choice < 0.6 and len(buf) > 24:
            pos = rng.randrange(20, len(buf) - 3) & ~3
            buf[pos : pos + 4] = rng.getrandbits(32).to_bytes(4, "little")
        elif choice < 0.75:
            del buf[rng.randrange(len(buf) + 1) :]
        elif choice < 0.9:
            pos = rng.randrange(len(buf) + 1)
            buf[pos:pos] = rng.randbytes(rng.choice([1, 4, 8]))
        else:
            pos = rng.randrange(5, max(6, len(buf) // 4)) * 4
            buf[pos : pos + 2] = rng.randrange(0x10000).to_bytes(2, "little")
    return bytes(buf)


def test_mutated_modules_raise_only_spirv_errors(shader: ComputeShader, rng: random.Random) -> None:
    outcomes = {"ok": 0, "error": 0}
    for _ in range(1500):
        data = _mutate(shader.binary, rng)
        for read in (parse, entry_points, disassemble):
            try:
                read(data)
                outcomes["ok"] += 1
            except SpirvError:
                outcomes["error"] += 1
    assert outcomes["ok"] and outcomes["error"]  # the mutations exercise both paths


def test_float_constants_reassemble_bit_exactly_including_nan_and_infinity() -> None:
    b = ModuleBuilder()
    for cap in (Capability.Shader, Capability.Linkage, Capability.Float64, Capability.Float16):
        b.capability(cap)
    b.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
    f16, f32, f64 = b.type_float(16), b.type_float(32), b.type_float(64)
    for value in (float("inf"), float("-inf"), float("nan"), 0.1, -0.0, 1e-40, 65504.0):
        for t in (f16, f32, f64):
            b.constant(t, value)
    b.op(Op.Constant, f32, 0x7FC00001)  # a NaN with a payload
    data = b.to_bytes()
    text = disassemble(data)
    for spelling in ("0x1p+128", "-0x1p+128", "0x1.8p+128", "0x1.800002p+128", "0x1p+1024", "0x1p+16"):
        assert f" {spelling}\n" in text
    again = _words(tools.assemble(text, "spv1.3"))
    assert again[3:] == _words(data)[3:]
