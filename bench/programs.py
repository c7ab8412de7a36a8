"""The programs the bench/ tables share: issue-sized matmuls, a 3x3 convolution with relu, an
MLP, an elementwise add + relu, a row sum and a softmax, each as MLIR text with its input
shapes and numpy's computation of the same thing (the float64 check and the numpy column).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


def _matmul(m: int, n: int, k: int) -> str:
    return f"""
func.func @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)
                     outs(%f : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}"""


CONV = """
func.func @main(%x: tensor<1x58x58x64xf32>, %w: tensor<3x3x64x64xf32>) -> tensor<1x56x56x64xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x56x56x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w : tensor<1x58x58x64xf32>, tensor<3x3x64x64xf32>) outs(%f : tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
       ins(%c : tensor<1x56x56x64xf32>) outs(%e : tensor<1x56x56x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.maximumf %v, %z : f32
    linalg.yield %m : f32
  } -> tensor<1x56x56x64xf32>
  return %r : tensor<1x56x56x64xf32>
}"""

MLP = """
func.func @main(%x: tensor<1x784xf32>, %w1: tensor<784x256xf32>, %w2: tensor<256x10xf32>) -> tensor<1x10xf32> {
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<1x256xf32>
  %f1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<1x784xf32>, tensor<784x256xf32>) outs(%f1 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>],
       iterator_types = ["parallel", "parallel"]} ins(%h : tensor<1x256xf32>) outs(%e1 : tensor<1x256xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.maximumf %v, %z : f32
    linalg.yield %m : f32
  } -> tensor<1x256xf32>
  %e2 = tensor.empty() : tensor<1x10xf32>
  %f2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<1x10xf32>) -> tensor<1x10xf32>
  %y = linalg.matmul ins(%r, %w2 : tensor<1x256xf32>, tensor<256x10xf32>) outs(%f2 : tensor<1x10xf32>) -> tensor<1x10xf32>
  return %y : tensor<1x10xf32>
}"""

def relu_add(n: int) -> str:
    """relu(a + b) over `n` f32: one elementwise dispatch (at small n, a per-call figure)."""
    t = f"tensor<{n}xf32>"
    return f"""
func.func @main(%a: {t}, %b: {t}) -> {t} {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : {t}
  %r = linalg.generic {{indexing_maps = [affine_map<(d) -> (d)>, affine_map<(d) -> (d)>, affine_map<(d) -> (d)>],
       iterator_types = ["parallel"]}} ins(%a, %b : {t}, {t}) outs(%e : {t}) {{
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %m = arith.maximumf %s, %z : f32
    linalg.yield %m : f32
  }} -> {t}
  return %r : {t}
}}"""


RELU_ADD = relu_add(1048576)

ROW_SUM = """
func.func @main(%x: tensor<1024x1024xf32>) -> tensor<1024xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1024xf32>) -> tensor<1024xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
       iterator_types = ["parallel", "reduction"]} ins(%x : tensor<1024x1024xf32>) outs(%f : tensor<1024xf32>) {
  ^bb0(%v: f32, %a: f32):
    %t = arith.addf %a, %v : f32
    linalg.yield %t : f32
  } -> tensor<1024xf32>
  return %r : tensor<1024xf32>
}"""

SOFTMAX = """
func.func @main(%x: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %e = tensor.empty() : tensor<256x1024xf32>
  %r = linalg.softmax dimension(1) ins(%x : tensor<256x1024xf32>) outs(%e : tensor<256x1024xf32>) -> tensor<256x1024xf32>
  return %r : tensor<256x1024xf32>
}"""


def _conv_relu(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """NHWC x HWCF, stride 1, no padding, then relu (as CONV)."""
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))  # n,h,w,c,kh,kw
    return np.maximum(np.einsum("nhwcij,ijcf->nhwf", windows, w, optimize=True), 0)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# name -> (MLIR, input shapes, numpy's computation, the numpy reference executor is quick enough
# on it)
PROGRAMS: dict[str, tuple[str, list[tuple[int, ...]], Callable[..., Any], bool]] = {
    "matmul 512^3": (_matmul(512, 512, 512), [(512, 512), (512, 512)], np.matmul, True),
    "matmul 1024^3": (_matmul(1024, 1024, 1024), [(1024, 1024), (1024, 1024)], np.matmul,
                      False),
    "conv 3x3 56x56x64 + relu": (CONV, [(1, 58, 58, 64), (3, 3, 64, 64)], _conv_relu, True),
    "MLP 1x784->256->10": (MLP, [(1, 784), (784, 256), (256, 10)],
                           lambda x, a, b: np.maximum(x @ a, 0) @ b, True),
    "relu(a+b) 1M": (RELU_ADD, [(1048576,), (1048576,)], lambda a, b: np.maximum(a + b, 0),
                     True),
    "row sum 1024^2": (ROW_SUM, [(1024, 1024)], lambda x: x.sum(axis=1), True),
    "softmax 256x1024": (SOFTMAX, [(256, 1024)], _softmax, True),
}
