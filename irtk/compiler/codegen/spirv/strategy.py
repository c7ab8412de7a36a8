"""Strategy selection: which code generator compiles a kernel (docs/codegen_spirv.md).

The rule, first match wins:
1. "matmul": a contraction C[b, m, n] (+)= A[b, m, k] * B[b, k, n] (see matmul.py);
2. "convolution": the same body over several reduction loops (windowed maps, matmul.py);
3. "reduction": every output is `combine(current, x)` with an associative combiner and the
   reduction loops innermost (see reduction.py);
4. "elementwise": all loops parallel, static shapes, no params or gathers, f32/i32 buffers;
5. "fallback": everything else (fallback.py), correct for any kernel.
Each strategy may decline a kernel it recognized (returning None), passing it down the list.

Emulated f16 costs two roundings of about twenty instructions each per multiply-add, so a
static f16 contraction of more than `NATIVE_F16_WORK` multiply-adds (2^30, over half a minute
emulated on a CPU driver, minutes for the conformance suite's 3456x1024x2048) is compiled
with native f16 even where the profile lacks it: it then needs shaderFloat16, and a device
without it refuses the executable by name instead of running for minutes.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from irtk.compiler.kernel import Kernel
from irtk.compiler.targets import VulkanProfile
from irtk.errors import CompileError

from . import elementwise, fallback, matmul, reduction
from .executable import SpirvKernel, validate

STRATEGIES = ("matmul", "convolution", "reduction", "elementwise", "fallback")
MAX_INDEX = (1 << 31) - 1
NATIVE_F16_WORK = 1 << 30


def compile_kernel(kernel: Kernel, profile: VulkanProfile, *,
                   max_workgroup_count: int = elementwise.MAX_WORKGROUP_COUNT,
                   strategy: str | None = None) -> SpirvKernel:
    """`kernel` as a validated compute shader for `profile`.

    `strategy` forces one strategy (tests compare them); it must accept the kernel.
    `max_workgroup_count` lowers the elementwise grid limit (tests reach 2-D grids with it).
    """
    _check(kernel)
    order = STRATEGIES if strategy is None else (strategy,)
    if strategy is not None and strategy not in STRATEGIES:
        raise CompileError(f"vulkan-spirv: unknown strategy '{strategy}'; strategies: "
                           f"{', '.join(STRATEGIES)}")
    if needs_native_f16(kernel, profile):
        profile = dataclasses.replace(profile, float16=True)
    for name in order:
        compiled = _BUILDERS[name](kernel, profile, max_workgroup_count)
        if compiled is not None:
            validate(compiled.code, profile.vulkan_env, kernel.name)
            compiled.strategy = name
            return compiled
    raise CompileError(f"vulkan-spirv: kernel '{kernel.name}' does not fit strategy "
                       f"'{strategy}'")


def needs_native_f16(kernel: Kernel, profile: VulkanProfile) -> bool:
    """Whether `kernel` is an f16 contraction too large to emulate (module docstring)."""
    if profile.float16 or not kernel.is_static or not kernel.reduction_dims:
        return False
    if not any(op.result_type == "f16" for op in kernel.ops):
        return False
    return math.prod(kernel.static_ranges) > NATIVE_F16_WORK


def _check(kernel: Kernel) -> None:
    where = f"vulkan-spirv: kernel '{kernel.name}'"
    try:
        kernel.validate()
    except ValueError as exc:  # its message names the kernel
        raise CompileError(f"vulkan-spirv: {exc}") from None
    for role, operands in (("input", kernel.inputs), ("output", kernel.outputs)):
        for i, o in enumerate(operands):
            if o.is_static and math.prod(o.static_shape) > MAX_INDEX:
                raise CompileError(f"{where}: {role} {i} of shape {o.shape} is too large for "
                                   f"32-bit indexing")
    for k, v in enumerate(kernel.yields):
        if kernel.value_type(v) != kernel.outputs[k].element_type:
            raise CompileError(f"{where}: output {k} is {kernel.outputs[k].element_type} but "
                               f"yields a {kernel.value_type(v)} value")


def _fallback(kernel: Kernel, profile: VulkanProfile, _: int) -> SpirvKernel:
    iface, code, grid = fallback.generate(kernel, profile)
    return iface.result(code, grid)


def _elementwise(kernel: Kernel, profile: VulkanProfile, max_groups: int) -> SpirvKernel | None:
    if not elementwise.accepts(kernel):
        return None
    return elementwise.compile_kernel(kernel, profile, max_workgroup_count=max_groups)


_BUILDERS: dict[str, Callable[[Kernel, VulkanProfile, int], SpirvKernel | None]] = {
    "matmul": lambda k, p, _: matmul.compile_matmul(k, p),
    "convolution": lambda k, p, _: matmul.compile_convolution(k, p),
    "reduction": lambda k, p, _: reduction.compile_reduction(k, p),
    "elementwise": _elementwise,
    "fallback": _fallback,
}
