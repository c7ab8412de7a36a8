"""The elementwise generator's cheaper code for common cases, executed bit for bit against
numpy: min/max against a constant (relu's max(x, 0)) as one compare and one select, and large
inputs read through texel windows on SwiftShader's profile."""
from __future__ import annotations

import numpy as np
import pytest

from irtk.compiler.codegen.spirv.elementwise import window_bindings
from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand
from irtk.compiler.targets import VULKAN_PROFILES

from .kernels import elementwise, identity

# Normal numbers only: drivers may flush denormals (SwiftShader compares them as zero).
SPECIAL = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.5, -1.5, 2.0, -2.0,
                    1.2e-38, -1.2e-38, 3.4e38, -3.4e38], np.float32)



def _ieee(is_max: bool, propagate_nan: bool):
    """IEEE 754-2019 maximum/minimum (NaN wins) or maximumNumber/minimumNumber (the number
    wins), with -0 < +0 (numpy's maximum and fmax leave the sign of a zero tie to chance)."""
    def f(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(np.float32(a), np.float32(b))
        def key(x):
            bits = x.view(np.int32).astype(np.int64)
            return np.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
        pick_a = key(a) > key(b) if is_max else key(a) < key(b)
        out = np.where(pick_a, a, b)
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        if propagate_nan:
            out = np.where(nan_a | nan_b, np.float32(np.nan), out)
        else:
            out = np.where(nan_a, b, np.where(nan_b, a, out))
        return out.astype(np.float32)
    return f


_NUMPY = {"arith.maximumf": _ieee(True, True), "arith.minimumf": _ieee(False, True),
          "arith.maxnumf": _ieee(True, False), "arith.minnumf": _ieee(False, False)}


def _same_bits_or_both_nan(got: np.ndarray, expected: np.ndarray) -> None:
    got, expected = got.astype(np.float32), expected.astype(np.float32)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), expected[~nan].view(np.uint32))


@pytest.mark.parametrize("name", list(_NUMPY))
@pytest.mark.parametrize("constant", [0.0, -0.0, 2.0, -1.5, np.inf, -np.inf])
@pytest.mark.parametrize("constant_first", [False, True], ids=["x-c", "c-x"])
def test_min_and_max_against_a_constant_keep_nan_and_signed_zero_rules(
        vulkan, rng, name, constant, constant_first):
    n = 1024
    x = np.concatenate([SPECIAL, np.full(8, constant, np.float32),
                        rng.standard_normal(n - SPECIAL.size - 8).astype(np.float32) * 3])
    rng.shuffle(x)
    operands = (2, 0) if constant_first else (0, 2)
    ops = [Op("arith.constant", (), "f32", float_value=constant), Op(name, operands, "f32")]
    kernel = elementwise("minmax_constant", (n,), ["f32"], ["f32"], ops, [3])
    got = vulkan.run(kernel, [x])[0]
    c = np.float32(constant)
    expected = _NUMPY[name](c, x) if constant_first else _NUMPY[name](x, c)
    _same_bits_or_both_nan(got, expected)


@pytest.mark.parametrize("name", list(_NUMPY))
def test_min_and_max_of_two_inputs_keep_nan_and_signed_zero_rules(vulkan, name):
    a = np.repeat(SPECIAL, SPECIAL.size)
    b = np.tile(SPECIAL, SPECIAL.size)
    ops = [Op(name, (0, 1), "f32")]
    kernel = elementwise("minmax", (a.size,), ["f32", "f32"], ["f32"], ops, [3])
    _same_bits_or_both_nan(vulkan.run(kernel, [a, b])[0], _NUMPY[name](a, b))


def _relu_add(n: int, offset: int = 0) -> Kernel:
    """relu(a[i + offset] + b[i]) over n elements, a holding n + offset."""
    shifted = AffineMap(1, ((1, offset),))
    ops = [Op("arith.addf", (0, 1), "f32"), Op("arith.constant", (), "f32", float_value=0.0),
           Op("arith.maximumf", (3, 4), "f32")]
    return Kernel("relu_add", (n,), [Operand(0, "f32", (n + offset,), shifted),
                                     Operand(1, "f32", (n,), identity(1))],
                  [Operand(2, "f32", (n,), identity(1))], ops, [5])


def test_large_inputs_are_read_through_texel_windows_on_swiftshader_only():
    kernel = _relu_add(1 << 20)
    swiftshader = VULKAN_PROFILES["swiftshader"]
    from irtk.compiler.codegen.spirv import compile_kernel
    compiled = compile_kernel(kernel, swiftshader)
    # 4 MiB each: views of 65536 texels every 32768 texels.
    assert compiled.texel_windows == {0: 8, 1: 8} and compiled.texel_window == 65536
    assert compiled.requirements["texel_array_indexing"] is True
    for other in ("default", "llvmpipe"):
        assert compile_kernel(kernel, VULKAN_PROFILES[other]).texel_windows == {}
    # At most one view, or not a quad's own 4 elements: no windows.
    assert compile_kernel(_relu_add(1 << 18), swiftshader).texel_windows == {}
    assert compile_kernel(_relu_add(1 << 20, offset=2), swiftshader).texel_windows == {1: 8}


@pytest.mark.slow
@pytest.mark.parametrize("n, offset, max_groups", [(1 << 20, 0, 65535), (3 << 19, 8, 65535),
                                                   (1 << 20, 4, 100)])
def test_texel_windows_read_every_element_across_view_boundaries(
        swiftshader, rng, n, offset, max_groups):
    """Workgroups whose texels start in every half window, a constant offset that shifts them
    off the view starts, and a 2-D grid whose surplus workgroups clamp their view."""
    kernel = _relu_add(n, offset)
    compiled = swiftshader.compile(kernel, max_workgroup_count=max_groups)
    assert compiled.texel_windows
    a = rng.standard_normal(n + offset).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    got = swiftshader.run(kernel, [a, b], compiled)[0]
    _same_bits_or_both_nan(got, np.maximum(a[offset:] + b, np.float32(0)))


def test_window_bindings_need_quads_and_a_texel_window():
    kernel = _relu_add(1 << 20)
    from irtk.compiler.codegen.spirv.elementwise import plan_launch
    plan = plan_launch(1 << 18, 12, VULKAN_PROFILES["swiftshader"])
    assert window_bindings(kernel, VULKAN_PROFILES["swiftshader"], None, plan) == {}
    assert window_bindings(kernel, VULKAN_PROFILES["llvmpipe"], ["contiguous"] * 3, plan) == {}
