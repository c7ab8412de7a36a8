"""Ops torch-mlir writes for common models, end to end on every device against numpy in
float64: grouped convolutions (NGCHW/GFCHW for `groups > 1`, and NHWGC/GFHWC), depthwise NCHW
convolution with a stride, NCHW max pooling, `expand_shape` with `output_shape`, `math.erf`
(GELU)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import irtk
from tests.compiler.frontend.test_named_ops import _conv_ref_nhwc
from tests.conftest import all_device_uris, target_for

PROGRAM = """
func.func @grouped(%x: tensor<1x2x3x7x7xf32>, %w: tensor<2x4x3x3x3xf32>) -> tensor<1x2x4x5x5xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x2x4x5x5xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x2x4x5x5xf32>) -> tensor<1x2x4x5x5xf32>
  %r = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
     ins(%x, %w : tensor<1x2x3x7x7xf32>, tensor<2x4x3x3x3xf32>) outs(%f : tensor<1x2x4x5x5xf32>) -> tensor<1x2x4x5x5xf32>
  return %r : tensor<1x2x4x5x5xf32>
}
func.func @grouped_nhwc(%x: tensor<1x6x6x2x3xf32>, %w: tensor<2x4x2x2x3xf32>) -> tensor<1x5x5x2x4xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x5x5x2x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x5x5x2x4xf32>) -> tensor<1x5x5x2x4xf32>
  %r = linalg.conv_2d_nhwgc_gfhwc {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
     ins(%x, %w : tensor<1x6x6x2x3xf32>, tensor<2x4x2x2x3xf32>) outs(%f : tensor<1x5x5x2x4xf32>) -> tensor<1x5x5x2x4xf32>
  return %r : tensor<1x5x5x2x4xf32>
}
func.func @depthwise(%x: tensor<1x4x9x9xf32>, %w: tensor<4x3x3xf32>) -> tensor<1x4x4x4xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x4x4x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %r = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
     ins(%x, %w : tensor<1x4x9x9xf32>, tensor<4x3x3xf32>) outs(%f : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %r : tensor<1x4x4x4xf32>
}
func.func @maxpool(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %k = tensor.empty() : tensor<2x2xf32>
  %e = tensor.empty() : tensor<1x3x4x4xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %r = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
     ins(%x, %k : tensor<1x3x8x8xf32>, tensor<2x2xf32>) outs(%f : tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  return %r : tensor<1x3x4x4xf32>
}
func.func @expand(%x: tensor<12xf32>) -> tensor<3x4xf32> {
  %r = tensor.expand_shape %x [[0, 1]] output_shape [3, 4] : tensor<12xf32> into tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}
func.func @gelu(%x: tensor<64xf32>) -> tensor<64xf32> {
  %half = arith.constant dense<0.5> : tensor<64xf32>
  %one = arith.constant dense<1.0> : tensor<64xf32>
  %rs2 = arith.constant dense<0.70710678118654752> : tensor<64xf32>
  %s = arith.mulf %x, %rs2 : tensor<64xf32>
  %e = math.erf %s : tensor<64xf32>
  %p = arith.addf %e, %one : tensor<64xf32>
  %h = arith.mulf %x, %half : tensor<64xf32>
  %r = arith.mulf %h, %p : tensor<64xf32>
  return %r : tensor<64xf32>
}
"""


@pytest.fixture(scope="module", params=all_device_uris())
def module(request):
    uri = request.param
    return irtk.load(irtk.compile_str(PROGRAM, target=target_for(uri)), uri)


def rand(*shape: int) -> np.ndarray:
    return np.random.default_rng().standard_normal(shape).astype(np.float32)


def _conv(x: np.ndarray, w: np.ndarray, stride: int = 1) -> np.ndarray:
    """NCHW x FCHW -> NFHW in float64, through the NHWC reference of test_named_ops."""
    nhwc = _conv_ref_nhwc(x.transpose(0, 2, 3, 1).astype(np.float64), w.transpose(2, 3, 1, 0),
                          (stride, stride), (1, 1))
    return nhwc.transpose(0, 3, 1, 2)


def test_grouped_convolutions(module):
    x, w = rand(1, 2, 3, 7, 7), rand(2, 4, 3, 3, 3)
    want = np.stack([_conv(x[:, g], w[g]) for g in range(2)], axis=1)
    np.testing.assert_allclose(module.grouped(x, w), want, rtol=1e-4, atol=1e-4)
    xh, wh = rand(1, 6, 6, 2, 3), rand(2, 4, 2, 2, 3)
    want = np.stack([_conv(xh[:, :, :, g].transpose(0, 3, 1, 2), wh[g].transpose(0, 3, 1, 2))
                     for g in range(2)], axis=1)          # n g f h w
    np.testing.assert_allclose(module.grouped_nhwc(xh, wh), want.transpose(0, 3, 4, 1, 2),
                               rtol=1e-4, atol=1e-4)


def test_depthwise_nchw_with_stride(module):
    x, w = rand(1, 4, 9, 9), rand(4, 3, 3)
    want = np.concatenate([_conv(x[:, c:c + 1], w[c:c + 1, None], stride=2) for c in range(4)],
                          axis=1)
    np.testing.assert_allclose(module.depthwise(x, w), want, rtol=1e-4, atol=1e-4)


def test_max_pooling_nchw(module):
    x = rand(1, 3, 8, 8)
    want = x.reshape(1, 3, 4, 2, 4, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(module.maxpool(x), want)


def test_expand_shape_with_output_shape(module):
    x = rand(12)
    np.testing.assert_array_equal(module.expand(x), x.reshape(3, 4))


def test_gelu_through_erf(module):
    x = rand(64) * 3
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    np.testing.assert_allclose(module.gelu(x), want, rtol=2e-6, atol=2e-6)
