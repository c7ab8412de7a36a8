"""The kernel executor: runs a decoded kernel program with numpy over a range of parallel points.

A kernel is a loop nest; its *parallel points* are the row-major linearization of its parallel
loops, and workgroup `w` of a dispatch owns points [w*tile_size, (w+1)*tile_size) with every
reduction of those points (tiles never split a reduction). Parallel points are independent, so
any split of a dispatch's range gives the same result: the task system hands out whole
workgroups in chunks, and `Kernel.run` cuts a chunk into blocks and each block into row-major
boxes (one range on one loop, whole inner loops), so every operand of a box is a strided numpy
view of its buffer (`numpy.lib.stride_tricks.as_strided`), with stride 0 on the loops its map
does not use: no index arrays and no copies for the common cases.

A box runs with one of four strategies (`hal_cpu.plans`), which the executable loader chooses
once per kernel and hands to it (a `Plan`):
- elementwise: no reduction loop; the body runs once over the box with numpy broadcasting;
- contraction: out = out + a*b over reduction loops (mulf/addf or muli/addi, optionally after
  an ext/itofp cast of each factor): one `numpy.einsum` per box (BLAS for f32/f64; integers
  accumulate in the output's type, wrapping as the sequential loop would);
- combiner: each output is out = combine(out, f(inputs)) with a recognized combiner (addf,
  mulf for f16/f32/f64; max/min of every kind; addi, muli, andi, ori, xori): f runs over the
  box and its reduction slabs; float add/mul fold in loop order with `ufunc.accumulate` (the
  sequential result exactly), the exact combiners with numpy's reductions;
- sequential: anything else (argmax, several dependent outputs, small floats): the reduction
  points run one after another in lexicographic order, each step vectorized over the box's
  parallel points, with the outputs' values carried between steps.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, Literal, Protocol

import numpy as np
from numpy.lib.stride_tricks import as_strided

from hal_cpu.ops import OpFn
from irtk.errors import RuntimeFailure
from irtk.hal import numerics
from irtk.types import SCALAR_TYPES, scalar_type, storage_bytes

# Parallel points per block: bounds numpy temporaries of an elementwise box.
BLOCK_ITERATIONS = 1 << 16
# Elements (parallel points x reduction points) of one combiner slab.
SLAB_ELEMENTS = 1 << 20

# A resolved dispatch binding: (buffer with `host_memory`, byte offset, byte length); any
# 3-tuple, such as irtk.hal's ResolvedBinding named tuple.
ResolvedBinding = tuple[Any, int, int]

# Body steps: (kind, function or payload, operand value ids). An op step holds its function;
# the others a number: the loop (index), the param (param) or the gather input (extract) read.
STEP_OP: Final = "op"
STEP_INDEX: Final = "index"
STEP_PARAM: Final = "param"
STEP_EXTRACT: Final = "extract"
OpStep = tuple[Literal["op"], OpFn, tuple[int, ...]]
ValueStep = tuple[Literal["index", "param", "extract"], int, tuple[int, ...]]
Step = OpStep | ValueStep

Box = tuple[tuple[int, int], ...]   # per loop: (first index, count)
LoopBox = Sequence[tuple[int, int]]  # per loop of a kernel: (first index, count)


class Plan(Protocol):
    """How a kernel runs a box of its loops (`hal_cpu.plans`): the executor only cuts the
    dispatch's range into blocks and boxes and hands each box to the plan."""

    name: str

    def block_points(self, bound: Bound) -> int:
        """Parallel points per block (bounds the temporaries of one box)."""
        ...

    def run_box(self, bound: Bound, box: LoopBox) -> None:
        ...

    def run_range(self, bound: Bound, start: int, end: int) -> None:
        """Run parallel points [start, end) (not empty, with a non-empty reduction)."""
        ...

    def min_chunk_points(self, bound: Bound) -> int | None:
        """The fewest points worth a chunk of their own on the task system (None: the
        driver's min_chunk_iterations)."""
        ...


