"""A kernel's static parts, typed as the phases that checked them rely on.

In the kernel IR a loop range or an operand dimension is an int or a parameter name, and a
gather input has no map (`irtk/compiler/kernel.py`). A phase or code generator that has
established that a kernel is static, or an operand mapped, reads those parts through these
functions: they give what the check established, typed so, and raise ValueError where it was
not so (a bug in the caller, not in its input).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from irtk.compiler.kernel import AffineMap, Kernel, Operand


def _ints(extents: Sequence[int | str], what: str) -> tuple[int, ...]:
    numbers = tuple(e for e in extents if isinstance(e, int))
    if len(numbers) != len(extents):
        raise ValueError(f"{what} {tuple(extents)} are not all static")
    return numbers


def static_ranges(kernel: Kernel) -> tuple[int, ...]:
    """The loop ranges of a static kernel (`Kernel.is_static`)."""
    return _ints(kernel.loop_ranges, f"kernel '{kernel.name}': loop ranges")


def static_extents(kernel: Kernel, dims: Sequence[int]) -> list[int] | None:
    """The ranges of loops `dims`, or None when one of them is dynamic."""
    ranges = [kernel.loop_ranges[d] for d in dims]
    numbers = [r for r in ranges if isinstance(r, int)]
    return numbers if len(numbers) == len(ranges) else None


def static_shape(operand: Operand) -> tuple[int, ...]:
    """The shape of a static operand (`Operand.is_static`)."""
    return _ints(operand.shape, f"binding {operand.binding}: dimensions")


def operand_map(operand: Operand) -> AffineMap:
    """The map of an operand read per point (every one but a gather input)."""
    if operand.map is None:
        raise ValueError(f"binding {operand.binding} is a gather input, which has no map")
    return operand.map


def row_major_strides(shape: Sequence[int]) -> list[int]:
    """Elements between neighbours along each dimension of a dense row-major array."""
    return [math.prod(shape[r + 1:]) for r in range(len(shape))]


def linear_offset(operand: Operand, num_loops: int) -> tuple[list[int], int]:
    """A static operand's element offset as a linear form in the loop indices: the coefficient
    of each of the `num_loops` loops, and the constant (a map's symbols are left out)."""
    rows = operand_map(operand).rows
    strides = row_major_strides(static_shape(operand))
    coeffs = [sum(row[j] * st for row, st in zip(rows, strides)) for j in range(num_loops)]
    return coeffs, sum(row[-1] * st for row, st in zip(rows, strides))


__all__ = ["linear_offset", "operand_map", "row_major_strides", "static_extents", "static_ranges",
           "static_shape"]
