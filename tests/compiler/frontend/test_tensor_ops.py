"""tensor ops, pack/unpack, bitcasts and host control flow, imported and evaluated against
numpy on random data."""
from __future__ import annotations

import numpy as np
import pytest

from irtk.compiler import tir
from irtk.compiler.frontend import parse_program
from tests.compiler.frontend.helpers import close, f32, ints, run


def _kinds(text: str) -> list[str]:
    program = parse_program(text, "t.mlir")
    return [op.kind for op in tir.walk(program.functions[0].body)]


def test_static_extract_slice_uses_maps_and_drops_unit_dims():
    x = f32(6, 5, 4)
    text = """func.func @main(%x: tensor<6x5x4xf32>) -> tensor<3x4xf32> {
  %s = tensor.extract_slice %x[1, 2, 0] [3, 1, 4] [2, 1, 1] : tensor<6x5x4xf32> to tensor<3x4xf32>
  return %s : tensor<3x4xf32>
}"""
    (r,) = run(text, x)
    close(r, x[1:6:2, 2, :])
    program = parse_program(text, "t.mlir")
    generic = next(op for op in tir.walk(program.functions[0].body) if op.kind == "generic")
    assert generic.attrs["maps"][0] is not None, "a static slice reads through an affine map"


def test_dynamic_extract_slice_gathers():
    x = f32(7, 6)
    text = """func.func @main(%x: tensor<7x6xf32>, %o: index, %n: index) -> tensor<?x3xf32> {
  %s = tensor.extract_slice %x[%o, 1] [%n, 3] [1, 2] : tensor<7x6xf32> to tensor<?x3xf32>
  return %s : tensor<?x3xf32>
}"""
    (r,) = run(text, x, 2, 4)
    close(r, x[2:6, 1:6:2])


@pytest.mark.parametrize("dynamic", [False, True])
def test_insert_slice(dynamic):
    d, s = f32(5, 6), f32(2, 3)
    offs = "%o, 1" if dynamic else "2, 1"
    text = f"""func.func @main(%s: tensor<2x3xf32>, %d: tensor<5x6xf32>, %o: index) -> tensor<5x6xf32> {{
  %r = tensor.insert_slice %s into %d[{offs}] [2, 3] [2, 2] : tensor<2x3xf32> into tensor<5x6xf32>
  return %r : tensor<5x6xf32>
}}"""
    (r,) = run(text, s, d, 2)
    want = d.copy()
    want[2:5:2, 1:6:2] = s
    close(r, want)


def test_pad_static_and_dynamic():
    x = f32(3, 4)
    text = """func.func @main(%x: tensor<3x4xf32>, %lo: index) -> (tensor<6x5xf32>, tensor<?x4xf32>) {
  %c = arith.constant 9.5 : f32
  %p = tensor.pad %x low[1, 0] high[2, 1] {
  ^bb0(%i: index, %j: index):
    tensor.yield %c : f32
  } : tensor<3x4xf32> to tensor<6x5xf32>
  %q = tensor.pad %x low[%lo, 0] high[0, 0] {
  ^bb0(%i: index, %j: index):
    tensor.yield %c : f32
  } : tensor<3x4xf32> to tensor<?x4xf32>
  return %p, %q : tensor<6x5xf32>, tensor<?x4xf32>
}"""
    p, q = run(text, x, 2)
    close(p, np.pad(x, ((1, 2), (0, 1)), constant_values=9.5))
    close(q, np.pad(x, ((2, 0), (0, 0)), constant_values=9.5))


def test_concat_static_and_dynamic():
    a, b = f32(2, 3), f32(4, 3)
    text = """func.func @main(%a: tensor<2x3xf32>, %b: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %r = tensor.concat dim(0) %a, %b : (tensor<2x3xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
  return %r : tensor<?x3xf32>
}"""
    (r,) = run(text, a, b)
    close(r, np.concatenate([a, b]))


