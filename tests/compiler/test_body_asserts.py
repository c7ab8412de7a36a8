"""A `cf.assert` in a generic body that depends on a call's data (PyTorch's Embedding asserts
its indices are in range) fails that call with its message and location, on every device; a
call whose data satisfies it runs as without the assert."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import irtk
from tests.conftest import all_device_uris

GATHER = """#id = affine_map<(d0) -> (d0)>
func.func @main(%t: tensor<5xf32>, %i: tensor<?xi64>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %i, %c0 : tensor<?xi64>
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%i : tensor<?xi64>) outs(%e : tensor<?xf32>) {
  ^bb0(%k: i64, %o: f32):
    %c5 = arith.constant 5 : i64
    %lt = arith.cmpi slt, %k, %c5 : i64
    cf.assert %lt, "index must be smaller than dim size"
    %ix = arith.index_cast %k : i64 to index
    %v = tensor.extract %t[%ix] : tensor<5xf32>
    linalg.yield %v : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""

# Row sums of log(x), asserting every x > 0 (at each point of the reduction loop).
LOG_SUM = """func.func @main(%x: tensor<SHAPExf32>) -> tensor<ROWSxf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(DIMS) : tensor<ROWSxf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<ROWSxf32>) -> tensor<ROWSxf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<SHAPExf32>) outs(%f : tensor<ROWSxf32>) {
  ^bb0(%v: f32, %acc: f32):
    %pos = arith.cmpf ogt, %v, %zero : f32
    cf.assert %pos, "log of a non-positive number"
    %l = math.log %v : f32
    %a = arith.addf %acc, %l : f32
    linalg.yield %a : f32
  } -> tensor<ROWSxf32>
  return %s : tensor<ROWSxf32>
}
"""


@functools.cache
def _module(text: str) -> bytes:
    return irtk.compile_str(text, target="vulkan-spirv,cpu", filename="model.mlir")


@pytest.mark.parametrize("uri", all_device_uris())
def test_an_index_check_passes_good_indices_and_fails_a_bad_one(uri):
    rng = np.random.default_rng()
    m = irtk.load(_module(GATHER), device=uri)
    table = rng.standard_normal(5).astype(np.float32)
    good = rng.integers(0, 5, int(rng.integers(1, 40)))
    np.testing.assert_array_equal(m.main(table, good), table[good])
    bad = good.copy()
    bad[rng.integers(0, bad.size)] = 5 + int(rng.integers(0, 100))
    with pytest.raises(irtk.RuntimeFailure, match=r"model.mlir:11:5: assertion failed: index "
                                                  r"must be smaller than dim size \(in function "
                                                  r"'main'\)"):
        m.main(table, bad)
    np.testing.assert_array_equal(m.main(table, good[:1]), table[good[:1]])   # still usable


@pytest.mark.parametrize("uri", all_device_uris())
def test_an_assert_in_a_reduction_checks_every_point(uri):
    rng = np.random.default_rng()
    text = LOG_SUM.replace("SHAPE", "3x7").replace("ROWS", "3").replace("DIMS", "")
    m = irtk.load(_module(text), device=uri)
    x = rng.uniform(0.5, 2, (3, 7)).astype(np.float32)
    logs = np.log(x.astype(np.float64))
    # A row's logs can nearly cancel: the f32 sum's error is relative to the terms, not to it.
    np.testing.assert_allclose(m.main(x), logs.sum(1), rtol=1e-5,
                               atol=1e-6 * np.abs(logs).sum(1).max())
    x[2, 6] = -x[2, 6]   # the last point of the last row
    with pytest.raises(irtk.RuntimeFailure, match="log of a non-positive number"):
        m.main(x)


def test_an_assert_in_a_dynamic_reduction_is_a_located_error():
    text = LOG_SUM.replace("SHAPE", "?x7").replace("ROWS", "?").replace(
        "DIMS", "%n").replace("%zero = arith.constant 0.0 : f32",
                              "%zero = arith.constant 0.0 : f32\n  %c0 = arith.constant 0 : "
                              "index\n  %n = tensor.dim %x, %c0 : tensor<?x7xf32>")
    with pytest.raises(irtk.CompileError, match=r"model.mlir:13:5: error: cf.assert \(\"log of "
                                                r"a non-positive number\"\) in the body of a "
                                                r"reduction with a dynamic result shape"):
        irtk.compile_str(text, target="cpu", filename="model.mlir")


def test_the_check_is_in_the_dispatch_and_on_the_host():
    seen: list[str] = []
    irtk.compile_str(GATHER, target="cpu", dump_after="const-eval", dump=seen.append)
    assert 'cf.assert' in seen[0] and "index must be smaller than dim size" in seen[0]
    assert "tensor.extract" in seen[0]
