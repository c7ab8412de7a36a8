"""Dispatch formation: each linalg.generic becomes a kernel; unsupported input is rejected at its
source location."""
import pytest

from irtk import CompileError
from irtk.compiler.flow import form_dispatches
from irtk.compiler.frontend import parse_mlir


def form(text: str):
    module, source = parse_mlir(text, "prog.mlir")
    return form_dispatches(module, source)


BROADCAST = """#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%a: tensor<3x5xf32>, %b: tensor<5xf32>) -> tensor<5x3xf32> {
  %c2 = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<5x3xf32>
  %r = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d1, d0)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<3x5xf32>, tensor<5xf32>) outs(%e : tensor<5x3xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %m = arith.mulf %s, %c2 : f32
    linalg.yield %m : f32
  } -> tensor<5x3xf32>
  return %r : tensor<5x3xf32>
}
"""


def test_generic_becomes_a_kernel_with_maps_and_cloned_constants():
    program = form(BROADCAST)
    (f,) = program.functions
    (d,) = f.dispatches
    k = d.kernel
    assert k.loop_ranges == (3, 5)
    assert [o.binding for o in k.inputs + k.outputs] == [0, 1, 2]
    assert k.inputs[1].map.rows == ((0, 1, 0),)
    assert k.outputs[0].map.rows == ((0, 1, 0), (1, 0, 0))
    assert [op.name for op in k.ops] == ["arith.addf", "arith.constant", "arith.mulf"]
    assert k.ops[1].float_value == 2.0
    assert k.yields == [5]
    assert [r.type.spelling() for r in f.results] == ["5x3xf32"]


def test_output_read_in_body_becomes_an_input():
    text = """func.func @main(%a: tensor<4xf32>, %acc: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""
    (d,) = form(text).functions[0].dispatches
    assert len(d.kernel.inputs) == 2
    assert d.kernel.ops[0].operands == (0, 1)
    assert d.inputs[1].kind == "arg" and d.inputs[1].index == 1


@pytest.mark.parametrize("snippet,message", [
    ('iterator_types = ["parallel"]', None),
])
def test_reduction_is_rejected_with_location(snippet, message):
    text = """func.func @main(%a: tensor<4xf32>, %acc: tensor<f32>) -> tensor<f32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>],
                       iterator_types = ["reduction"]}
      ins(%a : tensor<4xf32>) outs(%acc : tensor<f32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
"""
    with pytest.raises(CompileError) as e:
        form(text)
    assert str(e.value).startswith("prog.mlir:2:3: error: linalg.generic with reduction")


def test_unsupported_op_is_named_with_location():
    text = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = arith.addf %a, %a : tensor<4xf32>
  return %r : tensor<4xf32>
}
"""
    with pytest.raises(CompileError) as e:
        form(text)
    assert str(e.value) == "prog.mlir:2:3: error: unsupported op 'arith.addf'"


def test_unsupported_body_op_is_named():
    text = BROADCAST.replace("%m = arith.mulf %s, %c2 : f32", "%m = math.sin %s : f32")
    with pytest.raises(CompileError) as e:
        form(text)
    assert "prog.mlir:10:5: error: unsupported op 'math.sin' in linalg.generic body" == str(e.value)


def test_unsupported_element_type_is_named():
    text = """func.func @main(%a: tensor<4xf64>) -> tensor<4xf64> {
  return %a : tensor<4xf64>
}
"""
    with pytest.raises(CompileError) as e:
        form(text)
    assert "element type f64 is not supported" in str(e.value)
    assert str(e.value).startswith("prog.mlir:1:1: error: argument 0 of '@main'")


def test_dynamic_shapes_are_rejected():
    text = """func.func @main(%a: tensor<?xf32>) -> tensor<?xf32> {
  return %a : tensor<?xf32>
}
"""
    with pytest.raises(CompileError) as e:
        form(text)
    assert "dynamic shapes are not supported yet" in str(e.value)
