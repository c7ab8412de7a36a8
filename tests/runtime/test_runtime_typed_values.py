"""Tensors of element types numpy lacks (f8, f4, bf16, i4, i2) across the host boundary:
`--input` text in, IREE's text out, the Python API (TypedArray or plain numbers in, TypedArray
out) and `irtk run`, on every device."""
from __future__ import annotations

import subprocess
import sys
import zlib

import numpy as np
import pytest

import irtk
from irtk import hal
from irtk.errors import InputError
from irtk.hal import numerics
from irtk.runtime import TypedArray, format_output, format_results, parse_input
from tests.conftest import all_device_uris, target_for

ET = hal.ElementType
DEVICES = all_device_uris()


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(" ".join(map(str, key)).encode()))


# -- text in and out ----------------------------------------------------------------------------

def test_parse_small_float_input_rounds_to_the_type():
    a = parse_input("4xf8E4M3FN=1 2.5 0.3 -300")
    assert isinstance(a, TypedArray) and a.element_type is ET.f8E4M3FN and a.shape == (4,)
    # 0.3 rounds to 0.3125 (3 mantissa bits), -300 to -288 (nearest of -288 and -320)
    np.testing.assert_array_equal(a.values, np.float32([1, 2.5, 0.3125, -288]))
    assert a.to_bytes() == numerics.encode("f8E4M3FN", [1, 2.5, 0.3125, -288])


def test_parse_broadcasts_one_value_and_defaults_to_zeros():
    assert parse_input("2x3xbf16=1.5").values.tolist() == [[1.5] * 3] * 2
    z = parse_input("3xf8E5M2FNUZ=")
    assert z.element_type is ET.f8E5M2FNUZ and z.values.tolist() == [0, 0, 0]


def test_parse_sub_byte_integers_in_signed_or_unsigned_range():
    a = parse_input("5xi4=-8 7 15 8 0")
    np.testing.assert_array_equal(a.values, np.int8([-8, 7, -1, -8, 0]))   # 15, 8 wrap
    b = parse_input("2x3xi2=[0 1 2][3 -2 -1]")
    assert b.shape == (2, 3)
    np.testing.assert_array_equal(b.values, np.int8([[0, 1, -2], [-1, -2, -1]]))


def test_parse_raw_file_holds_packed_storage(tmp_path):
    rng = rng_for("raw i2")
    values = rng.integers(-2, 2, 11).astype(np.int8)
    path = tmp_path / "x.bin"
    path.write_bytes(numerics.encode("i2", values))
    a = parse_input(f"11xi2=@{path}")
    np.testing.assert_array_equal(a.values, values)
    with pytest.raises(InputError, match=r"has 3 bytes, 13xi2 needs 4"):
        parse_input(f"13xi2=@{path}")


def test_format_output_prints_the_element_type_and_values():
    a = TypedArray.from_values(np.array([[1, -2.5], [np.nan, 448]]), ET.f8E4M3FN)
    assert format_output(a) == "2x2xf8E4M3FN=[1 -2.5][NAN 448]"
    q = TypedArray.from_values(np.array([1, -1, 0, -2, 1]), ET.i2)
    assert format_output(q) == "5xi2=1 -1 0 -2 1"
    assert format_results((q,)) == "result[0]: hal.buffer_view\n5xi2=1 -1 0 -2 1"


# -- the Python API ---------------------------------------------------------------------------

SMALL_TYPES = """
func.func @main(%a: tensor<6xf8E4M3FN>, %b: tensor<6xf8E5M2>, %h: tensor<6xbf16>,
                %q: tensor<7xi4>, %p: tensor<9xi2>)
    -> (tensor<6xf8E4M3FN>, tensor<6xf8E5M2FNUZ>, tensor<6xbf16>, tensor<7xi4>, tensor<9xi2>) {
  %ea = tensor.empty() : tensor<6xf8E4M3FN>
  %s = linalg.add ins(%a, %a : tensor<6xf8E4M3FN>, tensor<6xf8E4M3FN>) outs(%ea : tensor<6xf8E4M3FN>) -> tensor<6xf8E4M3FN>
  %eb = tensor.empty() : tensor<6xf8E5M2FNUZ>
  %t = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%b : tensor<6xf8E5M2>) outs(%eb : tensor<6xf8E5M2FNUZ>) {
  ^bb0(%x: f8E5M2, %o: f8E5M2FNUZ):
    %w = arith.extf %x : f8E5M2 to f32
    %m = arith.mulf %w, %w : f32
    %n = arith.truncf %m : f32 to f8E5M2FNUZ
    linalg.yield %n : f8E5M2FNUZ
  } -> tensor<6xf8E5M2FNUZ>
  %eh = tensor.empty() : tensor<6xbf16>
  %u = linalg.sub ins(%h, %h : tensor<6xbf16>, tensor<6xbf16>) outs(%eh : tensor<6xbf16>) -> tensor<6xbf16>
  %v = linalg.add ins(%u, %h : tensor<6xbf16>, tensor<6xbf16>) outs(%eh : tensor<6xbf16>) -> tensor<6xbf16>
  %eq = tensor.empty() : tensor<7xi4>
  %w4 = linalg.mul ins(%q, %q : tensor<7xi4>, tensor<7xi4>) outs(%eq : tensor<7xi4>) -> tensor<7xi4>
  %ep = tensor.empty() : tensor<9xi2>
  %w2 = linalg.add ins(%p, %p : tensor<9xi2>, tensor<9xi2>) outs(%ep : tensor<9xi2>) -> tensor<9xi2>
  return %s, %t, %v, %w4, %w2 : tensor<6xf8E4M3FN>, tensor<6xf8E5M2FNUZ>, tensor<6xbf16>, tensor<7xi4>, tensor<9xi2>
}
"""