@dataclass(frozen=True)
class Operand:
    """One kernel operand as loaded: type, shape (static or dynamic) and affine map."""

    label: str                          # "input 0", "output 1": for messages
    binding: int
    element_type: str
    shape: tuple[int, ...]              # static extents (a dynamic entry holds 0)
    dynamic_dims: tuple[int, ...]       # per dimension: -1, or the param holding the extent
    rows: tuple[tuple[int, ...], ...] | None  # loops + params + 1 columns; None: a gather input

    @property
    def is_gather(self) -> bool:
        return self.rows is None

    @property
    def is_static(self) -> bool:
        return all(d < 0 for d in self.dynamic_dims)


@dataclass(frozen=True)
class Layout:
    """Where an operand's elements are, for concrete extents: flat = const + sum(coeffs * loop)."""

    shape: tuple[int, ...]
    const: int
    coeffs: tuple[int, ...]             # per loop, in elements
    count: int


def concrete_shape(op: Operand, params: Sequence[int]) -> tuple[int, ...]:
    return tuple(params[p] if p >= 0 else d for d, p in zip(op.shape, op.dynamic_dims))


def layout(op: Operand, loop_ranges: Sequence[int], params: Sequence[int]) -> Layout:
    shape = concrete_shape(op, params)
    strides = row_major_strides(shape)
    count = math.prod(shape)
    if op.rows is None:
        return Layout(shape, 0, (0,) * len(loop_ranges), count)
    n = len(loop_ranges)
    const = 0
    coeffs = [0] * n
    for row, stride in zip(op.rows, strides):
        const += stride * (row[-1] + sum(c * p for c, p in zip(row[n:-1], params)))
        for j in range(n):
            coeffs[j] += stride * row[j]
    return Layout(shape, const, tuple(coeffs), count)


def map_bounds(op: Operand, loop_ranges: Sequence[int], params: Sequence[int]
               ) -> list[tuple[int, int, int]]:
    """Per dimension: (lowest index, highest index, extent) the map reaches over the loop box."""
    shape = concrete_shape(op, params)
    n = len(loop_ranges)
    out = []
    assert op.rows is not None
    for row, extent in zip(op.rows, shape):
        lo = hi = row[-1] + sum(c * p for c, p in zip(row[n:-1], params))
        for c, r in zip(row[:n], loop_ranges):
            lo += min(0, c * (r - 1))
            hi += max(0, c * (r - 1))
        out.append((lo, hi, extent))
    return out


class Bound:
    """A kernel bound to one dispatch: concrete extents, params and a view of every operand."""

    def __init__(self, kernel: Kernel, loop_ranges: tuple[int, ...], params: tuple,
                 layouts: list[Layout], memories: list[np.ndarray]) -> None:
        self.kernel = kernel
        self.loop_ranges = loop_ranges
        self.params = params
        self.layouts = layouts
        self.memories = memories          # raw storage (flat), or unpacked values of i2/i4/f4
        self.parallel_extents = tuple(loop_ranges[j] for j in kernel.parallel_dims)
        self.reduction_extents = tuple(loop_ranges[j] for j in kernel.reduction_dims)
        self.total = math.prod(self.parallel_extents)
        self.reduction_total = math.prod(self.reduction_extents)
        n_in = len(kernel.inputs)
        # Inputs whose memory an output may overwrite (a binding used twice, or one buffer
        # bound to two slots): they are read as copies, so every read sees the old values.
        self.copied_inputs = frozenset(
            i for i in range(n_in) for o in range(n_in, len(memories))
            if np.may_share_memory(memories[i], memories[o]))
        self.lock = threading.Lock()      # packed outputs: read-modify-write of shared bytes
        self.packed_targets: dict[int, np.ndarray] = {}   # operand -> its buffer bytes
        self.native: Any = None           # what a native plan prepared for this dispatch


