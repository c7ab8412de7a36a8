"""What one scalar body op computes, for the test oracles that evaluate whole kernels or
programs (the SPIR-V tests' kernel reference, the front end's TIR evaluator).

The answer is the CPU reference backend's (`hal_cpu.ops.compile_op`, the semantics
docs/cpu_kernels.md states), so an op declared in `irtk.body_ops` and implemented there is
known to every oracle without a change here. The tests of the CPU backend itself keep their own
expected values and do not use this module.

Values go in and come out in each type's compute dtype (`irtk.types.ScalarType.compute_dtype`:
bool for i1, float32 for bf16 and the small floats, ...); operands in any other numpy form are
first rounded (floats) or wrapped (integers) to their type, as storing them would.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from hal_cpu.ops import OpAttrs, OpFn, compile_op
from irtk.hal import numerics
from irtk.types import scalar_type

_IDENTITY = "identity"


def value_type(t: str, index: str = "i32") -> str:
    """The scalar type a value of MLIR type `t` has: `index` is i32 in kernels and i64 in host
    code (a VM i64 register)."""
    return index if t == "index" else t


def _host_index_cast(name: str, source: str, result: str) -> str:
    """`index_cast(ui)` with a 64-bit index is the plain integer cast between the two widths."""
    ws, wr = scalar_type(source).bits, scalar_type(result).bits
    if ws == wr:
        return _IDENTITY
    if wr < ws:
        return "arith.trunci"
    return "arith.extui" if name == "arith.index_castui" else "arith.extsi"


def _converter(t: str) -> Callable[[Any], np.ndarray]:
    """What rounds or wraps a value to type `t`, in its compute dtype."""
    st = scalar_type(t)
    dtype = st.compute_dtype
    if t != "i1" and st.numpy_dtype == dtype:    # numpy's own type: its cast is the rounding
        return lambda x: np.asarray(x).astype(dtype, copy=False)
    return lambda x: numerics.round_to(t, np.asarray(x))


@cache
def _compiled(name: str, operand_types: tuple[str, ...], result_type: str | None,
              predicate: str | None, int_value: int, float_value: float
              ) -> tuple[OpFn, list[Callable[[Any], np.ndarray]]]:
    converters = [_converter(t) for t in operand_types]
    if name in ("arith.index_cast", "arith.index_castui") and "i32" not in \
            (operand_types[0], result_type):
        name = _host_index_cast(name, operand_types[0], result_type or "")
        if name == _IDENTITY:
            return (lambda a: a), converters
    fn, _ = compile_op(OpAttrs(name, result_type, predicate, int_value, float_value),
                       list(operand_types))
    return fn, converters


def evaluate(name: str, args: list, operand_types: list[str], result_type: str | None = None,
             *, predicate: str | None = None, int_value: int = 0, float_value: float = 0.0,
             index: str = "i32") -> np.ndarray:
    """Op `name` on `args` (numpy arrays or scalars of `operand_types`, MLIR names), as the CPU
    reference computes it; the result in its type's compute dtype. `index` is the type an MLIR
    `index` value has: i32 in kernels, i64 in host code."""
    types = tuple(value_type(t, index) for t in operand_types)
    result = value_type(result_type, index) if result_type is not None else None
    fn, converters = _compiled(name, types, result, predicate or None, int(int_value),
                               float(float_value))
    with np.errstate(all="ignore"):
        return np.asarray(fn(*[convert(a) for convert, a in zip(converters, args)]))
