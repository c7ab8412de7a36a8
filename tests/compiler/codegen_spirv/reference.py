"""A numpy reference for kernels: what the SPIR-V code must compute, for everything the kernel
IR contract allows (reductions, accumulators, gathers, params, dynamic extents, every type).

Each body op computes what the CPU reference backend computes (`tests/op_semantics.py`), in its
type's compute dtype, so every type rounds or wraps after every op as the kernel IR says. Around
the ops this module walks the kernel on its own, independently of hal_cpu's executor and its
strategies: reduction loops run sequentially in Python, in lexicographic order, over vectors of
parallel points. Arrays in and out are in the tests' form: integers as int64 (sign-extended),
i1 as bool, floats as float64. The storage helpers turn them into the bytes of each type's dense
layout and back (`irtk.hal.numerics`).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from irtk.compiler.kernel import Kernel
from irtk.hal import numerics
from irtk.types import FLOAT_TYPES, scalar_type
from tests.op_semantics import evaluate

FLOATS = FLOAT_TYPES


# --- values ------------------------------------------------------------------------------------

def tests_form(kind: str, values: np.ndarray) -> np.ndarray:
    """Values of type `kind` (any numpy form) as the tests hold them: float64, int64 or bool."""
    values = np.asarray(values)
    if kind == "i1":
        return values.astype(bool)
    with np.errstate(invalid="ignore"):     # signalling NaNs stay NaNs
        return values.astype(np.float64 if scalar_type(kind).is_float else np.int64)


def as_type(kind: str, values: np.ndarray) -> np.ndarray:
    """Values rounded or wrapped to `kind`, in its compute dtype (as storing them would)."""
    values = np.asarray(values)
    if scalar_type(kind).is_int and values.dtype.kind == "f":
        values = values.astype(np.int64)
    return numerics.round_to(kind, values)


def encode(kind: str, x: np.ndarray) -> np.ndarray:
    """Bits of `x` rounded to the float type `kind` (int64 array)."""
    return numerics.to_bits(kind, np.asarray(x, dtype=np.float64)).astype(np.int64)


def decode(kind: str, bits: np.ndarray) -> np.ndarray:
    """The float64 values of `kind`'s bit patterns."""
    mask = (1 << scalar_type(kind).bits) - 1
    return tests_form(kind, numerics.from_bits(kind, np.asarray(bits, dtype=np.int64) & mask))


def round_float(kind: str, x: np.ndarray) -> np.ndarray:
    """`x` rounded to the float type `kind`, as float64."""
    return numerics.round_to(kind, np.asarray(x, dtype=np.float64)).astype(np.float64)


# --- kernels -----------------------------------------------------------------------------------

def _extent(value, params: dict[str, int]) -> int:
    return value if isinstance(value, int) else int(params[value])


def run_reference(kernel: Kernel, inputs: list[np.ndarray],
                  outputs: list[np.ndarray] | None = None,
                  params: list[int | float] | None = None) -> list[np.ndarray]:
    """The outputs after the kernel runs on `inputs`, with `outputs` as their initial contents
    (zeros if not given) and `params` as the push constants (values, in order)."""
    params = list(params or [])
    named = {p.name: params[k] for k, p in enumerate(kernel.params)}
    ranges = [_extent(r, named) for r in kernel.loop_ranges]
    par, red = kernel.parallel_dims, kernel.reduction_dims
    par_ranges = [ranges[d] for d in par]
    size = math.prod(par_ranges)
    grids = np.indices(par_ranges).reshape(len(par), -1) if par else np.zeros((0, 1), np.int64)
    operands = kernel.inputs + kernel.outputs
    shapes = [tuple(_extent(d, named) for d in o.shape) for o in operands]
    arrays = [as_type(o.element_type, a) for a, o in zip(inputs, kernel.inputs)]
    outs = [(as_type(o.element_type, outputs[k]) if outputs is not None
             else np.zeros(shapes[len(kernel.inputs) + k],
                           scalar_type(o.element_type).compute_dtype)).copy()
            for k, o in enumerate(kernel.outputs)]
    symbols = [int(v) if kernel.params[k].type not in FLOATS else 0
               for k, v in enumerate(params)]

    def index(operand, loops: list) -> tuple:
        rows = operand.map.rows
        n = len(loops)
        return tuple(sum((row[j] * loops[j] for j in range(n)), np.zeros(size, np.int64))
                     + sum(row[n + s] * symbols[s] for s in range(operand.map.num_symbols))
                     + row[-1] for row in rows)

    base_loops: list = [None] * len(ranges)
    for i, d in enumerate(par):
        base_loops[d] = grids[i]
    out_index = [index(o, [x if x is not None else 0 for x in base_loops])
                 for o in kernel.outputs]
    current = [o[ix] if o.ndim else np.full(size, o[()]) for o, ix in zip(outs, out_index)]
    for point in itertools.product(*[range(ranges[d]) for d in red]):
        loops = list(base_loops)
        for d, v in zip(red, point):
            loops[d] = np.full(size, v, np.int64)
        values: list = []
        types: list[str] = []
        for i, o in enumerate(kernel.inputs):
            values.append(None if o.map is None else
                          (arrays[i][index(o, loops)] if arrays[i].ndim
                           else np.full(size, arrays[i][()])))
            types.append(o.element_type)
        values += current
        types += [o.element_type for o in kernel.outputs]
        for op in kernel.ops:
            if op.name == "kernel.param":
                value = as_type(kernel.params[op.int_value].type,
                                np.full(size, params[op.int_value]))
            elif op.name == "linalg.index":
                value = as_type("index", loops[op.int_value])
            elif op.name == "tensor.extract":
                src = arrays[op.int_value]
                dims = shapes[op.int_value]
                idx = tuple(np.clip(np.asarray(values[v], dtype=np.int64), 0, n - 1)
                            for v, n in zip(op.operands, dims))
                value = src[idx] if src.ndim else np.full(size, src[()])
            else:
                value = evaluate(op.name, [values[v] for v in op.operands],
                                 [types[v] for v in op.operands], op.result_type,
                                 predicate=op.predicate, int_value=op.int_value,
                                 float_value=op.float_value)
            values.append(np.broadcast_to(value, (size,)).copy())
            types.append(op.result_type)
        current = [values[v] for v in kernel.yields]
    for o, ix, cur in zip(outs, out_index, current):
        if o.ndim:
            o[ix] = cur
        elif size:
            o[()] = cur[-1]
    return [tests_form(o.element_type, out) for o, out in zip(kernel.outputs, outs)]


# --- storage -----------------------------------------------------------------------------------

def to_storage(array: np.ndarray, kind: str) -> bytes:
    """The dense bytes of `array` as a tensor of `kind`, padded to whole 32-bit words."""
    data = numerics.encode(kind, as_type(kind, np.asarray(array).reshape(-1)))
    return data + bytes(-len(data) % 4)


def from_storage(data: bytes, kind: str, shape: tuple[int, ...]) -> np.ndarray:
    """The inverse of `to_storage`, in the tests' form."""
    return tests_form(kind, numerics.decode(kind, data, math.prod(shape))).reshape(shape)
