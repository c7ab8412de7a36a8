"""`cf.assert`: at host level a runtime check that fails the call with its message; in a
generic body (torch-mlir's BatchNorm) dropped when it provably holds, a located error when it
always fails, else a check of the call; constants converted in a body (BatchNorm's f64 epsilon)
are converted at compile time."""
from __future__ import annotations

import math

import numpy as np
import pytest

import irtk
from irtk.compiler.frontend.assertions import _cmpf, _cmpi
from tests.conftest import all_device_uris, target_for

PROGRAM = """func.func @main(%x: tensor<4xf32>, %n: i32) -> tensor<4xf32> {
  %eps64 = arith.constant 1.0e-05 : f64
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : i32
  %pos = arith.cmpi sgt, %n, %c0 : i32
  cf.assert %pos, "n must be positive"
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %out: f32):
    %eps = arith.truncf %eps64 : f64 to f32
    %ok = arith.cmpf ogt, %eps, %zero : f32
    cf.assert %ok, "eps must be greater than 0"
    %s = arith.addf %a, %eps : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


@pytest.fixture(scope="module", params=all_device_uris())
def module(request):
    uri = request.param
    # The default Vulkan profile has no f64: the truncated epsilon must not need it.
    return irtk.load(irtk.compile_str(PROGRAM, target=target_for(uri), filename="bn.mlir"),
                     uri)


def test_a_body_assert_that_holds_is_dropped_and_the_epsilon_folded(module):
    x = np.random.default_rng().standard_normal(4).astype(np.float32)
    np.testing.assert_array_equal(module.main(x, 3), x + np.float32(1e-5))


def test_a_host_assert_fails_the_call_with_its_message(module):
    x = np.random.default_rng().standard_normal(4).astype(np.float32)
    with pytest.raises(irtk.RuntimeFailure, match=r"bn.mlir:6:3: assertion failed: n must be "
                                                  r"positive"):
        module.main(x, 0)
    np.testing.assert_array_equal(module.main(x, 1), x + np.float32(1e-5))   # still usable


def test_a_body_assert_that_always_fails_is_a_located_error():
    source = PROGRAM.replace("%ok = arith.cmpf ogt, %eps, %zero : f32",
                             "%ok = arith.cmpf olt, %eps, %zero : f32")
    with pytest.raises(irtk.CompileError) as info:
        irtk.compile_str(source, target="cpu", filename="bn.mlir")
    text = str(info.value)
    assert text.startswith("bn.mlir:14:5: error: cf.assert (\"eps must be greater than 0\") "
                           "in a generic body"), text
    assert "always fails" in text


def test_a_body_assert_on_the_data_fails_the_call_that_breaks_it():
    # tests/compiler/test_body_asserts.py has more: every device, reductions.
    source = PROGRAM.replace("%ok = arith.cmpf ogt, %eps, %zero : f32",
                             "%ok = arith.cmpf ogt, %a, %zero : f32")
    m = irtk.load(irtk.compile_str(source, target="cpu", filename="bn.mlir"), "local-sync")
    x = np.random.default_rng().uniform(0.5, 2, 4).astype(np.float32)
    np.testing.assert_array_equal(m.main(x, 1), x + np.float32(1e-5))
    with pytest.raises(irtk.RuntimeFailure, match=r"bn.mlir:14:5: assertion failed: eps must be "
                                                  r"greater than 0"):
        m.main(-x, 1)


def test_constant_comparisons_follow_mlir_semantics():
    nan = math.nan
    assert _cmpf("ogt", 1.0, 0.0) and not _cmpf("ogt", nan, 0.0) and _cmpf("ugt", nan, 0.0)
    assert _cmpf("uno", nan, 1.0) and not _cmpf("ord", nan, 1.0) and _cmpf("one", 1.0, 2.0)
    assert not _cmpf("one", nan, 2.0) and _cmpf("une", nan, 2.0) and _cmpf("true", nan, nan)
    assert _cmpi("ult", 1, -1, 32) and not _cmpi("slt", 1, -1, 32) and _cmpi("uge", -1, 5, 8)
