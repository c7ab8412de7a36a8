"""f64 -> f32 demotion, by default (`demote_f64=False`, `irtk compile --keep-f64` turn it
off), as IREE's `--iree-input-demote-f64-to-f32`: a LayerNorm-style program computing its mean in f64 runs on
every device (SwiftShader has no f64) in f32; f64 signatures and constants follow; an f64
bitcast is a located error."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import irtk
from irtk.compiler.frontend import parse_mlir
from tests.conftest import all_device_uris, target_for

# x - mean(x) + eps, with x widened to f64, the mean and eps in f64, truncated back to f32.
CENTER = """func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %eps = arith.constant 1.0e-05 : f64
  %n = arith.constant 8.0 : f64
  %e64 = tensor.empty() : tensor<2x8xf64>
  %x64 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x8xf32>) outs(%e64 : tensor<2x8xf64>) {
  ^bb0(%a: f32, %o: f64):
    %w = arith.extf %a : f32 to f64
    linalg.yield %w : f64
  } -> tensor<2x8xf64>
  %z = arith.constant 0.0 : f64
  %s0 = tensor.empty() : tensor<2xf64>
  %s1 = linalg.fill ins(%z : f64) outs(%s0 : tensor<2xf64>) -> tensor<2xf64>
  %sum = linalg.reduce ins(%x64 : tensor<2x8xf64>) outs(%s1 : tensor<2xf64>) dimensions = [1]
    (%a: f64, %acc: f64) {
      %t = arith.addf %a, %acc : f64
      linalg.yield %t : f64
    }
  %e = tensor.empty() : tensor<2x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x64, %sum : tensor<2x8xf64>, tensor<2xf64>) outs(%e : tensor<2x8xf32>) {
  ^bb0(%a: f64, %s: f64, %o: f32):
    %m = arith.divf %s, %n : f64
    %d = arith.subf %a, %m : f64
    %de = arith.addf %d, %eps : f64
    %t = arith.truncf %de : f64 to f32
    linalg.yield %t : f32
  } -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}
"""

SIGNATURE = """func.func @main(%x: tensor<3xf64>, %s: f64) -> tensor<3xf64> {
  %c = arith.constant dense<[0.1, 0.2, 0.3]> : tensor<3xf64>
  %y = arith.addf %x, %c : tensor<3xf64>
  %e = tensor.empty() : tensor<3xf64>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%y : tensor<3xf64>) outs(%e : tensor<3xf64>) {
  ^bb0(%a: f64, %o: f64):
    %m = arith.mulf %a, %s : f64
    linalg.yield %m : f64
  } -> tensor<3xf64>
  return %r : tensor<3xf64>
}
"""


@pytest.mark.parametrize("uri", all_device_uris())
def test_an_f64_computation_runs_in_f32_on_every_device(uri):
    m = irtk.load(irtk.compile_str(CENTER, target=target_for(uri)), uri)
    x = np.random.default_rng().standard_normal((2, 8)).astype(np.float32)
    x64 = x.astype(np.float64)
    want = x64 - x64.mean(axis=1, keepdims=True) + 1e-5
    r = m.main(x)
    assert r.dtype == np.float32
    np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-6)


def test_without_demotion_a_device_without_f64_is_told_how():
    with pytest.raises(irtk.CompileError, match="computes in f64.*leave out --keep-f64"):
        irtk.compile_str(CENTER, target="vulkan-spirv", demote_f64=False)


@pytest.mark.parametrize("uri", all_device_uris())
def test_signatures_constants_and_captured_scalars_become_f32(uri):
    m = irtk.load(irtk.compile_str(SIGNATURE, target=target_for(uri), demote_f64=True), uri)
    assert [str(t) for t in m.main.arg_types][0] == "3xf32"
    x = np.random.default_rng().standard_normal(3).astype(np.float32)
    r = m.main(x, 1.5)
    assert r.dtype == np.float32
    c = np.array([0.1, 0.2, 0.3], np.float32)   # constants rounded to f32
    np.testing.assert_allclose(r, (x + c) * np.float32(1.5), rtol=1e-6)


def test_no_f64_is_left_and_same_type_casts_are_gone():
    module, _ = parse_mlir(CENTER, demote_f64=True)
    text = str(module)
    assert "f64" not in text and "arith.extf" not in text and "arith.truncf" not in text


def test_an_f64_bitcast_is_a_located_error():
    source = """func.func @main(%x: i64) -> f64 {
  %f = arith.bitcast %x : i64 to f64
  return %f : f64
}
"""
    with pytest.raises(irtk.ParseError, match=r"m.mlir:2:3: error: arith.bitcast of f64 cannot be "
                                              r"demoted"):
        irtk.compile_str(source, target="cpu", filename="m.mlir", demote_f64=True)


def test_compile_demotes_unless_keep_f64(tmp_path):
    src = tmp_path / "c.mlir"
    src.write_text(CENTER)
    out = tmp_path / "c.vmfb"
    p = subprocess.run([sys.executable, "-m", "irtk.cli", "compile", str(src), "--keep-f64",
                        "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "--keep-f64" in p.stderr and not out.exists()
    p = subprocess.run([sys.executable, "-m", "irtk.cli", "compile", str(src),
                        "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, "-m", "irtk.cli", "run", str(out),
                        "--device=vulkan://swiftshader", "--input=2x8xf32=1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "2x8xf32=[1E-05 1E-05 1E-05 1E-05 1E-05 1E-05 1E-05 " \
        "1E-05][1E-05 1E-05 1E-05 1E-05 1E-05 1E-05 1E-05 1E-05]"
