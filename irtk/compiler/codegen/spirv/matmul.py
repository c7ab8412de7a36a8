"""The contraction strategies: matmul, batch matmul, and convolutions (several reduction
loops, windowed maps).

Recognized kernels: a first output C, two mapped inputs A and B, and a body
`C = C + f(a) * g(b)` (either operand order of add and mul), where f and g are the identity or
a widening conversion (extf, extsi, extui, sitofp, uitofp), computing in C's type held in f32
or i32 registers: f32 x f32 -> f32, f16/bf16 x f16/bf16 -> f32, i8 x i8 -> i32, and narrow
accumulators such as f16 x f16 -> f16 (each multiply and add rounded to C's type,
typed_ops.py). Every parallel loop is used by C; the innermost parallel loop that B does not
use is m, the innermost one that A does not use is n, the rest are batch loops (grid z). A and B are read through their maps, so
transposed operands and convolution windows need nothing special. The rest of the body may be
an epilogue (`_epilogue_fits`): ops on C's sum and on further inputs read at the output point,
yielding further outputs written at that point (what dispatch formation fuses after an
exported matmul or convolution: a bias, a batch norm, an activation). Each output point
evaluates it once, after its sum is final, which is the value the body's last reduction step
leaves there.

Variants (`tiling_for`, docs/codegen_spirv.md):
- tiled, for GPU profiles: TM x TN tiles of C per workgroup staged TK at a time through shared
  memory (zero-filled edges), RM x RN accumulators per invocation;
- direct, for CPU profiles: one subgroup-sized workgroup, RM rows uniform across its lanes and
  RN columns per lane, A and B read straight from the buffers at clamped indices; A shared
  through subgroup broadcasts where the subgroup size is fixed (with 8 columns per lane and
  a profile with int64, B's 8 from one u64vec4 load and A's k values 2 per lane and u64 load
  where the layout allows), else 16-byte loads where the layout allows;
- convolution: the direct variant with every reduction loop nested in order.
Each accumulator starts at C's initial value and adds the products in k order (reduction
loops nested in order for convolutions), each step rounded: the sequential order kernel.py
requires of float reductions with a computed addend. Stores are bounds-checked.

Selection: matmul when m and n have at least `MIN_EXTENT` points and k at least `MIN_K`
(dynamic extents count as large), any m on CPU-based devices with a fixed subgroup size
(`few_rows`: one block of m rows); convolution for any recognized kernel with several
reduction loops.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from spirv.tables import (BuiltIn, Capability, GLSLstd450, Op as SpvOp, Scope)

from irtk.compiler.kernel import Extent, Grid, GridAxis, Kernel, Op, Operand
from irtk.compiler.targets import VulkanProfile
from irtk.types import SCALAR_TYPES

from .body import evaluate
from .executable import SpirvKernel
from .fallback import delinearize, emit_if, emit_loop
from .interface import (ShaderInterface, add_windows, barrier, fits_one_view, shared_array,
                        shared_pointer)
from .typed_ops import emit_typed, register_class, round_float, wrap

MIN_EXTENT = 8
MIN_K = 8
CONV_RM, CONV_RN = 4, 4
LARGE_WORK = 1 << 26     # multiply-adds from which software drivers' matmuls use larger blocks
TEXEL_RM, TEXEL_RN = 8, 4  # the block per invocation where inputs are texel buffers
_WIDENING = frozenset({"arith.extf", "arith.extsi", "arith.extui", "arith.sitofp",
                       "arith.uitofp"})


@dataclass(frozen=True)
class Tiling:
    """A TM x TN tile of C per workgroup, RM x RN accumulators per invocation; `shared`:
    staged through shared memory TK at a time, else read directly (see the module docstring)."""

    tm: int
    tn: int
    tk: int
    rm: int
    rn: int
    shared: bool = True
    vector: bool = False    # direct variant reading A along k and B along n 4 words at a time
    broadcast: bool = False  # direct variant sharing A's loads through subgroup broadcasts
    b_wide: bool = False    # broadcast variant: a lane's 8 columns of B adjacent, one wide load
    a_wide: bool = False    # broadcast variant: A's k values 2 per lane, one load
    # bindings read as one texel view where the profile reads inputs as storage buffers
    # (texel-window profiles, inputs of at most one window: `fits_one_view`)
    texel_views: frozenset[int] = frozenset()
    # broadcast variant, larger inputs: (binding, views) read through texel windows
    # (`contraction_windows`), and the k values B's window serves before the next is picked
    texel_windows: tuple[tuple[int, int], ...] = ()
    b_chunk: int = 0

    @property
    def invocations(self) -> int:
        return (self.tm // self.rm) * (self.tn // self.rn)


def tiling_for(profile: VulkanProfile, m: Extent = 0, n: Extent = 0, k: Extent = 0,
               rounded: bool = False) -> Tiling:
    """The tiling for a contraction of m x n outputs (0 or a name: not known statically);
    `rounded`: C's type is narrower than its register (each multiply-add rounds or wraps).

    CPU-based devices (`profile.cpu_device`) use a direct variant: one subgroup-sized
    workgroup of `lanes` invocations owns RM rows of C (the same for every lane) and RN columns
    per lane (n0 + lane + lanes * s). These drivers pay per load instruction and lane far more
    than per multiply-add (lavapipe: about 10 ns against 0.1), so blocks are as large as the
    driver's shader compiler digests in reasonable time (lavapipe compiles a 16 x 4 block in
    5 s, 16 x 8 in 13 s, 32 x 8 in 40 s, for 17, 18 and 13 ms of CPU on 256^3):
    - with a fixed subgroup size and broadcasts: A is shared through the subgroup (one load per
      lane and row for `lanes` k values); RM = 16/8/4 and RN = 4/2/1 by the problem size
      (unknown sizes 8 x 4). Static problems of at least `LARGE_WORK` multiply-adds with
      m >= 128 and n >= 16 * lanes use RN = 8 and, with 8 lanes (lavapipe), RM = 32: per lane
      and k, 4 + 8 loads for 256 multiply-adds instead of 2 + 4 for 64 (lavapipe, 8 lanes) and
      4 + 8 for 128 instead of 4 + 4 for 64 (SwiftShader, 4 lanes), which repays a slower first
      compile (docs/codegen_spirv.md has the figures). Not when `rounded`: there the rounding
      arithmetic, not the loads, takes the time, and the larger block compiles far slower;
    - otherwise: 16-byte loads where the layout allows, RM x RN = 8 x 8.
    Others: 64 x 64 tiles staged in shared memory, 4 x 4 per invocation (256 invocations;
    32 x 32 tiles where only 64 invocations are allowed)."""
    if profile.cpu_device:
        lanes = profile.subgroup_size or 8

        def pick(extent: Extent, sizes: tuple[int, int, int], unit: int, unknown: int) -> int:
            if not isinstance(extent, int) or extent <= 0:
                return unknown
            return next((b for b in sizes if extent >= 4 * b * unit), sizes[-1])
        if profile.subgroup_size and profile.subgroup_ballot:
            rm, rn = pick(m, (16, 8, 4), 1, 8), pick(n, (4, 2, 1), lanes // 2, 4)
            if isinstance(m, int) and 0 < m < 4:
                # A matrix-vector product (a batch-1 linear layer): one block of m rows, and
                # 8 columns per lane (wide loads of B) where n gives every lane 8.
                rm = m
                if isinstance(n, int) and n >= 8 * lanes:
                    rn = 8
            if not rounded and rm == 16 and rn == 4 and isinstance(m, int) and \
                    isinstance(n, int) and isinstance(k, int) and min(m, n, k) > 0 and \
                    m * n * k >= LARGE_WORK and m >= 4 * 32 and n >= 16 * lanes:
                rm, rn = (32 if lanes >= 8 else 16), 8
            return Tiling(rm, rn * lanes, 1, rm, rn, shared=False, broadcast=True)
        return Tiling(8, 8 * lanes, 1, 8, 8, shared=False)
    if profile.max_workgroup_invocations >= 256:
        return Tiling(64, 64, 16, 4, 4)
    return Tiling(32, 32, 16, 4, 4)


@dataclass(frozen=True)
class Contraction:
    a: int                      # input positions
    b: int
    convert_a: Op | None        # widening op applied to A's element, if any
    convert_b: Op | None
    acc_type: str               # C's element type: f32 or i32, or one held in their registers
    m: int                      # loop dims
    n: int
    ks: tuple[int, ...]         # the reduction loops (one for a matmul, several for a conv)
    batch: tuple[int, ...]
    core: frozenset[int] = frozenset()  # the body ops of C's multiply-add; the rest: epilogue

    @property
    def k(self) -> int:
        return self.ks[-1]


def match(kernel: Kernel) -> Contraction | None:
    """The contraction a kernel computes, or None (see the module docstring)."""
    if not kernel.outputs or not kernel.reduction_dims:
        return None
    if len(kernel.inputs) < 2 or any(o.map is None for o in kernel.inputs):
        return None
    n_in = len(kernel.inputs)
    out = kernel.outputs[0]
    acc_type = out.element_type
    acc_class = register_class(acc_type)
    if acc_class not in ("f32", "i32"):
        return None
    base = n_in + len(kernel.outputs)
    ops = kernel.ops
    y = kernel.yields[0]
    if y < base:
        return None
    add = ops[y - base]
    add_name, mul_name = ("arith.addf", "arith.mulf") if acc_class == "f32" else \
        ("arith.addi", "arith.muli")
    if add.name != add_name or n_in not in add.operands:
        return None
    prod = add.operands[1] if add.operands[0] == n_in else add.operands[0]
    if prod < base or ops[prod - base].name != mul_name:
        return None
    mul = ops[prod - base]
    sources = []
    for v in mul.operands:
        convert = None
        if v >= base:
            convert = ops[v - base]
            if convert.name not in _WIDENING or convert.operands[0] >= n_in:
                return None
            v = convert.operands[0]
        if v >= n_in:
            return None
        sources.append((v, convert))
    (a, ca), (b, cb) = sources
    if a == b:
        return None
    core = {y - base, prod - base} | {v - base for v in mul.operands if v >= base}
    if not _epilogue_fits(kernel, core, (a, b)):
        return None
    ks = kernel.reduction_dims
    a_dims = kernel.inputs[a].point_map.used_dims()
    b_dims = kernel.inputs[b].point_map.used_dims()
    c_dims = out.point_map.used_dims()
    parallel = kernel.parallel_dims
    if set(parallel) - c_dims or set(ks) - (a_dims | b_dims):
        return None
    ms = [d for d in parallel if d not in b_dims]
    ns = [d for d in parallel if d not in a_dims]
    if not ms or not ns:
        return None
    m, n = ms[-1], ns[-1]
    batch = tuple(d for d in parallel if d not in (m, n))
    if kernel.value_type(mul.operands[0]) != acc_type or kernel.value_type(
            mul.operands[1]) != acc_type:
        return None
    return Contraction(a, b, ca, cb, acc_type, m, n, ks, batch, frozenset(core))


def _epilogue_fits(kernel: Kernel, core: set[int], ab: tuple[int, int]) -> bool:
    """Whether the body beyond C's multiply-add (`core`, op positions) is an epilogue: ops on
    the final sum and on inputs read at the output point, computing the other outputs (a
    fused bias, batch norm or activation). Its ops read neither A, B, any output's current
    value nor a reduction loop's index; its inputs and outputs are mapped without reduction
    loops; C's current value feeds the add alone. Each output then takes its value once, from
    the final sum, as the sequential loop leaves it."""
    n_in, n_out = len(kernel.inputs), len(kernel.outputs)
    base = n_in + n_out
    ks = set(kernel.reduction_dims)
    y = kernel.yields[0]
    forbidden = set(ab) | set(range(n_in, base)) | {base + i for i in core if base + i != y}
    for i, op in enumerate(kernel.ops):
        if i in core:
            continue
        if op.name == "tensor.extract" or (op.name == "linalg.index" and op.int_value in ks):
            return False
        if forbidden & set(op.operands):
            return False
    extra = {v for i, op in enumerate(kernel.ops) if i not in core for v in op.operands} | \
        set(kernel.yields[1:])
    if forbidden & set(kernel.yields[1:]) - {y}:
        return False
    for v in extra:
        if v < n_in and kernel.inputs[v].point_map.used_dims() & ks:
            return False
    return all(not (o.point_map.used_dims() & ks) for o in kernel.outputs[1:])


def matmul_tiling(kernel: Kernel, profile: VulkanProfile) -> Tiling | None:
    """The tiling `compile_matmul` uses for `kernel`, or None when it declines the kernel."""
    c = match(kernel)
    if c is None or len(c.ks) != 1:
        return None
    ranges = kernel.loop_ranges
    for d, least in ((c.m, MIN_EXTENT), (c.n, MIN_EXTENT), (c.k, MIN_K)):
        extent = ranges[d]
        if isinstance(extent, int) and extent < least and not (d == c.m and few_rows(profile)):
            return None
    rounded = register_class(c.acc_type) != c.acc_type
    tiling = tiling_for(profile, ranges[c.m], ranges[c.n], ranges[c.k], rounded=rounded)
    if profile.texel_buffer_loads and not rounded and vector_friendly(kernel, c):
        # Texel fetches are cheap enough that sharing A through broadcasts no longer pays:
        # 4 k values of A and 4 columns of B per fetch (docs/codegen_spirv.md, "Contractions").
        lanes = profile.subgroup_size or 8
        m_extent = ranges[c.m]
        rm = min(TEXEL_RM, m_extent) if isinstance(m_extent, int) else TEXEL_RM
        return Tiling(rm, TEXEL_RN * lanes, 1, rm, TEXEL_RN, shared=False, vector=True)
    if not tiling.shared and not tiling.broadcast and vector_friendly(kernel, c):
        tiling = Tiling(tiling.tm, tiling.tn, 1, tiling.rm, tiling.rn, shared=False, vector=True)
    # SwiftShader: A and B as texel buffers where each fits one view; a texel fetch is one
    # 16-byte load per lane there, a storage-buffer load a gather lane by lane.
    views = frozenset(kernel.inputs[i].binding for i in (c.a, c.b)
                      if fits_one_view(kernel, kernel.inputs[i], profile))
    # Wide loads: 64-bit storage loads (lavapipe before texel buffers), or texel fetches.
    # A's windows do not depend on the block's k values, B's do (a_wide doubles them): A's
    # wide loads are decided first, then B's windows with the final block, then B's loads.
    wide = tiling.broadcast and tiling.rn == 8
    fast = profile.int64 or profile.texel_buffer_loads
    if wide:
        windowed = {binding for binding, _ in
                    contraction_windows(kernel, c, tiling, profile, views)[0]}
        tiling = dataclasses.replace(tiling, a_wide=(
            fast or kernel.inputs[c.a].binding in views | windowed)
            and aligned_along(kernel, c, c.a, c.k, 2))
    if tiling.broadcast:
        windows, b_chunk = contraction_windows(kernel, c, tiling, profile, views)
        tiling = dataclasses.replace(tiling, texel_windows=windows, b_chunk=b_chunk)
    if wide:
        fetched = views | {binding for binding, _ in tiling.texel_windows}
        tiling = dataclasses.replace(tiling, b_wide=(
            fast or kernel.inputs[c.b].binding in fetched)
            and aligned_along(kernel, c, c.b, c.n, 8))
    return dataclasses.replace(tiling, texel_views=views)


def few_rows(profile: VulkanProfile) -> bool:
    """Whether contractions of fewer than MIN_EXTENT rows (m) take the matmul strategy: on
    CPU-based devices with a fixed subgroup size, whose direct variants keep one block of m
    rows per workgroup (matrix-vector products: the fallback's per-lane loads of B cost
    twice as much)."""
    return bool(profile.cpu_device and profile.subgroup_size and profile.subgroup_ballot)


def contraction_windows(kernel: Kernel, c: Contraction, t: Tiling, profile: VulkanProfile,
                        views: frozenset[int]) -> tuple[tuple[tuple[int, int], ...], int]:
    """A and B of the broadcast variant read through texel windows (docs/codegen_spirv.md,
    "Contractions"), on profiles with windows, where they are larger than one view: A's window
    is picked once per workgroup (its RM rows over all of k must lie in half a window), B's once
    per `b_chunk` k values (a multiple of the variant's block of k values, as many as half a
    window holds with the workgroup's columns). Each operand: static, 32-bit, read-only, its
    binding not shared with the other, no negative coefficient (the workgroup's first
    indices address its lowest word). Returns ((binding, views) pairs, b_chunk; 0: B keeps a
    storage buffer)."""
    window = profile.texel_window
    if not window or not kernel.is_static:
        return (), 0
    ranges = kernel.static_ranges
    half_words = 4 * (window // 2) - 3     # words of half a window, wherever the first falls
    written = {o.binding for o in kernel.outputs}
    a, b = kernel.inputs[c.a], kernel.inputs[c.b]
    span = 2 * t.tn // t.rn if t.a_wide else t.tn // t.rn   # k values per block

    def form(which: int) -> list[int] | None:
        operand = kernel.inputs[which]
        found = linear_form(kernel, which)
        if found is None or operand.binding in views or operand.binding in written \
                or a.binding == b.binding or min(found[0]) < 0 \
                or SCALAR_TYPES[operand.element_type].storage_bits != 32:
            return None
        return found[0]

    def reach(coeffs: list[int], k_values: int) -> int:
        """Words from the workgroup's first to its last, over `k_values` k values."""
        covered = {c.m: min(t.tm, ranges[c.m]), c.n: min(t.tn, ranges[c.n]), c.k: k_values}
        return sum(coeffs[d] * (covered.get(d, 1) - 1) for d in range(len(ranges))) + 1

    out: dict[int, int] = {}
    coeffs_a = form(c.a)
    if coeffs_a is not None and reach(coeffs_a, ranges[c.k]) <= half_words:
        add_windows(out, a, profile)
    b_chunk = 0
    coeffs_b = form(c.b)
    if coeffs_b is not None:
        chunk = min(ranges[c.k], half_words) // span * span
        while chunk >= span and reach(coeffs_b, chunk) > half_words:
            chunk -= span
        if chunk >= span:
            add_windows(out, b, profile)
            b_chunk = chunk if b.binding in out else 0
    return tuple(sorted(out.items())), b_chunk


def compile_matmul(kernel: Kernel, profile: VulkanProfile) -> SpirvKernel | None:
    tiling = matmul_tiling(kernel, profile)
    if tiling is None:
        return None
    contraction = match(kernel)
    assert contraction is not None, "matmul_tiling found the contraction"
    return _Generator(kernel, profile, contraction, tiling).build()


def compile_convolution(kernel: Kernel, profile: VulkanProfile) -> SpirvKernel | None:
    """Contractions over several reduction loops (convolutions: windowed input maps): the
    direct variant, each invocation a CONV_RM x CONV_RN block of outputs (rows along m, the
    innermost output position, read uniformly; columns along n, the output channels), all
    reduction loops nested inside in order."""
    c = match(kernel)
    if c is None or len(c.ks) < 2:
        return None
    lanes = profile.subgroup_size or 8
    tiling = Tiling(CONV_RM, CONV_RN * lanes, 1, CONV_RM, CONV_RN, shared=False)
    return _Generator(kernel, profile, c, tiling).build()


def linear_form(kernel: Kernel, operand_index: int) -> tuple[list[int], int] | None:
    """A static operand's element offset as coefficients of the loop indices plus a constant."""
    operand = kernel.inputs[operand_index]
    if not operand.is_static or operand.point_map.num_symbols:
        return None
    return operand.linear_offset(len(kernel.loop_ranges))


def aligned_along(kernel: Kernel, c: Contraction, which: int, dim: int, words: int) -> bool:
    """`words` consecutive elements of input `which` along loop `dim` fill one aligned
    `words`-word load: a static 32-bit operand without conversion, contiguous along `dim`, every
    other coefficient, the constant and the extent of `dim` multiples of `words`."""
    if not kernel.is_static or (c.convert_a if which == c.a else c.convert_b):
        return False
    if kernel.inputs[which].element_type not in ("f32", "i32"):
        return False
    form = linear_form(kernel, which)
    if form is None:
        return False
    coeffs, const = form
    return coeffs[dim] == 1 and const % words == 0 and kernel.static_ranges[dim] % words == 0 \
        and all(x % words == 0 for j, x in enumerate(coeffs) if j != dim)


def vector_friendly(kernel: Kernel, c: Contraction) -> bool:
    """4-word loads apply: A along k and B along n (see `aligned_along`)."""
    return aligned_along(kernel, c, c.a, c.k, 4) and aligned_along(kernel, c, c.b, c.n, 4)


class _Generator:
    def __init__(self, kernel: Kernel, profile: VulkanProfile, c: Contraction, t: Tiling):
        self.kernel, self.c, self.t = kernel, c, t
        self.iface = ShaderInterface(kernel, profile, (t.invocations, 1, 1),
                                     texel_windows=dict(t.texel_windows),
                                     texel_views=t.texel_views)
        self.e = self.iface.e

    def _loaded(self, which: int, loops: list[int]) -> int:
        """A's or B's element at `loops`, converted to the accumulator type."""
        iface, c = self.iface, self.c
        operand = self.kernel.inputs[which]
        value = iface.load(operand, iface.operand_offset(operand, loops))
        convert = c.convert_a if which == c.a else c.convert_b
        if convert is not None:
            value = emit_typed(self.e, convert, [value], [operand.element_type])
        return value

    def _epilogue(self, loops: list[int], total: int) -> None:
        """The other outputs at one output point, from C's final sum `total` and the
        epilogue's inputs read at that point (`_epilogue_fits`)."""
        iface, kernel = self.iface, self.kernel

        def operand_value(i: int) -> int:
            operand = kernel.inputs[i]
            return iface.load(operand, iface.operand_offset(operand, loops))
        values = evaluate(iface, kernel, operand_value, lambda d: loops[d],
                          given={kernel.yields[0]: total})
        for output, value in zip(kernel.outputs[1:], kernel.yields[1:]):
            iface.store(output, iface.operand_offset(output, loops), values[value])

    def build(self) -> SpirvKernel:
        iface, e, kernel, c, t = self.iface, self.e, self.kernel, self.c, self.t
        acc_t = e.scalar_type(c.acc_type)
        acc_class = register_class(c.acc_type)
        zero = e.f32c(0.0) if acc_class == "f32" else e.i32c(0)
        ranges = kernel.loop_ranges
        if t.shared:
            shared_a = shared_array(iface, acc_t, t.tk * t.tm, "tile_a")
            shared_b = shared_array(iface, acc_t, t.tk * t.tn, "tile_b")
        e.label()
        local = iface.builtin(BuiltIn.LocalInvocationId, 0)
        local_i = e.op(SpvOp.Bitcast, e.i32, local)
        tile_n = e.op(SpvOp.Bitcast, e.i32, iface.builtin(BuiltIn.WorkgroupId, 0))
        tile_m = e.op(SpvOp.Bitcast, e.i32, iface.builtin(BuiltIn.WorkgroupId, 1))
        batch_id = iface.builtin(BuiltIn.WorkgroupId, 2)
        m_size, n_size, k_size = (iface.extent(ranges[d]) for d in (c.m, c.n, c.k))
        m0 = e.op(SpvOp.IMul, e.i32, tile_m, e.i32c(t.tm))
        n0 = e.op(SpvOp.IMul, e.i32, tile_n, e.i32c(t.tn))
        threads_n = t.tn // t.rn
        tx = e.op(SpvOp.SMod, e.i32, local_i, e.i32c(threads_n))
        ty = e.op(SpvOp.SDiv, e.i32, local_i, e.i32c(threads_n))

        def row_of(r: int) -> int:
            if not t.shared:  # uniform across the workgroup
                return e.op(SpvOp.IAdd, e.i32, m0, e.i32c(r))
            return e.op(SpvOp.IAdd, e.i32, m0, e.op(SpvOp.IAdd, e.i32, e.op(
                SpvOp.IMul, e.i32, ty, e.i32c(t.rm)), e.i32c(r)))

        def col_of(s: int) -> int:
            if t.b_wide:  # 8 adjacent columns per lane
                return e.op(SpvOp.IAdd, e.i32, n0, e.op(SpvOp.IAdd, e.i32, e.op(
                    SpvOp.IMul, e.i32, tx, e.i32c(8)), e.i32c(s)))
            if t.vector:  # 4 consecutive columns per lane and vector load
                return e.op(SpvOp.IAdd, e.i32, n0, e.op(SpvOp.IAdd, e.i32, e.op(
                    SpvOp.IMul, e.i32, tx, e.i32c(4)), e.i32c((s // 4) * 4 * threads_n + s % 4)))
            if not t.shared:  # neighbouring lanes, neighbouring columns
                return e.op(SpvOp.IAdd, e.i32, n0, e.op(SpvOp.IAdd, e.i32, tx,
                                                         e.i32c(s * threads_n)))
            return e.op(SpvOp.IAdd, e.i32, n0, e.op(SpvOp.IAdd, e.i32, e.op(
                SpvOp.IMul, e.i32, tx, e.i32c(t.rn)), e.i32c(s)))
        batch = delinearize(iface, batch_id, c.batch) if c.batch else {}
        accs = [[e.local(acc_t) for _ in range(t.rn)] for _ in range(t.rm)]
        k_tiles = e.op(SpvOp.SDiv, e.i32, e.op(SpvOp.IAdd, e.i32, k_size, e.i32c(t.tk - 1)),
                       e.i32c(t.tk))
        n_dims = len(ranges)
        outer_k: dict[int, int] = {}   # indices of the outer reduction loops (convolutions)

        def loops_at(m_index: int, n_index: int, k_index: int) -> list[int]:
            loops = [e.i32c(0)] * n_dims
            for d, v in batch.items():
                loops[d] = v
            loops[c.m], loops[c.n], loops[c.k] = m_index, n_index, k_index
            for d, v in outer_k.items():
                loops[d] = v
            return loops

        def below(index: int, limit: int) -> int:
            """min(index, limit - 1): an index clamped into its dimension."""
            return e.glsl(e.i32, GLSLstd450.SMin, index, e.op(SpvOp.ISub, e.i32, limit,
                                                              e.i32c(1)))

        # Each accumulator starts at C's initial value and adds the products in k order, each
        # step rounded: the sequential result kernel.py requires (no reassociation). Edge
        # accumulators read a clamped element; they are never stored.
        output = kernel.outputs[0]
        for r in range(t.rm):
            for s in range(t.rn):
                offset = iface.operand_offset(output, loops_at(
                    below(row_of(r), m_size), below(col_of(s), n_size), e.i32c(0)))
                e.store(accs[r][s], iface.load(output, offset))

        def stage(which: int, shared: int, rows: int, along_m: bool, k0: int) -> None:
            """Copy a TK x rows tile of A (rows along m) or B (along n) into shared memory."""
            origin, limit = (m0, m_size) if along_m else (n0, n_size)
            for step in range(t.tk * rows // t.invocations):
                slot = e.op(SpvOp.IAdd, e.i32, local_i, e.i32c(step * t.invocations))
                kk = e.op(SpvOp.SDiv, e.i32, slot, e.i32c(rows))
                rr = e.op(SpvOp.SMod, e.i32, slot, e.i32c(rows))
                gk = e.op(SpvOp.IAdd, e.i32, k0, kk)
                gr = e.op(SpvOp.IAdd, e.i32, origin, rr)
                inside = e.and_(e.op(SpvOp.SLessThan, e.bool, gk, k_size),
                                e.op(SpvOp.SLessThan, e.bool, gr, limit))
                # Clamped indices keep the load in bounds; the select zero-fills the edge.
                ck = below(gk, k_size)
                cr = below(gr, limit)
                loops = loops_at(cr, e.i32c(0), ck) if along_m else loops_at(e.i32c(0), cr, ck)
                value = e.select(acc_t, inside, self._loaded(which, loops), zero)
                e.store(shared_pointer(iface, shared, acc_t, slot), value)

        mul_op = SpvOp.FMul if acc_class == "f32" else SpvOp.IMul
        add_op = SpvOp.FAdd if acc_class == "f32" else SpvOp.IAdd

        def narrow(value: int) -> int:
            """A register result rounded (floats) or wrapped (integers) to C's type."""
            if c.acc_type == acc_class:
                return value
            if acc_class == "f32":
                return round_float(e, value, c.acc_type)
            return wrap(e, value, c.acc_type)

        def mac(acc: int, a: int, b: int) -> int:
            """acc + a * b in C's type: the multiply and the add each rounded or wrapped to
            it, as typed_ops.py computes the body's two ops (f16 x f16 -> f16 gives the
            sequential f16 result)."""
            return narrow(e.op(add_op, acc_t, acc, narrow(e.op(mul_op, acc_t, a, b))))

        def k_tile(kt: int) -> None:
            k0 = e.op(SpvOp.IMul, e.i32, kt, e.i32c(t.tk))
            stage(c.a, shared_a, t.tm, True, k0)
            stage(c.b, shared_b, t.tn, False, k0)
            barrier(iface)
            current = [[e.load(acc_t, var) for var in row] for row in accs]
            a_base = e.op(SpvOp.IMul, e.i32, ty, e.i32c(t.rm))
            b_base = e.op(SpvOp.IMul, e.i32, tx, e.i32c(t.rn))
            for kk in range(t.tk):
                a_vals = [e.load(acc_t, shared_pointer(iface, shared_a, acc_t, e.op(
                    SpvOp.IAdd, e.i32, a_base, e.i32c(kk * t.tm + r)))) for r in range(t.rm)]
                b_vals = [e.load(acc_t, shared_pointer(iface, shared_b, acc_t, e.op(
                    SpvOp.IAdd, e.i32, b_base, e.i32c(kk * t.tn + s)))) for s in range(t.rn)]
                current = [[mac(current[r][s], a_vals[r], b_vals[s])
                            for s in range(t.rn)] for r in range(t.rm)]
            for r in range(t.rm):
                for s in range(t.rn):
                    e.store(accs[r][s], current[r][s])
            barrier(iface)
        def direct() -> None:
            """No shared memory: each invocation reads its rows of A and columns of B straight
            from the buffers (clamped at the edges; those results are never stored)."""
            rows = [below(row_of(r), m_size)
                    for r in range(t.rm)]
            cols = [below(col_of(s), n_size)
                    for s in range(t.rn)]

            def k_step(kk: int) -> None:
                current = [[e.load(acc_t, var) for var in row] for row in accs]
                a_vals = [self._loaded(c.a, loops_at(rows[r], e.i32c(0), kk))
                          for r in range(t.rm)]
                b_vals = [self._loaded(c.b, loops_at(e.i32c(0), cols[s], kk))
                          for s in range(t.rn)]
                for r in range(t.rm):
                    for s in range(t.rn):
                        e.store(accs[r][s], mac(current[r][s], a_vals[r], b_vals[s]))
            def nest(level: int) -> None:
                if level == len(c.ks) - 1:
                    emit_loop(e, k_size, k_step)
                    return
                d = c.ks[level]

                def inner(i: int) -> None:
                    outer_k[d] = i
                    nest(level + 1)
                emit_loop(e, iface.extent(ranges[d]), inner)
            nest(0)

        def direct_vector() -> None:
            """The direct variant with 4-word loads: A[row, k..k+3] and B[k, 4 columns]."""
            rows = [below(row_of(r), m_size)
                    for r in range(t.rm)]
            blocks = [e.glsl(e.i32, GLSLstd450.SMin, col_of(4 * q),
                              e.op(SpvOp.ISub, e.i32, n_size, e.i32c(4)))
                      for q in range(t.rn // 4)]
            a_op, b_op = kernel.inputs[c.a], kernel.inputs[c.b]

            def k_step(step: int) -> None:
                kk = e.op(SpvOp.IMul, e.i32, step, e.i32c(4))
                current = [[e.load(acc_t, var) for var in row] for row in accs]
                a_vals = [iface.load_vector4(a_op, iface.operand_offset(
                    a_op, loops_at(rows[r], e.i32c(0), kk)), acc_t) for r in range(t.rm)]
                for j in range(4):
                    k_j = e.op(SpvOp.IAdd, e.i32, kk, e.i32c(j))
                    b_vals = []
                    for q in range(t.rn // 4):
                        b_vals += iface.load_vector4(b_op, iface.operand_offset(
                            b_op, loops_at(e.i32c(0), blocks[q], k_j)), acc_t)
                    for r in range(t.rm):
                        for s in range(t.rn):
                            current[r][s] = mac(current[r][s], a_vals[r][j], b_vals[s])
                for r in range(t.rm):
                    for s in range(t.rn):
                        e.store(accs[r][s], current[r][s])
            emit_loop(e, e.op(SpvOp.SDiv, e.i32, k_size, e.i32c(4)), k_step)
        def direct_broadcast() -> None:
            """The direct variant sharing A through the subgroup: per block of `lanes` k
            values, lane j loads A[row, k0 + j] for each of its RM rows (one load per row
            instead of `lanes`; with `a_wide`, 2 * lanes k values and lane j's two from one u64
            load or texel fetch), and OpGroupNonUniformBroadcast hands every lane each k's
            value; B is read per lane and k (with `b_wide`, the lane's 8 columns from one
            u64vec4 load, or two texel fetches).
            Leftover k values run one at a time."""
            iface.e.b.capability(Capability.GroupNonUniform)
            iface.e.b.capability(Capability.GroupNonUniformBallot)
            lanes = threads_n
            rows = [below(row_of(r), m_size)
                    for r in range(t.rm)]
            cols = [below(col_of(s), n_size)
                    for s in range(t.rn)]
            span = 2 * lanes if t.a_wide else lanes    # k values per block
            full = e.op(SpvOp.SDiv, e.i32, k_size, e.i32c(span))
            # B_wide: the lane's first column, clamped (N is a multiple of 8, so a block is
            # wholly inside or wholly outside).
            start = e.glsl(e.i32, GLSLstd450.SMin, col_of(0),
                           e.op(SpvOp.ISub, e.i32, n_size, e.i32c(8))) if t.b_wide else 0

            def b_row(k_j: int) -> list[int]:
                if t.b_wide:
                    return iface.load_wide(kernel.inputs[c.b], iface.operand_offset(
                        kernel.inputs[c.b], loops_at(e.i32c(0), start, k_j)), 8, acc_t)
                return [self._loaded(c.b, loops_at(e.i32c(0), cols[s], k_j))
                        for s in range(t.rn)]

            windows = dict(t.texel_windows)

            def select(operand: Operand, k_index: int) -> None:
                """Read `operand` through the window holding the workgroup's reads from
                k_index on: its first word is the one at (m0, n0, k_index)."""
                word = e.op(SpvOp.Bitcast, e.u32, iface.operand_offset(
                    operand, loops_at(m0, n0, k_index)))
                iface.select_window(operand.binding,
                                    e.op(SpvOp.ShiftRightLogical, e.u32, word, e.u32c(2)))
            a_in, b_in = kernel.inputs[c.a], kernel.inputs[c.b]
            if a_in.binding in windows:
                select(a_in, e.i32c(0))

            def block(kb: int) -> None:
                k0 = e.op(SpvOp.IMul, e.i32, kb, e.i32c(span))
                if t.a_wide:  # lane l holds k0 + 2l and k0 + 2l + 1
                    mine = e.op(SpvOp.IAdd, e.i32, k0, e.op(SpvOp.IMul, e.i32, tx, e.i32c(2)))
                    own = [iface.load_wide(kernel.inputs[c.a], iface.operand_offset(
                        kernel.inputs[c.a], loops_at(rows[r], e.i32c(0), mine)), 2, acc_t)
                        for r in range(t.rm)]
                else:
                    own = [[self._loaded(c.a, loops_at(rows[r], e.i32c(0),
                                                       e.op(SpvOp.IAdd, e.i32, k0, tx)))]
                           for r in range(t.rm)]
                per_lane = len(own[0])
                current = [[e.load(acc_t, var) for var in row] for row in accs]
                for j in range(span):
                    b_vals = b_row(e.op(SpvOp.IAdd, e.i32, k0, e.i32c(j)))
                    for r in range(t.rm):
                        a = e.op(SpvOp.GroupNonUniformBroadcast, acc_t, e.u32c(Scope.Subgroup),
                                 own[r][j % per_lane], e.u32c(j // per_lane))
                        for s in range(t.rn):
                            current[r][s] = mac(current[r][s], a, b_vals[s])
                for r in range(t.rm):
                    for s in range(t.rn):
                        e.store(accs[r][s], current[r][s])
            if b_in.binding in windows:
                per = t.b_chunk // span     # blocks per window of B

                def chunk(ch: int) -> None:
                    first = e.op(SpvOp.IMul, e.i32, ch, e.i32c(per))
                    select(b_in, e.op(SpvOp.IMul, e.i32, first, e.i32c(span)))
                    count = e.glsl(e.i32, GLSLstd450.SMin, e.i32c(per),
                                   e.op(SpvOp.ISub, e.i32, full, first))
                    emit_loop(e, count, lambda i: block(e.op(SpvOp.IAdd, e.i32, first, i)))
                emit_loop(e, e.op(SpvOp.SDiv, e.i32, e.op(SpvOp.IAdd, e.i32, full,
                                                          e.i32c(per - 1)), e.i32c(per)), chunk)
            else:
                emit_loop(e, full, block)
            done = e.op(SpvOp.IMul, e.i32, full, e.i32c(span))
            if b_in.binding in windows:
                select(b_in, done)

            def tail(i: int) -> None:
                kk = e.op(SpvOp.IAdd, e.i32, done, i)
                current = [[e.load(acc_t, var) for var in row] for row in accs]
                a_vals = [self._loaded(c.a, loops_at(rows[r], e.i32c(0), kk))
                          for r in range(t.rm)]
                b_vals = b_row(kk)
                for r in range(t.rm):
                    for s in range(t.rn):
                        e.store(accs[r][s], mac(current[r][s], a_vals[r], b_vals[s]))
            emit_loop(e, e.op(SpvOp.ISub, e.i32, k_size, done), tail)

        if t.broadcast:
            direct_broadcast()
        elif t.vector:
            direct_vector()
        elif not t.shared:
            direct()
        else:
            emit_loop(e, k_tiles, k_tile)
        for r in range(t.rm):
            for s in range(t.rn):
                gm, gn = row_of(r), col_of(s)
                inside = e.and_(e.op(SpvOp.SLessThan, e.bool, gm, m_size),
                                e.op(SpvOp.SLessThan, e.bool, gn, n_size))

                def store(gm: int = gm, gn: int = gn, var: int = accs[r][s]) -> None:
                    loops = loops_at(gm, gn, e.i32c(0))
                    total = e.load(acc_t, var)
                    iface.store(output, iface.operand_offset(output, loops), total)
                    if len(kernel.outputs) > 1:
                        self._epilogue(loops, total)
                emit_if(e, inside, store)
        e.op_void(SpvOp.Return)
        code = iface.finish()
        grid = Grid(GridAxis((c.n,), t.tn), GridAxis((c.m,), t.tm), GridAxis(c.batch))
        if t.broadcast:
            return iface.result(code, grid, {"subgroup_size": t.invocations})
        if not t.shared:
            return iface.result(code, grid)
        return iface.result(code, grid, {"shared_memory_bytes": 4 * t.tk * (t.tm + t.tn)})