def test_insert_extract_from_elements_splat_dim():
    x = ints(-100, 100, 3, 4)
    text = """func.func @main(%x: tensor<3x4xi32>, %v: i32, %i: index) -> (tensor<3x4xi32>, tensor<2x2xi32>, tensor<3xi32>, i32, index) {
  %c1 = arith.constant 1 : index
  %ins = tensor.insert %v into %x[%i, %c1] : tensor<3x4xi32>
  %e = tensor.extract %x[%i, %c1] : tensor<3x4xi32>
  %fe = tensor.from_elements %v, %e, %e, %v : tensor<2x2xi32>
  %sp = tensor.splat %e : tensor<3xi32>
  %d = tensor.dim %x, %c1 : tensor<3x4xi32>
  return %ins, %fe, %sp, %e, %d : tensor<3x4xi32>, tensor<2x2xi32>, tensor<3xi32>, i32, index
}"""
    ins, fe, sp, e, d = run(text, x, 77, 2)
    want = x.copy()
    want[2, 1] = 77
    np.testing.assert_array_equal(ins, want)
    np.testing.assert_array_equal(fe, [[77, x[2, 1]], [x[2, 1], 77]])
    np.testing.assert_array_equal(sp, [x[2, 1]] * 3)
    assert int(e) == x[2, 1] and int(d) == 4
    assert _kinds(text).count("tensor.dim") == 0, "a static dim folds to a constant"


def test_reshapes_and_cast_are_metadata():
    x = f32(2, 6)
    text = """func.func @main(%x: tensor<2x6xf32>) -> (tensor<12xf32>, tensor<?x3xf32>) {
  %c = tensor.collapse_shape %x [[0, 1]] : tensor<2x6xf32> into tensor<12xf32>
  %e = tensor.expand_shape %x [[0], [1, 2]] output_shape [2, 2, 3] : tensor<2x6xf32> into tensor<2x2x3xf32>
  %f = tensor.collapse_shape %e [[0, 1], [2]] : tensor<2x2x3xf32> into tensor<4x3xf32>
  %g = tensor.cast %f : tensor<4x3xf32> to tensor<?x3xf32>
  return %c, %g : tensor<12xf32>, tensor<?x3xf32>
}"""
    c, g = run(text, x)
    close(c, x.reshape(12))
    close(g, x.reshape(4, 3))
    assert "generic" not in _kinds(text)


