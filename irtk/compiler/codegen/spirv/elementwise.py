"""SPIR-V code generation for elementwise dispatch kernels.

Every iteration of the kernel's loop nest is independent, so the row-major linearized
iteration space is split evenly: a workgroup of `wg` invocations covers `wg * E` consecutive
iterations, invocation `l` of linear workgroup `w` taking iterations `w * wg * E + l + k * wg`
for k < E (neighbouring invocations touch neighbouring elements on every step; several
iterations per invocation amortize the per-workgroup cost, which dominates on CPU-based
drivers). Grids beyond the 65535 workgroups one dimension allows become 2-D, and iterations
past the end are skipped by a bounds check that is emitted only when the grid does not cover
the iteration space exactly. docs/codegen_spirv.md states the rules.

Operand offsets are computed straight from the linear iteration index: each operand's affine
map, folded with its row-major strides, is a linear form in the loop indices, and runs of loop
dimensions that the form walks contiguously collapse into one `(index / stride) % extent`
term, so an identity map costs nothing and a broadcast costs one division or remainder.

Quads (profiles with `elementwise_quads`, where every output is contiguous and the iteration
count a multiple of 4): the unit of work is 4 consecutive iterations instead of one. Each
operand is read once per quad where its offsets allow — one 16-byte load or texel fetch where
the 4 iterations read 4 consecutive, 16-byte aligned elements (`CONTIGUOUS`), one element
where they all read the same one (`UNIFORM`), else one per iteration — and each output is
written with one 16-byte store: lavapipe and SwiftShader load and store lane by lane, so the
per-instruction cost falls by 4 (docs/codegen_spirv.md).

Read-only inputs are texel buffers on profiles with texel-buffer loads (lavapipe), and on
profiles with texel windows (SwiftShader) where they fit one view (`fits_one_view`); larger
ones that a quad reads as its own 4 consecutive elements (element = iteration + a multiple of
4) are read through an array of views overlapping by half (`window_bindings`), the one
holding the workgroup's texels picked once per workgroup: SwiftShader fetches a texel with one
16-byte load per lane but gathers storage-buffer words lane by lane.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from spirv.tables import (AddressingModel, BuiltIn, Capability, Decoration, ExecutionMode,
                          ExecutionModel, GLSLstd450, MemoryModel, Op as SpvOp,
                          SelectionControl, StorageClass)

from irtk.compiler.kernel import Grid, GridAxis, Kernel, Operand
from irtk.compiler.targets import VulkanProfile
from irtk.errors import CompileError

from .bindings import (fetch, fetch_image, fetch_word, storage_buffer, texel_buffer,
                       texel_window_array, window_image)
from .emitter import Emitter
from .interface import add_windows, fits_one_view
from .executable import SpirvKernel, validate
from .op_table import register_op
from .typed_ops import emit_typed

MAX_WORKGROUP_COUNT = 65535          # per grid dimension, the Vulkan minimum limit
DEFAULT_WORKGROUP_SIZE = 128
MAX_PER_INVOCATION = 8               # iterations per invocation for large kernels, at most ...
MIN_WORKGROUPS = 32                  # ... while the grid keeps at least this many workgroups
UNROLL_OP_BUDGET = 1024              # ... and body ops times iterations stays within this
MAX_ITERATIONS = (1 << 31) - 1       # indices are 32-bit
BUFFER_ELEMENT_TYPES = ("f32", "i32")


@dataclass(frozen=True)
class LaunchPlan:
    """How a kernel's iterations map onto invocations, workgroups and the grid."""

    iterations: int
    workgroup_size: int
    per_invocation: int
    grid: tuple[int, int, int]

    @property
    def per_workgroup(self) -> int:
        return self.workgroup_size * self.per_invocation

    @property
    def bounds_check(self) -> bool:
        """False when the grid covers exactly the iterations, so no invocation falls outside
        (an empty kernel keeps its check in case a host dispatches it anyway)."""
        covered = self.grid[0] * self.grid[1] * self.grid[2] * self.per_workgroup
        return covered != self.iterations or self.iterations == 0


