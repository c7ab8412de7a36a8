"""Constant evaluation: what depends only on constants is computed at compile time (on the CPU
reference driver), exactly as a call would compute it; broadcasts and fills stay; body asserts
of constant generics are checked there."""
from __future__ import annotations

import re

import numpy as np
import pytest

import irtk
from irtk.compiler.constants import HOST_INIT_BYTES
from tests.conftest import all_device_uris, target_for


def _dense(a: np.ndarray) -> str:
    def nested(x: np.ndarray) -> str:
        if x.ndim == 0:
            return f"{float(x):.9e}"
        return "[" + ", ".join(nested(r) for r in x) + "]"
    return f"dense<{nested(a)}>"


def batchnorm_program(var: np.ndarray, scale: np.ndarray) -> str:
    """y = x * (scale / sqrt(var + eps)), as torch-mlir writes BatchNorm's inference math: the
    per-channel factor from constants, with its assert, then one op on the input."""
    c = var.size
    return f"""#id = affine_map<(d0) -> (d0)>
#x = affine_map<(d0, d1) -> (d0, d1)>
#ch = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<8x{c}xf32>) -> tensor<8x{c}xf32> {{
  %zero = arith.constant 0.0 : f32
  %eps64 = arith.constant 1.0e-05 : f64
  %var = arith.constant {_dense(var)} : tensor<{c}xf32>
  %scale = arith.constant {_dense(scale)} : tensor<{c}xf32>
  %e = tensor.empty() : tensor<{c}xf32>
  %s = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel"]}}
      ins(%var : tensor<{c}xf32>) outs(%e : tensor<{c}xf32>) {{
  ^bb0(%v: f32, %o: f32):
    %eps = arith.truncf %eps64 : f64 to f32
    %a = arith.addf %v, %eps : f32
    %r = math.sqrt %a : f32
    linalg.yield %r : f32
  }} -> tensor<{c}xf32>
  %f = linalg.generic {{indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}}
      ins(%s, %scale : tensor<{c}xf32>, tensor<{c}xf32>) outs(%e : tensor<{c}xf32>) {{
  ^bb0(%r: f32, %g: f32, %o: f32):
    %nz = arith.cmpf one, %r, %zero : f32
    cf.assert %nz, "unimplemented: tensor with zero element"
    %q = arith.divf %g, %r : f32
    linalg.yield %q : f32
  }} -> tensor<{c}xf32>
  %ey = tensor.empty() : tensor<8x{c}xf32>
  %y = linalg.generic {{indexing_maps = [#x, #ch, #x], iterator_types = ["parallel", "parallel"]}}
      ins(%x, %f : tensor<8x{c}xf32>, tensor<{c}xf32>) outs(%ey : tensor<8x{c}xf32>) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  }} -> tensor<8x{c}xf32>
  return %y : tensor<8x{c}xf32>
}}
"""


def dumps(text: str, **options) -> dict[str, str]:
    seen: list[str] = []
    irtk.compile_str(text, target="cpu", filename="bn.mlir", dump_after="const-eval,dispatch",
                     dump=seen.append, **options)
    return {re.match(r"// ----- IR after (\S+)", s).group(1): s for s in seen}


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng()


def bn_reference(x: np.ndarray, var: np.ndarray, scale: np.ndarray) -> np.ndarray:
    x64, v64, g64 = (a.astype(np.float64) for a in (x, var, scale))
    return x64 * (g64 / np.sqrt(v64 + np.float32(1e-5)))


def test_batchnorm_factor_is_folded_and_its_assert_checked(rng):
    var, scale = rng.uniform(0.5, 2, 16).astype(np.float32), rng.standard_normal(16)
    shown = dumps(batchnorm_program(var, scale.astype(np.float32)))
    after = shown["const-eval"]
    # One generic is left (the one reading %x); the factor is a 16-element constant at the
    # generic that computed it.
    assert after.count("linalg.generic") == 1, after
    assert re.search(r"constant\(\) \{value = dense<.*> \(16 elements\).*bn\.mlir:18:3", after)
    assert shown["dispatch"].count("flow.dispatch @") == 1
    assert "math.sqrt" not in shown["dispatch"]


def test_without_const_eval_every_call_computes_it(rng):
    var, scale = rng.uniform(0.5, 2, 16).astype(np.float32), rng.standard_normal(16)
    shown = dumps(batchnorm_program(var, scale.astype(np.float32)), const_eval=False)
    assert shown["const-eval"].count("linalg.generic") == 3
    assert "math.sqrt" in shown["dispatch"]   # fused into the kernel: once per point


