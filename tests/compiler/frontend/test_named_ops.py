"""Each linalg named op, imported into generics and evaluated, against numpy on random data."""
from __future__ import annotations

import numpy as np
import pytest

from tests.compiler.frontend.helpers import close, f32, ints, run


def _binary_program(op: str, a: str, b: str, c: str, extra: str = "") -> str:
    return f"""func.func @main(%a: {a}, %b: {b}, %c: {c}) -> {c} {{
  %r = linalg.{op} {extra} ins(%a, %b : {a}, {b}) outs(%c : {c}) -> {c}
  return %r : {c}
}}"""


def test_matmul_f32_accumulates_into_outs():
    a, b, c = f32(3, 5), f32(5, 4), f32(3, 4)
    (r,) = run(_binary_program("matmul", "tensor<3x5xf32>", "tensor<5x4xf32>",
                               "tensor<3x4xf32>"), a, b, c)
    close(r, c + a @ b)


def test_matmul_i8_extends_signed_to_i32():
    a, b, c = ints(-128, 128, 4, 6), ints(-128, 128, 6, 3), ints(-1000, 1000, 4, 3)
    (r,) = run(_binary_program("matmul", "tensor<4x6xi8>", "tensor<6x3xi8>",
                               "tensor<4x3xi32>"), a, b, c)
    np.testing.assert_array_equal(r, c + a @ b)


def test_matmul_cast_unsigned():
    a, b, c = ints(-128, 128, 2, 3), ints(-128, 128, 3, 2), ints(0, 10, 2, 2)
    text = _binary_program("matmul", "tensor<2x3xi8>", "tensor<3x2xi8>", "tensor<2x2xi32>",
                           "{cast = #linalg.type_fn<cast_unsigned>}")
    (r,) = run(text, a, b, c)
    np.testing.assert_array_equal(r, c + (a % 256) @ (b % 256))


def test_matmul_f16_inputs_f32_accumulator():
    a = f32(3, 4).astype(np.float16).astype(np.float64)
    b = f32(4, 2).astype(np.float16).astype(np.float64)
    c = f32(3, 2)
    (r,) = run(_binary_program("matmul", "tensor<3x4xf16>", "tensor<4x2xf16>",
                               "tensor<3x2xf32>"), a, b, c)
    close(r, c + a @ b)


def test_matmul_with_indexing_maps_transposes_lhs():
    a, b, c = f32(5, 3), f32(5, 4), f32(3, 4)
    maps = ("indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>,"
            " affine_map<(m, n, k) -> (m, n)>]")
    text = _binary_program("matmul", "tensor<5x3xf32>", "tensor<5x4xf32>", "tensor<3x4xf32>",
                           maps)
    (r,) = run(text, a, b, c)
    close(r, c + a.T @ b)


@pytest.mark.parametrize(("op", "shapes", "ref"), [
    ("batch_matmul", [(2, 3, 4), (2, 4, 5), (2, 3, 5)], lambda a, b: a @ b),
    ("matvec", [(3, 4), (4,), (3,)], lambda a, b: a @ b),
    ("vecmat", [(4,), (4, 3), (3,)], lambda a, b: a @ b),
    ("batch_matvec", [(2, 3, 4), (2, 4), (2, 3)], lambda a, b: np.einsum("bmk,bk->bm", a, b)),
    ("dot", [(6,), (6,), ()], lambda a, b: a @ b),
    ("matmul_transpose_b", [(3, 4), (5, 4), (3, 5)], lambda a, b: a @ b.T),
    ("batch_reduce_matmul", [(2, 3, 4), (2, 4, 5), (3, 5)],
     lambda a, b: np.einsum("bmk,bkn->mn", a, b)),
])
def test_contractions(op, shapes, ref):
    def ty(s):
        return "tensor<" + "x".join([str(d) for d in s] + ["f32"]) + ">"
    a, b, c = (f32(*s) for s in shapes)
    (r,) = run(_binary_program(op, *(ty(s) for s in shapes)), a, b, c)
    close(r, c + ref(a, b))


def test_quantized_matmul_subtracts_zero_points():
    a, b = ints(-128, 128, 3, 4), ints(-128, 128, 4, 5)
    azp, bzp = -7, 12
    text = """func.func @main(%a: tensor<3x4xi8>, %b: tensor<4x5xi8>, %azp: i32, %bzp: i32,
                         %c: tensor<3x5xi32>) -> tensor<3x5xi32> {
  %r = linalg.quantized_matmul ins(%a, %b, %azp, %bzp : tensor<3x4xi8>, tensor<4x5xi8>, i32, i32)
         outs(%c : tensor<3x5xi32>) -> tensor<3x5xi32>
  return %r : tensor<3x5xi32>
}"""
    c = ints(-5, 5, 3, 5)
    (r,) = run(text, a, b, azp, bzp, c)
    np.testing.assert_array_equal(r, c + (a - azp) @ (b - bzp))


