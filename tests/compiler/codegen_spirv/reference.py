"""A numpy reference for kernels: float ops in float64, integer ops exactly in int32.

It states the semantics the SPIR-V code must reproduce, including the edge cases that MLIR
leaves undefined but irtk defines (division by zero, oversized shifts, saturating
float-to-int conversion, NaN rules of min/max).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from irtk.compiler.kernel import Kernel, Op

INT_MIN = np.int32(-(1 << 31))
_NP = {"f32": np.float32, "i32": np.int32, "i1": np.bool_}


def _u32(a: np.ndarray) -> np.ndarray:
    return a.astype(np.int32).view(np.uint32)


def _i32(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a if a.dtype == np.int32 else _wrap(a)


def _wrap(a: np.ndarray) -> np.ndarray:
    """int64 -> int32 modulo 2**32."""
    return (np.asarray(a, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _div(a: np.ndarray, b: np.ndarray, signed: bool, rem: bool) -> np.ndarray:
    if signed:
        a64, b64 = a.astype(np.int64), b.astype(np.int64)
    else:
        a64, b64 = _u32(a).astype(np.int64), _u32(b).astype(np.int64)
    safe = np.where(b64 == 0, 1, b64)
    q = np.sign(a64) * np.sign(safe) * (np.abs(a64) // np.abs(safe))  # rounds toward zero
    r = a64 - safe * q
    out = r if rem else q
    return _wrap(np.where(b64 == 0, 0, out))


def _shift(a: np.ndarray, b: np.ndarray, kind: str) -> np.ndarray:
    amount = _u32(b).astype(np.int64)
    big = amount >= 32
    small = np.where(big, 0, amount)
    if kind == "shl":
        return _wrap(np.where(big, 0, a.astype(np.int64) << small))
    if kind == "shrsi":
        return (a.astype(np.int64) >> np.where(big, 31, amount)).astype(np.int32)
    return _wrap(np.where(big, 0, _u32(a).astype(np.int64) >> small))


def _as_int(a: np.ndarray, signed: bool) -> np.ndarray:
    if a.dtype == np.bool_:
        return np.where(a, -1 if signed else 1, 0).astype(np.int64)
    return a.astype(np.int64) if signed else _u32(a).astype(np.int64)


def _cmpi(pred: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    signed = not pred.startswith("u")
    x, y = _as_int(a, signed), _as_int(b, signed)
    rel = pred if pred in ("eq", "ne") else pred[1:]
    return {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y,
            "ge": x >= y}[rel]


def _cmpf(pred: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    nan = np.isnan(a) | np.isnan(b)
    if pred in ("true", "false"):
        return np.full(np.broadcast(a, b).shape, pred == "true")
    if pred == "ord":
        return ~nan
    if pred == "uno":
        return nan
    rel = {"eq": a == b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b,
           "ne": (a != b) & ~nan}[pred[1:]]
    return rel | nan if pred[0] == "u" else rel & ~nan


def _fptosi(x: np.ndarray) -> np.ndarray:
    t = np.trunc(np.where(np.isnan(x), 0, x))
    return np.clip(t, -(2.0 ** 31), 2.0 ** 31 - 1).astype(np.int64).astype(np.int32)


def _fptoui(x: np.ndarray) -> np.ndarray:
    t = np.trunc(np.where(np.isnan(x), 0, x))
    return _wrap(np.clip(t, 0, 2.0 ** 32 - 1).astype(np.int64))


def _bitcast(x: np.ndarray, to: str) -> np.ndarray:
    if to == "i32" and x.dtype != np.int32:
        return x.astype(np.float32).view(np.int32)
    if to == "f32" and x.dtype == np.int32:
        return x.view(np.float32).astype(np.float64)
    return x


def _int_or_bool(int_fn: Callable, bool_fn: Callable) -> Callable:
    return lambda a, b: bool_fn(a, b) if a.dtype == np.bool_ else int_fn(a, b)


_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
    "arith.divf": np.divide, "arith.remf": np.fmod,
    "arith.maximumf": np.maximum, "arith.minimumf": np.minimum,
    "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin,
    "arith.addi": _int_or_bool(lambda a, b: _wrap(a.astype(np.int64) + b), np.not_equal),
    "arith.subi": _int_or_bool(lambda a, b: _wrap(a.astype(np.int64) - b), np.not_equal),
    "arith.muli": _int_or_bool(lambda a, b: _wrap(a.astype(np.int64) * b), np.logical_and),
    "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor,
    "arith.divsi": lambda a, b: _div(a, b, True, False),
    "arith.divui": lambda a, b: _div(a, b, False, False),
    "arith.remsi": lambda a, b: _div(a, b, True, True),
    "arith.remui": lambda a, b: _div(a, b, False, True),
    "arith.maxsi": lambda a, b: np.where(_cmpi("sgt", a, b), a, b),
    "arith.minsi": lambda a, b: np.where(_cmpi("slt", a, b), a, b),
    "arith.maxui": lambda a, b: np.where(_cmpi("ugt", a, b), a, b),
    "arith.minui": lambda a, b: np.where(_cmpi("ult", a, b), a, b),
    "arith.shli": lambda a, b: a & ~b if a.dtype == np.bool_ else _shift(a, b, "shl"),
    "arith.shrui": lambda a, b: a & ~b if a.dtype == np.bool_ else _shift(a, b, "shrui"),
    "arith.shrsi": lambda a, b: a if a.dtype == np.bool_ else _shift(a, b, "shrsi"),
    "math.powf": np.power, "math.copysign": np.copysign,
}

_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "arith.negf": np.negative, "math.exp": np.exp, "math.exp2": np.exp2, "math.log": np.log,
    "math.log2": np.log2, "math.tanh": np.tanh, "math.sqrt": np.sqrt,
    "math.rsqrt": lambda x: 1.0 / np.sqrt(x), "math.absf": np.abs, "math.absi": np.abs,
    "math.floor": np.floor, "math.ceil": np.ceil, "math.trunc": np.trunc,
    "math.roundeven": np.rint,
    "arith.sitofp": lambda x: (np.where(x, -1.0, 0.0) if x.dtype == np.bool_
                               else x.astype(np.float64)),
    "arith.uitofp": lambda x: (np.where(x, 1.0, 0.0) if x.dtype == np.bool_
                               else _u32(x).astype(np.float64)),
    "arith.fptosi": _fptosi, "arith.fptoui": _fptoui,
    "arith.extui": lambda x: x.astype(np.int32), "arith.extsi": lambda x: -x.astype(np.int32),
    "arith.trunci": lambda x: (x & 1) != 0,
    "arith.index_cast": lambda x: x, "arith.index_castui": lambda x: x,
}


def evaluate_op(op: Op, args: list[np.ndarray], loops: list[np.ndarray], size: int) -> np.ndarray:
    name = op.name
    with np.errstate(all="ignore"):
        if name == "arith.constant":
            value = op.float_value if op.result_type == "f32" else op.int_value
            if op.result_type == "i32":
                return _wrap(np.full(size, value, dtype=np.int64))
            return np.full(size, value, dtype=np.float64 if op.result_type == "f32" else np.bool_)
        if name == "linalg.index":
            return loops[op.int_value].astype(np.int32)
        if name == "arith.cmpf":
            return _cmpf(op.predicate, *args)
        if name == "arith.cmpi":
            return _cmpi(op.predicate, *args)
        if name == "arith.select":
            return np.where(*args)
        if name == "arith.bitcast":
            return _bitcast(args[0], op.result_type)
        if name == "math.fma":
            return args[0] * args[1] + args[2]
        if name in _BINARY:
            out = _BINARY[name](*args)
        else:
            out = _UNARY[name](args[0])
        if op.result_type == "i32":
            return _i32(out)
        return out


def run_reference(kernel: Kernel, inputs: list[np.ndarray],
                  outputs: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """The kernel's outputs for `inputs` (and the outputs' initial contents, if it reads them)."""
    size = kernel.iteration_count
    loops = [g.reshape(-1) for g in np.indices(kernel.loop_ranges)] if kernel.loop_ranges else []
    operands = kernel.inputs + kernel.outputs
    outputs = outputs or [np.zeros(o.shape, _NP[o.element_type]) for o in kernel.outputs]
    arrays = list(inputs) + list(outputs)

    def element_indices(operand_index: int) -> tuple[np.ndarray, ...]:
        rows = operands[operand_index].map.rows
        return tuple(sum((row[j] * loops[j] for j in range(len(loops))),
                         np.zeros(size, np.int64)) + row[-1] for row in rows)

    values: list[np.ndarray] = []
    for i, array in enumerate(arrays):
        v = np.asarray(array)[element_indices(i)] if operands[i].shape else \
            np.full(size, np.asarray(array).reshape(()))
        values.append(v.astype(np.float64) if v.dtype == np.float32 else v)
    for op in kernel.ops:
        values.append(np.broadcast_to(evaluate_op(op, [values[v] for v in op.operands], loops,
                                                  size), (size,)))
    results = []
    for o, v in enumerate(kernel.yields):
        out = np.array(outputs[o], dtype=np.float64 if kernel.outputs[o].element_type == "f32"
                       else _NP[kernel.outputs[o].element_type])
        index = element_indices(len(kernel.inputs) + o)
        if kernel.outputs[o].shape:
            out[index] = values[v]
        else:
            out[()] = values[v][-1] if size else out[()]
        results.append(out)
    return results