def plan_launch(iterations: int, op_count: int, profile: VulkanProfile,
                max_workgroup_count: int = MAX_WORKGROUP_COUNT) -> LaunchPlan:
    """The launch rule (docs/codegen_spirv.md): workgroup size min(128, device limit, next power
    of two >= iterations); the most iterations per invocation (8, 4, 2 or 1) that keep
    MIN_WORKGROUPS workgroups and the unrolled body within UNROLL_OP_BUDGET ops; a 2-D grid when
    one dimension cannot hold the workgroups."""
    if iterations > MAX_ITERATIONS:
        raise CompileError(f"vulkan-spirv: {iterations} iterations exceed the 32-bit index "
                           f"range ({MAX_ITERATIONS})")
    size = min(DEFAULT_WORKGROUP_SIZE, profile.max_workgroup_invocations,
               1 << max(iterations - 1, 0).bit_length())
    per_invocation = MAX_PER_INVOCATION
    while per_invocation > 1 and (
            iterations < size * per_invocation * MIN_WORKGROUPS
            or per_invocation * max(op_count, 1) > UNROLL_OP_BUDGET):
        per_invocation //= 2
    groups = -(-iterations // (size * per_invocation))
    if groups <= max_workgroup_count:
        grid = (groups, 1, 1)
    else:
        rows = -(-groups // max_workgroup_count)
        if rows > max_workgroup_count:
            raise CompileError(f"vulkan-spirv: {iterations} iterations need {groups} workgroups, "
                               f"more than a {max_workgroup_count}^2 grid holds")
        # Full rows, as `Grid(linear=True)` launches them; the surplus is bounds-checked.
        grid = (max_workgroup_count, rows, 1)
    return LaunchPlan(iterations, size, per_invocation, grid)


@dataclass(frozen=True)
class _Term:
    """`coefficient * ((iteration / divisor) % modulus)`; modulus 0 means no remainder."""

    divisor: int
    modulus: int
    coefficient: int


def offset_terms(loop_ranges: tuple[int, ...], operand: Operand) -> tuple[tuple[_Term, ...], int]:
    """An operand's element offset as terms of the linear iteration index, plus a constant."""
    n = len(loop_ranges)
    coeff, const = operand.linear_offset(n)
    loop_strides = [math.prod(loop_ranges[j + 1:]) for j in range(n)]
    dims = [j for j in range(n) if loop_ranges[j] > 1]
    groups: list[list[int]] = []   # [outer dim, inner dim]
    for j in dims:
        if groups and coeff[groups[-1][1]] == coeff[j] * loop_ranges[j]:
            groups[-1][1] = j
        else:
            groups.append([j, j])
    terms = []
    for outer, inner in groups:
        if coeff[inner] == 0:
            continue
        extent = math.prod(loop_ranges[outer:inner + 1])
        modulus = 0 if outer == dims[0] else extent
        terms.append(_Term(loop_strides[inner], modulus, coeff[inner]))
    return tuple(terms), const


CONTIGUOUS, UNIFORM, SCATTERED = "contiguous", "uniform", "scattered"


def quad_kind(terms: tuple[_Term, ...], const: int) -> str:
    """How an operand's offsets move over iterations 4q .. 4q + 3: `CONTIGUOUS` (4 consecutive
    elements from a multiple of 4), `UNIFORM` (one element) or `SCATTERED`. A term whose
    divisor is a multiple of 4 is the same for all four; the one with divisor 1 steps by its
    coefficient, and wraps inside the quad unless its modulus is a multiple of 4."""
    moving = [t for t in terms if t.divisor % 4]
    if not moving:
        return UNIFORM
    if len(moving) == 1 and moving[0].divisor == 1 and moving[0].coefficient == 1 and \
            moving[0].modulus % 4 == 0 and const % 4 == 0 and \
            all(t.coefficient % 4 == 0 for t in terms if t.divisor % 4 == 0):
        return CONTIGUOUS
    return SCATTERED


def quad_kinds(kernel: Kernel, profile: VulkanProfile) -> list[str] | None:
    """Each operand's `quad_kind` when the kernel runs in quads on `profile`, else None."""
    if not profile.elementwise_quads or kernel.iteration_count % 4 or \
            kernel.iteration_count == 0:
        return None
    kinds = [quad_kind(*offset_terms(kernel.static_ranges, o))
             for o in kernel.inputs + kernel.outputs]
    if any(k != CONTIGUOUS for k in kinds[len(kernel.inputs):]):
        return None
    return kinds


def window_bindings(kernel: Kernel, profile: VulkanProfile, kinds: list[str] | None,
                    plan: LaunchPlan) -> dict[int, int]:
    """binding -> window views, for the inputs read through texel windows (module docstring):
    on a profile with texel windows, in quads, a read-only 32-bit input too large for one view,
    the only operand of its binding, whose element is its iteration plus a multiple of 4, so
    a workgroup reads `per_workgroup` consecutive texels (at most half a window)."""
    half = profile.texel_window // 2
    if kinds is None or not half or plan.per_workgroup > half:
        return {}
    written = {o.binding for o in kernel.outputs}
    uses: dict[int, int] = {}
    for o in kernel.inputs + kernel.outputs:
        uses[o.binding] = uses.get(o.binding, 0) + 1
    out: dict[int, int] = {}
    for i, o in enumerate(kernel.inputs):
        terms, const = offset_terms(kernel.static_ranges, o)
        if o.binding in written or uses[o.binding] > 1 or kinds[i] != CONTIGUOUS or \
                terms != (_Term(1, 0, 1),) or const % 4 or \
                fits_one_view(kernel, o, profile):
            continue
        add_windows(out, o, profile)
    return out


def accepts(kernel: Kernel) -> bool:
    """Whether this strategy handles the kernel: all loops parallel, static shapes, no params
    or gathers, f32/i32 buffers, and a body of ops on f32/i32/i1 that `scalar_ops` supports."""
    if kernel.reduction_dims or not kernel.is_static or kernel.params:
        return False
    operands = kernel.inputs + kernel.outputs
    if any(o.map is None or o.element_type not in BUFFER_ELEMENT_TYPES or not o.is_static
           for o in operands):
        return False
    types = [o.element_type for o in operands]
    for op in kernel.ops:
        if op.name in ("kernel.param", "tensor.extract"):
            return False
        if register_op(op.name, [types[v] for v in op.operands], op.result_type) is None:
            return False
        types.append(op.result_type)
    return True


def check_kernel(kernel: Kernel) -> None:
    """Reject what this generator cannot compile, naming the kernel and the reason."""
    where = f"vulkan-spirv: kernel '{kernel.name}'"
    ranges = kernel.static_ranges
    n = len(ranges)
    if any(r < 0 for r in ranges):
        raise CompileError(f"{where}: negative loop range in {ranges}")
    for role, operands in (("input", kernel.inputs), ("output", kernel.outputs)):
        for i, operand in enumerate(operands):
            if operand.element_type == "i1":
                raise CompileError(f"{where}: {role} {i} is i1; i1 tensors are not supported "
                                   f"yet by the vulkan-spirv target")
            if operand.element_type not in BUFFER_ELEMENT_TYPES:
                raise CompileError(f"{where}: {role} {i} has element type "
                                   f"{operand.element_type}; supported: "
                                   f"{', '.join(BUFFER_ELEMENT_TYPES)}")
            m = operand.point_map
            if m.num_dims != n or len(m.rows) != len(operand.shape):
                raise CompileError(f"{where}: {role} {i} map does not fit {n} loops and shape "
                                   f"{operand.shape}")
            if any(len(row) != n + 1 for row in m.rows):
                raise CompileError(f"{where}: {role} {i} map rows need {n + 1} entries")
            if math.prod(operand.static_shape) > MAX_ITERATIONS:
                raise CompileError(f"{where}: {role} {i} of shape {operand.shape} is too large "
                                   f"for 32-bit indexing")
    if len(kernel.yields) != len(kernel.outputs):
        raise CompileError(f"{where}: {len(kernel.yields)} yields for "
                           f"{len(kernel.outputs)} outputs")
    first_op = kernel.binding_count
    for i, op in enumerate(kernel.ops):
        for v in op.operands:
            if not 0 <= v < first_op + i:
                raise CompileError(f"{where}: op {i} ({op.name}) uses value {v} before it is "
                                   f"defined")
    value_count = first_op + len(kernel.ops)
    for o, v in enumerate(kernel.yields):
        if not 0 <= v < value_count:
            raise CompileError(f"{where}: output {o} yields undefined value {v}")
        if kernel.value_type(v) != kernel.outputs[o].element_type:
            raise CompileError(f"{where}: output {o} is {kernel.outputs[o].element_type} but "
                               f"yields a {kernel.value_type(v)} value")


def compile_kernel(kernel: Kernel, profile: VulkanProfile, *,
                   max_workgroup_count: int = MAX_WORKGROUP_COUNT) -> SpirvKernel:
    """An elementwise kernel as a validated compute shader for `profile`.

    `max_workgroup_count` lowers the per-dimension grid limit (tests use it to reach the 2-D
    grid with small kernels).
    """
    check_kernel(kernel)
    kinds = quad_kinds(kernel, profile)
    step = 1 if kinds is None else 4      # iterations per unit of work
    plan = plan_launch(kernel.iteration_count // step, step * len(kernel.ops), profile,
                       max_workgroup_count)
    generator = _Generator(kernel, plan, profile, kinds,
                           window_bindings(kernel, profile, kinds, plan))
    code, bindings = generator.build()
    validate(code, profile.vulkan_env, kernel.name)
    needs: dict[str, int | bool] = {"max_workgroup_invocations": plan.workgroup_size}
    if generator.e.uses_float16:
        needs["float16"] = True
    if generator.windows:
        needs["texel_array_indexing"] = True
    return SpirvKernel(
        code=code,
        entry_point=kernel.name,
        workgroup_size=(plan.workgroup_size, 1, 1),
        workgroup_count=plan.grid,
        bindings=bindings,
        push_constant_count=0,
        requirements=needs,
        texel_bindings=tuple(sorted(generator.texel_bindings)),
        texel_windows=dict(generator.windows),
        texel_window=profile.texel_window if generator.windows else 0,
        grid=Grid(GridAxis(tuple(range(len(kernel.loop_ranges))), step * plan.per_workgroup),
                  linear=True),
    )


class _Generator:
    """Builds the module for one kernel; see the module docstring for the scheme."""

    def __init__(self, kernel: Kernel, plan: LaunchPlan, profile: VulkanProfile,
                 quads: list[str] | None = None, windows: dict[int, int] | None = None
                 ) -> None:
        self.kernel, self.plan, self.profile = kernel, plan, profile
        self.quads = quads            # per operand, its quad kind; None: one iteration a unit
        self.windows = dict(windows or {})  # binding -> views (`window_bindings`)
        # binding -> (the workgroup's window image, the window's first texel)
        self.window_images: dict[int, tuple[int, int]] = {}
        # uvec4 variable of each output binding and contiguous storage input (quads)
        self.quad_views: dict[int, int] = {}
        self.e = Emitter(profile.spirv_version, native_float16=profile.float16)
        self.operands = kernel.inputs + kernel.outputs
        self.terms = [offset_terms(kernel.static_ranges, o) for o in self.operands]
        self.used = {v for op in kernel.ops for v in op.operands} | set(kernel.yields)
        self.buffers: dict[tuple[int, str], int] = {}
        self.texel_bindings: set[int] = set()   # read-only bindings as uniform texel buffers
        self.interface: list[int] = []

    # --- module structure ----------------------------------------------------------------

    def build(self) -> tuple[bytes, list[tuple[int, bool]]]:
        e, b = self.e, self.e.b
        b.capability(Capability.Shader)
        b.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
        bindings = self._declare_buffers()
        self._emit_body()
        fn = e.finish_function(self.kernel.name)
        interface = list(self.interface)
        if self.profile.spirv_version >= (1, 4):  # from 1.4 every global is in the interface
            interface += list(dict.fromkeys(self.buffers.values())) + \
                list(self.quad_views.values())
        b.entry_point(ExecutionModel.GLCompute, fn, self.kernel.name, interface)
        b.execution_mode(fn, ExecutionMode.LocalSize, self.plan.workgroup_size, 1, 1)
        e.declare_float_modes(fn)
        return b.to_bytes(), bindings

    def _declare_buffers(self) -> list[tuple[int, bool]]:
        """One StorageBuffer variable per (binding, element type) at descriptor set 0 (one
        texel buffer per read-only binding where the profile reads through them)."""
        e, b = self.e, self.e.b
        n_in = len(self.kernel.inputs)
        written = {o.binding for o in self.kernel.outputs}
        read = {o.binding for i, o in enumerate(self.operands) if i < n_in or i in self.used}
        for i, operand in enumerate(self.operands):
            key = (operand.binding, operand.element_type)
            if key in self.buffers:
                continue
            if operand.binding in self.windows:
                self.buffers[key] = texel_window_array(
                    e, operand.binding, self.windows[operand.binding],
                    f"in{i}_w{operand.binding}")
                self.texel_bindings.add(operand.binding)
                continue
            if operand.binding not in written and (self.profile.texel_buffer_loads or
                                                   fits_one_view(self.kernel, operand,
                                                                 self.profile)):
                # As ShaderInterface does (docs/codegen_spirv.md, "Texel-buffer loads"): one
                # variable per binding, whatever the element types read from it.
                same = [v for (binding, _), v in self.buffers.items()
                        if binding == operand.binding]
                self.buffers[key] = same[0] if same else \
                    texel_buffer(e, operand.binding, f"in{i}_t{operand.binding}")
                self.texel_bindings.add(operand.binding)
                continue
            role = "in" if i < n_in else "out"
            self.buffers[key] = storage_buffer(
                e, operand.binding, e.scalar_type(operand.element_type), 4,
                f"{role}{i if i < n_in else i - n_in}_b{operand.binding}",
                writable=operand.binding in written, readable=operand.binding in read)
        if self.quads is not None:
            # uvec4 views: every output, and contiguous inputs read as storage buffers.
            contiguous = {o.binding for i, o in enumerate(self.operands)
                          if self.quads[i] == CONTIGUOUS and i in self.used}
            for binding in sorted(written | (contiguous - self.texel_bindings)):
                self.quad_views[binding] = storage_buffer(
                    e, binding, b.type_vector(e.u32, 4), 16, f"quads_b{binding}",
                    writable=binding in written)
        bindings = sorted({o.binding for o in self.operands})
        return [(binding, binding not in written) for binding in bindings]

    def _builtin(self, builtin: BuiltIn) -> int:
        """Declare a uvec3 Input builtin (it joins the entry point interface) and load it."""
        b = self.e.b
        v3 = b.type_vector(self.e.u32, 3)
        var = b.variable(b.type_pointer(StorageClass.Input, v3), StorageClass.Input)
        b.decorate(var, Decoration.BuiltIn, builtin)
        self.interface.append(var)
        return self.e.op(SpvOp.Load, v3, var)

    # --- the function body ---------------------------------------------------------------

    def _emit_body(self) -> None:
        e, plan = self.e, self.plan
        e.label()
        local = e.op(SpvOp.CompositeExtract, e.u32, self._builtin(BuiltIn.LocalInvocationId), 0)
        group_ids = self._builtin(BuiltIn.WorkgroupId)
        group = e.op(SpvOp.CompositeExtract, e.u32, group_ids, 0)
        if plan.grid[1] > 1:
            row = e.op(SpvOp.CompositeExtract, e.u32, group_ids, 1)
            width = e.op(SpvOp.CompositeExtract, e.u32, self._builtin(BuiltIn.NumWorkgroups), 0)
            group = e.op(SpvOp.IAdd, e.u32, group, e.op(SpvOp.IMul, e.u32, row, width))
        first_unit = e.op(SpvOp.IMul, e.u32, group, e.u32c(plan.per_workgroup))
        self._select_windows(first_unit)
        base = e.op(SpvOp.IAdd, e.u32, local, first_unit)
        for k in range(plan.per_invocation):
            index = base if k == 0 else e.op(SpvOp.IAdd, e.u32, base,
                                             e.u32c(k * plan.workgroup_size))
            if not plan.bounds_check:
                self._unit(index)
                continue
            inside = e.op(SpvOp.ULessThan, e.bool, index, e.u32c(plan.iterations))
            then, merge = e.new_id(), e.new_id()
            e.op_void(SpvOp.SelectionMerge, merge, SelectionControl.None_)
            e.op_void(SpvOp.BranchConditional, inside, then, merge)
            e.label(then)
            self._unit(index)
            e.op_void(SpvOp.Branch, merge)
            e.label(merge)
        e.op_void(SpvOp.Return)


    def _select_windows(self, first_unit: int) -> None:
        """Pick each windowed binding's view for this workgroup: the one starting at the
        multiple of half a window at or below the workgroup's first texel (clamped, so a
        surplus workgroup of a 2-D grid indexes no view past the array)."""
        e = self.e
        shift = (self.profile.texel_window // 2).bit_length() - 1
        for binding, views in sorted(self.windows.items()):
            i = next(i for i, o in enumerate(self.kernel.inputs) if o.binding == binding)
            operand = self.kernel.inputs[i]
            first = e.op(SpvOp.IAdd, e.u32, first_unit, e.u32c(self.terms[i][1] // 4))
            window = e.op(SpvOp.ShiftRightLogical, e.u32, first, e.u32c(shift))
            window = e.glsl(e.u32, GLSLstd450.UMin, window, e.u32c(views - 1))
            var = self.buffers[(binding, operand.element_type)]
            self.window_images[binding] = (
                window_image(e, var, window),
                e.op(SpvOp.ShiftLeftLogical, e.u32, window, e.u32c(shift)))

    def _unit(self, index: int) -> None:
        """The code for unit `index`: one iteration, or the quad of iterations 4 * index + j."""
        if self.quads is None:
            _Iteration(self, index).emit()
        else:
            _Quad(self, index, self.quads).emit()


class _Iteration:
    """The code for one iteration: offsets, loads, the body ops, stores."""

    def __init__(self, gen: _Generator, index: int) -> None:
        self.gen, self.e, self.index = gen, gen.e, index
        self.kernel = gen.kernel

    def _term_value(self, term: _Term) -> int:
        e, value = self.e, self.index
        if term.divisor > 1:
            value = e.op(SpvOp.UDiv, e.u32, value, e.u32c(term.divisor))
        if term.modulus:
            value = e.op(SpvOp.UMod, e.u32, value, e.u32c(term.modulus))
        if term.coefficient != 1:
            value = e.op(SpvOp.IMul, e.u32, value, e.u32c(term.coefficient))
        return value

    def offset(self, operand_index: int) -> int:
        e = self.e
        terms, const = self.gen.terms[operand_index]
        values = [self._term_value(t) for t in terms]
        if const or not values:
            values.append(e.u32c(const))
        total = values[0]
        for v in values[1:]:
            total = e.op(SpvOp.IAdd, e.u32, total, v)
        return total

    def _pointer(self, operand_index: int) -> int:
        e, b = self.e, self.e.b
        operand = self.gen.operands[operand_index]
        elem = e.scalar_type(operand.element_type)
        var = self.gen.buffers[(operand.binding, operand.element_type)]
        return e.op(SpvOp.AccessChain, b.type_pointer(StorageClass.StorageBuffer, elem), var,
                    e.u32c(0), self.offset(operand_index))

    def _fetch(self, operand_index: int, elem: int) -> int:
        """A read-only operand's element from its texel buffer: component offset % 4 of
        texel offset / 4."""
        e = self.e
        operand = self.gen.operands[operand_index]
        var = self.gen.buffers[(operand.binding, operand.element_type)]
        return e.op(SpvOp.Bitcast, elem, fetch_word(e, var, self.offset(operand_index)))

    def loop_index(self, dim: int) -> int:
        """linalg.index: loop index `dim` of this iteration as an i32."""
        e, ranges = self.e, self.kernel.static_ranges
        if not 0 <= dim < len(ranges):
            raise CompileError(f"vulkan-spirv: kernel '{self.kernel.name}': linalg.index {dim} "
                               f"is outside its {len(ranges)} loops")
        if ranges[dim] <= 1:
            return e.i32c(0)
        outer = next(j for j, r in enumerate(ranges) if r > 1)
        term = _Term(math.prod(ranges[dim + 1:]), 0 if dim == outer else ranges[dim], 1)
        return e.op(SpvOp.Bitcast, e.i32, self._term_value(term))

    def load(self, operand_index: int) -> int:
        """Operand `operand_index`'s element at this iteration."""
        operand = self.gen.operands[operand_index]
        elem = self.e.scalar_type(operand.element_type)
        if operand.binding in self.gen.texel_bindings:
            return self._fetch(operand_index, elem)
        return self.e.op(SpvOp.Load, elem, self._pointer(operand_index))

    def compute(self, values: list[int]) -> list[int]:
        """The body ops on the operands' `values` (0 for unused ones): every value."""
        types = [o.element_type for o in self.gen.operands]
        values = list(values)
        for op in self.kernel.ops:
            if op.name == "linalg.index":
                values.append(self.loop_index(op.int_value))
            else:
                values.append(emit_typed(self.e, op, [values[v] for v in op.operands],
                                         [types[v] for v in op.operands]))
            types.append(op.result_type)
        return values

    def emit(self) -> None:
        values = self.compute([self.load(i) if i in self.gen.used else 0
                               for i in range(len(self.gen.operands))])
        first_output = len(self.kernel.inputs)
        for o, v in enumerate(self.kernel.yields):
            self.e.op_void(SpvOp.Store, self._pointer(first_output + o), values[v])


class _Quad:
    """The code for iterations 4u .. 4u + 3 (module docstring, "Quads")."""

    def __init__(self, gen: _Generator, unit: int, kinds: list[str]) -> None:
        self.gen, self.e = gen, gen.e
        self.kinds = kinds  # each operand's quad kind
        base = self.e.op(SpvOp.IMul, self.e.u32, unit, self.e.u32c(4))
        self.iterations = [_Iteration(gen, base if j == 0 else
                                      self.e.op(SpvOp.IAdd, self.e.u32, base, self.e.u32c(j)))
                           for j in range(4)]

    def _words(self, operand_index: int) -> list[int]:
        """The 4 words of a `CONTIGUOUS` operand's quad: one texel fetch or uvec4 load."""
        e, b, gen = self.e, self.e.b, self.gen
        operand = gen.operands[operand_index]
        v4 = b.type_vector(e.u32, 4)
        index = e.op(SpvOp.ShiftRightLogical, e.u32, self.iterations[0].offset(operand_index),
                     e.u32c(2))
        if operand.binding in gen.window_images:
            image, first = gen.window_images[operand.binding]
            words = fetch_image(e, image, e.op(SpvOp.ISub, e.u32, index, first))
        elif operand.binding in gen.texel_bindings:
            words = fetch(e, gen.buffers[(operand.binding, operand.element_type)], index)
        else:
            words = e.op(SpvOp.Load, v4, self._quad_pointer(operand.binding, index))
        return [e.op(SpvOp.CompositeExtract, e.u32, words, j) for j in range(4)]

    def _quad_pointer(self, binding: int, index: int) -> int:
        e, b = self.e, self.e.b
        return e.op(SpvOp.AccessChain, b.type_pointer(StorageClass.StorageBuffer,
                                                      b.type_vector(e.u32, 4)),
                    self.gen.quad_views[binding], e.u32c(0), index)

    def emit(self) -> None:
        e, gen = self.e, self.gen
        per: list[list[int]] = [[] for _ in range(4)]   # operand values of each iteration
        for i, operand in enumerate(gen.operands):
            kind = self.kinds[i]
            if i not in gen.used:
                values = [0] * 4
            elif kind == CONTIGUOUS:
                elem = e.scalar_type(operand.element_type)
                values = [e.op(SpvOp.Bitcast, elem, w) for w in self._words(i)]
            elif kind == UNIFORM:
                values = [self.iterations[0].load(i)] * 4
            else:
                values = [it.load(i) for it in self.iterations]
            for j in range(4):
                per[j].append(values[j])
        results = [it.compute(values) for it, values in zip(self.iterations, per)]
        first_output = len(gen.kernel.inputs)
        for o, v in enumerate(gen.kernel.yields):
            operand = gen.operands[first_output + o]
            words = [e.op(SpvOp.Bitcast, e.u32, r[v]) for r in results]
            quad = e.op(SpvOp.CompositeConstruct, e.b.type_vector(e.u32, 4), *words)
            index = e.op(SpvOp.ShiftRightLogical, e.u32,
                         self.iterations[0].offset(first_output + o), e.u32c(2))
            e.op_void(SpvOp.Store, self._quad_pointer(operand.binding, index), quad)