def _conv_ref_nhwc(x, w, s, d):
    n, h, wd, ci = x.shape
    kh, kw, _, co = w.shape
    oh = (h - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (wd - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((n, oh, ow, co))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, i * d[0]: i * d[0] + s[0] * (oh - 1) + 1: s[0],
                      j * d[1]: j * d[1] + s[1] * (ow - 1) + 1: s[1], :]
            out += np.einsum("nhwc,cf->nhwf", patch, w[i, j])
    return out


@pytest.mark.parametrize(("strides", "dilations"), [((1, 1), (1, 1)), ((2, 1), (1, 2))])
def test_conv_2d_nhwc_hwcf(strides, dilations):
    x, w = f32(2, 7, 8, 3), f32(3, 2, 3, 4)
    ref = _conv_ref_nhwc(x, w, strides, dilations)
    o = ref.shape
    text = f"""func.func @main(%x: tensor<2x7x8x3xf32>, %w: tensor<3x2x3x4xf32>) -> tensor<{o[0]}x{o[1]}x{o[2]}x{o[3]}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{o[0]}x{o[1]}x{o[2]}x{o[3]}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{o[0]}x{o[1]}x{o[2]}x{o[3]}xf32>) -> tensor<{o[0]}x{o[1]}x{o[2]}x{o[3]}xf32>
  %r = linalg.conv_2d_nhwc_hwcf {{dilations = dense<[{dilations[0]}, {dilations[1]}]> : tensor<2xi64>,
                                  strides = dense<[{strides[0]}, {strides[1]}]> : tensor<2xi64>}}
     ins(%x, %w : tensor<2x7x8x3xf32>, tensor<3x2x3x4xf32>) outs(%f : tensor<{o[0]}x{o[1]}x{o[2]}x{o[3]}xf32>) -> tensor<{o[0]}x{o[1]}x{o[2]}x{o[3]}xf32>
  return %r : tensor<{o[0]}x{o[1]}x{o[2]}x{o[3]}xf32>
}}"""
    (r,) = run(text, x, w)
    close(r, ref)


def test_conv_2d_nchw_fchw_and_depthwise():
    x, w = f32(1, 3, 6, 5), f32(4, 3, 3, 2)
    ref = _conv_ref_nhwc(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), (1, 1), (1, 1))
    text = """func.func @main(%x: tensor<1x3x6x5xf32>, %w: tensor<4x3x3x2xf32>, %o: tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32> {
  %r = linalg.conv_2d_nchw_fchw ins(%x, %w : tensor<1x3x6x5xf32>, tensor<4x3x3x2xf32>) outs(%o : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %r : tensor<1x4x4x4xf32>
}"""
    o = f32(1, 4, 4, 4)
    (r,) = run(text, x, w, o)
    close(r, o + ref.transpose(0, 3, 1, 2))
    xd, wd = f32(1, 5, 5, 3), f32(2, 2, 3)
    text = """func.func @main(%x: tensor<1x5x5x3xf32>, %w: tensor<2x2x3xf32>, %o: tensor<1x4x4x3xf32>) -> tensor<1x4x4x3xf32> {
  %r = linalg.depthwise_conv_2d_nhwc_hwc ins(%x, %w : tensor<1x5x5x3xf32>, tensor<2x2x3xf32>) outs(%o : tensor<1x4x4x3xf32>) -> tensor<1x4x4x3xf32>
  return %r : tensor<1x4x4x3xf32>
}"""
    o = f32(1, 4, 4, 3)
    want = o.copy()
    for i in range(2):
        for j in range(2):
            want += xd[:, i:i + 4, j:j + 4, :] * wd[i, j]
    (r,) = run(text, xd, wd, o)
    close(r, want)


@pytest.mark.parametrize(("kind", "reduce", "init"), [("max", np.max, -np.inf), ("sum", np.sum, 0.0)])
def test_pooling_nhwc(kind, reduce, init):
    x = f32(1, 6, 6, 2)
    text = f"""func.func @main(%x: tensor<1x6x6x2xf32>) -> tensor<1x3x3x2xf32> {{
  %init = arith.constant {'0xFF800000' if kind == 'max' else '0.0'} : f32
  %w = tensor.empty() : tensor<2x2xf32>
  %e = tensor.empty() : tensor<1x3x3x2xf32>
  %f = linalg.fill ins(%init : f32) outs(%e : tensor<1x3x3x2xf32>) -> tensor<1x3x3x2xf32>
  %r = linalg.pooling_nhwc_{kind} {{dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}}
     ins(%x, %w : tensor<1x6x6x2xf32>, tensor<2x2xf32>) outs(%f : tensor<1x3x3x2xf32>) -> tensor<1x3x3x2xf32>
  return %r : tensor<1x3x3x2xf32>
}}"""
    (r,) = run(text, x)
    want = reduce(x.reshape(1, 3, 2, 3, 2, 2), axis=(2, 4))
    close(r, want)


