"""End to end from MLIR text: host control flow around dispatches, globals of several types
updated across calls, fused matmul + bias + relu, and check ops, on every device."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import irtk
from irtk.modules.check import CheckModule
from irtk.runtime import load
from tests.conftest import all_device_uris, target_for

DEVICES = all_device_uris()

LOOP = """
func.func @main(%x: tensor<4x3xf32>, %n: index) -> tensor<4x3xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %half = arith.constant dense<0.5> : tensor<4x3xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<4x3xf32>) {
    %e = tensor.empty() : tensor<4x3xf32>
    %m = linalg.mul ins(%acc, %half : tensor<4x3xf32>, tensor<4x3xf32>) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
    %s = linalg.add ins(%m, %x : tensor<4x3xf32>, tensor<4x3xf32>) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
    scf.yield %s : tensor<4x3xf32>
  }
  return %r : tensor<4x3xf32>
}
"""

WHILE = """
func.func @main(%x: tensor<5xi32>, %limit: i32) -> (tensor<5xi32>, i32) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i32
  %r:2 = scf.while (%v = %x, %k = %zero) : (tensor<5xi32>, i32) -> (tensor<5xi32>, i32) {
    %first = tensor.extract %v[%c0] : tensor<5xi32>
    %go = arith.cmpi slt, %first, %limit : i32
    scf.condition(%go) %v, %k : tensor<5xi32>, i32
  } do {
  ^bb0(%v: tensor<5xi32>, %k: i32):
    %e = tensor.empty() : tensor<5xi32>
    %d = linalg.add ins(%v, %v : tensor<5xi32>, tensor<5xi32>) outs(%e : tensor<5xi32>) -> tensor<5xi32>
    %one = arith.constant 1 : i32
    %k1 = arith.addi %k, %one : i32
    scf.yield %d, %k1 : tensor<5xi32>, i32
  }
  return %r#0, %r#1 : tensor<5xi32>, i32
}
"""

GLOBALS = """
util.global private mutable @sum = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
util.global private mutable @calls = 10 : i64
util.global private mutable @scale = 1.5 : f32
func.func @step(%a: tensor<3xf32>) -> (tensor<3xf32>, i64, f32) {
  %g = util.global.load @sum : tensor<3xf32>
  %e = tensor.empty() : tensor<3xf32>
  %s = linalg.add ins(%g, %a : tensor<3xf32>, tensor<3xf32>) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  util.global.store %s, @sum : tensor<3xf32>
  %c = util.global.load @calls : i64
  %one = arith.constant 1 : i64
  %c1 = arith.addi %c, %one : i64
  util.global.store %c1, @calls : i64
  %f = util.global.load @scale : f32
  %two = arith.constant 2.0 : f32
  %f2 = arith.mulf %f, %two : f32
  util.global.store %f2, @scale : f32
  return %s, %c1, %f2 : tensor<3xf32>, i64, f32
}
"""

MATMUL = """
func.func @main(%a: tensor<6x4xf32>, %b: tensor<4x5xf32>, %bias: tensor<5xf32>) -> tensor<6x5xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x5xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<6x5xf32>) -> tensor<6x5xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<6x4xf32>, tensor<4x5xf32>) outs(%z : tensor<6x5xf32>) -> tensor<6x5xf32>
  %biased = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                            iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<6x5xf32>, tensor<5xf32>) outs(%e : tensor<6x5xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<6x5xf32>
  return %biased : tensor<6x5xf32>
}
"""

CHECKS = """
func.func @passes() {
  %x = util.unfoldable_constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %e = tensor.empty() : tensor<3xf32>
  %y = linalg.add ins(%x, %x : tensor<3xf32>, tensor<3xf32>) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  check.expect_almost_eq_const(%y, dense<[2.0, 4.0, 6.0]> : tensor<3xf32>) : tensor<3xf32>
  return
}
func.func @fails() {
  %x = util.unfoldable_constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %e = tensor.empty() : tensor<3xf32>
  %y = linalg.add ins(%x, %x : tensor<3xf32>, tensor<3xf32>) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  check.expect_eq_const(%y, dense<[2.0, 4.0, 7.0]> : tensor<3xf32>) : tensor<3xf32>
  check.expect_almost_eq_const(%y, dense<[2.0, 4.5, 6.0]> : tensor<3xf32>) : tensor<3xf32>
  return
}
"""


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def compiled(text: str, device: str) -> bytes:
    return irtk.compile_str(text, target=target_for(device))


@pytest.mark.parametrize("device", DEVICES)
def test_scf_for_with_a_tensor_iter_arg(device):
    rng = rng_for("for", device)
    m = irtk.load(compiled(LOOP, device), device=device)
    x = rng.uniform(-4, 4, (4, 3)).astype(np.float32)
    for n in (0, 1, 5):
        expected = x.astype(np.float64)
        for _ in range(n):
            expected = expected * 0.5 + x
        np.testing.assert_allclose(m.main(x, n), expected, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_scf_while_on_a_value_read_from_the_device(device):
    m = irtk.load(compiled(WHILE, device), device=device)
    x = np.array([3, -1, 7, 0, 2], np.int32)
    doubled, steps = m.main(x, np.int32(40))
    assert int(steps) == 4                        # 3 -> 6 -> 12 -> 24 -> 48
    np.testing.assert_array_equal(doubled, x * 16)


@pytest.mark.parametrize("device", DEVICES)
def test_globals_of_several_types_persist_across_calls(device):
    rng = rng_for("globals", device)
    m = irtk.load(compiled(GLOBALS, device), device=device)
    total = np.array([1.0, 2.0, 3.0])
    for k in range(1, 4):
        a = rng.uniform(-2, 2, 3).astype(np.float32)
        total = total + a
        s, calls, scale = m.step(a)
        np.testing.assert_allclose(s, total, rtol=1e-6)
        assert int(calls) == 10 + k and float(scale) == 1.5 * 2 ** k


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_bias_relu_from_mlir(device):
    rng = rng_for("mm", device)
    a = rng.standard_normal((6, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    dumps: list[str] = []
    irtk.compile_str(MATMUL, target="cpu", dump_after="dispatch", dump=dumps.append)
    assert dumps[0].count("flow.dispatch") == 1
    m = irtk.load(compiled(MATMUL, device), device=device)
    np.testing.assert_allclose(m.main(a, b, bias),
                               np.maximum(a.astype(np.float64) @ b + bias, 0), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_check_ops_report_through_the_check_module(device):
    check = CheckModule()
    m = load(compiled(CHECKS, device), device=device, native_modules=[check])
    m.passes()
    assert check.take_failures() == []
    m.fails()
    failures = check.take_failures()
    assert len(failures) == 2
    assert failures[0].startswith("Expected equality")
    assert "Expected near equality" in failures[1] and "index 1" in failures[1]
