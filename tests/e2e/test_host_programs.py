"""End to end: host control flow, globals, calls, reductions, fused matmuls and dynamic shapes
on every device, against numpy."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import irtk
from irtk.compiler.driver import compile_program
from tests.conftest import all_device_uris, target_for
from tests.e2e import host_programs as P

DEVICES = all_device_uris()


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def build(make, device: str, *args) -> object:
    return irtk.load(compile_program(make(*args), target=target_for(device)), device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_for_loop_carries_a_tensor_through_dispatches(device):
    rng = rng_for("for", device)
    x = rng.uniform(-10, 10, (6, 5)).astype(np.float32)
    a = rng.uniform(-1, 1, (6, 5)).astype(np.float32)
    m = build(P.loop_program, device, 7)
    np.testing.assert_allclose(m.main(x, a), P.loop_reference(x, a, 7), rtol=1e-5, atol=1e-5)
    # A second call starts from its own arguments again.
    np.testing.assert_allclose(m.main(a, x), P.loop_reference(a, x, 7), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_trip_loop_returns_its_init(device):
    rng = rng_for("for0", device)
    x = rng.uniform(-10, 10, (6, 5)).astype(np.float32)
    m = build(P.loop_program, device, 0)
    np.testing.assert_array_equal(m.main(x, x), x)


@pytest.mark.parametrize("device", DEVICES)
def test_while_loop_condition_is_read_from_the_device(device):
    rng = rng_for("while", device)
    x = rng.uniform(0.5, 1.0, 8).astype(np.float32)
    a = rng.uniform(0.0, 0.5, 8).astype(np.float32)
    m = build(P.while_program, device)
    for limit in (0.1, 5.0, 300.0):
        np.testing.assert_allclose(m.main(x, a, np.float32(limit)),
                                   P.while_reference(x, a, limit), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_if_branches_on_a_tensor_element(device):
    rng = rng_for("if", device)
    m = build(P.if_program, device)
    a = rng.uniform(-1, 1, 7).astype(np.float32)
    for sign in (1.0, -1.0):
        x = rng.uniform(0.1, 5, 7).astype(np.float32) * np.float32(sign)
        expected = x.astype(np.float64) * (3.0 if x[1] > 0 else -1.0) + a
        np.testing.assert_allclose(m.main(x, a), expected, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_globals_are_updated_across_calls(device):
    rng = rng_for("globals", device)
    m = build(P.global_program, device)
    acc = np.arange(12, dtype=np.float64).reshape(3, 4)
    for call in range(1, 4):
        a = rng.uniform(-5, 5, (3, 4)).astype(np.float32)
        acc = acc + a
        total, calls = m.accumulate(a)
        np.testing.assert_allclose(total, acc, rtol=1e-5)
        assert int(calls) == 5 + call


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_bias_relu_is_one_fused_dispatch(device):
    rng = rng_for("mm", device)
    a = rng.standard_normal((9, 7)).astype(np.float32)
    w = rng.standard_normal((7, 11)).astype(np.float32)
    bias = rng.standard_normal(11).astype(np.float32)
    program = P.matmul_bias_relu_program(9, 7, 11)
    m = irtk.load(compile_program(program, target=target_for(device)), device=device)
    dispatches = [op for op in program.functions[0].body.ops if op.kind == "dispatch"]
    assert len(dispatches) == 1
    expected = np.maximum(a.astype(np.float64) @ w + bias, 0)
    np.testing.assert_allclose(m.main(a, w, bias), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m.main(a, w, bias), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_reductions_with_fused_fills_and_constant_bias(device):
    rng = rng_for("reduce", device)
    x = rng.uniform(-2, 2, (13, 10)).astype(np.float32)
    m = build(P.reduction_program, device, 13, 10)
    sums, colmax = m.main(x)
    np.testing.assert_allclose(sums, x.astype(np.float64).sum(1) + np.linspace(-1, 1, 13),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(colmax, np.exp(x.astype(np.float64)).max(0), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_shapes_take_their_extents_from_the_arguments(device):
    rng = rng_for("dynamic", device)
    m = build(P.dynamic_program, device)
    for n in (1, 6, 37):
        x = rng.uniform(-5, 5, (n, 4)).astype(np.float32)
        y = rng.uniform(-5, 5, (n, 4)).astype(np.float32)
        np.testing.assert_allclose(m.main(x, y), (x.astype(np.float64) + y) * 2, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES[:1] + [d for d in DEVICES if "vulkan" in d][:1])
def test_dynamic_shapes_reject_wrong_shapes(device):
    m = build(P.dynamic_program, device)
    x = np.ones((3, 4), np.float32)
    with pytest.raises(irtk.Error, match=r"argument 1: expected \?x4xf32, got 3x5xf32"):
        m.main(x, np.ones((3, 5), np.float32))
    with pytest.raises(irtk.Error, match=r"argument 0: expected \?x4xf32"):
        m.main(np.ones(4, np.float32), x)
    with pytest.raises(irtk.Error, match=r"test.mlir:\d+:3: error: operand 1 of dispatch "
                                         r"main_dispatch_0_elementwise: dimension 0 does not "
                                         r"match"):
        m.main(x, np.ones((2, 4), np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_calls_to_private_functions(device):
    rng = rng_for("call", device)
    x = rng.uniform(-5, 5, 5).astype(np.float32)
    a = rng.uniform(-5, 5, 5).astype(np.float32)
    m = build(P.call_program, device)
    assert m.function_names == ["main"]
    r1 = x.astype(np.float64) * 2 + a
    np.testing.assert_allclose(m.main(x, a), r1 + (r1 * 2 + a), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_reused_transient_buffers_keep_results_apart(device):
    """Five dependent dispatches in one submission, where later ones write buffers that
    earlier ones read (the planner reuses them); barriers keep the answers right."""
    from irtk.compiler import tir
    from irtk.compiler.kernel import Op as KOp
    from irtk.compiler.stream import plan_function
    from tests.compiler.tir_build import T, function, program

    def build(b, x):
        v, kept = x, []
        for k in range(5):
            v = b.elementwise([v], b.empty(T(64)), [KOp("arith.constant", (), "f32",
                                                         float_value=float(k + 1)),
                                                    KOp("arith.mulf", (0, 0), "f32"),
                                                    KOp("arith.subf", (3, 2), "f32")])
            (v,) = b.op("barrier", [v], [T(64)]).results
            kept.append(v)
        return [kept[1], v]
    p = program(function("main", [T(64)], build))
    data = compile_program(p, target=target_for(device))
    f = p.functions[0]
    plan = plan_function(f)
    reused = [plan.output(op, 0).reuse for op in tir.walk(f.body) if op.kind == "dispatch"]
    assert any(r is not None for r in reused)
    m = irtk.load(data, device=device)
    x = rng_for("reuse", device).uniform(-1, 1, 64).astype(np.float32)
    expected, v = [], x.astype(np.float64)
    for k in range(5):
        v = v * v - (k + 1)
        expected.append(v)
    second, last = m.main(x)
    np.testing.assert_allclose(second, expected[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(last, expected[4], rtol=1e-4, atol=1e-5)