class Kernel:
    """One kernel of an executable in the form the executor runs (built and checked by
    `hal_cpu.executable`, which also chooses its plan: `choose_plan` is called once, on the
    finished kernel, since the choice reads the kernel's body and loops)."""

    def __init__(self, name: str, loop_ranges: Sequence[int], dynamic_loops: Sequence[int],
                 iterator_types: Sequence[str], tile_size: int, inputs: Sequence[Operand],
                 outputs: Sequence[Operand], steps: Sequence[Step], step_names: Sequence[str],
                 yields: Sequence[int], params: Sequence[tuple[str, str, int]],
                 value_types: Sequence[str], *, choose_plan: Callable[[Kernel], Plan],
                 step_attrs: Sequence[Any] = ()) -> None:
        self.name = name
        self.static_loop_ranges = tuple(loop_ranges)
        self.dynamic_loops = tuple(dynamic_loops)
        self.iterator_types = tuple(iterator_types)
        self.parallel_dims = tuple(j for j, t in enumerate(iterator_types) if t == "parallel")
        self.reduction_dims = tuple(j for j, t in enumerate(iterator_types) if t == "reduction")
        self.tile_size = tile_size
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.operands = self.inputs + self.outputs
        self.steps = tuple(steps)
        self.step_names = tuple(step_names)   # the MLIR op of each step
        # Each op step's decoded attributes (hal_cpu.ops.OpAttrs; None for the executor's own
        # steps): what the native code generator reads.
        self.step_attrs = tuple(step_attrs) if step_attrs else (None,) * len(self.steps)
        self.yields = tuple(yields)
        self.params = tuple(params)       # (name, type, byte offset)
        self.value_types = tuple(value_types)
        self.push_constant_bytes = max((off + storage_bytes(t, 1) for _, t, off in self.params),
                                       default=0)
        self.bindings = sorted({op.binding for op in self.operands})
        self.binding_count = len(self.bindings)
        self.min_binding_count = self.bindings[-1] + 1 if self.bindings else 0
        self.is_static = all(p < 0 for p in self.dynamic_loops) and \
            all(op.is_static for op in self.operands)
        n_in, n_out = len(self.inputs), len(self.outputs)
        used = {v for _, _, args in self.steps for v in args} | set(self.yields)
        self.read_outputs = tuple(n_in + k in used for k in range(n_out))
        self.plan: Plan = choose_plan(self)
        self._static_layouts = [layout(op, self.static_loop_ranges, ()) for op in self.operands] \
            if self.is_static and not self.params else None
        # A plan's shortcut past `bind` for a dispatch it can take as is (None: bind it).
        self.direct_bind: Callable[[Sequence[ResolvedBinding]], Bound | None] | None = None

    @property
    def static_layouts(self) -> list[Layout] | None:
        """Every operand's layout when nothing about it depends on the dispatch."""
        return self._static_layouts

    def op_fn(self, index: int) -> OpFn:
        """The function of step `index`, an op step (a plan folds or casts with it)."""
        step = self.steps[index]
        if step[0] != STEP_OP:
            raise ValueError(f"kernel '{self.name}': step {index} is a {step[0]} step, not an op")
        return step[1]

    # --- binding -----------------------------------------------------------------------------

    def decode_params(self, constants: bytes | Sequence[int]) -> tuple:
        """Each param's value from the dispatch's push-constant words."""
        if not isinstance(constants, (bytes, bytearray, memoryview)):
            constants = b"".join(int(w & 0xFFFFFFFF).to_bytes(4, "little") for w in constants)
        data = bytes(constants)
        if len(data) < self.push_constant_bytes:
            raise RuntimeFailure(
                f"kernel '{self.name}': needs {self.push_constant_bytes} bytes of push constants "
                f"({', '.join(n for n, _, _ in self.params)}), the dispatch gave {len(data)}")
        values = []
        for _, t, off in self.params:
            values.append(np.frombuffer(data, dtype=scalar_type(t).storage_dtype, count=1,
                                        offset=off)[0])
        return tuple(values)

    def bind(self, bindings: Sequence[ResolvedBinding],
             constants: bytes | Sequence[int] = b"") -> Bound:
        """Resolve extents and views for one dispatch; raises RuntimeFailure."""
        if self.direct_bind is not None:
            direct = self.direct_bind(bindings)
            if direct is not None:
                return direct
        params = self.decode_params(constants) if self.params else ()
        ints = [int(v) for v in params]
        loop_ranges = tuple(ints[p] if p >= 0 else r
                            for r, p in zip(self.static_loop_ranges, self.dynamic_loops))
        for j, (r, p) in enumerate(zip(loop_ranges, self.dynamic_loops)):
            if r < 0:
                raise RuntimeFailure(f"kernel '{self.name}': loop {j} extent "
                                     f"{self.params[p][0]} = {r} is negative")
        for op in self.operands:
            for d, p in enumerate(op.dynamic_dims):
                if p >= 0 and ints[p] < 0:
                    raise RuntimeFailure(f"kernel '{self.name}': {op.label} dimension {d} "
                                         f"extent {self.params[p][0]} = {ints[p]} is negative")
        if self._static_layouts is not None:
            layouts = self._static_layouts
        else:
            layouts = [layout(op, loop_ranges, ints) for op in self.operands]
            if math.prod(loop_ranges) > 0:
                for op in self.operands:
                    if op.rows is None:
                        continue
                    for r, (lo, hi, extent) in enumerate(map_bounds(op, loop_ranges, ints)):
                        if lo < 0 or hi >= extent:
                            raise RuntimeFailure(
                                f"kernel '{self.name}': {op.label} map row {r} reaches indices "
                                f"[{lo}, {hi}] outside its extent {extent} for loop ranges "
                                f"{list(loop_ranges)}")
        memories = []
        packed: dict[int, np.ndarray] = {}
        for i, (op, lay) in enumerate(zip(self.operands, layouts)):
            raw = self._raw(op, lay, bindings)
            if i >= len(self.inputs) and not raw.flags.writeable:
                raise RuntimeFailure(f"kernel '{self.name}': {op.label} is written, but its "
                                     f"binding {op.binding} is a read-only buffer (imported "
                                     "host memory: a module constant)")
            t = SCALAR_TYPES[op.element_type]
            if t.storage_dtype is not None:
                memories.append(raw.view(t.storage_dtype))
            else:  # a packed type: unpacked here, packed again by the writes
                memories.append(numerics.from_bits(op.element_type, numerics.unpack_codes(
                    raw, lay.count, t.storage_bits)).copy())
                if i >= len(self.inputs):
                    packed[i] = raw
        bound = Bound(self, loop_ranges, params, layouts, memories)
        bound.packed_targets = packed
        return bound

    def _raw(self, op: Operand, lay: Layout, bindings: Sequence[ResolvedBinding]) -> np.ndarray:
        if op.binding >= len(bindings):
            raise RuntimeFailure(
                f"kernel '{self.name}': {op.label} uses binding {op.binding} but the dispatch "
                f"has {len(bindings)} binding(s)")
        buffer, offset, length = bindings[op.binding]
        need = SCALAR_TYPES[op.element_type].storage_bytes(lay.count)
        if need > length:
            shape = "x".join([str(d) for d in lay.shape] + [op.element_type])
            raise RuntimeFailure(
                f"kernel '{self.name}': {op.label} ({shape}, {need} bytes) does not fit in "
                f"binding {op.binding} ({length} bytes at offset {offset})")
        return buffer.host_memory[offset:offset + need]

    def iteration_end(self, workgroups: tuple[int, int, int], bound: Bound | None = None) -> int:
        """The end of the parallel-point range a grid of workgroups covers."""
        if bound is None:
            if not self.is_static:
                raise RuntimeFailure(f"kernel '{self.name}' has dynamic extents: bind it with "
                                     "the dispatch's push constants first")
            total = math.prod(self.static_loop_ranges[j] for j in self.parallel_dims)
        else:
            total = bound.total
        count = workgroups[0] * workgroups[1] * workgroups[2]
        return min(count * self.tile_size, total)

    # --- running -----------------------------------------------------------------------------

    def run(self, bound: Bound, start: int, end: int) -> None:
        """Run parallel points [start, end) of a bound dispatch."""
        if bound.reduction_total == 0 or end <= start:
            return                       # no body evaluation: outputs keep their values
        self.plan.run_range(bound, start, end)

    def run_boxes(self, plan: Plan, bound: Bound, start: int, end: int) -> None:
        """The numpy executor: [start, end) in blocks, each cut into boxes `plan` runs."""
        block = plan.block_points(bound)
        with np.errstate(all="ignore"):
            for s in range(start, end, block):
                for pbox in boxes(bound.parallel_extents, s, min(s + block, end)):
                    plan.run_box(bound, self.loop_box(bound, pbox))

    def loop_box(self, bound: Bound, pbox: Box) -> list[tuple[int, int]]:
        """A parallel box widened to every loop (reductions: their whole range)."""
        box = [(0, r) for r in bound.loop_ranges]
        for j, b in zip(self.parallel_dims, pbox):
            box[j] = b
        return box


