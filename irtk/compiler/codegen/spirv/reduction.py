"""The reduction strategy: a workgroup per parallel point (or several), accumulated in blocks.

Recognized kernels: at least one reduction loop, and every output yields
`combine(current, x)` (either operand order) with an associative, commutative combiner of
`irtk/compiler/reductions.py` on f32, f16, bf16 or i32 (index) values, where the output's
current value is used by nothing else and `x` does not depend on any output. A float add/mul must moreover combine an
input element as loaded (`x` is that input's block argument): only such a plain sum/product may
be reassociated (kernel.py, "Reassociation"); a float sum of values the body computes, such as
`(x - b) * (x - b)` or a product, goes to the fallback, which keeps the sequential order with
every step rounded. argmax-style bodies (selects over several outputs) do not match either.

Floats accumulate in f32 whatever the output type (f16/bf16 sums are rounded once, when the
total meets the output's initial value), integers in i32.

Each workgroup of W invocations owns one parallel point (linear grid), or with a subgroup
reduce R consecutive points one after another (`rows_per_workgroup`). Invocation l reads the
units l, l + W, ... (a unit is one reduction point, or `group` consecutive points read with one
wide load per input where the inputs allow), `unroll` units per loop trip. Accuracy: the
`unroll * group` values of one trip are summed into a fresh trip sum, trips add into a block
accumulator (`BLOCK` trips each) and blocks into the invocation's accumulator; with the
subgroup (or shared-memory) tree on top, each value of a sum of n passes through at most
about unroll * group + BLOCK + n / (W * unroll * group * BLOCK) + log2(W) roundings, not the
n / W of a serial sum per invocation (2 x 40960 values 0.001: 40.959713 before, 40.96 now).

Where the profile fixes the subgroup size and can combine every output across a subgroup
(`subgroup_reducible`: the combiner's `OpGroupNonUniform*` Reduce with subgroup arithmetic, or,
for the float max/min family, which has none with the body's NaN and signed-zero rules, a
butterfly of `OpGroupNonUniformShuffleXor` around the body's own combiner), W is that size: the
workgroup is one subgroup and the subgroup finishes the job with no shared memory and no
barrier (SwiftShader's 256 x 1024 row max: 11 ms with the shared-memory tree). Otherwise W = 64 partial results
meet in shared memory behind one barrier and invocation 0 folds them in order (CPU drivers pay
dearly per barrier). Invocation 0 then combines the output's initial value with the total and
stores it.

Load shape per profile (`plan`; docs/codegen_spirv.md, "The reduction strategy"): on lavapipe
each lane reads 8 consecutive f32 per unit, two 16-byte texel fetches (the `llvmpipe` profile
reads inputs as texel buffers; with storage buffers it would be one u64vec4 load, since
lavapipe loads those lane by lane);
SwiftShader turns a load whose lanes read consecutive words into one vector load, and a
per-lane vector into a gather, which measured no better than per-lane uvec4 loads there; both
keep 4-wide loads.

Texel windows (profiles with `texel_window`, SwiftShader): an input whose reads for one
parallel point span at most half a window is read through an array of texel-buffer views that
overlap by half (`texel_windows`); the view holding the point's span is picked once per point,
which every invocation of the workgroup shares (docs/codegen_spirv.md, "Texel windows").
SwiftShader fetches a texel with one 16-byte load per lane where a storage-buffer load is a
gather, lane by lane: the 1024 x 1024 row sum takes 0.6x the time.

Selection: static reductions of fewer than `MIN_REDUCTION` points stay with the fallback (one
invocation per point is cheaper there).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from spirv.tables import (BuiltIn, Capability, GLSLstd450, GroupOperation,
                          Op as SpvOp, Scope)

from irtk.compiler import reductions
from irtk.compiler.kernel import Grid, GridAxis, Kernel, Op, Operand
from irtk.compiler.reductions import Combiner
from irtk.compiler.targets import VulkanProfile
from irtk.types import SCALAR_TYPES

from .body import evaluate
from .executable import SpirvKernel
from .fallback import LOOP_TRIP_BUDGET, delinearize, emit_if, emit_loop
from .interface import ShaderInterface, add_windows, barrier, shared_array, shared_pointer
from .typed_ops import emit_typed

MIN_REDUCTION = 64
SHARED_WORKGROUP = 64
UNROLL = 4
BLOCK = 16
MAX_ROWS = 32
MIN_GROUPS = 32
FLOAT_OUTPUTS = ("f32", "f16", "bf16")
INT_OUTPUTS = ("i32", "index")

# combiner -> its subgroup reduce opcode, where it has one (identities: irtk/compiler/reductions.py)
SUBGROUP_OPS: dict[str, SpvOp | None] = {
    "arith.addf": SpvOp.GroupNonUniformFAdd, "arith.mulf": SpvOp.GroupNonUniformFMul,
    "arith.maximumf": None, "arith.minimumf": None, "arith.maxnumf": None,
    "arith.minnumf": None,
    "arith.addi": SpvOp.GroupNonUniformIAdd, "arith.muli": SpvOp.GroupNonUniformIMul,
    "arith.andi": SpvOp.GroupNonUniformBitwiseAnd, "arith.ori": SpvOp.GroupNonUniformBitwiseOr,
    "arith.xori": SpvOp.GroupNonUniformBitwiseXor, "arith.maxsi": SpvOp.GroupNonUniformSMax,
    "arith.minsi": SpvOp.GroupNonUniformSMin, "arith.maxui": SpvOp.GroupNonUniformUMax,
    "arith.minui": SpvOp.GroupNonUniformUMin,
}


def combiners(kernel: Kernel) -> list[Op] | None:
    """The combiner op of each output, or None when the kernel is not a plain reduction."""
    found = reduction_terms(kernel)
    return None if found is None else [c.op for c in found]


def reduction_terms(kernel: Kernel) -> list[Combiner] | None:
    """Each output's combiner and folded value, or None when the kernel is not a plain
    reduction this strategy may reorder (f32, f16, bf16, i32 or index outputs)."""
    return reductions.reduction_terms(kernel, FLOAT_OUTPUTS, INT_OUTPUTS)


def contiguous_group(kernel: Kernel, group: int) -> bool:
    """`group` consecutive points of the innermost reduction loop can be read with one
    `4 * group`-byte load per input: static, 32-bit inputs, the loop contiguous in each
    (coefficient 1, every other coefficient and the constant multiples of `group`), and its
    extent a multiple of `group`."""
    inner = kernel.reduction_dims[-1]
    if not kernel.is_static or kernel.static_ranges[inner] % group:
        return False
    n = len(kernel.loop_ranges)
    for o in kernel.inputs:
        if o.map is None:
            continue
        if o.element_type not in ("f32", "i32", "index") or not o.is_static \
                or o.map.num_symbols:
            return False
        coeffs, const = o.linear_offset(n)
        if coeffs[inner] != 1 or const % group or any(c % group for j, c in enumerate(coeffs)
                                                      if j != inner):
            return False
    return True


def _offset_terms(kernel: Kernel, operand: Operand) -> list[int] | None:
    """The element-offset coefficient of each loop of a static operand, or None (dynamic,
    symbols)."""
    if operand.map is None or not operand.is_static or operand.map.num_symbols:
        return None
    return operand.linear_offset(len(kernel.loop_ranges))[0]


def texel_windows(kernel: Kernel, profile: VulkanProfile) -> dict[int, int]:
    """binding -> window views, for the inputs read through texel windows: static 32-bit
    inputs no output shares, whose reads for one parallel point start at its reduction
    indices 0 (no negative reduction coefficient) and span at most half a window."""
    window = profile.texel_window
    if not window or not kernel.is_static:
        return {}
    ranges = kernel.static_ranges
    half = window // 2
    written = {o.binding for o in kernel.outputs}
    uses: dict[int, int] = {}
    for o in kernel.inputs:
        uses[o.binding] = uses.get(o.binding, 0) + 1
    out: dict[int, int] = {}
    for o in kernel.inputs:
        coeffs = _offset_terms(kernel, o)
        if coeffs is None or o.binding in written or uses[o.binding] > 1 \
                or SCALAR_TYPES[o.element_type].storage_bits != 32:
            continue
        reach = [coeffs[d] * (ranges[d] - 1) for d in kernel.reduction_dims]
        if min(coeffs[d] for d in kernel.reduction_dims) < 0:
            continue
        span = sum(reach) + 1                     # words one point reads, from its first
        if -(-(span + 3) // 4) > half:            # texels, whatever the first word's place
            continue
        add_windows(out, o, profile)
    return out


def rows_per_workgroup(kernel: Kernel) -> int:
    """Parallel points per one-subgroup workgroup: up to `MAX_ROWS`, keeping at least
    `MIN_GROUPS` workgroups for the driver's threads; 1 for dynamic extents. Software drivers
    pay a fixed cost per workgroup (SwiftShader most: see docs/codegen_spirv.md)."""
    extents = kernel.static_extents(kernel.parallel_dims)
    if extents is None:
        return 1
    points = math.prod(extents)
    rows = 1
    while rows * 2 <= MAX_ROWS and points // (rows * 2) >= MIN_GROUPS:
        rows *= 2
    return rows


@dataclass(frozen=True)
class Plan:
    """How a reduction kernel is laid out (see the module docstring)."""

    width: int        # invocations per workgroup
    subgroup: int     # the subgroup size the reduce relies on; 0: shared memory
    rows: int         # parallel points per workgroup
    group: int        # consecutive reduction points per unit (one load per input)
    unroll: int       # units per loop trip
    block: int        # trips per block accumulator


def subgroup_reducible(profile: VulkanProfile, op: Op) -> bool:
    """A subgroup of `profile` can combine its lanes' values of `op`: with the op's own
    subgroup reduce, or else with a butterfly of xor shuffles around the combiner as the body
    computes it (the float max/min family, whose NaN and signed-zero rules no subgroup
    operation promises)."""
    if SUBGROUP_OPS[op.name] is not None:
        return profile.subgroup_arithmetic
    return profile.subgroup_shuffle and profile.subgroup_size & (profile.subgroup_size - 1) == 0


def plan(kernel: Kernel, profile: VulkanProfile, ops: list[Op]) -> Plan:
    """The layout for `profile` (the per-driver rule is in the module docstring)."""
    if profile.subgroup_size > 1 and all(subgroup_reducible(profile, op) for op in ops):
        width = subgroup = profile.subgroup_size
        rows = rows_per_workgroup(kernel)
    else:
        width, subgroup, rows = min(SHARED_WORKGROUP, profile.max_workgroup_invocations), 0, 1
    group = 1
    if profile.cpu_device and profile.int64 and contiguous_group(kernel, 8):
        group = 8
    elif contiguous_group(kernel, 4):
        group = 4
    return Plan(width, subgroup, rows, group, UNROLL, BLOCK)


def compile_reduction(kernel: Kernel, profile: VulkanProfile) -> SpirvKernel | None:
    terms = reduction_terms(kernel)
    if terms is None:
        return None
    static = kernel.static_extents(kernel.reduction_dims)
    size = None if static is None else math.prod(static)
    if size is not None and size < MIN_REDUCTION:
        return None
    layout = plan(kernel, profile, [t.op for t in terms])
    if size is not None and _loop_trips(layout, size) > LOOP_TRIP_BUDGET:
        return None     # llvmpipe would cut the loops short; the fallback unrolls or refuses
    return _Generator(kernel, profile, terms, layout).build()


def _loop_trips(layout: Plan, size: int) -> int:
    """Loop back-edges one invocation takes for a static reduction of `size` points."""
    trips = -(-size // (layout.group * layout.width * layout.unroll))
    blocks = -(-trips // layout.block) if trips > layout.block else 0
    return layout.rows * (trips + blocks + 1)


def accumulator_type(kind: str) -> str:
    """The register type a reduction into `kind` accumulates in."""
    return "f32" if kind in FLOAT_OUTPUTS else "i32"


class _Generator:
    def __init__(self, kernel: Kernel, profile: VulkanProfile, terms: list[Combiner],
                 layout: Plan):
        self.kernel, self.profile, self.terms, self.layout = kernel, profile, terms, layout
        self.width = layout.width
        self.windows = texel_windows(kernel, profile)
        self.iface = ShaderInterface(kernel, profile, (layout.width, 1, 1), self.windows)
        self.e = self.iface.e
        self.subgroup = layout.subgroup
        self.kinds = [accumulator_type(o.element_type) for o in kernel.outputs]
        self.acc_ops = [Op(t.op.name, t.op.operands, kind)
                        for t, kind in zip(terms, self.kinds)]
        # The body up to the folded values: each combiner op becomes a (free) constant, so
        # evaluating it emits no dead combiner code.
        base = len(kernel.inputs) + len(kernel.outputs)
        combiner_at = {y - base for y in kernel.yields}
        self.body = dataclasses.replace(kernel, ops=[
            Op("arith.constant", (), op.result_type) if i in combiner_at else op
            for i, op in enumerate(kernel.ops)])

    def identity(self, o: int) -> int:
        value = self.terms[o].identity(self.kinds[o] == "f32")
        return self.e.f32c(value) if self.kinds[o] == "f32" else self.e.i32c(int(value))

    def combine(self, o: int, a: int, b: int) -> int:
        """a (+) b in the accumulator type (no rounding to a narrower output type)."""
        kind = self.kinds[o]
        return emit_typed(self.e, self.acc_ops[o], [a, b], [kind, kind])

    def fold(self, o: int, values: list[int]) -> int:
        """The values combined in order (a serial chain measured 5% faster than a pairwise
        tree on SwiftShader; as fast on lavapipe)."""
        total = values[0]
        for v in values[1:]:
            total = self.combine(o, total, v)
        return total

    def build(self) -> SpirvKernel:
        iface, e, kernel, layout = self.iface, self.e, self.kernel, self.layout
        types = [e.scalar_type(k) for k in self.kinds]
        shared = [] if self.subgroup else [shared_array(iface, t, self.width, f"partial{o}")
                                           for o, t in enumerate(types)]
        e.label()
        group_id = iface.linear_workgroup()
        local = iface.builtin(BuiltIn.LocalInvocationId, 0)
        accs = [e.local(t) for t in types]
        blocks = [e.local(t) for t in types]
        if layout.rows == 1:
            self._parallel_point(group_id, local, types, shared, accs, blocks)
        else:
            # Several parallel points per workgroup, one after another (uniform control flow:
            # the subgroup reduce inside stays legal): fewer, longer workgroups.
            first = e.op(SpvOp.IMul, e.u32, group_id, e.u32c(layout.rows))
            emit_loop(e, e.i32c(layout.rows), lambda i: self._parallel_point(
                e.op(SpvOp.IAdd, e.u32, first, e.op(SpvOp.Bitcast, e.u32, i)),
                local, types, shared, accs, blocks))
        e.op_void(SpvOp.Return)
        code = iface.finish()
        requirements: dict[str, int | bool] = {
            "shared_memory_bytes": 4 * len(shared) * self.width}
        if self.subgroup:
            requirements["subgroup_size"] = self.subgroup
        return iface.result(code, Grid(GridAxis(kernel.parallel_dims, layout.rows),
                                       linear=True), requirements)

    def _parallel_point(self, point: int, local: int, types: list[int], shared: list[int],
                        accs: list[int], blocks: list[int]) -> None:
        """Reduce parallel point `point` (u32, linear) and store its outputs."""
        iface, e, kernel, layout = self.iface, self.e, self.kernel, self.layout
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
        group, unroll, block = layout.group, layout.unroll, layout.block
        span = width * unroll                       # units per trip of the whole workgroup
        units = e.op(SpvOp.SDiv, e.i32, total, e.i32c(group))
        static = kernel.static_extents(reduction_dims)
        size = None if static is None else math.prod(static)
        exact = size is not None and (size // group) % span == 0
        static_trips = None if size is None else -(-(size // group) // span)

        def accumulate() -> None:
            indices = delinearize(iface, point, parallel_dims)
            self._select_windows(indices)
            self._row_offsets(indices)
            trips = e.op(SpvOp.SDiv, e.i32, e.op(SpvOp.IAdd, e.i32, units, e.i32c(span - 1)),
                         e.i32c(span))

            def trip(t: int, into: list[int]) -> None:
                base = e.op(SpvOp.IAdd, e.i32, e.op(SpvOp.IMul, e.i32, t, e.i32c(span)),
                            local_i)
                values: list[list[int]] = [[] for _ in self.terms]
                for u in range(unroll):
                    unit = base if u == 0 else e.op(SpvOp.IAdd, e.i32, base, e.i32c(u * width))
                    for o, xs in enumerate(self._unit(indices, unit, units, exact)):
                        values[o].extend(xs)
                # A fresh sum per trip, added to the running one: short chains only.
                for o, into_o in enumerate(into):
                    e.store(into_o, self.combine(o, e.load(types[o], into_o),
                                                 self.fold(o, values[o])))

            if static_trips is not None and static_trips <= block:
                emit_loop(e, trips, lambda t: trip(t, accs))
                return
            # Trips add into a block accumulator, blocks into the invocation's accumulator.
            count = e.op(SpvOp.SDiv, e.i32, e.op(SpvOp.IAdd, e.i32, trips, e.i32c(block - 1)),
                         e.i32c(block))

            def one_block(b: int) -> None:
                first = e.op(SpvOp.IMul, e.i32, b, e.i32c(block))
                length = e.glsl(e.i32, GLSLstd450.SMin, e.op(SpvOp.ISub, e.i32, trips, first),
                                e.i32c(block))
                for o, blk in enumerate(blocks):
                    e.store(blk, self.identity(o))
                emit_loop(e, length, lambda t: trip(e.op(SpvOp.IAdd, e.i32, first, t), blocks))
                for o, (acc, blk) in enumerate(zip(accs, blocks)):
                    e.store(acc, self.combine(o, e.load(types[o], acc),
                                              e.load(types[o], blk)))
            emit_loop(e, count, one_block)
        emit_if(e, active, accumulate)
        partials = [e.load(t, acc) for t, acc in zip(types, accs)]
        if self.subgroup:
            # The workgroup is one subgroup: a subgroup reduce is the whole tree.
            iface.e.b.capability(Capability.GroupNonUniform)
            totals = [self._subgroup_reduce(o, t, p)
                      for o, (t, p) in enumerate(zip(types, partials))]
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
                kind = operand.element_type
                # One rounding to the output type, of initial value (+) total.
                value = emit_typed(e, self.terms[o].op, [iface.load(operand, offset),
                                                         totals[o]], [kind, kind])
                iface.store(operand, offset, value)
        emit_if(e, e.and_(active, e.op(SpvOp.IEqual, e.bool, local, e.u32c(0))), write)

    def _row_offsets(self, indices: dict[int, int]) -> None:
        """With one reduction loop, each static input's offset at reduction point 0 of the
        parallel point `indices`, so a unit's offset is one multiply-add (`_input_offset`)
        instead of the whole affine map (software drivers run every integer op per load)."""
        e, kernel = self.e, self.kernel
        self.row_offsets: dict[int, tuple[int, int]] = {}
        if len(kernel.reduction_dims) != 1:
            return
        inner = kernel.reduction_dims[0]
        for i, o in enumerate(kernel.inputs):
            terms = _offset_terms(kernel, o)
            if terms is None:
                continue
            loops = [indices.get(d, e.i32c(0)) for d in range(len(kernel.loop_ranges))]
            self.row_offsets[i] = (self.iface.operand_offset(o, loops), terms[inner])

    def _input_offset(self, i: int, point: list[int], r: int) -> int:
        """The element offset of input `i` at reduction point `r` (i32) of the current parallel
        point, whose loop indices are `point`."""
        e = self.e
        if i not in self.row_offsets:
            return self.iface.operand_offset(self.kernel.inputs[i], point)
        base, coefficient = self.row_offsets[i]
        step = r if coefficient == 1 else e.op(SpvOp.IMul, e.i32, r, e.i32c(coefficient))
        return e.op(SpvOp.IAdd, e.i32, base, step)

    def _select_windows(self, indices: dict[int, int]) -> None:
        """Pick each windowed input's view for parallel point `indices`: the one holding the
        texel of its reduction indices 0, where its reads for the point start."""
        e, iface, kernel = self.e, self.iface, self.kernel
        # input -> its point's first texel within the selected window, where a unit of 4
        # elements is one texel (group 4, one reduction loop of coefficient 1)
        self.window_texels: dict[int, int] = {}
        inner = kernel.reduction_dims[-1]
        for i, o in enumerate(kernel.inputs):
            if o.binding not in self.windows:
                continue
            loops = [indices.get(d, e.i32c(0)) for d in range(len(kernel.loop_ranges))]
            first = e.op(SpvOp.Bitcast, e.u32, iface.operand_offset(o, loops))
            local = iface.select_window(o.binding, e.op(SpvOp.ShiftRightLogical, e.u32, first,
                                                        e.u32c(2)))
            terms = _offset_terms(kernel, o)
            if self.layout.group == 4 and len(kernel.reduction_dims) == 1 and terms and \
                    terms[inner] == 1:
                self.window_texels[i] = local

    def _subgroup_reduce(self, o: int, value_type: int, value: int) -> int:
        """The subgroup's combined value of output `o`'s partials (unsigned min/max work on
        u32). A combiner without a subgroup reduce (`SUBGROUP_OPS`) folds lanes l and l ^ k for
        k = 1, 2, 4, ...: every lane ends with the whole subgroup's value, combined by the
        body's own op (associative and commutative, so any order gives the same bits)."""
        e, op = self.e, self.acc_ops[o]
        opcode = SUBGROUP_OPS[op.name]
        scope = e.u32c(Scope.Subgroup)
        if opcode is None:
            e.b.capability(Capability.GroupNonUniformShuffle)
            lane = 1
            while lane < self.subgroup:
                other = e.op(SpvOp.GroupNonUniformShuffleXor, value_type, scope, value,
                             e.u32c(lane))
                value = self.combine(o, value, other)
                lane *= 2
            return value
        e.b.capability(Capability.GroupNonUniformArithmetic)
        if op.name in ("arith.maxui", "arith.minui"):
            unsigned = e.op(opcode, e.u32, scope, GroupOperation.Reduce,
                            e.op(SpvOp.Bitcast, e.u32, value))
            return e.op(SpvOp.Bitcast, value_type, unsigned)
        return e.op(opcode, value_type, scope, GroupOperation.Reduce, value)

    def _unit(self, indices: dict[int, int], unit: int, units: int, exact: bool
              ) -> list[list[int]]:
        """Per output, the `group` values unit `unit` folds in (in order). Without `exact` a
        unit past the end reads the last unit instead and gives the combiner's identity."""
        e, iface, kernel = self.e, self.iface, self.kernel
        group = self.layout.group
        inside = None
        if not exact:
            inside = e.op(SpvOp.SLessThan, e.bool, unit, units)
            unit = e.select(e.i32, inside, unit, e.op(SpvOp.ISub, e.i32, units, e.i32c(1)))
        first = unit if group == 1 else e.op(SpvOp.IMul, e.i32, unit, e.i32c(group))
        loaded: dict[int, list[int]] = {}
        if group > 1:
            point = self._loops(indices, first)
            for i, o in enumerate(kernel.inputs):
                if i in self.window_texels:
                    # A unit is one texel: the point's first texel in the window, plus unit.
                    texel = e.op(SpvOp.IAdd, e.u32, self.window_texels[i],
                                 e.op(SpvOp.Bitcast, e.u32, unit))
                    scalar = e.scalar_type(o.element_type)
                    loaded[i] = [e.op(SpvOp.Bitcast, scalar, w)
                                 for w in iface.fetch_window_texel(o.binding, texel)]
                elif o.map is not None:
                    loaded[i] = self._load_group(o, self._input_offset(i, point, first))
        out: list[list[int]] = [[] for _ in self.terms]
        for j in range(group):
            r = first if j == 0 else e.op(SpvOp.IAdd, e.i32, first, e.i32c(j))
            xs = self._point(indices, r, {i: w[j] for i, w in loaded.items()})
            for k, x in enumerate(xs):
                if inside is not None:
                    x = e.select(e.scalar_type(self.kinds[k]), inside, x, self.identity(k))
                out[k].append(x)
        return out

    def _load_group(self, operand: Operand, offset: int) -> list[int]:
        """`group` consecutive 32-bit elements from `offset` (a multiple of `group`) with one
        load: a uvec4, or a u64vec4 split into words (low word first)."""
        e, iface = self.e, self.iface
        scalar = e.scalar_type(operand.element_type)
        if self.layout.group == 4:
            return iface.load_vector4(operand, offset, scalar)
        return iface.load_wide(operand, offset, 8, scalar)

    def _loops(self, indices: dict[int, int], r: int) -> list[int]:
        loops = dict(indices)
        loops.update(delinearize(self.iface, self.e.op(SpvOp.Bitcast, self.e.u32, r),
                                 self.kernel.reduction_dims))
        return [loops[d] for d in range(len(self.kernel.loop_ranges))]

    def _point(self, indices: dict[int, int], r: int, loaded: dict[int, int]) -> list[int]:
        """Per output, the value its combiner folds in at reduction point r (linear, i32);
        `loaded`: the input values already read (the body's combiners are not emitted)."""
        iface, kernel = self.iface, self.kernel
        point = self._loops(indices, r)

        def operand_value(i: int) -> int:
            if i not in loaded:
                loaded[i] = iface.load(kernel.inputs[i], self._input_offset(i, point, r))
            return loaded[i]
        values = evaluate(iface, self.body, operand_value, lambda d: point[d])
        # An input folded as loaded is used by nothing the body still computes.
        return [values[t.x] if t.x >= len(kernel.inputs) else operand_value(t.x)
                for t in self.terms]

