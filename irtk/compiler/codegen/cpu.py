"""CPU codegen: kernels -> a `cpu-kernel-fb` executable (reference kernel programs).

hal_cpu runs each kernel tile by tile with numpy; the tile size is chosen here so that a large
dispatch splits into enough workgroups to keep every worker thread busy, while each tile stays
large enough for numpy's per-call overhead to vanish.
"""
from __future__ import annotations

from dataclasses import dataclass

import flatbuffers

from irtk.compiler.kernel import Kernel, Operand
from schemas import CPU_EXECUTABLE_IDENTIFIER
from schemas import cpu_executable as fb

FORMAT = "cpu-kernel-fb"
MIN_TILE = 4096
MAX_TILE = 1 << 16
TARGET_WORKGROUPS = 32


@dataclass(frozen=True)
class CpuKernel:
    name: str
    tile_size: int
    workgroup_count: tuple[int, int, int]


def plan_kernel(kernel: Kernel) -> CpuKernel:
    total = kernel.iteration_count
    tile = min(MAX_TILE, max(MIN_TILE, -(-total // TARGET_WORKGROUPS)))
    groups = max(1, -(-total // tile)) if total else 0
    return CpuKernel(kernel.name, tile, (groups, 1, 1))


def pack_executable(kernels: list[Kernel]) -> tuple[bytes, list[CpuKernel]]:
    """Serialize kernels into one executable; returns its bytes and each kernel's launch plan."""
    plans = [plan_kernel(k) for k in kernels]
    exe = fb.ExecutableDefT()
    exe.kernels = [_kernel_def(k, p) for k, p in zip(kernels, plans)]
    builder = flatbuffers.Builder(1024)
    builder.Finish(exe.Pack(builder), file_identifier=CPU_EXECUTABLE_IDENTIFIER)
    return bytes(builder.Output()), plans


def _kernel_def(kernel: Kernel, plan: CpuKernel) -> fb.KernelDefT:
    k = fb.KernelDefT()
    k.name = kernel.name
    k.loopRanges = list(kernel.loop_ranges)
    k.inputs = [_operand(o) for o in kernel.inputs]
    k.outputs = [_operand(o) for o in kernel.outputs]
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
    return k


def _operand(o: Operand) -> fb.OperandDefT:
    d = fb.OperandDefT()
    d.binding = o.binding
    d.elementType = o.element_type
    d.shape = list(o.shape)
    m = fb.AffineMapDefT()
    m.numDims = o.map.num_dims
    m.coefficients = [c for row in o.map.rows for c in row]
    d.map = m
    return d
