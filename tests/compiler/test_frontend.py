"""The front end parses MLIR with xDSL and reports every problem at file:line:col."""
import pytest

from irtk import ParseError
from irtk.compiler.frontend import parse_mlir

GOOD = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.exp %x : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def test_parse_records_op_locations():
    module, source = parse_mlir(GOOD, "good.mlir")
    locations = {op.name: source.location(op) for op in module.walk()}
    assert locations["tensor.empty"] == "good.mlir:2:3"
    assert locations["linalg.generic"] == "good.mlir:3:3"
    assert locations["math.exp"] == "good.mlir:7:5"


def test_unknown_op_is_reported_at_its_position():
    text = GOOD.replace("math.exp %x : f32", "foo.bar %x : f32")
    with pytest.raises(ParseError) as e:
        parse_mlir(text, "bad.mlir")
    assert str(e.value).startswith("bad.mlir:7:10: error: Operation foo.bar is not registered")


def test_syntax_error_has_file_line_col():
    with pytest.raises(ParseError) as e:
        parse_mlir("func.func @main( {\n}\n", "syntax.mlir")
    assert str(e.value).startswith("syntax.mlir:1:")
    assert ": error: " in str(e.value)


def test_type_mismatch_is_a_verification_error_with_location():
    text = ("func.func @main(%a: tensor<4xf32>) -> tensor<4xi32> {\n"
            "  func.return %a : tensor<4xf32>\n}\n")
    with pytest.raises(ParseError) as e:
        parse_mlir(text, "types.mlir")
    assert str(e.value).startswith("types.mlir:2:3: error:")


def test_parse_program_imports_into_tir():
    from irtk.compiler import tir
    from irtk.compiler.frontend import parse_program
    program = parse_program(GOOD, "good.mlir")
    fn = program.function("main")
    assert [op.kind for op in fn.body.ops] == ["empty", "generic", "return"]
    generic = fn.body.ops[1]
    assert [op.name for op in generic.attrs["ops"]] == ["math.exp"]
    assert generic.location == "good.mlir:3:3"
    assert fn.result_types == [tir.TensorType((4,), "f32")]


def test_index_division_by_zero_is_not_folded():
    from irtk.compiler.frontend import parse_program
    program = parse_program("""func.func @main() -> index {
  %a = arith.constant 4 : index
  %z = arith.constant 0 : index
  %q = arith.divui %a, %z : index
  return %q : index
}""", "div.mlir")
    assert "arith.divui" in [op.kind for op in program.function("main").body.ops]


def test_function_importer_provides_what_the_lowerings_ask_of_it():
    from irtk.compiler.frontend.import_context import ImportContext
    from irtk.compiler.frontend.importer import FunctionImporter, ProgramImporter
    module, source_map = parse_mlir(GOOD, "good.mlir")
    imp = FunctionImporter(ProgramImporter(module, source_map, "good.mlir"), module.ops.first)
    wanted = set(ImportContext.__annotations__) | {
        name for name, v in vars(ImportContext).items() if callable(v) and name[0] != "_"}
    assert wanted and not [name for name in wanted if not hasattr(imp, name)]
