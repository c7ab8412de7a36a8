"""The reduction strategy: a workgroup per parallel point (or several), no barrier tree.

Recognized kernels: at least one reduction loop, and every output yields
`combine(current, x)` (either operand order) with an associative, commutative combiner from
`COMBINERS` on f32 or i32 (index) values, where the output's current value is used by nothing
else and `x` does not depend on any output. A float add/mul must moreover combine an input
element as loaded (`x` is that input's block argument): only such a plain sum/product may be
reassociated (kernel.py, "Reassociation"); a float sum of values the body computes, such as
`(x - b) * (x - b)` or a product, goes to the fallback, which keeps the sequential order with
every step rounded. argmax-style bodies (selects over several outputs) do not match either.

Each workgroup of W invocations owns one parallel point (linear grid), or with a subgroup
reduce R consecutive points one after another (`rows_per_workgroup`: SwiftShader pays a fixed
cost per workgroup, about 3 us, so 1024 one-row workgroups cost more than the loads).
Invocation l combines the units l, l + W, ... (a unit is one reduction point, or four
consecutive points read with 16-byte loads where the inputs allow) into a register
accumulator started at the combiner's identity, `UNROLL` units per loop trip. Where the
profile fixes the subgroup size and has subgroup arithmetic (and every combiner has a
subgroup operation), W is that size: the workgroup is one subgroup and `OpGroupNonUniform*`
Reduce finishes the job with no shared memory and no barrier. Otherwise W = 64 partial
results meet in shared memory behind one barrier and invocation 0 folds them in order (CPU
drivers pay dearly per barrier). Invocation 0 then combines the output's initial value with
the total and stores it; plain float sums are thus reassociated (they match a sequential sum
to rounding), as the rule above allows.

Selection: static reductions of fewer than `MIN_REDUCTION` points stay with the fallback (one
invocation per point is cheaper there).
"""
from __future__ import annotations

import math

from spirv.tables import BuiltIn, Capability, GroupOperation, Op as SpvOp, Scope

from irtk.compiler.kernel import Grid, GridAxis, Kernel, Op
from irtk.compiler.targets import VulkanProfile

from .body import evaluate
from .executable import SpirvKernel
from .fallback import delinearize, emit_if, emit_loop
from .interface import ShaderInterface, barrier, shared_array, shared_pointer
from .typed_ops import emit_typed

MIN_REDUCTION = 64
SHARED_WORKGROUP = 64
UNROLL = 4
MAX_ROWS = 32
MIN_GROUPS = 32
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1

# combiner -> (identity for f32, identity for i32, subgroup reduce opcode)
COMBINERS: dict[str, tuple[float | None, int | None, SpvOp | None]] = {
    "arith.addf": (0.0, None, SpvOp.GroupNonUniformFAdd),
    "arith.mulf": (1.0, None, SpvOp.GroupNonUniformFMul),
    "arith.maximumf": (-math.inf, None, None),
    "arith.minimumf": (math.inf, None, None),
    "arith.maxnumf": (-math.inf, None, None),
    "arith.minnumf": (math.inf, None, None),
    "arith.addi": (None, 0, SpvOp.GroupNonUniformIAdd),
    "arith.muli": (None, 1, SpvOp.GroupNonUniformIMul),
    "arith.andi": (None, -1, SpvOp.GroupNonUniformBitwiseAnd),
    "arith.ori": (None, 0, SpvOp.GroupNonUniformBitwiseOr),
    "arith.xori": (None, 0, SpvOp.GroupNonUniformBitwiseXor),
    "arith.maxsi": (None, INT_MIN, SpvOp.GroupNonUniformSMax),
    "arith.minsi": (None, INT_MAX, SpvOp.GroupNonUniformSMin),
    "arith.maxui": (None, 0, SpvOp.GroupNonUniformUMax),
    "arith.minui": (None, -1, SpvOp.GroupNonUniformUMin),
}