@pytest.mark.parametrize("uri", all_device_uris())
def test_folded_values_are_what_a_call_computes(uri, rng):
    var = rng.uniform(0.5, 2, 16).astype(np.float32)
    scale = rng.standard_normal(16).astype(np.float32)
    text = batchnorm_program(var, scale)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    folded = irtk.load(irtk.compile_str(text, target=target_for(uri)), uri).main(x)
    unfolded = irtk.load(irtk.compile_str(text, target=target_for(uri), const_eval=False),
                         uri).main(x)
    np.testing.assert_allclose(folded, bn_reference(x, var, scale), rtol=2e-6, atol=1e-6)
    if uri in ("local-sync", "local-task"):   # the reference driver computed the constants
        np.testing.assert_array_equal(folded, unfolded)
    else:
        np.testing.assert_allclose(folded, unfolded, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("const_eval", [True, False])
def test_a_constant_assert_that_fails_is_a_located_error(const_eval, rng):
    var = rng.uniform(0.5, 2, 16).astype(np.float32)
    var[[3, 9]] = -np.float32(1e-5)            # sqrt(var + eps) == 0 for two channels
    text = batchnorm_program(var, rng.standard_normal(16).astype(np.float32))
    with pytest.raises(irtk.CompileError) as info:
        irtk.compile_str(text, target="cpu", filename="bn.mlir", const_eval=const_eval)
    message = str(info.value)
    assert message.startswith('bn.mlir:22:5: error: cf.assert ("unimplemented: tensor with '
                              'zero element") in a generic body fails for the constants it '
                              'reads (at 2 of 16 points)'), message
    assert "in function 'main'" in message


REDUCTION = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %w = arith.constant DENSE : tensor<3x5xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%w : tensor<3x5xf32>) outs(%f : tensor<3xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %pos = arith.cmpf ogt, %a, %zero : f32
    cf.assert %pos, "weights must be positive"
    %l = math.log %a : f32
    %t = arith.addf %acc, %l : f32
    linalg.yield %t : f32
  } -> tensor<3xf32>
  %y = arith.addf %x, %s : tensor<3xf32>
  return %y : tensor<3xf32>
}
"""


def test_an_assert_in_a_constant_reduction_is_checked_at_every_point(rng):
    w = rng.uniform(0.5, 2, (3, 5)).astype(np.float32)
    x = rng.standard_normal(3).astype(np.float32)
    text = REDUCTION.replace("DENSE", _dense(w))
    got = irtk.load(irtk.compile_str(text, target="cpu"), "local-task").main(x)
    np.testing.assert_allclose(got, x + np.log(w.astype(np.float64)).sum(1), rtol=1e-5)
    w[2, 4] = -1.0   # one point of the reduction loop, not the first
    with pytest.raises(irtk.CompileError, match=r"<string>:12:5: error: cf.assert \("
                                                r"\"weights must be positive\"\) .* fails for "
                                                r"the constants it reads \(at 1 of 3 points\)"):
        irtk.compile_str(REDUCTION.replace("DENSE", _dense(w)), target="cpu")


def test_a_transposed_weight_is_folded_and_a_broadcast_or_fill_is_not(rng):
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    text = f"""func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<64x3xf32>) {{
  %w = arith.constant {_dense(w)} : tensor<4x3xf32>
  %b = arith.constant {_dense(b)} : tensor<3xf32>
  %zero = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<3x4xf32>
  %wt = linalg.transpose ins(%w : tensor<4x3xf32>) outs(%et : tensor<3x4xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<2x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = linalg.matmul ins(%x, %wt : tensor<2x3xf32>, tensor<3x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  %eb = tensor.empty() : tensor<64x3xf32>
  %bb = linalg.broadcast ins(%b : tensor<3xf32>) outs(%eb : tensor<64x3xf32>) dimensions = [0]
  return %y, %bb : tensor<2x4xf32>, tensor<64x3xf32>
}}
"""
    after = dumps(text)["const-eval"]
    assert "(12 elements)" in after and "linalg.transpose" not in after
    assert after.count("linalg.generic") == 3, after   # fill, matmul, broadcast
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y, bb = irtk.load(irtk.compile_str(text, target="cpu"), "local-task").main(x)
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(bb, np.broadcast_to(b, (64, 3)))


def _bias_start_program(w: np.ndarray, b: np.ndarray, rows: int, return_bias: bool) -> str:
    """x @ w accumulated onto b broadcast over `rows` rows (a convolution or linear layer as
    exporters write it: the bias broadcast is the output's initial value)."""
    k, n = w.shape
    results = f"tensor<{rows}x{n}xf32>" + (f", tensor<{rows}x{n}xf32>" if return_bias else "")
    ret = "%y, %bb" if return_bias else "%y"
    return f"""func.func @main(%x: tensor<{rows}x{k}xf32>) -> ({results}) {{
  %w = arith.constant {_dense(w)} : tensor<{k}x{n}xf32>
  %b = arith.constant {_dense(b)} : tensor<{n}xf32>
  %eb = tensor.empty() : tensor<{rows}x{n}xf32>
  %bb = linalg.broadcast ins(%b : tensor<{n}xf32>) outs(%eb : tensor<{rows}x{n}xf32>) dimensions = [0]
  %y = linalg.matmul ins(%x, %w : tensor<{rows}x{k}xf32>, tensor<{k}x{n}xf32>) outs(%bb : tensor<{rows}x{n}xf32>) -> tensor<{rows}x{n}xf32>
  return {ret} : {results}
}}
"""


@pytest.mark.parametrize("uri", all_device_uris())
@pytest.mark.parametrize("rows, return_bias, folded", [
    (16, False, True),                         # small, only the matmul's start: folded
    (HOST_INIT_BYTES // 16 + 1, False, False),  # over the limit: the broadcast stays
    (16, True, False),                         # returned as well: it stays
])
def test_a_small_broadcast_that_only_starts_an_output_is_folded(uri, rows, return_bias, folded,
                                                                rng):
    w = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    text = _bias_start_program(w, b, rows, return_bias)
    after = dumps(text)["const-eval"]
    assert ("linalg.broadcast" not in after and after.count("linalg.generic") == 1) == folded, \
        after
    data = irtk.compile_str(text, target=target_for(uri))
    for _ in range(2):   # each call starts from the bias, not the last call's result
        x = rng.standard_normal((rows, 3)).astype(np.float32)
        got = irtk.load(data, uri).main(x)
        y = got[0] if return_bias else got
        np.testing.assert_allclose(y, x.astype(np.float64) @ w + b, rtol=1e-5, atol=1e-5)
        if return_bias:
            np.testing.assert_array_equal(got[1], np.broadcast_to(b, (rows, 4)))


def test_a_folded_scalar_tensor_keeps_its_rank(rng):
    # 0-d results: a fold that made them 1-d would not match their type.
    a, b = rng.standard_normal(2).astype(np.float32)
    src = f"""#s = affine_map<() -> ()>
func.func @main(%x: tensor<f32>) -> tensor<f32> {{
  %a = arith.constant dense<{a:.9e}> : tensor<f32>
  %b = arith.constant dense<{b:.9e}> : tensor<f32>
  %e = tensor.empty() : tensor<f32>
  %s = linalg.generic {{indexing_maps = [#s, #s, #s], iterator_types = []}}
      ins(%a, %b : tensor<f32>, tensor<f32>) outs(%e : tensor<f32>) {{
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    linalg.yield %m : f32
  }} -> tensor<f32>
  %r = linalg.generic {{indexing_maps = [#s, #s, #s], iterator_types = []}}
      ins(%s, %x : tensor<f32>, tensor<f32>) outs(%e : tensor<f32>) {{
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.addf %p, %q : f32
    linalg.yield %m : f32
  }} -> tensor<f32>
  return %r : tensor<f32>
}}
"""
    assert "mulf" not in dumps(src)["dispatch"]
    x = np.float32(rng.standard_normal())
    y = irtk.load(irtk.compile_str(src, target="cpu"), device="local-sync").main(
        np.array(x, np.float32))
    assert np.asarray(y).shape == ()
    assert float(np.asarray(y)) == np.float32(np.float32(a) * np.float32(b)) + x


def _rsqrt_with_assert(name: str, n: int, values: np.ndarray) -> str:
    return f"""  %{name}c = arith.constant {_dense(values)} : tensor<{n}xf32>
  %{name}e = tensor.empty() : tensor<{n}xf32>
  %{name}s = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel"]}}
      ins(%{name}c : tensor<{n}xf32>) outs(%{name}e : tensor<{n}xf32>) {{
  ^bb0(%v: f32, %o: f32):
    %r = math.sqrt %v : f32
    %zero = arith.constant 0.0 : f32
    %nz = arith.cmpf one, %r, %zero : f32
    cf.assert %nz, "zero variance"
    %one = arith.constant 1.0 : f32
    %q = arith.divf %one, %r : f32
    linalg.yield %q : f32
  }} -> tensor<{n}xf32>
  %{name}r = linalg.generic {{indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}}
      ins(%{name}, %{name}s : tensor<{n}xf32>, tensor<{n}xf32>) outs(%{name}e : tensor<{n}xf32>) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  }} -> tensor<{n}xf32>
"""


def test_several_folded_values_with_asserts_each_get_their_own(rng):
    # Each folded generic's assert outputs are checks, not folded values of the next one.
    u = rng.uniform(0.5, 2, 4).astype(np.float32)
    v = rng.uniform(0.5, 2, 6).astype(np.float32)
    src = ("#id = affine_map<(d0) -> (d0)>\nfunc.func @main(%x: tensor<4xf32>, %y: tensor<6xf32>)"
           " -> (tensor<4xf32>, tensor<6xf32>) {\n" + _rsqrt_with_assert("x", 4, u)
           + _rsqrt_with_assert("y", 6, v) + "  return %xr, %yr : tensor<4xf32>, tensor<6xf32>\n}\n")
    assert "math.sqrt" not in dumps(src)["dispatch"]
    x = rng.standard_normal(4).astype(np.float32)
    y = rng.standard_normal(6).astype(np.float32)
    got = irtk.load(irtk.compile_str(src, target="cpu"), device="local-sync").main(x, y)
    np.testing.assert_allclose(got[0], x / np.sqrt(u.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(got[1], y / np.sqrt(v.astype(np.float64)), rtol=1e-6)
