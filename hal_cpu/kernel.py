"""The kernel executor: runs a decoded kernel program with numpy over a range of iterations.

A kernel's iteration space is the row-major linearization of its `loop_ranges`; workgroup `w`
of a dispatch covers iterations [w*tile_size, min((w+1)*tile_size, total)). All loops are
parallel, so iterations are independent and any split of a dispatch's range gives the same
result: the task system hands out whole workgroups in chunks, and `Kernel.run` walks a chunk in
blocks of at most `BLOCK_ITERATIONS` to bound the size of numpy temporaries. (Where two
iterations write the same element, or an output aliases another operand across iterations, the
result is unspecified, as on a GPU.)

Operand addressing is decided once per kernel: an affine map becomes a linear function of the
loop indices over the flattened operand, and the common cases (the map walks the operand in
iteration order, or does not depend on the loops) become slices instead of gathers.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from hal_cpu.buffer import CpuBuffer
from hal_cpu.ops import I1, OpFn
from irtk.errors import RuntimeFailure

BLOCK_ITERATIONS = 1 << 16

SLICE, UNIFORM, GATHER = "slice", "uniform", "gather"

# A resolved dispatch binding: (buffer, byte offset, byte length).
ResolvedBinding = tuple[CpuBuffer, int, int]


@dataclass(frozen=True)
class Operand:
    """How one kernel operand is found in memory: flat element index = const + sum(c * loop_j)."""

    label: str                         # "input 0", "output 1": for messages
    binding: int
    element_type: str                  # "f32", "i32", "i1"
    storage: np.dtype                  # how elements are stored (i1: one uint8 per element)
    shape: tuple[int, ...]
    terms: tuple[tuple[int, int], ...]  # (loop dimension, coefficient), nonzero, range > 1
    const: int
    mode: str                          # SLICE, UNIFORM or GATHER

    @property
    def byte_length(self) -> int:
        return math.prod(self.shape) * self.storage.itemsize

    @classmethod
    def from_map(cls, label: str, binding: int, element_type: str, storage: np.dtype,
                 shape: Sequence[int], loop_ranges: Sequence[int],
                 rows: Sequence[Sequence[int]]) -> Operand:
        """Linearize a (validated, in-bounds) affine map over a dense row-major operand."""
        strides = _row_major_strides(shape)
        loop_strides = _row_major_strides(loop_ranges)
        nd = len(loop_ranges)
        const = sum(row[nd] * s for row, s in zip(rows, strides))
        terms = []
        for j in range(nd):
            c = sum(row[j] * s for row, s in zip(rows, strides))
            if c != 0 and loop_ranges[j] > 1:
                terms.append((j, c))
        if not terms:
            mode = UNIFORM
        elif all(c == loop_strides[j] for j, c in terms) and \
                {j for j, _ in terms} == {j for j in range(nd) if loop_ranges[j] > 1}:
            mode = SLICE  # flat index = const + iteration id
        else:
            mode = GATHER
        return cls(label, binding, element_type, np.dtype(storage), tuple(shape), tuple(terms),
                   const, mode)

    def view(self, kernel: str, bindings: Sequence[ResolvedBinding]) -> np.ndarray:
        """This operand's elements in its bound buffer, as a flat typed array (no copy)."""
        if self.binding >= len(bindings):
            raise RuntimeFailure(
                f"kernel '{kernel}': {self.label} uses binding {self.binding} but the dispatch "
                f"has {len(bindings)} binding(s)")
        buffer, offset, length = bindings[self.binding]
        need = self.byte_length
        if need > length:
            shape = "x".join([str(d) for d in self.shape] + [self.element_type])
            raise RuntimeFailure(
                f"kernel '{kernel}': {self.label} ({shape}, {need} bytes) does not fit in "
                f"binding {self.binding} ({length} bytes at offset {offset})")
        return buffer.host_memory[offset:offset + need].view(self.storage)

    def flat_index(self, indices: dict[int, np.ndarray]) -> np.ndarray:
        (j, c), *rest = self.terms
        flat = indices[j] * c if c != 1 else indices[j]
        for j, c in rest:
            flat = flat + indices[j] * c
        return flat + self.const if self.const else flat

    def read(self, mem: np.ndarray, start: int, end: int, indices: dict[int, np.ndarray],
             copy: bool) -> np.ndarray:
        if self.mode == SLICE:
            value = mem[self.const + start:self.const + end]
            if copy:
                value = value.copy()
        elif self.mode == UNIFORM:
            value = mem[self.const:self.const + 1].copy()
        else:
            value = mem[self.flat_index(indices)]
        return value != 0 if self.element_type == I1 else value

    def write(self, mem: np.ndarray, start: int, end: int, indices: dict[int, np.ndarray],
              value: np.ndarray) -> None:
        if self.element_type == I1:
            value = value.astype(np.uint8)
        if self.mode == SLICE:
            mem[self.const + start:self.const + end] = value
        elif self.mode == UNIFORM:
            mem[self.const:self.const + 1] = value[-1:]  # the last iteration's write wins
        else:
            mem[self.flat_index(indices)] = value


