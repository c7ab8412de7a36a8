"""Contractions with a fused epilogue: the matmul and convolution strategies take a kernel whose
body, beyond C's multiply-add, computes further outputs from the final sum and from inputs
read at the output point (an exported bias, batch norm or activation), and give the fallback's
results bit for bit; bodies that are not such an epilogue stay with the fallback."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from irtk.compiler.codegen.spirv.matmul import match
from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand

from .kernels import projection


def linear_relu(m: int, n: int, k: int, in_type: str = "f32", acc: str = "f32") -> Kernel:
    """C += A x B over (m, n, k), and D = relu(C + bias[n]) from the final C."""
    a = Operand(0, in_type, (m, k), projection(3, [0, 2]))
    b = Operand(1, in_type, (k, n), projection(3, [2, 1]))
    bias = Operand(2, acc, (n,), projection(3, [1]))
    c = Operand(3, acc, (m, n), projection(3, [0, 1]))
    d = Operand(4, acc, (m, n), projection(3, [0, 1]))
    # values: 0 A, 1 B, 2 bias, 3 C, 4 D; ops from 5
    ops = [Op("arith.mulf", (0, 1), acc), Op("arith.addf", (3, 5), acc),
           Op("arith.addf", (6, 2), acc), Op("arith.constant", (), acc, float_value=0.0),
           Op("arith.cmpf", (7, 8), "i1", predicate="ugt"), Op("arith.select", (9, 7, 8), acc)]
    return Kernel("linear_relu", (m, n, k), [a, b, bias], [c, d], ops, [6, 10],
                  ("parallel", "parallel", "reduction"))


def conv_batch_norm(c_in: int, hw: int, f: int, kh: int) -> Kernel:
    """NCHW x FCHW over (n, f, oh, ow, c, kh, kw) as PyTorch exports a convolution with its batch
    norm and relu fused: C += x * w, D = relu(((C - mean) * inv) * gamma + beta), the four
    per-channel vectors broadcast as (f, 1, 1)."""
    o = hw - kh + 1

    def row(coeffs: dict[int, int]) -> tuple[int, ...]:
        return tuple(coeffs.get(j, 0) for j in range(7)) + (0,)
    image = AffineMap(7, (row({0: 1}), row({4: 1}), row({2: 1, 5: 1}), row({3: 1, 6: 1})))
    per_channel = AffineMap(7, (row({1: 1}), row({}), row({})))
    out_map = projection(7, [0, 1, 2, 3])
    inputs = [Operand(0, "f32", (1, c_in, hw, hw), image),
              Operand(1, "f32", (f, c_in, kh, kh), projection(7, [1, 4, 5, 6]))]
    inputs += [Operand(2 + i, "f32", (f, 1, 1), per_channel) for i in range(4)]
    outputs = [Operand(6, "f32", (1, f, o, o), out_map), Operand(7, "f32", (1, f, o, o), out_map)]
    # values: 0 x, 1 w, 2 beta, 3 gamma, 4 inv, 5 mean, 6 C, 7 D; ops from 8
    ops = [Op("arith.mulf", (0, 1), "f32"), Op("arith.addf", (6, 8), "f32"),
           Op("arith.subf", (9, 5), "f32"), Op("arith.mulf", (10, 4), "f32"),
           Op("arith.mulf", (11, 3), "f32"), Op("arith.addf", (12, 2), "f32"),
           Op("arith.constant", (), "f32", float_value=0.0),
           Op("arith.cmpf", (13, 14), "i1", predicate="ugt"),
           Op("arith.select", (15, 13, 14), "f32")]
    return Kernel("conv_bn", (1, f, o, o, c_in, kh, kh), inputs, outputs, ops, [9, 16],
                  ("parallel",) * 4 + ("reduction",) * 3)


def _f32(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("m, n, k", [(1, 256, 96), (3, 10, 32), (37, 45, 70), (64, 64, 64)])
def test_a_matmul_with_bias_and_relu_takes_the_matmul_strategy(vulkan, rng, m, n, k):
    kernel = linear_relu(m, n, k)
    assert vulkan.compile(kernel).strategy == "matmul"
    a, b, bias, init = _f32(rng, (m, k)), _f32(rng, (k, n)), _f32(rng, (n,)), _f32(rng, (m, n))
    fast = vulkan.run(kernel, [a, b, bias], initial=[init, init])
    slow = vulkan.run(kernel, [a, b, bias], initial=[init, init], strategy="fallback")
    for got, expected in zip(fast, slow):
        np.testing.assert_array_equal(got, expected)
    total = init.astype(np.float64) + a.astype(np.float64) @ b
    np.testing.assert_allclose(fast[0], total, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(fast[1], np.maximum(total + bias, 0.0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c_in, hw, f, kh", [(1, 20, 6, 5), (6, 8, 16, 5), (3, 9, 13, 3)])
def test_a_convolution_with_batch_norm_and_relu_takes_the_convolution_strategy(
        vulkan, rng, c_in, hw, f, kh):
    kernel = conv_batch_norm(c_in, hw, f, kh)
    assert vulkan.compile(kernel).strategy == "convolution"
    o = hw - kh + 1
    x, w = _f32(rng, (1, c_in, hw, hw)), _f32(rng, (f, c_in, kh, kh))
    beta, gamma, inv, mean = (_f32(rng, (f, 1, 1)) for _ in range(4))
    init = _f32(rng, (1, f, o, o))
    inputs = [x, w, beta, gamma, inv, mean]
    fast = vulkan.run(kernel, inputs, initial=[init, init])
    slow = vulkan.run(kernel, inputs, initial=[init, init], strategy="fallback")
    for got, expected in zip(fast, slow):
        np.testing.assert_array_equal(got, expected)
    total = init.astype(np.float64).copy()
    for i in range(kh):
        for j in range(kh):
            total += np.einsum("chw,fc->fhw", x[0, :, i:i + o, j:j + o].astype(np.float64),
                               w[:, :, i, j])[None]
    np.testing.assert_allclose(fast[0], total, rtol=1e-4, atol=1e-4)
    expected = np.maximum((total - mean) * inv * gamma + beta, 0.0)
    np.testing.assert_allclose(fast[1], expected, rtol=1e-4, atol=1e-4)


def _replace(kernel: Kernel, **changes: object) -> Kernel:
    return dataclasses.replace(kernel, **changes)


def test_bodies_that_are_not_an_epilogue_stay_with_the_fallback():
    kernel = linear_relu(16, 16, 16)
    assert match(kernel) is not None
    ops = list(kernel.ops)
    # The epilogue reads A, which varies over k.
    reads_a = _replace(kernel, ops=ops[:2] + [Op("arith.addf", (6, 0), "f32")] + ops[3:])
    # The epilogue reads its own output's current value.
    reads_own = _replace(kernel, ops=ops[:2] + [Op("arith.addf", (6, 4), "f32")] + ops[3:])
    # The bias is read along k, so the last k step's element would decide D.
    along_k = _replace(kernel, inputs=kernel.inputs[:2] + [
        Operand(2, "f32", (16,), projection(3, [2]))])
    # D is written along k.
    out_along_k = _replace(kernel, outputs=kernel.outputs[:1] + [
        Operand(4, "f32", (16, 16), projection(3, [0, 2]))])
    # The epilogue reads the loop index of k.
    index_k = _replace(kernel, ops=ops[:3] + [Op("linalg.index", (), "index", int_value=2)]
                       + ops[4:])
    for bad in (reads_a, reads_own, along_k, out_along_k, index_k):
        assert match(bad) is None
