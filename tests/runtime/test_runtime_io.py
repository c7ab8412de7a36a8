"""IREE's `--input=` syntax and its output format."""
from __future__ import annotations

import numpy as np
import pytest

from irtk.errors import InputError
from irtk.runtime import format_output, format_results, parse_input


@pytest.mark.parametrize("text, expected", [
    ("4x2xf32=1,2,3,4,5,6,7,8", np.arange(1, 9, dtype=np.float32).reshape(4, 2)),
    ("4x2xf32=1 2 3 4 5 6 7 8", np.arange(1, 9, dtype=np.float32).reshape(4, 2)),
    ("2x2xi32=[[1,2],[3,4]]", np.array([[1, 2], [3, 4]], np.int32)),
    ("2x2xi32=[1 2][3 4]", np.array([[1, 2], [3, 4]], np.int32)),
    ("f32=3.5", np.array(3.5, np.float32)),
    ("4xf32=0", np.zeros(4, np.float32)),
    ("3xi64=-7", np.full(3, -7, np.int64)),
    ("2xf32=", np.zeros(2, np.float32)),
    ("3xf64=inf,-inf,1e-3", np.array([np.inf, -np.inf, 1e-3])),
    ("2xi1=true,0", np.array([True, False])),
    ("0x3xf32=", np.zeros((0, 3), np.float32)),
    ("  2xi8=127,-128  ", np.array([127, -128], np.int8)),
])
def test_parse_input(text, expected):
    got = parse_input(text)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_parse_input_nan():
    assert np.isnan(parse_input("f64=nan"))


@pytest.mark.parametrize("text, message", [
    ("1,2,3", "expected TYPE=VALUES"),
    ("4xq32=1", "unknown element type 'q32'"),
    ("4xaxf32=1", "bad dimension 'a'"),
    ("?x2xf32=1", "dynamic dimension"),
    ("4xf32=1,2,3", "3 values for 4xf32 (4 elements)"),
    ("2xi32=1,x", "'x' is not an integer"),
    ("2xi32=1.5,2", "'1.5' is not an integer"),
    ("f32=abc", "'abc' is not a number"),
    ("i8=300", "300 is out of range for int8"),
    ("i1=maybe", "'maybe' is not a boolean"),
    ("2xi4=3,16", "16 is out of range for i4 [-8, 15]"),
    ("2xf8E4M3FN=1,x", "'x' is not a number"),
    ("3xi2=1,2", "2 values for 3xi2 (3 elements)"),
    ("@/nonexistent/file.npy", "cannot read input file"),
    ("4xf32=@/nonexistent/file.bin", "cannot read input file"),
])
def test_parse_input_errors(text, message):
    with pytest.raises(InputError) as info:
        parse_input(text)
    assert message in str(info.value)


def test_parse_input_from_npy_and_raw_files(tmp_path):
    array = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.save(tmp_path / "a.npy", array)
    np.testing.assert_array_equal(parse_input(f"@{tmp_path / 'a.npy'}"), array)
    (tmp_path / "a.bin").write_bytes(array.tobytes())
    np.testing.assert_array_equal(parse_input(f"2x3xi32=@{tmp_path / 'a.bin'}"), array)
    with pytest.raises(InputError, match="has 24 bytes, 4xi32 needs 16"):
        parse_input(f"4xi32=@{tmp_path / 'a.bin'}")


@pytest.mark.parametrize("array, text", [
    (np.arange(1, 9, dtype=np.float32).reshape(4, 2), "4x2xf32=[1 2][3 4][5 6][7 8]"),
    (np.arange(8, dtype=np.int32).reshape(2, 2, 2), "2x2x2xi32=[[0 1][2 3]][[4 5][6 7]]"),
    (np.array([1.5, -2, 0.1], np.float32), "3xf32=1.5 -2 0.1"),
    (np.float32(3.5), "f32=3.5"),
    (np.array([1e-5, 1e10, np.nan, -np.inf]), "4xf64=1E-05 1E+10 NAN -INF"),
    (np.array([True, False]), "2xi1=1 0"),
    (np.array([-3, 4], np.int64), "2xi64=-3 4"),
    (np.zeros((0, 2), np.float32), "0x2xf32="),
])
def test_format_output_matches_iree(array, text):
    assert format_output(array) == text


def test_format_output_truncates_long_tensors():
    assert format_output(np.arange(10, dtype=np.int32), max_elements=4) == "10xi32=0 1 2 3..."