@pytest.fixture(scope="module")
def small_types_modules() -> dict[str, bytes]:
    return {t: irtk.compile_str(SMALL_TYPES, target=t) for t in ("cpu", "vulkan-spirv")}


@pytest.mark.parametrize("device", DEVICES)
def test_api_takes_and_returns_types_numpy_lacks(small_types_modules, device):
    rng = rng_for("api", device)
    m = irtk.load(small_types_modules[target_for(device)], device=device)
    a = TypedArray.from_values(rng.standard_normal(6) * 40, ET.f8E4M3FN)
    b = rng.standard_normal(6) * 30           # plain float64: rounded to f8E5M2 on the way in
    h = rng.standard_normal(6).astype(np.float32)
    q = rng.integers(-8, 16, 7)               # signed or unsigned i4 range
    p = TypedArray.from_values(rng.integers(-2, 2, 9), ET.i2)
    s, t, v, w4, w2 = m.main(a, b, h, q, p)
    for got, et, shape in ((s, ET.f8E4M3FN, 6), (t, ET.f8E5M2FNUZ, 6), (v, ET.bf16, 6),
                           (w4, ET.i4, 7), (w2, ET.i2, 9)):
        assert isinstance(got, TypedArray) and got.element_type is et and got.shape == (shape,)
        assert got.values.dtype == et.value_dtype()
    b8 = numerics.round_to("f8E5M2", b).astype(np.float64)
    np.testing.assert_array_equal(s.values, numerics.round_to("f8E4M3FN", 2 * a.values.astype(np.float64)))
    np.testing.assert_array_equal(t.values, numerics.round_to("f8E5M2FNUZ", b8 * b8))
    h16 = numerics.round_to("bf16", h)
    np.testing.assert_array_equal(v.values, h16)       # (h - h) + h
    np.testing.assert_array_equal(w4.values, numerics.round_to("i4", q * q))
    np.testing.assert_array_equal(w2.values, numerics.round_to("i2", 2 * p.values.astype(np.int64)))
    # A result goes back in as it came out.
    s2, *_ = m.main(s, b, h, w4, w2)
    np.testing.assert_array_equal(s2.values, numerics.round_to("f8E4M3FN", 2 * s.values.astype(np.float64)))


@pytest.mark.parametrize("value, message", [
    (TypedArray.from_values(np.zeros(6), ET.f8E5M2), "argument 0: expected 6xf8E4M3FN, got 6xf8E5M2"),
    (np.zeros(5, np.float32), "argument 0: expected 6xf8E4M3FN, got 5xf32"),
    (np.array(["a"] * 6), "argument 0: expected 6xf8E4M3FN, got 6x"),
])
def test_api_rejects_wrong_small_float_arguments(small_types_modules, value, message):
    m = irtk.load(small_types_modules["cpu"], device="local-sync")
    good = [np.zeros(6), np.zeros(6), np.zeros(6, np.float32), np.zeros(7, np.int8),
            np.zeros(9, np.int8)]
    with pytest.raises(InputError, match=message):
        m.main(value, *good[1:])


def test_api_rejects_out_of_range_or_float_sub_byte_integers(small_types_modules):
    m = irtk.load(small_types_modules["cpu"], device="local-sync")
    args = [np.zeros(6), np.zeros(6), np.zeros(6, np.float32), np.zeros(7, np.int8),
            np.zeros(9, np.int8)]
    with pytest.raises(InputError, match=r"argument 4: 4 is out of range for i2 \[-2, 3\]"):
        m.main(*args[:4], np.array([0, 1, 2, 3, 4, 0, 0, 0, 0]))
    with pytest.raises(InputError, match=r"argument 3: expected 7xi4, got 7xf64"):
        m.main(*args[:3], np.zeros(7), args[4])


def test_irtk_run_reads_and_prints_small_types(small_types_modules, tmp_path):
    path = tmp_path / "small.vmfb"
    path.write_bytes(small_types_modules["cpu"])
    p = subprocess.run(
        [sys.executable, "-m", "irtk.cli", "run", str(path), "--device=local-task",
         "--function=main", "--input=6xf8E4M3FN=1 -2 0.3 300 0 -0.5",
         "--input=6xf8E5M2=1 2 3 -4 0.5 100", "--input=6xbf16=1.5", "--input=7xi4=1 2 3 4 -1 -8 15",
         "--input=9xi2=0 1 2 3 -1 -2 0 1 1"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "EXEC @main",
        "result[0]: hal.buffer_view", "6xf8E4M3FN=2 -4 0.625 NAN 0 -1",
        "result[1]: hal.buffer_view", "6xf8E5M2FNUZ=1 4 8 16 0.25 8192",
        "result[2]: hal.buffer_view", "6xbf16=1.5 1.5 1.5 1.5 1.5 1.5",
        "result[3]: hal.buffer_view", "7xi4=1 4 -7 0 1 0 1",
        "result[4]: hal.buffer_view", "9xi2=0 -2 0 -2 -2 0 0 -2 -2",
    ]