def test_softmax_dynamic():
    x = f32(3, 7) * 3
    text = """func.func @main(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %x, %c0 : tensor<?x?xf32>
  %d1 = tensor.dim %x, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%d0, %d1) : tensor<?x?xf32>
  %r = linalg.softmax dimension(1) ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}"""
    (r,) = run(text, x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    close(r, e / e.sum(axis=1, keepdims=True))


def test_fill_transpose_broadcast():
    x = f32(2, 3, 4)
    text = """func.func @main(%x: tensor<2x3x4xf32>, %v: tensor<3xf32>) -> (tensor<4x2x3xf32>, tensor<3x5xf32>, tensor<2x2xi32>) {
  %e = tensor.empty() : tensor<4x2x3xf32>
  %t = linalg.transpose ins(%x : tensor<2x3x4xf32>) outs(%e : tensor<4x2x3xf32>) permutation = [2, 0, 1]
  %e2 = tensor.empty() : tensor<3x5xf32>
  %b = linalg.broadcast ins(%v : tensor<3xf32>) outs(%e2 : tensor<3x5xf32>) dimensions = [1]
  %c = arith.constant 7 : i32
  %e3 = tensor.empty() : tensor<2x2xi32>
  %f = linalg.fill ins(%c : i32) outs(%e3 : tensor<2x2xi32>) -> tensor<2x2xi32>
  return %t, %b, %f : tensor<4x2x3xf32>, tensor<3x5xf32>, tensor<2x2xi32>
}"""
    v = f32(3)
    t, b, f = run(text, x, v)
    close(t, x.transpose(2, 0, 1))
    close(b, np.broadcast_to(v[:, None], (3, 5)))
    np.testing.assert_array_equal(f, np.full((2, 2), 7))


def test_reduce_and_map_regions_and_short_forms():
    x, y = f32(4, 5), f32(4, 5)
    text = """func.func @main(%x: tensor<4x5xf32>, %y: tensor<4x5xf32>, %init: tensor<4xf32>) -> (tensor<4xf32>, tensor<4x5xf32>, tensor<4xf32>) {
  %r = linalg.reduce ins(%x : tensor<4x5xf32>) outs(%init : tensor<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.mulf %in, %in : f32
      %a = arith.addf %s, %acc : f32
      linalg.yield %a : f32
    }
  %e = tensor.empty() : tensor<4x5xf32>
  %m = linalg.map ins(%x, %y : tensor<4x5xf32>, tensor<4x5xf32>) outs(%e : tensor<4x5xf32>)
    (%a: f32, %b: f32) {
      %s = arith.subf %a, %b : f32
      linalg.yield %s : f32
    }
  %r2 = linalg.reduce { arith.maximumf } ins(%y : tensor<4x5xf32>) outs(%init : tensor<4xf32>) dimensions = [1]
  return %r, %m, %r2 : tensor<4xf32>, tensor<4x5xf32>, tensor<4xf32>
}"""
    init = f32(4)
    r, m, r2 = run(text, x, y, init)
    close(r, init + (x * x).sum(axis=1))
    close(m, x - y)
    close(r2, np.maximum(init, y.max(axis=1)))


@pytest.mark.parametrize(("op", "ref"), [
    ("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide),
    ("max", np.maximum), ("min", np.minimum), ("powf", lambda a, b: np.abs(a) ** b),
])
def test_elementwise_binary(op, ref):
    a, b = f32(3, 4), f32(3, 4)
    if op == "powf":
        a = np.abs(a)
    text = _binary_program(op, "tensor<3x4xf32>", "tensor<3x4xf32>", "tensor<3x4xf32>")
    (r,) = run(text, a, b, f32(3, 4))
    close(r, ref(a, b), 1e-4)


@pytest.mark.parametrize(("op", "ref"), [
    ("exp", np.exp), ("log", lambda x: np.log(np.abs(x) + 0.1)), ("abs", np.abs),
    ("negf", np.negative), ("sqrt", lambda x: np.sqrt(np.abs(x))), ("tanh", np.tanh),
    ("floor", np.floor), ("ceil", np.ceil), ("square", np.square),
    ("reciprocal", lambda x: 1 / x), ("erf", None),
])
def test_elementwise_unary(op, ref):
    import math
    x = f32(2, 5)
    if op == "log":
        x = np.abs(x) + 0.1
        ref = np.log
    if op == "sqrt":
        x = np.abs(x)
        ref = np.sqrt
    if ref is None:
        ref = np.vectorize(math.erf)
    text = f"""func.func @main(%x: tensor<2x5xf32>, %o: tensor<2x5xf32>) -> tensor<2x5xf32> {{
  %r = linalg.{op} ins(%x : tensor<2x5xf32>) outs(%o : tensor<2x5xf32>) -> tensor<2x5xf32>
  return %r : tensor<2x5xf32>
}}"""
    (r,) = run(text, x, f32(2, 5))
    close(r, ref(x), 1e-5)


def test_select_named_op():
    c, a, b = ints(0, 2, 6), f32(6), f32(6)
    text = """func.func @main(%c: tensor<6xi1>, %a: tensor<6xf32>, %b: tensor<6xf32>, %o: tensor<6xf32>) -> tensor<6xf32> {
  %r = linalg.select ins(%c, %a, %b : tensor<6xi1>, tensor<6xf32>, tensor<6xf32>) outs(%o : tensor<6xf32>) -> tensor<6xf32>
  return %r : tensor<6xf32>
}"""
    (r,) = run(text, c, a, b, f32(6))
    close(r, np.where(c != 0, a, b))


def _t(shape) -> str:
    return "tensor<" + "x".join([str(d) for d in shape] + ["f32"]) + ">"


@pytest.mark.parametrize(("op", "x_shape", "w_shape", "to_nhwc", "to_hwcf", "from_nhwc"), [
    ("conv_2d_nhwc_fhwc", (1, 5, 6, 2), (3, 2, 3, 2), lambda x: x,
     lambda w: w.transpose(1, 2, 3, 0), lambda o: o),
    ("conv_1d_nwc_wcf", (2, 7, 3), (3, 3, 4), lambda x: x[:, None],
     lambda w: w[None], lambda o: o[:, 0]),
    ("conv_2d", (6, 5), (2, 3), lambda x: x[None, :, :, None],
     lambda w: w[:, :, None, None], lambda o: o[0, :, :, 0]),
])
def test_conv_layouts(op, x_shape, w_shape, to_nhwc, to_hwcf, from_nhwc):
    x, w = f32(*x_shape), f32(*w_shape)
    want = from_nhwc(_conv_ref_nhwc(to_nhwc(x), to_hwcf(w), (1, 1), (1, 1)))
    o = f32(*want.shape)
    text = f"""func.func @main(%x: {_t(x.shape)}, %w: {_t(w.shape)}, %o: {_t(o.shape)}) -> {_t(o.shape)} {{
  %r = linalg.{op} ins(%x, %w : {_t(x.shape)}, {_t(w.shape)}) outs(%o : {_t(o.shape)}) -> {_t(o.shape)}
  return %r : {_t(o.shape)}
}}"""
    (r,) = run(text, x, w, o)
    close(r, o + want)


def test_pooling_nchw_max_with_strides():
    x = f32(1, 2, 7, 7)
    text = """func.func @main(%x: tensor<1x2x7x7xf32>, %o: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
  %w = tensor.empty() : tensor<3x3xf32>
  %r = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
     ins(%x, %w : tensor<1x2x7x7xf32>, tensor<3x3xf32>) outs(%o : tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  return %r : tensor<1x2x3x3xf32>
}"""
    o = np.full((1, 2, 3, 3), -np.inf)
    (r,) = run(text, x, o)
    want = np.array([[[[x[0, c, 2 * i:2 * i + 3, 2 * j:2 * j + 3].max() for j in range(3)]
                       for i in range(3)] for c in range(2)]])
    close(r, want)


def test_quantized_conv_subtracts_zero_points():
    x, w = ints(-128, 128, 1, 4, 4, 2), ints(-128, 128, 2, 2, 2, 3)
    text = """func.func @main(%x: tensor<1x4x4x2xi8>, %w: tensor<2x2x2x3xi8>, %xz: i32, %wz: i32, %o: tensor<1x3x3x3xi32>) -> tensor<1x3x3x3xi32> {
  %r = linalg.conv_2d_nhwc_hwcf_q ins(%x, %w, %xz, %wz : tensor<1x4x4x2xi8>, tensor<2x2x2x3xi8>, i32, i32) outs(%o : tensor<1x3x3x3xi32>) -> tensor<1x3x3x3xi32>
  return %r : tensor<1x3x3x3xi32>
}"""
    o = ints(-9, 9, 1, 3, 3, 3)
    (r,) = run(text, x, w, 5, -3, o)
    want = o + _conv_ref_nhwc((x - 5).astype(np.float64), (w + 3).astype(np.float64), (1, 1), (1, 1))
    np.testing.assert_array_equal(r, want.astype(np.int64))
