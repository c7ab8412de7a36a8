"""Split reductions in dispatch formation: a long reduction over few parallel points becomes a
partial dispatch (into a transient filled with the combiner's identity) and a final one, and
the program still computes the same values on every device."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import irtk
from irtk.compiler import tir
from irtk.compiler.dispatch import form_dispatches
from tests.compiler.tir_build import T, function, program
from tests.conftest import target_for

ROW_SUM = """func.func @main(%x: tensor<{rows}x{cols}xf32>) -> tensor<{rows}xf32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{rows}xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<{rows}xf32>) -> tensor<{rows}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}}
      ins(%x : tensor<{rows}x{cols}xf32>) outs(%c : tensor<{rows}xf32>) {{
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %acc, %in : f32
    linalg.yield %m : f32
  }} -> tensor<{rows}xf32>
  %s = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}}
      ins(%x : tensor<{rows}x{cols}xf32>) outs(%c : tensor<{rows}xf32>) {{
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %acc, %in : f32
    linalg.yield %a : f32
  }} -> tensor<{rows}xf32>
  %t = arith.addf %r, %s : tensor<{rows}xf32>
  return %t : tensor<{rows}xf32>
}}
"""


def dispatches(f: tir.Function) -> list[tir.Op]:
    return [op for op in tir.walk(f.body) if op.kind == "dispatch"]


def test_a_long_row_sum_forms_a_partial_and_a_final_dispatch():
    def build(b, x):
        return b.row_sum(x, b.fill(0.0, b.empty(T(2))))
    p = program(function("main", [T(2, 40960)], build))
    form_dispatches(p)
    (f,) = p.functions
    partial, final = dispatches(f)
    assert partial.attrs["kernel"].loop_ranges == (2, 20, 2048)
    assert partial.operands[0] is f.args[0]
    assert partial.operands[1].type == T(2, 20)
    assert partial.attrs["fills"] == [0.0] and partial.attrs["reads_init"] == [True]
    assert final.operands[0] is partial.results[0]
    assert final.attrs["kernel"].loop_ranges == (2, 20)
    assert final.attrs["fills"] == [0.0]
    assert f.body.ops[-1].operands == final.results


def test_a_short_or_wide_reduction_stays_one_dispatch():
    for shape in ((2, 4096), (256, 40960)):
        def build(b, x, rows=shape[0]):
            return b.row_sum(x, b.fill(0.0, b.empty(T(rows))))
        p = program(function("main", [T(*shape)], build))
        form_dispatches(p)
        assert len(dispatches(p.functions[0])) == 1, shape


@pytest.mark.parametrize("device", ["local-task", "vulkan://swiftshader", "vulkan://llvmpipe"])
@pytest.mark.parametrize("rows, cols", [(1, 1 << 18), (3, 3 * 20480)])
def test_split_reductions_compute_the_same_values(device, rows, cols):
    try:
        module = irtk.load(irtk.compile_str(ROW_SUM.format(rows=rows, cols=cols),
                                            target=target_for(device)), device=device)
    except irtk.DeviceError as exc:
        pytest.skip(f"{device}: {exc}")
    rng = np.random.default_rng(zlib.crc32(f"{device}{rows}x{cols}".encode()))
    x = rng.uniform(-1.0, 3.0, (rows, cols)).astype(np.float32)
    got = np.asarray(module.main(x), np.float64)
    expected = np.maximum(x.max(axis=1), 0.0) + x.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=2e-4)
