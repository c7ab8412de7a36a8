"""`cf.assert` in a generic body: proved at compile time, or left to a later check.

torch-mlir writes one into every BatchNorm's body (on the model's running variance, or on its
epsilon) and into every Embedding's (on its indices). A body assert that provably holds can
never fire, so dropping it loses nothing. This module proves the ones whose condition is made
of scalar constants, and makes one that is always false a located error; the importer records
the rest on their generic, and consteval.py checks those whose generic reads only constants at
compile time, and body_asserts.py makes the others checks that fail the call. (Host-level
asserts are runtime checks: importer.py.)
"""
from __future__ import annotations

import math

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import (Float16Type, Float32Type, Float64Type, FloatAttr, IntegerAttr,
                                   IntegerType)
from xdsl.ir import Operation, SSAValue

from irtk.compiler.frontend.body import Unsupported

_CMPF = arith.CMPF_COMPARISON_OPERATIONS
_CMPI = arith.CMPI_COMPARISON_OPERATIONS
# Conversions that keep a constant's value (the float ones round: `_rounded`).
_CASTS = ("arith.sitofp", "arith.extsi", "arith.index_cast")
_DEPTH = 32   # how far back through constant ops a condition is followed


def check_body_assert(op: Operation) -> str | None:
    """None when `op` (a cf.assert in a generic body) provably holds; its message when the
    condition depends on values (constant evaluation may still prove it); Unsupported when it
    always fails."""
    message = op.attributes.get("msg") or op.properties.get("msg")
    text = str(getattr(message, "data", ""))
    value = constant_value(op.operands[0], _DEPTH)
    if value is None:
        return text
    if not value:
        raise Unsupported(f"cf.assert (\"{text}\") in a generic body always fails", op)
    return None


def constant_value(v: SSAValue, depth: int) -> float | int | bool | None:
    """The value of `v` when it is computed from constants only, else None."""
    owner = v.owner
    if depth <= 0 or not isinstance(owner, Operation):
        return None
    if isinstance(owner, arith.ConstantOp):
        attr = owner.value
        if isinstance(attr, FloatAttr):   # as its type holds it (the text may be finer)
            return _rounded(float(attr.value.data), attr.type)
        if isinstance(attr, IntegerAttr):
            return int(attr.value.data)
        return None
    found = [constant_value(a, depth - 1) for a in owner.operands]
    args = [a for a in found if a is not None]
    if len(args) != len(found):
        return None
    if owner.name in ("arith.extf", "arith.truncf"):
        return _rounded(float(args[0]), owner.results[0].type)
    if owner.name in _CASTS:
        return args[0]
    if isinstance(owner, arith.CmpfOp):
        return _cmpf(_CMPF[owner.predicate.value.data], float(args[0]), float(args[1]))
    if isinstance(owner, arith.CmpiOp):
        width = getattr(owner.operands[0].type, "width", None)
        bits = width.data if width is not None else 64
        return _cmpi(_CMPI[owner.predicate.value.data], int(args[0]), int(args[1]), bits)
    result_type = owner.results[0].type
    if owner.name in ("arith.andi", "arith.ori", "arith.xori") and \
            isinstance(result_type, IntegerType) and result_type.width.data == 1:
        a, b = bool(args[0]), bool(args[1])
        return {"arith.andi": a and b, "arith.ori": a or b, "arith.xori": a != b}[owner.name]
    return None


def _rounded(value: float, type_: object) -> float | None:
    """`value` rounded to a float type numpy has (f16, f32, f64); None for another type."""
    if isinstance(type_, Float64Type):
        return value
    if isinstance(type_, Float32Type):
        return float(np.float32(value))
    if isinstance(type_, Float16Type):
        return float(np.float16(value))
    return None


def _cmpf(predicate: str, a: float, b: float) -> bool:
    unordered = math.isnan(a) or math.isnan(b)
    if predicate in ("false", "true"):
        return predicate == "true"
    if predicate == "ord":
        return not unordered
    if predicate == "uno":
        return unordered
    compare = {"eq": a == b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b,
               "ne": a != b}[predicate[1:]]
    return (unordered or compare) if predicate[0] == "u" else (not unordered and compare)


def _cmpi(predicate: str, a: int, b: int, bits: int) -> bool:
    if predicate in ("ult", "ule", "ugt", "uge"):
        a, b = a & ((1 << bits) - 1), b & ((1 << bits) - 1)
    return {"eq": a == b, "ne": a != b, "slt": a < b, "sle": a <= b, "sgt": a > b,
            "sge": a >= b, "ult": a < b, "ule": a <= b, "ugt": a > b, "uge": a >= b}[predicate]
