"""The size rule of strategy.py: an f16 contraction too large to emulate is compiled with
native f16 (and needs shaderFloat16) even for a profile without it; smaller f16 kernels stay
emulated and need nothing. What the device then does with each is tested end to end in
tests/e2e/test_target_features.py and by the conformance suite (SwiftShader skips IREE's
3456x1024x2048 f16 matmul by name)."""
from __future__ import annotations

import pytest

from irtk.compiler.codegen.spirv import compile_kernel, pack_executable
from irtk.compiler.codegen.spirv.executable import merged_requirements
from irtk.compiler.codegen.spirv.strategy import needs_native_f16
from irtk.compiler.kernel import Kernel, Op, Operand
from irtk.compiler.targets import VULKAN_PROFILES

from .kernels import projection


def matmul(m: int, n: int, k: int, t: str) -> Kernel:
    return Kernel("mm", (m, n, k), [Operand(0, t, (m, k), projection(3, [0, 2])),
                                    Operand(1, t, (k, n), projection(3, [2, 1]))],
                  [Operand(2, t, (m, n), projection(3, [0, 1]))],
                  [Op("arith.mulf", (0, 1), t), Op("arith.addf", (2, 3), t)], [4],
                  ("parallel", "parallel", "reduction"))


@pytest.mark.parametrize("profile", ["default", "swiftshader"])
def test_a_huge_f16_contraction_needs_native_f16(profile):
    p = VULKAN_PROFILES[profile]
    big = matmul(3456, 1024, 2048, "f16")
    assert needs_native_f16(big, p)
    compiled = compile_kernel(big, p)
    assert compiled.requirements.get("float16") is True
    assert merged_requirements([compiled], p).float16
    pack_executable([compiled], p)   # the profile's own check lets the rule's need through


@pytest.mark.parametrize("shape,t,profile", [
    ((1024, 1024, 1024), "f16", "default"),          # exactly the limit: still emulated
    ((3456, 1024, 2048), "f32", "default"),          # not f16
    ((3456, 1024, 2048), "f16", "llvmpipe"),         # native anyway: the profile has f16
])
def test_other_kernels_keep_the_profile(shape, t, profile):
    p = VULKAN_PROFILES[profile]
    kernel = matmul(*shape, t)
    assert not needs_native_f16(kernel, p)
    compiled = compile_kernel(kernel, p)
    assert compiled.requirements.get("float16", False) is (profile == "llvmpipe" and t == "f16")

