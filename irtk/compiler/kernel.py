"""The dispatch kernel IR: what one dispatch computes, independent of any target.

Dispatch formation turns each root `linalg.generic` (with what is fused into it) into a
`Kernel`; every code generator (SPIR-V, CPU) reads only this. A kernel is a loop nest over
`loop_ranges`; each operand is read or written at the indices its affine map gives; the body
is a list of scalar ops in SSA form.

Value numbering in the body: 0..n_in-1 are the input elements, n_in..n_in+n_out-1 the output
elements' current values, then one value per op in order (the same numbering as the CPU
executable schema).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

# Scalar types a kernel body computes in. "index" values (linalg.index) are 32-bit signed.
SCALAR_TYPES = ("i1", "i32", "f32")


@dataclass(frozen=True)
class AffineMap:
    """An affine map from loop indices to operand indices.

    `rows[r]` has num_dims + 1 integers: the coefficient of each loop index, then the constant.
    """

    num_dims: int
    rows: tuple[tuple[int, ...], ...]

    @staticmethod
    def identity(num_dims: int) -> "AffineMap":
        return AffineMap(num_dims, tuple(
            tuple(1 if j == i else 0 for j in range(num_dims + 1)) for i in range(num_dims)))

    def is_permutation_or_projection(self) -> bool:
        """Each result is one loop index (coefficient 1) or a constant 0 (a broadcast dim)."""
        for row in self.rows:
            coeffs, const = row[:-1], row[-1]
            nonzero = [c for c in coeffs if c != 0]
            if not ((len(nonzero) == 1 and nonzero[0] == 1 and const == 0)
                    or (not nonzero and const == 0)):
                return False
        return True

    def apply(self, indices: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sum(c * i for c, i in zip(row[:-1], indices)) + row[-1] for row in self.rows)


@dataclass(frozen=True)
class Operand:
    """A tensor read or written by a kernel: its binding slot, element type, shape and map."""

    binding: int
    element_type: str
    shape: tuple[int, ...]
    map: AffineMap

    @property
    def byte_size(self) -> int:
        return math.prod(self.shape) * element_byte_size(self.element_type)


@dataclass(frozen=True)
class Op:
    """One scalar op of the body, named as in MLIR (`arith.addf`, `math.exp`, `linalg.index`)."""

    name: str
    operands: tuple[int, ...]
    result_type: str
    predicate: str = ""          # arith.cmpf / arith.cmpi
    int_value: int = 0           # arith.constant (integer or i1), linalg.index (dimension)
    float_value: float = 0.0     # arith.constant (float)


@dataclass
class Kernel:
    name: str
    loop_ranges: tuple[int, ...]
    inputs: list[Operand]
    outputs: list[Operand]
    ops: list[Op] = field(default_factory=list)
    yields: list[int] = field(default_factory=list)

    @property
    def iteration_count(self) -> int:
        return math.prod(self.loop_ranges)

    @property
    def binding_count(self) -> int:
        return len(self.inputs) + len(self.outputs)

    def value_type(self, value: int) -> str:
        """The scalar type of body value `value`."""
        operands = self.inputs + self.outputs
        if value < len(operands):
            return operands[value].element_type
        return self.ops[value - len(operands)].result_type


def element_byte_size(element_type: str) -> int:
    return {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4,
            "f64": 8}[element_type]