def combiners(kernel: Kernel) -> list[Op] | None:
    """The combiner op of each output, or None when the kernel is not a plain reduction."""
    if not kernel.reduction_dims:
        return None
    n_in, n_out = len(kernel.inputs), len(kernel.outputs)
    base = n_in + n_out
    outputs = set(range(n_in, base))
    depends: dict[int, set[int]] = {v: ({v} if v in outputs else set()) for v in range(base)}
    for i, op in enumerate(kernel.ops):
        depends[base + i] = set().union(*(depends[v] for v in op.operands)) if op.operands \
            else set()
    found = []
    for o, y in enumerate(kernel.yields):
        if y < base:
            return None
        op = kernel.ops[y - base]
        kind = kernel.outputs[o].element_type
        identity = COMBINERS.get(op.name)
        if identity is None or kind not in ("f32", "i32", "index") or len(op.operands) != 2:
            return None
        if (identity[0] if kind == "f32" else identity[1]) is None:
            return None
        acc = n_in + o
        if acc not in op.operands:
            return None
        x = op.operands[1] if op.operands[0] == acc else op.operands[0]
        if depends[x]:
            return None
        if not reassociable(kernel, op, x):
            return None
        # The current value feeds only the combiner.
        if any(acc in other.operands for j, other in enumerate(kernel.ops) if j != y - base):
            return None
        found.append(op)
    return found


def reassociable(kernel: Kernel, op: Op, x: int) -> bool:
    """Whether combining in any order is allowed (kernel.py, "Reassociation"): always for
    integers and float max/min; for a float add/mul only when the addend is an input element
    as loaded (a plain sum/product), never a value the body computes, whose sequential order
    the result must keep (each step rounded)."""
    if op.name not in ("arith.addf", "arith.mulf"):
        return True
    if x >= len(kernel.inputs) or kernel.inputs[x].map is None:
        return False
    return kernel.inputs[x].element_type == kernel.value_type(op.operands[0])


def contiguous_quads(kernel: Kernel) -> bool:
    """Four consecutive points of the innermost reduction loop can be read with one 4-word
    load per input: static, 32-bit inputs, the loop contiguous in each (coefficient 1, every
    other coefficient and the constant multiples of 4), and its extent a multiple of 4."""
    inner = kernel.reduction_dims[-1]
    if not kernel.is_static or kernel.loop_ranges[inner] % 4:  # type: ignore[operator]
        return False
    n = len(kernel.loop_ranges)
    for o in kernel.inputs:
        if o.map is None:
            continue
        if o.element_type not in ("f32", "i32", "index") or not o.is_static \
                or o.map.num_symbols:
            return False
        strides = [math.prod(o.shape[r + 1:]) for r in range(len(o.shape))]  # type: ignore
        coeffs = [sum(row[j] * st for row, st in zip(o.map.rows, strides)) for j in range(n)]
        const = sum(row[-1] * st for row, st in zip(o.map.rows, strides))
        if coeffs[inner] != 1 or const % 4 or any(c % 4 for j, c in enumerate(coeffs)
                                                  if j != inner):
            return False
    return True


def rows_per_workgroup(kernel: Kernel) -> int:
    """Parallel points per one-subgroup workgroup: up to `MAX_ROWS`, keeping at least
    `MIN_GROUPS` workgroups for the driver's threads; 1 for dynamic extents. Software drivers
    pay a fixed cost per workgroup (SwiftShader most: see docs/codegen_spirv.md)."""
    extents = [kernel.loop_ranges[d] for d in kernel.parallel_dims]
    if not all(isinstance(x, int) for x in extents):
        return 1
    points = math.prod(extents)  # type: ignore[arg-type]
    rows = 1
    while rows * 2 <= MAX_ROWS and points // (rows * 2) >= MIN_GROUPS:
        rows *= 2
    return rows


def compile_reduction(kernel: Kernel, profile: VulkanProfile) -> SpirvKernel | None:
    ops = combiners(kernel)
    if ops is None:
        return None
    static = [kernel.loop_ranges[d] for d in kernel.reduction_dims]
    size = math.prod(static) if all(isinstance(r, int) for r in static) else None
    if size is not None and size < MIN_REDUCTION:
        return None
    if profile.subgroup_size > 1 and profile.subgroup_arithmetic and all(
            COMBINERS[op.name][2] is not None for op in ops):
        width = profile.subgroup_size
    else:
        width = min(SHARED_WORKGROUP, profile.max_workgroup_invocations)
    return _Generator(kernel, profile, ops, width).build()