# --- operand access ----------------------------------------------------------------------------

def read(bound: Bound, index: int, box: Sequence[tuple[int, int]], copy: bool = False
         ) -> np.ndarray:
    """Operand `index`'s values over a box (broadcast shape: 1 on loops its map ignores)."""
    kernel = bound.kernel
    op = kernel.operands[index]
    view = strided(bound, index, box)
    t = SCALAR_TYPES[op.element_type]
    if t.packed or t.stores_values:
        return view.copy() if copy else view
    return numerics.from_bits(t.name, view)


def strided(bound: Bound, index: int, box: Sequence[tuple[int, int]],
            compact: bool = False) -> np.ndarray:
    """A strided view of operand `index` over a box; `compact` drops the loops it ignores."""
    lay = bound.layouts[index]
    mem = bound.memories[index]
    offset = lay.const + sum(c * lo for c, (lo, _) in zip(lay.coeffs, box))
    item = mem.itemsize
    if compact:
        dims = [j for j, c in enumerate(lay.coeffs) if c != 0]
        shape = [box[j][1] for j in dims]
        strides = [lay.coeffs[j] * item for j in dims]
    else:
        shape = [n if c != 0 else 1 for c, (_, n) in zip(lay.coeffs, box)]
        strides = [c * item for c in lay.coeffs]
    base = mem[offset:offset + 1] if mem.size else mem
    return as_strided(base, shape=shape, strides=strides, writeable=True)


