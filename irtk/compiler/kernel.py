"""The dispatch kernel IR: what one dispatch computes, independent of any target.

Dispatch formation turns each root `linalg.generic` (with what is fused into it) into a
`Kernel`; every code generator (SPIR-V, CPU) reads only this, so the CPU driver is a faithful
reference for the Vulkan one.

Semantics. A kernel is a loop nest over `loop_ranges`, one loop per entry of `iterator_types`
("parallel" or "reduction"). For every point of the iteration space, in lexicographic order
within each parallel point (parallel points may run in any order, concurrently), the body is
evaluated with:
- each mapped input's element read at `input.map(point)`;
- each output's *current* element read at `output.map(point)`;
and each yielded value written to its output at `output.map(point)`. Outputs are read-write: the
output buffer holds the initial value (linalg's `outs` operand) before the dispatch, and the host
program guarantees that. A code generator may skip the initial read of an output whose block
argument the body never uses, and may keep an accumulator in registers across a reduction.
Output maps never use reduction loops (`validate` checks), and distinct output points are
written by one parallel point each. Bindings never alias each other.

Reassociation. Integer reductions and float max/min give the same result in any order. A float
add/mul reduction whose yield is `combiner(output value, input element as loaded)` is a plain
sum/product of the input, and code generators may reassociate it (tree, pairwise, split
reductions), as IREE does for its vector reductions. Every other float reduction (an addend the
body computes, such as a matmul's product) keeps the sequential order above, each step rounded
in the output type: IREE's own tests expect exactly that result.

Value numbering in the body: 0..n_in-1 are the input elements, n_in..n_in+n_out-1 the outputs'
current values, then one value per op in order. An input whose `map` is None is not read per
point; the body reads it with `tensor.extract` ops (gathers), and its block-argument value number
is still reserved (it must not be used).

Dynamic extents. A loop range or operand dimension may be a parameter name instead of an int.
`params` are scalar push constants (dynamic extents, and host scalars that a body uses, read with
`kernel.param`), laid out in order, each 4 bytes (i32/f32/index) or 8 bytes (i64/f64, aligned to
8). Index arithmetic is 32-bit signed ("index" is i32 on every target).

Storage. Tensor elements are stored densely, row-major, in their own width: i1 as one byte
(0 or 1), i8/i16/i32/i64, f16/bf16/f32/f64, f8 types as one byte, "index" as i32; i4 and
f4E2M1FN are packed two per byte, element 2k in the low nibble of byte k, and i2 four per byte,
element 4k + j in bits 2j..2j+1 of byte k. Where a device lacks a type the code
generator emulates it in 32-bit code or refuses with the missing feature named.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from irtk import body_ops
# Scalar types a kernel body computes in and tensors store: every type of `irtk.types`. Small
# floats (and bf16) are computed in f32 registers holding exactly representable values: every
# op that produces one rounds its f32 result to the type (as arith.truncf would).
from irtk.types import SCALAR_TYPES, storage_bytes

ITERATOR_TYPES = ("parallel", "reduction")



@dataclass(frozen=True)
class AffineMap:
    """An affine map from loop indices (and params) to operand indices.

    `rows[r]` has num_dims + num_symbols + 1 integers: the coefficient of each loop index, then
    of each symbol (the kernel's params, in order), then the constant.
    """

    num_dims: int
    rows: tuple[tuple[int, ...], ...]
    num_symbols: int = 0

    @staticmethod
    def identity(num_dims: int) -> "AffineMap":
        return AffineMap(num_dims, tuple(
            tuple(1 if j == i else 0 for j in range(num_dims + 1)) for i in range(num_dims)))

    def row_loop(self, r: int) -> int | None:
        """The loop whose index row `r` is, exactly (coefficient 1, no symbol, constant 0), so
        that the operand's dim `r` walks that loop and shares its extent; None for any other
        row (a broadcast, a window, a stride, an offset)."""
        row = self.rows[r]
        used = [j for j, c in enumerate(row[:-1]) if c]
        if len(used) == 1 and used[0] < self.num_dims and row[used[0]] == 1 and row[-1] == 0:
            return used[0]
        return None

    def row_loops(self) -> tuple[int | None, ...]:
        """`row_loop` of every row, in order."""
        return tuple(self.row_loop(r) for r in range(len(self.rows)))

    def loop_per_row(self) -> tuple[int, ...] | None:
        """`row_loop` of every row when each row is exactly one loop index; None when some row
        is anything else."""
        loops = tuple(j for j in self.row_loops() if j is not None)
        return loops if len(loops) == len(self.rows) else None

    def is_permutation_or_projection(self) -> bool:
        """Each result is one loop index (coefficient 1) or a constant 0 (a broadcast dim)."""
        return all(self.row_loop(r) is not None or not any(row)
                   for r, row in enumerate(self.rows))

    def used_dims(self) -> frozenset[int]:
        return frozenset(j for row in self.rows for j in range(self.num_dims) if row[j])

    def apply(self, indices: tuple[int, ...], symbols: tuple[int, ...] = ()) -> tuple[int, ...]:
        values = tuple(indices) + tuple(symbols) + (1,)
        return tuple(sum(c * v for c, v in zip(row, values)) for row in self.rows)


Extent = int | str   # a static size, or the name of an index param holding it


def _static(extents: Sequence[Extent], what: str) -> tuple[int, ...]:
    """`extents` where a check has established that they are all static (ValueError if not:
    a bug in the caller, not in its input)."""
    numbers = tuple(e for e in extents if isinstance(e, int))
    if len(numbers) != len(extents):
        raise ValueError(f"{what} {tuple(extents)} are not all static")
    return numbers


def row_major_strides(shape: Sequence[int]) -> list[int]:
    """Elements between neighbours along each dimension of a dense row-major array."""
    return [math.prod(shape[r + 1:]) for r in range(len(shape))]


@dataclass(frozen=True)
class Param:
    """A scalar push constant: a dynamic extent ("index") or a host scalar the body reads."""

    name: str
    type: str

    @property
    def byte_size(self) -> int:
        return storage_bytes(self.type, 1)


@dataclass(frozen=True)
class Operand:
    """A tensor read or written by a kernel: its binding slot, element type, shape and map."""

    binding: int
    element_type: str
    shape: tuple[Extent, ...]
    map: AffineMap | None

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    @property
    def static_shape(self) -> tuple[int, ...]:
        """The shape of a static operand (`is_static`)."""
        return _static(self.shape, f"binding {self.binding}: dimensions")

    @property
    def point_map(self) -> AffineMap:
        """The map of an operand read per point (every one but a gather input)."""
        if self.map is None:
            raise ValueError(f"binding {self.binding} is a gather input, which has no map")
        return self.map

    @property
    def byte_size(self) -> int:
        """Static operands only."""
        return storage_bytes(self.element_type, math.prod(self.static_shape))

    def linear_offset(self, num_loops: int) -> tuple[list[int], int]:
        """A static operand's element offset as a linear form in the loop indices: the
        coefficient of each of the `num_loops` loops, and the constant (a map's symbols are
        left out)."""
        rows = self.point_map.rows
        strides = row_major_strides(self.static_shape)
        coeffs = [sum(row[j] * st for row, st in zip(rows, strides)) for j in range(num_loops)]
        return coeffs, sum(row[-1] * st for row, st in zip(rows, strides))


@dataclass(frozen=True)
class Op:
    """One scalar op of the body, named as in MLIR (`arith.addf`, `math.exp`, `linalg.index`)."""

    name: str
    operands: tuple[int, ...]
    result_type: str
    predicate: str = ""          # arith.cmpf / arith.cmpi
    int_value: int = 0           # arith.constant (integer or i1), linalg.index, tensor.extract, kernel.param
    float_value: float = 0.0     # arith.constant (float)


@dataclass(frozen=True)
class GridAxis:
    """One workgroup-count axis: ceil(prod(loop_ranges[d] for d in dims) / divisor)."""

    dims: tuple[int, ...]
    divisor: int = 1


@dataclass(frozen=True)
class Grid:
    """How many workgroups a dispatch launches, as a rule the host evaluates once extents are known.

    `linear`: only axis x is used and may exceed a device's 65535 limit; the host launches
    (min(n, 65535), ceil(n / 65535), 1) and the kernel recovers id = x + y * 65535 (guarding
    id < n). Otherwise each axis is launched as computed.
    """

    x: GridAxis
    y: GridAxis = GridAxis(())
    z: GridAxis = GridAxis(())
    linear: bool = False

    def counts(self, loop_ranges: tuple[int, ...]) -> tuple[int, int, int]:
        """The launch for concrete loop ranges."""
        def axis(a: GridAxis) -> int:
            n = math.prod(loop_ranges[d] for d in a.dims)
            return -(-n // a.divisor)
        x, y, z = axis(self.x), axis(self.y), axis(self.z)
        if self.linear and x > 65535:
            return 65535, -(-x // 65535), 1
        return x, y, z


@dataclass
class Kernel:
    name: str
    loop_ranges: tuple[Extent, ...]
    inputs: list[Operand]
    outputs: list[Operand]
    ops: list[Op] = field(default_factory=list)
    yields: list[int] = field(default_factory=list)
    iterator_types: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()

    def __post_init__(self) -> None:
        if not self.iterator_types:
            self.iterator_types = ("parallel",) * len(self.loop_ranges)

    @property
    def is_static(self) -> bool:
        return all(isinstance(r, int) for r in self.loop_ranges)

    @property
    def static_ranges(self) -> tuple[int, ...]:
        """The loop ranges of a static kernel (`is_static`)."""
        return _static(self.loop_ranges, f"kernel '{self.name}': loop ranges")

    def static_extents(self, dims: Sequence[int]) -> list[int] | None:
        """The ranges of loops `dims`, or None when one of them is dynamic."""
        ranges = [self.loop_ranges[d] for d in dims]
        numbers = [r for r in ranges if isinstance(r, int)]
        return numbers if len(numbers) == len(ranges) else None

    @property
    def iteration_count(self) -> int:
        """Static kernels only."""
        return math.prod(self.static_ranges)

    @property
    def binding_count(self) -> int:
        return len(self.inputs) + len(self.outputs)

    @property
    def parallel_dims(self) -> tuple[int, ...]:
        return tuple(i for i, t in enumerate(self.iterator_types) if t == "parallel")

    @property
    def reduction_dims(self) -> tuple[int, ...]:
        return tuple(i for i, t in enumerate(self.iterator_types) if t == "reduction")

    @property
    def push_constant_bytes(self) -> int:
        if not self.params:
            return 0
        return self.param_offsets()[-1] + self.params[-1].byte_size

    def param_offsets(self) -> list[int]:
        offsets, offset = [], 0
        for p in self.params:
            offset = -(-offset // p.byte_size) * p.byte_size
            offsets.append(offset)
            offset += p.byte_size
        return offsets

    def value_type(self, value: int) -> str:
        """The scalar type of body value `value`."""
        operands = self.inputs + self.outputs
        if value < len(operands):
            return operands[value].element_type
        return self.ops[value - len(operands)].result_type

    def validate(self) -> None:
        """Raise ValueError if the kernel breaks the rules in this module's docstring."""
        n = len(self.loop_ranges)
        names = {p.name: p for p in self.params}
        if len(self.iterator_types) != n or any(t not in ITERATOR_TYPES for t in self.iterator_types):
            raise ValueError(f"kernel {self.name}: bad iterator types {self.iterator_types}")
        for r in self.loop_ranges:
            if isinstance(r, str) and (r not in names or names[r].type != "index"):
                raise ValueError(f"kernel {self.name}: loop range '{r}' is not an index param")
            if isinstance(r, int) and r < 0:
                raise ValueError(f"kernel {self.name}: negative loop range {r}")
        for role, operands in (("input", self.inputs), ("output", self.outputs)):
            for k, o in enumerate(operands):
                if o.element_type not in SCALAR_TYPES:
                    raise ValueError(f"kernel {self.name}: {role} {k} has type {o.element_type}")
                for d in o.shape:
                    if isinstance(d, str) and d not in names:
                        raise ValueError(f"kernel {self.name}: {role} {k} extent '{d}' unknown")
                if o.map is None:
                    if role == "output":
                        raise ValueError(f"kernel {self.name}: output {k} has no map")
                    continue
                m = o.map
                if m.num_dims != n or m.num_symbols not in (0, len(self.params)) \
                        or len(m.rows) != len(o.shape) \
                        or any(len(row) != n + m.num_symbols + 1 for row in m.rows):
                    raise ValueError(f"kernel {self.name}: {role} {k} map does not fit")
                if role == "output" and m.used_dims() & set(self.reduction_dims):
                    raise ValueError(f"kernel {self.name}: output {k} map uses a reduction loop")
        if len(self.yields) != len(self.outputs):
            raise ValueError(f"kernel {self.name}: {len(self.yields)} yields for "
                             f"{len(self.outputs)} outputs")
        base = len(self.inputs) + len(self.outputs)
        gathered = {k for k, o in enumerate(self.inputs) if o.map is None}
        for i, op in enumerate(self.ops):
            if op.name not in body_ops.NAMES:
                raise ValueError(f"kernel {self.name}: unknown body op {op.name}")
            if op.result_type not in SCALAR_TYPES:
                raise ValueError(f"kernel {self.name}: op {op.name} has type {op.result_type}")
            for v in op.operands:
                if not 0 <= v < base + i or v in gathered:
                    raise ValueError(f"kernel {self.name}: op {i} ({op.name}) uses value {v}")
            if op.name == "tensor.extract" and op.int_value not in gathered:
                raise ValueError(f"kernel {self.name}: tensor.extract of input {op.int_value}, "
                                 "which is not a gather input")
            if op.name == "kernel.param" and not 0 <= op.int_value < len(self.params):
                raise ValueError(f"kernel {self.name}: kernel.param {op.int_value} out of range")
            if op.name == "linalg.index" and not 0 <= op.int_value < n:
                raise ValueError(f"kernel {self.name}: linalg.index {op.int_value} out of range")
            if op.name not in body_ops.EXECUTOR_OPS:
                types = [body_ops.kernel_type(self.value_type(v)) for v in op.operands]
                try:
                    body_ops.infer(op.name, types, body_ops.kernel_type(op.result_type),
                                   op.predicate or None, op.int_value)
                except body_ops.OpTypeError as e:
                    raise ValueError(f"kernel {self.name}: op {i} ({op.name}): {e}") from None
        for v in self.yields:
            if not 0 <= v < base + len(self.ops) or v in gathered:
                raise ValueError(f"kernel {self.name}: yield of value {v}")
