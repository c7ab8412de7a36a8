"""Strategy selection: which code generator compiles a kernel (docs/codegen_spirv.md).

The rule, first match wins:
1. "matmul": a contraction C[b, m, n] (+)= A[b, m, k] * B[b, k, n] (see matmul.py);
2. "convolution": the same body over several reduction loops (windowed maps, matmul.py);
3. "reduction": every output is `combine(current, x)` with an associative combiner and the
   reduction loops innermost (see reduction.py);
4. "elementwise": all loops parallel, static shapes, no params or gathers, f32/i32 buffers;
5. "fallback": everything else (fallback.py), correct for any kernel.
Each strategy may decline a kernel it recognized (returning None), passing it down the list.
"""
from __future__ import annotations

from collections.abc import Callable

from irtk.compiler.kernel import Grid, GridAxis, Kernel
from irtk.compiler.targets import VulkanProfile
from irtk.errors import CompileError

from . import elementwise, fallback, matmul, reduction
from .executable import SpirvKernel, validate

STRATEGIES = ("matmul", "convolution", "reduction", "elementwise", "fallback")
MAX_INDEX = (1 << 31) - 1


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
    for name in order:
        compiled = _BUILDERS[name](kernel, profile, max_workgroup_count)
        if compiled is not None:
            validate(compiled.code, profile.vulkan_env, kernel.name)
            compiled.strategy = name
            return compiled
    raise CompileError(f"vulkan-spirv: kernel '{kernel.name}' does not fit strategy "
                       f"'{strategy}'")


def _check(kernel: Kernel) -> None:
    where = f"vulkan-spirv: kernel '{kernel.name}'"
    try:
        kernel.validate()
    except ValueError as exc:  # its message names the kernel
        raise CompileError(f"vulkan-spirv: {exc}") from None
    for role, operands in (("input", kernel.inputs), ("output", kernel.outputs)):
        for i, o in enumerate(operands):
            if o.is_static and _product(o.shape) > MAX_INDEX:
                raise CompileError(f"{where}: {role} {i} of shape {o.shape} is too large for "
                                   f"32-bit indexing")
    for o, v in enumerate(kernel.yields):
        if kernel.value_type(v) != kernel.outputs[o].element_type:
            raise CompileError(f"{where}: output {o} is {kernel.outputs[o].element_type} but "
                               f"yields a {kernel.value_type(v)} value")


def _product(shape) -> int:
    total = 1
    for d in shape:
        total *= d
    return total


def _fallback(kernel: Kernel, profile: VulkanProfile, _: int) -> SpirvKernel:
    iface, code, grid = fallback.generate(kernel, profile)
    return iface.result(code, grid)


def _elementwise(kernel: Kernel, profile: VulkanProfile, max_groups: int) -> SpirvKernel | None:
    if not elementwise.accepts(kernel):
        return None
    compiled = elementwise.compile_kernel(kernel, profile, max_workgroup_count=max_groups)
    per_workgroup = compiled.workgroup_size[0] * elementwise.plan_launch(
        kernel.iteration_count, len(kernel.ops), profile, max_groups).per_invocation
    compiled.grid = Grid(GridAxis(tuple(range(len(kernel.loop_ranges))), per_workgroup),
                         linear=True)
    return compiled


_BUILDERS: dict[str, Callable[[Kernel, VulkanProfile, int], SpirvKernel | None]] = {
    "matmul": lambda k, p, _: matmul.compile_matmul(k, p),
    "convolution": lambda k, p, _: matmul.compile_convolution(k, p),
    "reduction": lambda k, p, _: reduction.compile_reduction(k, p),
    "elementwise": _elementwise,
    "fallback": _fallback,
}
