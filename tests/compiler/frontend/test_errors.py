"""Every problem is reported at file:line:col: parse errors of the added dialects as
irtk.ParseError, functions the importer cannot lower in Program.unsupported."""
from __future__ import annotations

import pytest

from irtk import ParseError
from irtk.compiler.frontend import parse_mlir, parse_program

GOOD = """func.func @good() -> tensor<2xf32> {
  %c = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  return %c : tensor<2xf32>
}
"""


@pytest.mark.parametrize(("line", "where", "message"), [
    ("  check.expect_almost_eq(%a, %a, tol 1.0) : tensor<2xf32>", "3:34",
     "expected 'atol' or 'rtol'"),
    ("  check.expect_eq_const(%a, dense<[1, 2]> : tensor<2xi32>) : tensor<2xf32>", "3:3",
     "constant's type differs"),
    ("  %b = util.optimization_barrier %a : tensor<2xf32>, tensor<2xf32>", "3:39",
     "expected 1 types"),
    ("  %b = flow.tensor.tie_shape %a : tensor<2xf32>{%a}", "3:49", "index"),
    ("  %b = linalg.softmax dimension(x) ins(%a : tensor<2xf32>) outs(%a : tensor<2xf32>)"
     " -> tensor<2xf32>", "3:33", "integer"),
])
def test_dialect_syntax_errors_are_located(line, where, message):
    text = ("func.func @f(%a: tensor<2xf32>) {\n  %z = arith.constant 0 : index\n"
            + line + "\n  return\n}\n")
    with pytest.raises(ParseError) as e:
        parse_mlir(text, "bad.mlir")
    assert str(e.value).startswith(f"bad.mlir:{where}: error:"), str(e.value)
    assert message in str(e.value)


def test_pack_tile_mismatch_is_a_located_verification_error():
    text = """func.func @f(%a: tensor<8x8xf32>, %d: tensor<2x2x4x2xf32>) -> tensor<2x2x4x2xf32> {
  %p = linalg.pack %a inner_dims_pos = [0, 1] inner_tiles = [4, 4] into %d : tensor<8x8xf32> -> tensor<2x2x4x2xf32>
  return %p : tensor<2x2x4x2xf32>
}"""
    with pytest.raises(ParseError) as e:
        parse_mlir(text, "pack.mlir")
    assert str(e.value).startswith("pack.mlir:2:3: error: linalg.pack: inner tile 1 is 4")