def test_format_results_prints_iree_result_lines():
    assert format_results((np.ones(2, np.float32), np.zeros((1, 2), np.int32))) == (
        "result[0]: hal.buffer_view\n2xf32=1 1\nresult[1]: hal.buffer_view\n1x2xi32=[0 0]")
    assert format_results(None) == ""
    assert format_results(np.float32(2.5)) == "result[0]: hal.buffer_view\nf32=2.5"


def test_parse_and_format_round_trip():
    text = "2x3xf32=[0.5 1 -2][3 4 5E+06]"
    assert format_output(parse_input(text)) == text


def _npy_with_header(path, header: bytes) -> None:
    """A .npy (format 1.0) file with `header` as its header text and a few data bytes."""
    header = header + b" " * ((-(len(header) + 11)) % 64) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header
                     + b"\0" * 12)


@pytest.mark.parametrize("text, message", [
    ("99999999999999999999xf32=1", "has a dimension of 99,999,999,999,999,999,999"),
    ("100000x100000xf32=1", "100000x100000xf32 is 10,000,000,000 elements (37.3 GiB), more "
                            "than this machine's memory"),
    ("99999999999999999999x0xf32=", "has a dimension of"),
    ("1000000x1000000xbf16=1", "1,000,000,000,000 elements (1.8 TiB)"),
    ("100000x100000xi4=@/nonexistent", "10,000,000,000 elements (4.7 GiB)"),
])
def test_inputs_larger_than_memory_are_refused_before_allocating(text, message, monkeypatch):
    monkeypatch.setattr("irtk.runtime.abi.host_memory_bytes", lambda: 4 << 30)
    with pytest.raises(InputError) as info:
        parse_input(text, where="--input 3")
    assert str(info.value).startswith("--input 3: ")
    assert message in str(info.value)


@pytest.mark.parametrize("header, message", [
    (b"{'descr': '<f4', 'fortran_order': False, 'shape': (3,", "malformed header"),
    (b"{'descr': '<f4', 'fortran_order': False}", "malformed header"),
    (b"not a dict at all", "malformed header"),
    (b"{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }",
     "1,000,000,000,000 elements (3.6 TiB), more than this machine's memory"),
    (b"{'descr': '<f4', 'fortran_order': False, 'shape': (1000, 1000), }",
     "is cut short: its header says 1,000,000 elements of float32 (3.8 MiB), it holds "
     "12 bytes"),
    (b"{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", "holds Python objects"),
])
def test_broken_npy_headers_are_input_errors(tmp_path, header, message):
    path = tmp_path / "x.npy"
    _npy_with_header(path, header)
    with pytest.raises(InputError) as info:
        parse_input(f"@{path}", where="--input 0")
    assert str(info.value).startswith("--input 0: ")
    assert message in str(info.value)


def test_npy_files_still_load_in_every_version(tmp_path):
    rng = np.random.default_rng()
    array = rng.standard_normal((3, 5)).astype(np.float32)
    for version in ((1, 0), (2, 0), (3, 0)):
        path = tmp_path / f"v{version[0]}.npy"
        with open(path, "wb") as f:
            np.lib.format.write_array(f, array, version=version)
        np.testing.assert_array_equal(parse_input(f"@{path}"), array)
    np.savez(tmp_path / "two.npz", a=array, b=array)
    with pytest.raises(InputError, match="holds several arrays"):
        parse_input(f"@{tmp_path / 'two.npz'}")


@pytest.mark.parametrize("text, expected", [
    ("5", 5), ("-3", -3), ("+7", 7), ("2.5", 2.5), ("-1e-3", -1e-3), (".5", 0.5),
    ("inf", float("inf")),
])
def test_bare_numbers_are_scalars_as_in_iree(text, expected):
    value = parse_input(text)
    assert value == expected and type(value) is type(expected)


def test_write_output_forms(tmp_path):
    from irtk.runtime import check_output_target, write_output
    array = np.random.default_rng().standard_normal((2, 3)).astype(np.float32)
    assert write_output("-", array) is False
    assert write_output(f"@{tmp_path / 'a.npy'}", array)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), array)
    assert write_output(f"@{tmp_path / 'a.bin'}", array)
    assert (tmp_path / "a.bin").read_bytes() == array.tobytes()
    assert write_output(f"@{tmp_path / 'x.bin'}", 1.5, "f64")
    assert np.fromfile(tmp_path / "x.bin", np.float64).tolist() == [1.5]
    for bad in ("a.npy", "@", "=a"):
        with pytest.raises(InputError, match="expected '-'"):
            check_output_target(bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "a.npy", "x.bin"]
