"""End to end: whole programs — several generics, broadcasts, transposes, chained dispatches,
several results — on every device, against numpy."""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

import irtk
from tests.conftest import all_device_uris

DEVICES = all_device_uris()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "elementwise.mlir"

CHAIN = """#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#bc = affine_map<(d0, d1, d2) -> (d2)>
#tr = affine_map<(d0, d1, d2) -> (d2, d1, d0)>
func.func @main(%a: tensor<5x6x7xf32>, %b: tensor<7xf32>, %n: tensor<7x6x5xi32>)
    -> (tensor<5x6x7xf32>, tensor<7x6x5xf32>, tensor<5x6x7xi32>) {
  %one = arith.constant 1.0 : f32
  %e0 = tensor.empty() : tensor<5x6x7xf32>
  %s = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a, %b : tensor<5x6x7xf32>, tensor<7xf32>) outs(%e0 : tensor<5x6x7xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %t = arith.mulf %x, %y : f32
    %u = arith.addf %t, %one : f32
    linalg.yield %u : f32
  } -> tensor<5x6x7xf32>
  %e1 = tensor.empty() : tensor<7x6x5xf32>
  %t = linalg.generic {indexing_maps = [#tr, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %n : tensor<5x6x7xf32>, tensor<7x6x5xi32>) outs(%e1 : tensor<7x6x5xf32>) {
  ^bb0(%x: f32, %k: i32, %o: f32):
    %kf = arith.sitofp %k : i32 to f32
    %v = arith.mulf %x, %kf : f32
    linalg.yield %v : f32
  } -> tensor<7x6x5xf32>
  %e2 = tensor.empty() : tensor<5x6x7xi32>
  %idx = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<5x6x7xf32>) outs(%e2 : tensor<5x6x7xi32>) {
  ^bb0(%x: f32, %o: i32):
    %i0 = linalg.index 0 : index
    %i2 = linalg.index 2 : index
    %c0 = arith.index_cast %i0 : index to i32
    %c2 = arith.index_cast %i2 : index to i32
    %c100 = arith.constant 100 : i32
    %m = arith.muli %c0, %c100 : i32
    %r = arith.addi %m, %c2 : i32
    linalg.yield %r : i32
  } -> tensor<5x6x7xi32>
  return %s, %t, %idx : tensor<5x6x7xf32>, tensor<7x6x5xf32>, tensor<5x6x7xi32>
}
"""


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


@pytest.fixture(scope="module")
def chain_module() -> bytes:
    return irtk.compile_str(CHAIN, target="vulkan-spirv,cpu")


@pytest.mark.parametrize("device", DEVICES)
def test_chained_dispatches_with_broadcast_transpose_and_index(chain_module, device):
    rng = rng_for("chain", device)
    a = rng.standard_normal((5, 6, 7)).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)
    n = rng.integers(-50, 50, (7, 6, 5)).astype(np.int32)
    s, t, idx = irtk.load(chain_module, device=device).main(a, b, n)
    s_ref = a.astype(np.float64) * b + 1
    np.testing.assert_allclose(s, s_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t, s_ref.transpose(2, 1, 0) * n, rtol=1e-5, atol=1e-5)
    i0, _, i2 = np.indices((5, 6, 7))
    np.testing.assert_array_equal(idx, i0 * 100 + i2)


@pytest.mark.parametrize("device", DEVICES)
def test_calling_twice_gives_fresh_results(chain_module, device):
    module = irtk.load(chain_module, device=device)
    rng = rng_for("twice", device)
    for _ in range(2):
        a = rng.standard_normal((5, 6, 7)).astype(np.float32)
        b = rng.standard_normal(7).astype(np.float32)
        n = rng.integers(-5, 5, (7, 6, 5)).astype(np.int32)
        s, _, _ = module.main(a, b, n)
        np.testing.assert_allclose(s, a.astype(np.float64) * b + 1, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_example_program(device):
    module = irtk.load(irtk.compile_file(str(EXAMPLE), target="vulkan-spirv,cpu"), device=device)
    rng = rng_for("example", device)
    x = rng.uniform(-3, 3, (2, 4)).astype(np.float32)
    w = rng.standard_normal(4).astype(np.float32)
    y, t = module.main(x, w)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, np.exp(-x64 * x64) * w + np.maximum(x64, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(t, np.trunc(x64).T.astype(np.int32))


def test_rank0_and_rank4(tmp_path):
    text = """func.func @main(%a: tensor<f32>, %b: tensor<2x3x4x5xf32>) -> (tensor<f32>, tensor<2x3x4x5xf32>) {
  %e = tensor.empty() : tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%a : tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<f32>
  %e4 = tensor.empty() : tensor<2x3x4x5xf32>
  %r4 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                        iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%b : tensor<2x3x4x5xf32>) outs(%e4 : tensor<2x3x4x5xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.absf %x : f32
    linalg.yield %y : f32
  } -> tensor<2x3x4x5xf32>
  return %r, %r4 : tensor<f32>, tensor<2x3x4x5xf32>
}
"""
    vmfb = irtk.compile_str(text, target="vulkan-spirv,cpu")
    rng = rng_for("rank")
    b = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    for device in DEVICES:
        r, r4 = irtk.load(vmfb, device=device).main(np.float32(1.5), b)
        assert r.shape == () and float(r) == 2.25
        np.testing.assert_array_equal(r4, np.abs(b))


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_large_dispatch_needs_a_two_dimensional_grid(device):
    """More elements than 65535 workgroups of any size the codegen picks can cover in x."""
    n = (1 << 25) - 3 if device.startswith("vulkan") else (1 << 22) + 5
    text = f"""func.func @main(%a: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %e = tensor.empty() : tensor<{n}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}}
      ins(%a : tensor<{n}xf32>) outs(%e : tensor<{n}xf32>) {{
  ^bb0(%x: f32, %o: f32):
    %c = arith.constant 3.0 : f32
    %y = arith.mulf %x, %c : f32
    linalg.yield %y : f32
  }} -> tensor<{n}xf32>
  return %r : tensor<{n}xf32>
}}
"""
    vmfb = irtk.compile_str(text, target="vulkan-spirv,cpu")
    a = rng_for("large", device).standard_normal(n).astype(np.float32)
    np.testing.assert_array_equal(irtk.load(vmfb, device=device).main(a), a * np.float32(3))