class _Generator:
    def __init__(self, kernel: Kernel, profile: VulkanProfile, ops: list[Op], width: int):
        self.kernel, self.profile, self.ops, self.width = kernel, profile, ops, width
        self.iface = ShaderInterface(kernel, profile, (width, 1, 1))
        self.e = self.iface.e
        self.subgroup = profile.subgroup_size if width == profile.subgroup_size else 0
        self.vector = contiguous_quads(kernel)
        self.rows = rows_per_workgroup(kernel) if self.subgroup else 1

    def identity(self, o: int) -> int:
        e, op = self.e, self.ops[o]
        f, i, _ = COMBINERS[op.name]
        return e.f32c(f) if self.kernel.outputs[o].element_type == "f32" else e.i32c(i)

    def combine(self, o: int, a: int, b: int) -> int:
        kind = self.kernel.outputs[o].element_type
        return emit_typed(self.e, self.ops[o], [a, b], [kind, kind])

    def build(self) -> SpirvKernel:
        iface, e, kernel = self.iface, self.e, self.kernel
        width = self.width
        types = [e.scalar_type(o.element_type) for o in kernel.outputs]
        shared = [] if self.subgroup else [shared_array(iface, t, width, f"partial{o}")
                                           for o, t in enumerate(types)]
        e.label()
        group_id = iface.linear_workgroup()
        local = iface.builtin(BuiltIn.LocalInvocationId, 0)
        accs = [e.local(t) for t in types]
        if self.rows == 1:
            self._parallel_point(group_id, local, types, shared, accs)
        else:
            # Several parallel points per workgroup, one after another (uniform control flow:
            # the subgroup reduce inside stays legal): fewer, longer workgroups.
            first = e.op(SpvOp.IMul, e.u32, group_id, e.u32c(self.rows))
            emit_loop(e, e.i32c(self.rows), lambda i: self._parallel_point(
                e.op(SpvOp.IAdd, e.u32, first, e.op(SpvOp.Bitcast, e.u32, i)),
                local, types, shared, accs))
        e.op_void(SpvOp.Return)
        code = iface.finish()
        requirements: dict[str, int | bool] = {
            "shared_memory_bytes": 4 * len(shared) * width}
        if self.subgroup:
            requirements["subgroup_size"] = self.subgroup
        return iface.result(code, Grid(GridAxis(kernel.parallel_dims, self.rows), linear=True),
                            requirements)

    def _parallel_point(self, point: int, local: int, types: list[int], shared: list[int],
                        accs: list[int]) -> None:
        """Reduce parallel point `point` (u32, linear) and store its outputs."""
        iface, e, kernel = self.iface, self.e, self.kernel
        width = self.width
        parallel_dims, reduction_dims = kernel.parallel_dims, kernel.reduction_dims
        points = e.u32c(1)
        for d in parallel_dims:
            points = e.op(SpvOp.IMul, e.u32, points,
                          e.op(SpvOp.Bitcast, e.u32, iface.extent(kernel.loop_ranges[d])))
        total = e.i32c(1)
        for d in reduction_dims:
            total = e.op(SpvOp.IMul, e.i32, total, iface.extent(kernel.loop_ranges[d]))
        active = e.op(SpvOp.ULessThan, e.bool, point, points)
        for o, acc in enumerate(accs):
            e.store(acc, self.identity(o))
        # Workgroups past the end still reach every barrier: only their work is skipped.
        local_i = e.op(SpvOp.Bitcast, e.i32, local)

        group = 4 if self.vector else 1       # reduction points per unit of work
        units = e.op(SpvOp.SDiv, e.i32, total, e.i32c(group))
        static = [kernel.loop_ranges[d] for d in reduction_dims]
        exact = all(isinstance(r, int) for r in static) and \
            (math.prod(static) // group) % (width * UNROLL) == 0  # type: ignore[arg-type]

        def accumulate() -> None:
            indices = delinearize(iface, point, parallel_dims)
            trips = e.op(SpvOp.SDiv, e.i32, e.op(SpvOp.IAdd, e.i32, units,
                                                 e.i32c(width * UNROLL - 1)),
                         e.i32c(width * UNROLL))

            def trip(t: int) -> None:
                base = e.op(SpvOp.IAdd, e.i32, e.op(SpvOp.IMul, e.i32, t,
                                                    e.i32c(width * UNROLL)), local_i)
                for u in range(UNROLL):
                    unit = base if u == 0 else e.op(SpvOp.IAdd, e.i32, base, e.i32c(u * width))
                    if exact:   # every unit of every trip exists: no divergent branch
                        self._unit(indices, unit, accs)
                    else:
                        emit_if(e, e.op(SpvOp.SLessThan, e.bool, unit, units),
                                lambda unit=unit: self._unit(indices, unit, accs))
            emit_loop(e, trips, trip)
        emit_if(e, active, accumulate)
        partials = [e.load(t, acc) for t, acc in zip(types, accs)]
        if self.subgroup:
            # The workgroup is one subgroup: a subgroup reduce is the whole tree.
            iface.e.b.capability(Capability.GroupNonUniform)
            iface.e.b.capability(Capability.GroupNonUniformArithmetic)
            totals = [self._subgroup_reduce(op, t, p)
                      for op, t, p in zip(self.ops, types, partials)]
        else:
            # One barrier, then invocation 0 folds the W partial results in order.
            for o, p in enumerate(partials):
                e.store(shared_pointer(iface, shared[o], types[o], local), p)
            barrier(iface)
            totals = []
            for o, t in enumerate(types):
                total_o = e.load(t, shared_pointer(iface, shared[o], t, e.u32c(0)))
                for slot in range(1, width):
                    total_o = self.combine(o, total_o, e.load(t, shared_pointer(
                        iface, shared[o], t, e.u32c(slot))))
                totals.append(total_o)

        def write() -> None:
            indices = delinearize(iface, point, parallel_dims)
            loops = [indices.get(d) for d in range(len(kernel.loop_ranges))]
            for o, operand in enumerate(kernel.outputs):
                offset = iface.operand_offset(operand, loops)
                value = self.combine(o, iface.load(operand, offset), totals[o])
                iface.store(operand, offset, value)
        emit_if(e, e.and_(active, e.op(SpvOp.IEqual, e.bool, local, e.u32c(0))), write)

    def _subgroup_reduce(self, op: Op, value_type: int, value: int) -> int:
        """The subgroup's combined value (unsigned min/max work on u32)."""
        e = self.e
        opcode = COMBINERS[op.name][2]
        if op.name in ("arith.maxui", "arith.minui"):
            unsigned = e.op(opcode, e.u32, e.u32c(Scope.Subgroup), GroupOperation.Reduce,
                            e.op(SpvOp.Bitcast, e.u32, value))
            return e.op(SpvOp.Bitcast, value_type, unsigned)
        return e.op(opcode, value_type, e.u32c(Scope.Subgroup), GroupOperation.Reduce, value)

    def _unit(self, indices: dict[int, int], unit: int, accs: list[int]) -> None:
        """One reduction point, or with 4-word loads four consecutive ones (one load per
        input, then the body four times in order)."""
        e = self.e
        if not self.vector:
            self._point(indices, unit, accs)
            return
        iface, kernel = self.iface, self.kernel
        first = e.op(SpvOp.IMul, e.i32, unit, e.i32c(4))
        point = self._loops(indices, first)
        words = {i: iface.load_vector4(o, iface.operand_offset(o, point),
                                       e.scalar_type(o.element_type))
                 for i, o in enumerate(kernel.inputs) if o.map is not None}
        for j in range(4):
            r = first if j == 0 else e.op(SpvOp.IAdd, e.i32, first, e.i32c(j))
            self._point(indices, r, accs, {i: w[j] for i, w in words.items()})

    def _loops(self, indices: dict[int, int], r: int) -> list[int]:
        loops = dict(indices)
        loops.update(delinearize(self.iface, self.e.op(SpvOp.Bitcast, self.e.u32, r),
                                 self.kernel.reduction_dims))
        return [loops[d] for d in range(len(self.kernel.loop_ranges))]

    def _point(self, indices: dict[int, int], r: int, accs: list[int],
               loaded: dict[int, int] | None = None) -> None:
        """Evaluate the body at reduction point r (linear, i32) with the accumulators as the
        outputs' current values (`loaded`: input values already read)."""
        iface, e, kernel = self.iface, self.e, self.kernel
        n_in = len(kernel.inputs)
        point = self._loops(indices, r)

        def operand_value(i: int) -> int:
            if i >= n_in:
                o = i - n_in
                return e.load(e.scalar_type(kernel.outputs[o].element_type), accs[o])
            if loaded is not None:
                return loaded[i]
            return iface.load(kernel.inputs[i], iface.operand_offset(kernel.inputs[i], point))
        values = evaluate(iface, kernel, operand_value, lambda d: point[d])
        for acc, v in zip(accs, kernel.yields):
            e.store(acc, values[v])