def write(bound: Bound, index: int, box: Sequence[tuple[int, int]], value: np.ndarray) -> None:
    """Store values (broadcastable to the box) into output operand `index`."""
    kernel = bound.kernel
    op = kernel.operands[index]
    lay = bound.layouts[index]
    full = tuple(n for _, n in box)
    value = np.broadcast_to(value, full)
    # Loops the output ignores: several points write one element, the last one wins.
    pick = tuple(slice(-1, None) if c == 0 and n > 1 else slice(None)
                 for c, n in zip(lay.coeffs, full))
    value = value[pick]
    view = strided(bound, index, box)
    t = SCALAR_TYPES[op.element_type]
    if t.packed:
        with bound.lock:
            view[...] = value
            _write_back_packed(bound, index, box)
        return
    if t.stores_values:
        view[...] = value
    else:
        view[...] = numerics.to_bits(t.name, value)


def _write_back_packed(bound: Bound, index: int, box: Sequence[tuple[int, int]]) -> None:
    """Re-pack the bytes that hold the box's elements of a packed output from its unpacked
    values (whole bytes, so neighbours outside the box keep their values)."""
    lay = bound.layouts[index]
    start = lay.const + sum(c * lo for c, (lo, _) in zip(lay.coeffs, box))
    flat = np.asarray(start, dtype=np.int64)
    for j, (c, (_, n)) in enumerate(zip(lay.coeffs, box)):
        if c != 0:
            shape = [1] * len(box)
            shape[j] = n
            flat = flat + (np.arange(n, dtype=np.int64) * c).reshape(shape)
    t = bound.kernel.operands[index].element_type
    bits = SCALAR_TYPES[t].storage_bits
    per_byte = 8 // bits
    byte_index = np.unique(np.asarray(flat).reshape(-1) // per_byte)
    values = bound.memories[index]
    packed = np.zeros(byte_index.size, dtype=np.uint8)
    for j in range(per_byte):
        pos = per_byte * byte_index + j
        inside = pos < values.size
        codes = numerics.to_bits(t, values[np.where(inside, pos, 0)])
        packed |= np.where(inside, codes, 0).astype(np.uint8) << np.uint8(j * bits)
    bound.packed_targets[index][byte_index] = packed


# --- body evaluation ---------------------------------------------------------------------------

def evaluate(bound: Bound, box: Sequence[tuple[int, int]], outputs: Sequence | None,
             skip: frozenset[int] = frozenset()) -> list:
    """Body values over a box. `outputs`: the outputs' current values (None: read them)."""
    kernel = bound.kernel
    n_in = len(kernel.inputs)
    copied = bound.copied_inputs
    values: list = [None if op.is_gather else read(bound, i, box, i in copied)
                    for i, op in enumerate(kernel.inputs)]
    if outputs is None:
        values += [read(bound, n_in + k, box, copy=True) if kernel.read_outputs[k] else None
                   for k in range(len(kernel.outputs))]
    else:
        values += list(outputs)
    rank = len(box)
    for n, step in enumerate(kernel.steps):
        if n in skip:
            values.append(None)
        elif step[0] == STEP_OP:
            _, fn, args = step
            values.append(fn(*[values[a] for a in args]))
        elif step[0] == STEP_INDEX:
            j = step[1]
            lo, count = box[j]
            shape = [1] * rank
            shape[j] = count
            values.append(np.arange(lo, lo + count, dtype=np.int32).reshape(shape))
        elif step[0] == STEP_PARAM:
            values.append(np.asarray(bound.params[step[1]]))
        else:
            _, input_index, args = step
            values.append(_extract(bound, input_index, [values[a] for a in args]))
    return values


def _extract(bound: Bound, input_index: int, indices: list[np.ndarray]) -> np.ndarray:
    """tensor.extract of a gather input; each index is clamped into its dimension."""
    lay = bound.layouts[input_index]
    op = bound.kernel.inputs[input_index]
    t = SCALAR_TYPES[op.element_type]
    dtype = t.compute_dtype
    if lay.count == 0:
        return np.zeros(np.broadcast_shapes(*[np.shape(i) for i in indices]) if indices else (),
                        dtype=dtype)
    strides = row_major_strides(lay.shape)
    flat: np.ndarray | int = 0
    for idx, extent, stride in zip(indices, lay.shape, strides):
        flat = flat + np.clip(np.asarray(idx, dtype=np.int64), 0, extent - 1) * stride
    raw = bound.memories[input_index][flat]
    if t.packed:
        return np.asarray(raw)
    if not t.stores_values:
        return numerics.from_bits(t.name, raw)
    return np.asarray(raw).astype(dtype, copy=False)


# --- iteration space ---------------------------------------------------------------------------

def boxes(extents: Sequence[int], start: int, end: int) -> Iterator[Box]:
    """Cut points [start, end) of a row-major space into boxes: one range on one dimension,
    fixed indices before it, whole dimensions after it."""
    if start >= end:
        return
    if not extents:
        yield ()
        return
    inner = math.prod(extents[1:])
    if inner == 0:
        return
    i0, r0 = divmod(start, inner)
    i1, r1 = divmod(end, inner)
    rest = tuple((0, n) for n in extents[1:])
    if i0 == i1:
        for b in boxes(extents[1:], r0, r1):
            yield ((i0, 1),) + b
        return
    if r0:
        for b in boxes(extents[1:], r0, inner):
            yield ((i0, 1),) + b
        i0 += 1
    if i1 > i0:
        yield ((i0, i1 - i0),) + rest
    if r1:
        for b in boxes(extents[1:], 0, r1):
            yield ((i1, 1),) + b


def row_major_strides(shape: Sequence[int]) -> list[int]:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return strides


def run_guarded(kernel: Kernel, bound: Bound, start: int, end: int) -> None:
    """`kernel.run`, with any unexpected error turned into a RuntimeFailure naming the kernel."""
    try:
        kernel.run(bound, start, end)
    except RuntimeFailure:
        raise
    except Exception as e:
        raise RuntimeFailure(
            f"kernel '{kernel.name}' failed on parallel points [{start}, {end}): "
            f"{type(e).__name__}: {e}") from e


def work_items(kernel: Kernel, bound: Bound,
               chunks: Sequence[tuple[int, int]]) -> list[Callable[[], None]]:
    """One callable per chunk of parallel points, for the task system."""
    return [partial(run_guarded, kernel, bound, s, e) for s, e in chunks]


__all__ = ["Bound", "Kernel", "LoopBox", "Operand", "OpFn", "Plan", "ResolvedBinding", "Step",
           "boxes", "evaluate", "read", "strided", "write", "work_items"]
