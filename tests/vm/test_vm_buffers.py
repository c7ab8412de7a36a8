"""`buffer.*` ops on random data, checked against numpy and struct; their traps."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from irtk.errors import RuntimeFailure
from irtk.vm import VMBuffer
from tests.vm.helpers import run_asm

HEADER = ('module @m\nexport @main = @main\n'
          'rodata @ro "application/octet-stream" x"0102030405060708"\n')


def program(cc: str, body: str) -> str:
    return HEADER + f'func @main "{cc}" {{\n{body}\n}}\n'


def random_buffer(rng: np.random.Generator, size: int) -> VMBuffer:
    return VMBuffer(bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes()),
                    readonly=False)


@pytest.mark.parametrize("op, fmt", [("buffer.load.i8.s", "<b"), ("buffer.load.i8.u", "<B"),
                                     ("buffer.load.i16.s", "<h"), ("buffer.load.i16.u", "<H"),
                                     ("buffer.load.i32", "<i")])
def test_narrow_and_word_loads_extend_as_named(op, fmt):
    rng = np.random.default_rng(11)
    buf = random_buffer(rng, 64)
    text = program("0rI_i", f"    i32:0 = {op} ref:0, i64:0\n    return (i32:0)")
    for offset in rng.integers(0, 64 - struct.calcsize(fmt), 8):
        expected = struct.unpack_from(fmt, buf.data, int(offset))[0]
        assert run_asm(text, [buf, int(offset)]) == [expected]


@pytest.mark.parametrize("op, fmt, mask", [("buffer.store.i8", "<B", 0xFF),
                                           ("buffer.store.i16", "<H", 0xFFFF)])
def test_narrow_stores_keep_the_low_bits_and_touch_nothing_else(op, fmt, mask):
    rng = np.random.default_rng(12)
    buf = random_buffer(rng, 32)
    before = bytearray(buf.data)
    value = int(rng.integers(-2 ** 31, 2 ** 31))
    run_asm(program("0rIi_v", f"    {op} ref:0, i64:0, i32:0\n    return ()"), [buf, 5, value])
    struct.pack_into(fmt, before, 5, value & mask)
    assert bytes(buf.data) == bytes(before)


def test_clone_copies_a_range_into_a_new_writable_buffer():
    rng = np.random.default_rng(13)
    src = random_buffer(rng, 100)
    text = program("0rII_r", "    ref:1 = buffer.clone ref:0, i64:0, i64:1\n"
                             "    i32:0 = const.i32 0\n    i64:2 = const.i64 0\n"
                             "    buffer.store.i8 ref:1, i64:2, i32:0\n    return (ref:1)")
    (clone,) = run_asm(text, [src, 10, 40])
    assert len(clone) == 40 and not clone.readonly
    assert bytes(clone.data[1:]) == bytes(src.data[11:50]) and clone.data[0] == 0
    assert src.data[10] == bytes(src.data)[10]   # the source is untouched


def test_clone_of_read_only_rodata_is_writable():
    text = program("0v_i", "    ref:0 = const.ref.rodata @ro\n    i64:0 = const.i64 2\n"
                           "    i64:1 = const.i64 4\n    ref:1 = buffer.clone ref:0, i64:0, i64:1\n"
                           "    i64:0 = const.i64 0\n    i32:0 = const.i32 -1\n"
                           "    buffer.store.i8 ref:1, i64:0, i32:0\n"
                           "    i32:1 = buffer.load.i32 ref:1, i64:0\n    return (i32:1)")
    assert run_asm(text) == [struct.unpack("<i", bytes([0xFF, 4, 5, 6]))[0]]


@pytest.mark.parametrize("op, bank, dtype", [
    ("buffer.fill.i8", "i32", np.int8), ("buffer.fill.i16", "i32", np.int16),
    ("buffer.fill.i32", "i32", np.int32), ("buffer.fill.i64", "i64", np.int64),
    ("buffer.fill.f32", "f32", np.float32), ("buffer.fill.f64", "f64", np.float64)])
def test_fill_writes_the_pattern_over_the_range_only(op, bank, dtype):
    rng = np.random.default_rng(14)
    size = np.dtype(dtype).itemsize
    buf = random_buffer(rng, 16 * size)
    before = np.frombuffer(bytes(buf.data), dtype).copy()
    if bank in ("f32", "f64"):
        value = float(dtype(rng.standard_normal()))
    else:
        value = int(rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max))
    cc = {"i32": "0rIIi_v", "i64": "0rIII_v", "f32": "0rIIf_v", "f64": "0rIIF_v"}[bank]
    reg = {"i32": "i32:0", "i64": "i64:2", "f32": "f32:0", "f64": "f64:0"}[bank]
    run_asm(program(cc, f"    {op} ref:0, i64:0, i64:1, {reg}\n    return ()"),
            [buf, 3 * size, 9 * size, value])
    after = np.frombuffer(bytes(buf.data), dtype)
    expected = before.copy()
    expected[3:12] = value
    np.testing.assert_array_equal(after, expected)


def test_compare_finds_equal_and_unequal_ranges():
    rng = np.random.default_rng(15)
    a = random_buffer(rng, 64)
    b = VMBuffer(bytearray(a.data), readonly=False)
    b.data[40] ^= 0x10
    text = program("0rIrII_i", "    i32:0 = buffer.compare ref:0, i64:0, ref:1, i64:1, i64:2\n"
                               "    return (i32:0)")
    assert run_asm(text, [a, 0, b, 0, 40]) == [1]
    assert run_asm(text, [a, 0, b, 0, 41]) == [0]
    assert run_asm(text, [a, 8, a, 8, 0]) == [1]


@pytest.mark.parametrize("body, args, message", [
    ("    buffer.fill.i32 ref:0, i64:0, i64:1, i32:0", (2, 4),
     "fill of 4-byte values needs offset 2 and length 4 to be multiples of 4"),
    ("    ref:1 = buffer.clone ref:0, i64:0, i64:1", (2, 8),
     "range [2, 10) is outside the buffer of 8 bytes"),
    ("    i32:0 = buffer.compare ref:0, i64:0, ref:0, i64:1, i64:1", (0, 8),
     "range [8, 16) is outside the buffer of 8 bytes"),
    ("    i32:0 = buffer.load.i16.s ref:0, i64:1", (0, 7),
     "range [7, 9) is outside the buffer of 8 bytes"),
    ("    buffer.store.i8 ref:0, i64:0, i32:0", (-1, 0),
     "range [-1, 0) is outside the buffer of 8 bytes"),
])
def test_out_of_range_and_misaligned_access_trap(body, args, message):
    buf = VMBuffer(bytearray(8), readonly=False)
    text = program("0rII_v", body + "\n    return ()")
    with pytest.raises(RuntimeFailure) as info:
        run_asm(text, [buf, *args])
    assert str(info.value) == f"function 'main' at offset 0: {message}"


def test_fill_of_read_only_rodata_traps():
    text = program("0v_v", "    ref:0 = const.ref.rodata @ro\n    i64:0 = const.i64 0\n"
                           "    i32:0 = const.i32 0\n"
                           "    buffer.fill.i8 ref:0, i64:0, i64:0, i32:0\n"
                           "    return ()")
    with pytest.raises(RuntimeFailure, match="buffer is read-only"):
        run_asm(text)


def test_cmp_type_ref_checks_the_module_type_table():
    text = """module @m
type "!vm.buffer"
type "!vm.list"
export @main = @main
func @main "0r_ii" {
    i32:0 = cmp.type.ref ref:0, "!vm.buffer"
    i32:1 = cmp.type.ref ref:0, #1
    return (i32:0, i32:1)
}
"""
    from irtk.vm import VMList
    assert run_asm(text, [VMBuffer(b"x")]) == [1, 0]
    assert run_asm(text, [VMList()]) == [0, 1]
    assert run_asm(text, [None]) == [0, 0]
