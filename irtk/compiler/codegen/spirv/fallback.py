"""The general strategy: correct for every kernel the contract allows.

One invocation per parallel point: the parallel loops, linearized row-major, are spread over
workgroups of `WORKGROUP_SIZE` invocations with a linear grid (`Grid(linear=True)`: workgroup
id x + y * 65535, points past the end skipped). Each invocation runs the reduction loops
sequentially in lexicographic order, keeping each output's current value in a register
(initialized from the output buffer only when the body reads it), and stores the outputs once
at the end. Dynamic extents come from push constants; gathers clamp their indices.

Loop trip budget. Mesa's llvmpipe (lavapipe) counts every loop back-edge an invocation takes,
across all its loops, and silently leaves the loop once 65535 have been taken (a guard
against infinite loops): a longer sequential reduction would stop early and store a partial
result. So the innermost reduction loop is unrolled until the static back-edges of the whole
nest fit `LOOP_TRIP_BUDGET`; a static nest that cannot fit even at `MAX_UNROLL` is refused.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

from spirv.tables import BuiltIn, LoopControl, Op as SpvOp, SelectionControl

from irtk.compiler.kernel import Grid, GridAxis, Kernel
from irtk.compiler.targets import VulkanProfile
from irtk.errors import CompileError

from .body import evaluate, used_values
from .emitter import Emitter
from .interface import ShaderInterface

WORKGROUP_SIZE = 64
# Back-edges one invocation may take on every driver (llvmpipe stops loops after 65535 of
# them in total), with room for the loops a strategy adds around the reduction nest.
LOOP_TRIP_BUDGET = 60000
MAX_UNROLL = 64


def emit_loop(e: Emitter, count: int, body: Callable[[int], None]) -> None:
    """for (i = 0; i < count; ++i) body(i) with a structured loop; count and i are i32."""
    var = e.local(e.i32)
    e.store(var, e.i32c(0))
    header, body_label, cont, merge = e.new_id(), e.new_id(), e.new_id(), e.new_id()
    e.op_void(SpvOp.Branch, header)
    e.label(header)
    i = e.load(e.i32, var)
    going = e.op(SpvOp.SLessThan, e.bool, i, count)
    e.op_void(SpvOp.LoopMerge, merge, cont, LoopControl.None_)
    e.op_void(SpvOp.BranchConditional, going, body_label, merge)
    e.label(body_label)
    body(i)
    e.op_void(SpvOp.Branch, cont)
    e.label(cont)
    e.store(var, e.op(SpvOp.IAdd, e.i32, e.load(e.i32, var), e.i32c(1)))
    e.op_void(SpvOp.Branch, header)
    e.label(merge)


def emit_unrolled_loop(e: Emitter, count: int, factor: int, exact: bool,
                       body: Callable[[int], None]) -> None:
    """for (i = 0; i < count; ++i) body(i), `factor` bodies per loop trip; without `exact`
    (count not known to be a multiple of factor) each body is behind an `i < count` check."""
    if factor == 1:
        emit_loop(e, count, body)
        return
    trips = e.op(SpvOp.SDiv, e.i32, count if exact else
                 e.op(SpvOp.IAdd, e.i32, count, e.i32c(factor - 1)), e.i32c(factor))

    def trip(t: int) -> None:
        base = e.op(SpvOp.IMul, e.i32, t, e.i32c(factor))
        for j in range(factor):
            i = e.op(SpvOp.IAdd, e.i32, base, e.i32c(j)) if j else base
            if exact:
                body(i)
            else:
                emit_if(e, e.op(SpvOp.SLessThan, e.bool, i, count), partial(body, i))
    emit_loop(e, trips, trip)


def innermost_unroll(kernel: Kernel) -> tuple[int, bool]:
    """(factor, exact) for the innermost reduction loop so that the static back-edges of the
    reduction nest fit LOOP_TRIP_BUDGET; (1, True) when they already do or an extent is
    dynamic (the budget cannot be checked at compile time)."""
    extents = kernel.static_extents(kernel.reduction_dims)
    if not extents:
        return 1, True
    outer_edges, outer = 0, 1
    for x in extents[:-1]:
        outer *= x
        outer_edges += outer
    inner = extents[-1]
    factor = 1
    while outer_edges + outer * -(-inner // factor) > LOOP_TRIP_BUDGET:
        if factor >= MAX_UNROLL or factor >= inner:
            raise CompileError(
                f"vulkan-spirv: kernel '{kernel.name}': its sequential reduction loops "
                f"{tuple(extents)} take more than {LOOP_TRIP_BUDGET} loop trips per invocation "
                f"even unrolled {factor} times (llvmpipe stops loops after 65535 trips)")
        factor *= 2
    return factor, inner % factor == 0


def emit_if(e: Emitter, condition: int, then: Callable[[], None]) -> None:
    then_label, merge = e.new_id(), e.new_id()
    e.op_void(SpvOp.SelectionMerge, merge, SelectionControl.None_)
    e.op_void(SpvOp.BranchConditional, condition, then_label, merge)
    e.label(then_label)
    then()
    e.op_void(SpvOp.Branch, merge)
    e.label(merge)


def delinearize(iface: ShaderInterface, linear: int, dims: tuple[int, ...]) -> dict[int, int]:
    """Row-major indices (i32) of `dims` from a linear u32 index."""
    e, ranges = iface.e, iface.kernel.loop_ranges
    out: dict[int, int] = {}
    rest = linear
    for pos in range(len(dims) - 1, -1, -1):
        d = dims[pos]
        extent = e.op(SpvOp.Bitcast, e.u32, iface.extent(ranges[d]))
        if pos == 0:
            out[d] = e.op(SpvOp.Bitcast, e.i32, rest)
        else:
            out[d] = e.op(SpvOp.Bitcast, e.i32, e.op(SpvOp.UMod, e.u32, rest, extent))
            rest = e.op(SpvOp.UDiv, e.u32, rest, extent)
    return out


def point_count(iface: ShaderInterface, dims: tuple[int, ...]) -> int:
    e = iface.e
    total = e.u32c(1)
    for d in dims:
        total = e.op(SpvOp.IMul, e.u32, total,
                     e.op(SpvOp.Bitcast, e.u32, iface.extent(iface.kernel.loop_ranges[d])))
    return total


def emit_point(iface: ShaderInterface, loops: dict[int, int]) -> None:
    """Run the reduction loops and the body for the parallel point whose indices are `loops`,
    then store the outputs."""
    e, kernel = iface.e, iface.kernel
    n_in = len(kernel.inputs)
    used = used_values(kernel)
    parallel = [loops.get(d) for d in range(len(kernel.loop_ranges))]
    out_offsets = [iface.operand_offset(o, parallel) for o in kernel.outputs]
    accumulators = []
    for k, o in enumerate(kernel.outputs):
        var = e.local(e.scalar_type(o.element_type))
        if n_in + k in used:
            e.store(var, iface.load(o, out_offsets[k]))
        accumulators.append(var)

    def body(indices: list[int]) -> None:
        def operand_value(i: int) -> int:
            if i >= n_in:
                o = kernel.outputs[i - n_in]
                return e.load(e.scalar_type(o.element_type), accumulators[i - n_in])
            return iface.load(kernel.inputs[i], iface.operand_offset(kernel.inputs[i], indices))
        values = evaluate(iface, kernel, operand_value, lambda d: indices[d])
        for var, v in zip(accumulators, kernel.yields):
            e.store(var, values[v])

    reductions = kernel.reduction_dims
    factor, exact = innermost_unroll(kernel)

    def nest(level: int, indices: dict[int, int]) -> None:
        if level == len(reductions):
            body([indices[d] for d in range(len(kernel.loop_ranges))])
            return
        d = reductions[level]

        def inner(i: int) -> None:
            nest(level + 1, {**indices, d: i})
        count = iface.extent(kernel.loop_ranges[d])
        if level == len(reductions) - 1:
            emit_unrolled_loop(e, count, factor, exact, inner)
        else:
            emit_loop(e, count, inner)

    nest(0, loops)
    for k, o in enumerate(kernel.outputs):
        iface.store(o, out_offsets[k], e.load(e.scalar_type(o.element_type), accumulators[k]))


def generate(kernel: Kernel, profile: VulkanProfile) -> tuple[ShaderInterface, bytes, Grid]:
    size = min(WORKGROUP_SIZE, profile.max_workgroup_invocations)
    iface = ShaderInterface(kernel, profile, (size, 1, 1))
    e = iface.e
    e.label()
    group = iface.linear_workgroup()
    local = iface.builtin(BuiltIn.LocalInvocationId, 0)
    linear = e.op(SpvOp.IAdd, e.u32, e.op(SpvOp.IMul, e.u32, group, e.u32c(size)), local)
    dims = kernel.parallel_dims
    inside = e.op(SpvOp.ULessThan, e.bool, linear, point_count(iface, dims))
    emit_if(e, inside, lambda: emit_point(iface, delinearize(iface, linear, dims)))
    e.op_void(SpvOp.Return)
    code = iface.finish()
    return iface, code, Grid(GridAxis(dims, size), linear=True)
