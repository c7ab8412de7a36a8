"""CPU codegen: kernels -> a `cpu-kernel-fb` executable (reference kernel programs).

hal_cpu runs each kernel tile by tile with numpy. A tile is a range of *parallel* points (a
workgroup owns whole reductions); its size is chosen here so that a large dispatch splits into
enough workgroups to keep every worker thread busy, while each tile holds enough work (parallel
points x reduction length) for numpy's per-call overhead to vanish. Where it can, the tile is a
whole number of rows of the inner parallel loops, so the executor sees one box per tile.
docs/cpu_kernels.md describes the format.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import flatbuffers

from irtk.compiler.codegen import Codegen, Launch
from irtk.compiler.kernel import AffineMap, Grid, GridAxis, Kernel, Operand
from irtk.errors import CompileError
from schemas import CPU_EXECUTABLE_IDENTIFIER
from schemas import cpu_executable as fb

MIN_WORK = 1 << 12          # parallel points x reduction length per tile, at least
MAX_WORK = 1 << 18          # ... and at most, when the dispatch is large enough
MAX_TILE = 1 << 16          # parallel points per tile
TARGET_WORKGROUPS = 32
DYNAMIC_TILE = 4096         # parallel points per tile when extents are only known at run time


@dataclass(frozen=True)
class CpuKernel:
    """The launch plan of one kernel: the host evaluates `grid` once extents are known."""

    name: str
    tile_size: int
    grid: Grid
    loop_ranges: tuple[int, ...] | None = None   # None: dynamic extents

    @property
    def workgroup_count(self) -> tuple[int, int, int]:
        """Static kernels only: the launch `grid` gives for the static loop ranges."""
        if self.loop_ranges is None:
            raise ValueError(f"kernel {self.name} has dynamic extents: use grid.counts()")
        return self.grid.counts(self.loop_ranges)


def plan_kernel(kernel: Kernel) -> CpuKernel:
    parallel = kernel.parallel_dims
    if not kernel.is_static:
        tile = DYNAMIC_TILE
        return CpuKernel(kernel.name, tile, Grid(GridAxis(parallel, tile)))
    ranges = kernel.static_ranges
    points = math.prod(ranges[d] for d in parallel)
    work = max(1, math.prod(ranges[d] for d in kernel.reduction_dims))
    tile = -(-points // TARGET_WORKGROUPS)
    tile = max(tile, -(-MIN_WORK // work))
    tile = min(tile, max(1, MAX_WORK // work), MAX_TILE)
    tile = max(1, tile)
    # Whole rows of the innermost parallel loop where that keeps the tile near its size.
    row = ranges[parallel[-1]] if parallel else 1
    if row > 1 and tile >= row:
        tile = tile // row * row
    elif row > tile > 0 and row % tile:
        tile = next((t for t in range(tile, 0, -1) if row % t == 0), tile)
    return CpuKernel(kernel.name, tile, Grid(GridAxis(parallel, tile)), ranges)


def pack_executable(kernels: list[Kernel]) -> tuple[bytes, list[CpuKernel]]:
    """Serialize kernels into one executable; returns its bytes and each kernel's launch plan.

    A kernel that breaks the kernel IR's rules is a CompileError naming it (hal_cpu would
    refuse the executable at load)."""
    for k in kernels:
        try:
            k.validate()
        except ValueError as e:
            raise CompileError(f"cpu: {e}") from None
    plans = [plan_kernel(k) for k in kernels]
    exe = fb.ExecutableDefT()
    exe.kernels = [_kernel_def(k, p) for k, p in zip(kernels, plans)]
    builder = flatbuffers.Builder(1024)
    builder.Finish(exe.Pack(builder), file_identifier=CPU_EXECUTABLE_IDENTIFIER)
    return bytes(builder.Output()), plans


class CpuCodegen(Codegen):
    """The cpu target's code generator, as the compiler driver calls it
    (irtk/compiler/target_backends.py); the target has no profiles."""

    def compile_kernel(self, kernel: Kernel, profile: None) -> CpuKernel:
        """The kernel's launch plan, after packing it alone: that checks it as hal_cpu will."""
        return pack_executable([kernel])[1][0]

    def pack_executable(self, kernels: Sequence[Kernel], compiled: Sequence[CpuKernel],
                        profile: None) -> tuple[bytes, list[Launch]]:
        data, plans = pack_executable(list(kernels))
        return data, [plan.grid for plan in plans]


CODEGEN = CpuCodegen()


def _kernel_def(kernel: Kernel, plan: CpuKernel) -> fb.KernelDefT:
    names = {p.name: i for i, p in enumerate(kernel.params)}
    k = fb.KernelDefT()
    k.name = kernel.name
    k.loopRanges = [r if isinstance(r, int) else 0 for r in kernel.loop_ranges]
    if not kernel.is_static:
        k.dynamicLoopRanges = [names[r] if isinstance(r, str) else -1 for r in kernel.loop_ranges]
    k.iteratorTypes = [0 if t == "parallel" else 1 for t in kernel.iterator_types]
    k.params = [fb.ParamDefT(name=p.name, type=p.type, offset=off)
                for p, off in zip(kernel.params, kernel.param_offsets())]
    k.inputs = [_operand(o, names) for o in kernel.inputs]
    k.outputs = [_operand(o, names) for o in kernel.outputs]
    k.ops = []
    for op in kernel.ops:
        d = fb.OpDefT()
        d.name = op.name
        d.operands = list(op.operands)
        d.resultType = op.result_type
        d.predicate = op.predicate
        d.intValue = op.int_value
        d.floatValue = op.float_value
        k.ops.append(d)
    k.yields = list(kernel.yields)
    k.tileSize = plan.tile_size
    k.grid = _grid(plan.grid)
    return k


def _grid(grid: Grid) -> fb.GridDefT:
    def axis(a: GridAxis) -> fb.GridAxisDefT:
        return fb.GridAxisDefT(dims=list(a.dims), divisor=a.divisor)
    return fb.GridDefT(x=axis(grid.x), y=axis(grid.y), z=axis(grid.z), linear=grid.linear)


def _operand(o: Operand, names: dict[str, int]) -> fb.OperandDefT:
    d = fb.OperandDefT()
    d.binding = o.binding
    d.elementType = o.element_type
    d.shape = [e if isinstance(e, int) else 0 for e in o.shape]
    if not o.is_static:
        d.dynamicDims = [names[e] if isinstance(e, str) else -1 for e in o.shape]
    if o.map is not None:
        d.map = _map(o.map)
    return d


def _map(m: AffineMap) -> fb.AffineMapDefT:
    amap = fb.AffineMapDefT()
    amap.numDims = m.num_dims
    amap.numSymbols = m.num_symbols
    amap.coefficients = [c for row in m.rows for c in row]
    return amap