def _pack_ref(x, tiles, pos, perm, pad):
    """numpy reference of linalg.pack (2-D source)."""
    rows, cols = x.shape
    t = dict(zip(pos, tiles))
    outer = [-(-s // t[d]) if d in t else s for d, s in enumerate(x.shape)]
    padded = np.full([o * t.get(d, 1) for d, o in enumerate(outer)], pad, dtype=x.dtype)
    padded[:rows, :cols] = x
    blocked = padded.reshape(outer[0], t.get(0, 1), outer[1], t.get(1, 1))
    result = blocked.transpose(0, 2, 1, 3)            # outer0, outer1, tile0, tile1
    inner_order = [{0: 2, 1: 3}[d] for d in pos]
    missing = [a for a in (2, 3) if a not in inner_order]
    result = result.transpose([perm[0], perm[1]] + inner_order + missing)
    return result.reshape(result.shape[:2 + len(pos)])


@pytest.mark.parametrize("dynamic_tiles", [False, True])
def test_pack_with_padding_and_permutations_then_unpack(dynamic_tiles):
    x = ints(-1000, 1000, 7, 10)
    tiles = "[%t0, %t1]" if dynamic_tiles else "[3, 4]"
    tile_types = "tensor<?x?x?x?xi32>" if dynamic_tiles else "tensor<4x2x3x4xi32>"
    text = f"""func.func @main(%x: tensor<7x10xi32>, %t0: index, %t1: index) -> ({tile_types}, tensor<7x10xi32>) {{
  %pad = arith.constant -5 : i32
  %c4 = arith.constant 4 : index
  %c2 = arith.constant 2 : index
  %e = tensor.empty({'%c4, %c2, %t0, %t1' if dynamic_tiles else ''}) : {tile_types}
  %p = linalg.pack %x padding_value(%pad : i32) outer_dims_perm = [1, 0] inner_dims_pos = [1, 0]
       inner_tiles = {tiles} into %e : tensor<7x10xi32> -> {tile_types}
  %u0 = tensor.empty() : tensor<7x10xi32>
  %u = linalg.unpack %p outer_dims_perm = [1, 0] inner_dims_pos = [1, 0] inner_tiles = {tiles}
       into %u0 : {tile_types} -> tensor<7x10xi32>
  return %p, %u : {tile_types}, tensor<7x10xi32>
}}"""
    p, u = run(text, x, 3, 4)
    # inner_dims_pos = [1, 0]: source dim 1 is tiled by 3, dim 0 by 4; outer dims swapped.
    padded = np.full((8, 12), -5)
    padded[:7, :10] = x
    want = padded.reshape(2, 4, 4, 3).transpose(2, 0, 3, 1)   # (o1, o0, tile of d1, tile of d0)
    np.testing.assert_array_equal(p, want)
    np.testing.assert_array_equal(u, x)


def test_bitcasts():
    x = ints(-2**31, 2**31, 4)
    text = """func.func @main(%x: tensor<4xi32>, %b: tensor<2xi8>) -> (tensor<4xf32>, tensor<4xf4E2M1FN>, tensor<2xi8>) {
  %f = tensor.bitcast %x : tensor<4xi32> to tensor<4xf32>
  %n = flow.tensor.bitcast %b : tensor<2xi8> -> tensor<4xf4E2M1FN>
  %back = flow.tensor.bitcast %n : tensor<4xf4E2M1FN> -> tensor<2xi8>
  return %f, %n, %back : tensor<4xf32>, tensor<4xf4E2M1FN>, tensor<2xi8>
}"""
    b = np.array([0x2A, -0x3F])   # nibbles 0xA,0x2 and 0x1,0xC
    f, n, back = run(text, x, b)
    np.testing.assert_array_equal(np.asarray(f, dtype=np.float32),
                                  x.astype(np.int32).view(np.float32))
    # f4E2M1FN: 0xA = -1.0, 0x2 = 1.0, 0x1 = 0.5, 0xC = -2.0 (element 2k is byte k's low nibble)
    np.testing.assert_array_equal(n, [-1.0, 1.0, 0.5, -2.0])
    np.testing.assert_array_equal(back, b)


def test_elementwise_arith_on_tensors():
    x = ints(-128, 128, 3, 2)
    y = f32(3, 2)
    text = """func.func @main(%x: tensor<3x2xi8>, %y: tensor<3x2xf32>) -> (tensor<3x2xi32>, tensor<3x2xf32>) {
  %e = arith.extsi %x : tensor<3x2xi8> to tensor<3x2xi32>
  %s = arith.mulf %y, %y : tensor<3x2xf32>
  return %e, %s : tensor<3x2xi32>, tensor<3x2xf32>
}"""
    e, s = run(text, x, y)
    np.testing.assert_array_equal(e, x)
    close(s, y * y)


def test_host_control_flow_and_calls():
    x = f32(4)
    text = """func.func private @twice(%t: tensor<4xf32>) -> tensor<4xf32> {
  %r = arith.addf %t, %t : tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @main(%x: tensor<4xf32>, %n: index) -> (tensor<4xf32>, tensor<4xf32>, index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %loop = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<4xf32>) {
    %t = func.call @twice(%acc) : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %t : tensor<4xf32>
  }
  %first = tensor.extract %x[%c0] : tensor<4xf32>
  %zero = arith.constant 0.0 : f32
  %pos = arith.cmpf ogt, %first, %zero : f32
  %sel = scf.if %pos -> (tensor<4xf32>) {
    scf.yield %x : tensor<4xf32>
  } else {
    %neg = arith.negf %x : tensor<4xf32>
    scf.yield %neg : tensor<4xf32>
  }
  %w = scf.while (%k = %c1) : (index) -> index {
    %go = arith.cmpi slt, %k, %n : index
    scf.condition(%go) %k : index
  } do {
  ^bb0(%k: index):
    %k2 = arith.muli %k, %n : index
    scf.yield %k2 : index
  }
  return %loop, %sel, %w : tensor<4xf32>, tensor<4xf32>, index
}"""
    loop, sel, w = run(text, x, 3)
    close(loop, x * 8)
    close(sel, x if x[0] > 0 else -x)
    assert int(w) == 3
