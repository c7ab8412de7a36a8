"""The fast paths for dense literals (dense_literal.py) give exactly the bytes xDSL's own
parser gives, and leave every literal they do not take (and every error) to it."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import irtk
from irtk.compiler.frontend import parse_mlir
from irtk.compiler.frontend import parser as frontend_parser

TYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8,
         "i16": np.int16, "i32": np.int32, "i64": np.int64, "index": np.int64}


def _constant(literal: str, type_text: str) -> str:
    return (f"func.func @f() -> {type_text} {{\n  %c = arith.constant dense<{literal}> : "
            f"{type_text}\n  return %c : {type_text}\n}}\n")


def _attr(text: str):
    module, _ = parse_mlir(text, "d.mlir")
    return next(op for op in module.walk() if op.name == "arith.constant").value


def _both(text: str, monkeypatch) -> tuple[bytes, bytes]:
    fast = _attr(text).data.data
    with monkeypatch.context() as m:
        m.setattr(frontend_parser._LocatingParser, "_fast_dense", lambda self, t: None)
        slow = _attr(text).data.data
    return fast, slow


def _format(value, style: int) -> str:
    """A float written as MLIR allows: 1.5, 1.5e+00, or 2. (a bare trailing dot)."""
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    # repr writes the tiniest subnormals without a dot ("5e-324"), which MLIR reads as an
    # integer followed by junk: give it one.
    text = repr(float(value))
    if "." not in text:
        text = text.replace("e", ".0e")
    if style == 0:
        return text
    if style == 1:
        return f"{float(value):.17e}"   # enough digits to round-trip
    return f"{float(value):.0f}." if float(value).is_integer() else text


def _nested(array: np.ndarray, style: int) -> str:
    if array.ndim == 0:
        return _format(array.item(), style)
    return "[" + ", ".join(_nested(a, style) for a in array) + "]"


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # context() resets it
@given(st.sampled_from(sorted(TYPES)), hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
       st.integers(0, 2), st.data())
def test_fast_literals_match_xdsl(monkeypatch, elt, shape, style, data):
    dtype = TYPES[elt]
    if np.dtype(dtype).kind == "f":
        values = data.draw(hnp.arrays(dtype, shape, elements=st.floats(
            -1e4, 1e4, width=np.dtype(dtype).itemsize * 8)))
    else:
        values = data.draw(hnp.arrays(dtype, shape))
    type_text = f"tensor<{'x'.join(map(str, shape))}x{elt}>"
    fast, slow = _both(_constant(_nested(values, style), type_text), monkeypatch)
    assert fast == slow
    assert np.array_equal(np.frombuffer(fast, dtype=np.dtype(dtype).newbyteorder("<"))
                          .reshape(shape), values)


@pytest.mark.parametrize(("literal", "type_text"), [
    ("1.5", "tensor<2x3xf32>"), ("-7", "tensor<4xi8>"), ("3", "tensor<2x2xf64>"),
    ("0x7C", "tensor<3xf8E5M2>"), ("true", "tensor<2xi1>"), ("[true, false]", "tensor<2xi1>"),
    ("[0xCA, 1]", "tensor<2xi8>"), ("[1.5, 2.0]", "tensor<2xbf16>"), ("[200, 1]", "tensor<2xi8>"),
    ("[1.0, 2.0]", "tensor<2xf8E4M3FN>"), ("[7, -8]", "tensor<2xi4>"),
    ("[[1, 2], [3, 4]]", "tensor<2x2xindex>"),
])
def test_splats_and_literals_xdsl_handles_agree(monkeypatch, literal, type_text):
    fast, slow = _both(_constant(literal, type_text), monkeypatch)
    assert fast == slow


@pytest.mark.parametrize(("literal", "type_text", "message"), [
    ("[1.0, 2.0]", "tensor<3xf32>", "Shape mismatch"),
    ("[1, 2.5]", "tensor<2xi32>", "Expected integer value"),
    ("[[1.0], [2.0, 3.0]]", "tensor<2x1xf32>", "inconsistent ranks"),
    ("[1.0, , 2.0]", "tensor<2xf32>", "Expected"),
    ("[300]", "tensor<1xi8>", "out of range"),
    ("1.0", "tensor<4294967296x1024xf32>", "larger than the 256 MiB"),
])
def test_bad_literals_are_located_errors(literal, type_text, message):
    with pytest.raises(irtk.ParseError) as e:
        parse_mlir(_constant(literal, type_text), "d.mlir")
    assert str(e.value).startswith("d.mlir:"), str(e.value)
    assert message in str(e.value)


@pytest.mark.parametrize("literal", ["[1.0, 2.0, 3.0, 4.0]", '"0x0000803F0000803F"'])
def test_a_literal_of_the_wrong_size_is_reported_at_the_literal(literal):
    text = (f"func.func @main() -> tensor<2x2xf32> {{\n"
            f"  %w = arith.constant dense<{literal}> : tensor<2x2xf32>\n"
            f"  return %w : tensor<2x2xf32>\n}}\n")
    with pytest.raises(irtk.ParseError, match=r"^d.mlir:2:28: error: Shape mismatch in dense"):
        parse_mlir(text, "d.mlir")


def test_a_large_splat_is_its_value_everywhere():
    module, _ = parse_mlir(_constant("0.25", "tensor<1x225x225x3xf32>"), "d.mlir")
    attr = next(op for op in module.walk() if op.name == "arith.constant").value
    values = np.frombuffer(attr.data.data, dtype="<f4")
    assert values.shape == (225 * 225 * 3,) and (values == 0.25).all()