# One step of a kernel body: (function, operand value ids); a None function is linalg.index,
# whose single "operand" is the loop dimension.
Step = tuple[OpFn | None, tuple[int, ...]]


class Kernel:
    """One kernel of an executable in the form the executor runs (built and checked by
    `hal_cpu.executable`)."""

    def __init__(self, name: str, loop_ranges: Sequence[int], tile_size: int,
                 inputs: Sequence[Operand], outputs: Sequence[Operand], steps: Sequence[Step],
                 yields: Sequence[int]) -> None:
        self.name = name
        self.loop_ranges = tuple(loop_ranges)
        self.total = math.prod(self.loop_ranges)
        self.tile_size = tile_size
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.operands = self.inputs + self.outputs
        self.steps = tuple(steps)
        self.yields = tuple(yields)
        self.bindings = sorted({op.binding for op in self.operands})
        self.binding_count = len(self.bindings)
        self.min_binding_count = self.bindings[-1] + 1 if self.bindings else 0
        self._loop_strides = _row_major_strides(self.loop_ranges)
        used = {v for _, args in self.steps for v in args} | set(self.yields)
        n_in = len(self.inputs)
        self._read_outputs = tuple(n_in + k in used for k in range(len(self.outputs)))
        # With several outputs a later output may yield a value that is a view of memory an
        # earlier output's write changes (in-place kernels), so slices are read as copies.
        self._copy_slices = len(self.outputs) > 1
        dims = {j for op in self.operands if op.mode == GATHER for j, _ in op.terms}
        dims |= {args[0] for fn, args in self.steps if fn is None}
        self._index_dims = tuple(sorted(dims))

    def iteration_end(self, workgroups: tuple[int, int, int]) -> int:
        """The end of the iteration range a grid of workgroups covers (ids past it do nothing)."""
        count = workgroups[0] * workgroups[1] * workgroups[2]
        return min(count * self.tile_size, self.total)

    def bind(self, bindings: Sequence[ResolvedBinding]) -> list[np.ndarray]:
        """Typed views of every operand (inputs, then outputs); raises RuntimeFailure."""
        return [op.view(self.name, bindings) for op in self.operands]

    def run(self, views: Sequence[np.ndarray], start: int, end: int) -> None:
        """Run iterations [start, end) over operand `views` (from `bind`)."""
        with np.errstate(all="ignore"):
            for s in range(start, end, BLOCK_ITERATIONS):
                self._run_block(views, s, min(s + BLOCK_ITERATIONS, end))

    def _run_block(self, views: Sequence[np.ndarray], start: int, end: int) -> None:
        indices: dict[int, np.ndarray] = {}
        if self._index_dims:
            ids = np.arange(start, end, dtype=np.int64)
            for j in self._index_dims:
                if self.loop_ranges[j] <= 1:
                    indices[j] = np.zeros(1, dtype=np.int64)
                    continue
                idx = ids // self._loop_strides[j] if self._loop_strides[j] != 1 else ids
                indices[j] = idx % self.loop_ranges[j] if j > 0 else idx
        copy = self._copy_slices
        values: list = [op.read(views[i], start, end, indices, copy)
                        for i, op in enumerate(self.inputs)]
        n_in = len(self.inputs)
        for k, op in enumerate(self.outputs):
            values.append(op.read(views[n_in + k], start, end, indices, copy)
                          if self._read_outputs[k] else None)
        for fn, args in self.steps:
            if fn is None:
                values.append(indices[args[0]].astype(np.int32))
            else:
                values.append(fn(*[values[a] for a in args]))
        for k, op in enumerate(self.outputs):
            op.write(views[n_in + k], start, end, indices, values[self.yields[k]])


def run_guarded(kernel: Kernel, views: Sequence[np.ndarray], start: int, end: int) -> None:
    """`kernel.run`, with any unexpected error turned into a RuntimeFailure naming the kernel."""
    try:
        kernel.run(views, start, end)
    except RuntimeFailure:
        raise
    except Exception as e:
        raise RuntimeFailure(
            f"kernel '{kernel.name}' failed on iterations [{start}, {end}): "
            f"{type(e).__name__}: {e}") from e


def work_items(kernel: Kernel, views: Sequence[np.ndarray],
               chunks: Sequence[tuple[int, int]]) -> list[Callable[[], None]]:
    """One callable per chunk of iterations, for the task system."""
    return [partial(run_guarded, kernel, views, s, e) for s, e in chunks]


def _row_major_strides(shape: Sequence[int]) -> list[int]:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return strides