def test_unsupported_function_is_recorded_and_the_rest_imports():
    text = GOOD + """func.func @bad(%a: tensor<4xi3>) -> tensor<4xi3> {
  return %a : tensor<4xi3>
}
func.func @body(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%a : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.cbrt %x : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""
    program = parse_program(text, "mixed.mlir")
    assert [f.name for f in program.functions] == ["good"]
    assert program.unsupported["bad"] == "mixed.mlir:5:1: error: element type i3 is not supported"
    assert program.unsupported["body"] == (
        "mixed.mlir:12:5: error: unsupported op 'math.cbrt' in a generic body")


def test_unsupported_types_and_affine_expressions_are_located():
    text = """func.func @f(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%a : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = bufferization.to_buffer %r : tensor<4x4xf32> to memref<4x4xf32>
  return %r : tensor<4x4xf32>
}
func.func @g(%a: tensor<8xf32>, %o: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0 floordiv 2)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%a : tensor<8xf32>) outs(%o : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @h(%m: memref<4xf32>) {
  return
}
"""
    program = parse_program(text, "ops.mlir")
    assert program.unsupported["f"] == "ops.mlir:3:3: error: unsupported op 'bufferization.to_buffer'"
    assert program.unsupported["h"] == ("ops.mlir:14:1: error: type memref<4xf32> is not "
                                        "supported (only tensors and scalars are)")
    assert program.unsupported["g"].startswith("ops.mlir:7:3: error: affine expression")


def test_hex_float_elements_are_bit_patterns():
    text = """func.func @f() -> (tensor<3xf8E5M2>, tensor<2xf32>, tensor<2xi8>) {
  %a = arith.constant dense<[0x7C, 0xFC, 1.5]> : tensor<3xf8E5M2>
  %b = arith.constant dense<[0x3F800000, -2.0]> : tensor<2xf32>
  %c = arith.constant dense<[0xCA, 0x01]> : tensor<2xi8>
  return %a, %b, %c : tensor<3xf8E5M2>, tensor<2xf32>, tensor<2xi8>
}"""
    program = parse_program(text, "hex.mlir")
    values = [op.attrs["value"] for op in program.functions[0].body.ops if op.kind == "constant"]
    assert list(values[0]) == [float("inf"), float("-inf"), 1.5]
    assert list(values[1]) == [1.0, -2.0]
    assert list(values[2]) == [-54, 1]


def test_custom_ops_print_back_in_their_syntax():
    text = """util.global private mutable @g = dense<2.0> : tensor<f32>
func.func @f(%a: tensor<?xf32>, %n: index) {
  %c = util.unfoldable_constant dense<[1.0, 2.0]> : tensor<2xf32>
  %d = flow.tensor.dynamic_constant dense<[1.0, 2.0]> : tensor<2xf32> -> tensor<?xf32>
  %b = util.optimization_barrier %c : tensor<2xf32>
  %t = flow.tensor.tie_shape %a : tensor<?xf32>{%n}
  %l = util.global.load @g : tensor<f32>
  util.global.store %l, @g : tensor<f32>
  check.expect_almost_eq(%b, %c, atol 0.5) : tensor<2xf32>
  check.expect_eq_const(%b, dense<[1.0, 2.0]> : tensor<2xf32>) : tensor<2xf32>
  return
}
"""
    module, _ = parse_mlir(text, "p.mlir")
    printed = str(module)
    for piece in ("util.global private mutable @g = dense<2.000000e+00> : tensor<f32>",
                  "util.unfoldable_constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>",
                  "-> tensor<?xf32>", "util.optimization_barrier %",
                  "flow.tensor.tie_shape %", "{%", "util.global.load @g : tensor<f32>",
                  "util.global.store %", "check.expect_almost_eq(%", "atol 0.5",
                  "check.expect_eq_const(%"):
        assert piece in printed, piece
    reparsed, _ = parse_mlir(printed, "again.mlir")
    assert len(list(reparsed.walk())) == len(list(module.walk()))


def test_an_op_constructor_failure_is_located_at_the_op():
    # xDSL raises a plain exception (not a parse error) for an out-of-range dense element.
    text = """func.func @f() {
  %z = arith.constant 0 : index
  %b = util.unfoldable_constant dense<[300]> : tensor<1xi8>
  return
}"""
    with pytest.raises(ParseError) as e:
        parse_mlir(text, "ctor.mlir")
    assert str(e.value).startswith("ctor.mlir:3:3: error: Integer value 300 is out of range")


@pytest.mark.parametrize(("body", "message"), [
    ("  %t = tensor.from_elements : tensor<0xf32>\n  return %t : tensor<0xf32>",
     "2:3: error: tensor.from_elements of no elements is not supported"),
    ("  %t = arith.select %c, %a, %a : tensor<0xf32>\n  return %t : tensor<0xf32>",
     "2:3: error: 'arith.select' mixes tensors and scalars"),
])
def test_ops_the_importer_cannot_lower_are_located(body, message):
    text = f"func.func @f(%a: tensor<0xf32>, %c: i1) -> tensor<0xf32> {{\n{body}\n}}\n"
    program = parse_program(text, "f.mlir")
    assert program.unsupported == {"f": f"f.mlir:{message}"}


def test_an_undefined_value_is_reported_where_it_is_used():
    text = ("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
            "  %r = arith.addf %a, %b : tensor<4xf32>\n"
            "  return %r : tensor<4xf32>\n}\n")
    with pytest.raises(ParseError, match=r"^bad.mlir:2:23: error: use of undefined value "
                                         r"'%b'$"):
        parse_mlir(text, "bad.mlir")


def test_compile_errors_quote_the_source_line_with_a_caret():
    import irtk
    text = ("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
            "\t%r = arith.addf %a, %b : tensor<4xf32>\n"
            "  return %r : tensor<4xf32>\n}\n")
    with pytest.raises(ParseError) as e:
        irtk.compile_str(text, target="cpu", filename="bad.mlir")
    assert str(e.value).split("\n") == [
        "bad.mlir:2:22: error: use of undefined value '%b'",
        "\t%r = arith.addf %a, %b : tensor<4xf32>",
        "\t                    ^"]
    unsupported = ("func.func @main() -> tensor<4xf32> {\n"
                   "  %r = bufferization.alloc_tensor() : tensor<4xf32>\n"
                   "  return %r : tensor<4xf32>\n}\n")
    with pytest.raises(irtk.CompileError) as e:
        irtk.compile_str(unsupported, target="cpu", filename="op.mlir")
    assert str(e.value).split("\n")[1:] == [
        "  %r = bufferization.alloc_tensor() : tensor<4xf32>", "  ^"]


def test_a_long_source_line_is_quoted_as_a_window_around_the_column():
    from irtk.compiler.frontend.source_map import quote_source
    source = "x" * 500 + "HERE" + "y" * 500
    quoted = quote_source("f.mlir:1:501: error: here", "f.mlir", source).split("\n")
    assert len(quoted) == 3 and len(quoted[1]) <= 170
    assert quoted[1][len(quoted[2]) - 1:].startswith("HERE")
    assert quote_source("g.mlir:1:1: error: elsewhere", "f.mlir", source) == \
        "g.mlir:1:1: error: elsewhere"
