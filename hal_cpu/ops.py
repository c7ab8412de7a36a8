"""The op table of kernel bodies: MLIR op name -> a numpy function over one tile of values.

Values are 1-D numpy arrays (float32 for f32, int32 for i32 and index, bool for i1) of the tile's
length, or of length 1 for values that do not vary over the tile (constants); numpy broadcasting
mixes the two. Ops are compiled once when an executable is created: `compile_op` checks operand
and result types and returns a closure with the attributes (predicate, constant) bound, so running
a tile is one call per op. No op mutates its operands (values may be views of buffers).

Numerical rules where MLIR leaves the result undefined (poison / UB) — the same on every tile and
every driver run, and written down in docs/hal_cpu.md:
- f32 arithmetic is IEEE float32 (numpy's float32 loops); inf and NaN are ordinary results.
- i32 arithmetic wraps modulo 2**32.
- divsi/divui/remsi/remui by zero give 0; divsi(INT_MIN, -1) wraps to INT_MIN, remsi gives 0.
- shli/shrui by an amount >= 32 (the amount read as unsigned) give 0; shrsi gives the sign fill.
- fptosi/fptoui saturate to the target range and turn NaN into 0.
- maximumf/minimumf propagate NaN and order -0.0 < +0.0; maxnumf/minnumf ignore a NaN operand.
- math.fma rounds once in float64, then to float32.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

F32, I32, I1 = "f32", "i32", "i1"
VALUE_TYPES = (F32, I32, I1)
DTYPES: dict[str, np.dtype] = {F32: np.dtype(np.float32), I32: np.dtype(np.int32),
                               I1: np.dtype(np.bool_)}

OpFn = Callable[..., np.ndarray]

_INT_MIN, _INT_MAX, _UINT_MAX = -(2 ** 31), 2 ** 31 - 1, 2 ** 32 - 1


class OpError(Exception):
    """An op the table cannot accept; the executable loader turns it into a VerificationError."""


@dataclass(frozen=True)
class OpAttrs:
    """The attributes of one body op, as decoded from the executable."""

    name: str
    result_type: str | None  # normalized ("index" -> "i32"); None when absent
    predicate: str | None
    int_value: int
    float_value: float


def normalize_type(name: str | None) -> str | None:
    """MLIR's `index` is 32 bits wide in irtk kernels, like i32."""
    return I32 if name == "index" else name


# --- float ops -------------------------------------------------------------------------------

def _maximumf(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.maximum(a, b)
    zeros = (a == 0) & (b == 0)  # +0 + -0 is +0: the larger zero
    return np.where(zeros, a + b, r) if zeros.any() else r


def _minimumf(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.minimum(a, b)
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, -((-a) + (-b)), r) if zeros.any() else r


def _rsqrt(a: np.ndarray) -> np.ndarray:
    return np.float32(1) / np.sqrt(a)


def _round_half_away(a: np.ndarray) -> np.ndarray:
    m = np.abs(a)
    r = np.floor(m)
    r = r + (m - r >= np.float32(0.5)).astype(np.float32)
    return np.copysign(r, a)


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return (a.astype(np.float64) * b + c).astype(np.float32)


_FLOAT_UNARY: dict[str, OpFn] = {
    "arith.negf": np.negative,
    "math.absf": np.abs,
    "math.exp": np.exp,
    "math.exp2": np.exp2,
    "math.expm1": np.expm1,
    "math.log": np.log,
    "math.log2": np.log2,
    "math.log10": np.log10,
    "math.log1p": np.log1p,
    "math.sqrt": np.sqrt,
    "math.rsqrt": _rsqrt,
    "math.tanh": np.tanh,
    "math.sinh": np.sinh,
    "math.cosh": np.cosh,
    "math.sin": np.sin,
    "math.cos": np.cos,
    "math.tan": np.tan,
    "math.asin": np.arcsin,
    "math.acos": np.arccos,
    "math.atan": np.arctan,
    "math.floor": np.floor,
    "math.ceil": np.ceil,
    "math.trunc": np.trunc,
    "math.roundeven": np.rint,
    "math.round": _round_half_away,
}

_FLOAT_BINARY: dict[str, OpFn] = {
    "arith.addf": np.add,
    "arith.subf": np.subtract,
    "arith.mulf": np.multiply,
    "arith.divf": np.divide,
    "arith.remf": np.fmod,  # C fmod: the result has the sign of the dividend
    "arith.maximumf": _maximumf,
    "arith.minimumf": _minimumf,
    "arith.maxnumf": np.fmax,
    "arith.minnumf": np.fmin,
    "math.powf": np.power,
    "math.atan2": np.arctan2,
    "math.copysign": np.copysign,
}


def _always(value: bool) -> OpFn:
    def fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.full(np.broadcast_shapes(a.shape, b.shape), value)
    return fn


def _unordered(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.isnan(a) | np.isnan(b)


_CMPF: dict[str, OpFn] = {
    "false": _always(False),
    "oeq": np.equal,
    "ogt": np.greater,
    "oge": np.greater_equal,
    "olt": np.less,
    "ole": np.less_equal,
    "one": lambda a, b: (a < b) | (a > b),
    "ord": lambda a, b: ~_unordered(a, b),
    "ueq": lambda a, b: (a == b) | _unordered(a, b),
    "ugt": lambda a, b: ~(a <= b),
    "uge": lambda a, b: ~(a < b),
    "ult": lambda a, b: ~(a >= b),
    "ule": lambda a, b: ~(a > b),
    "une": np.not_equal,  # NaN != x is true: unordered or not equal
    "uno": _unordered,
    "true": _always(True),
}


# --- integer ops -----------------------------------------------------------------------------

def _u32(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32)


def _s32(a: np.ndarray) -> np.ndarray:
    return a.view(np.int32)


def _divsi(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    zero = b64 == 0
    b64 = np.where(zero, 1, b64)
    q = np.abs(a64) // np.abs(b64)
    q = np.where((a64 < 0) != (b64 < 0), -q, q)  # truncate toward zero
    return np.where(zero, 0, q).astype(np.int32)  # INT_MIN / -1 = 2**31 wraps to INT_MIN


def _remsi(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    zero = b64 == 0
    r = np.fmod(a64, np.where(zero, 1, b64))  # sign of the dividend
    return np.where(zero, 0, r).astype(np.int32)


def _divui(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    au, bu = _u32(a), _u32(b)
    zero = bu == 0
    q = au // np.where(zero, np.uint32(1), bu)
    return _s32(np.where(zero, np.uint32(0), q))


def _remui(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    au, bu = _u32(a), _u32(b)
    zero = bu == 0
    r = au % np.where(zero, np.uint32(1), bu)
    return _s32(np.where(zero, np.uint32(0), r))


def _shli(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    amount = _u32(b)
    r = np.left_shift(_u32(a), amount & np.uint32(31))
    return _s32(np.where(amount >= 32, np.uint32(0), r))


def _shrui(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    amount = _u32(b)
    r = np.right_shift(_u32(a), amount & np.uint32(31))
    return _s32(np.where(amount >= 32, np.uint32(0), r))


def _shrsi(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    amount = np.minimum(_u32(b), np.uint32(31)).astype(np.int32)  # >= 32: sign fill
    return np.right_shift(a, amount)


def _unsigned(fn: OpFn) -> OpFn:
    """An i32 op on the operands read as unsigned, its result read back as i32."""
    def op(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _s32(fn(_u32(a), _u32(b)))
    return op


def _unsigned_compare(fn: OpFn) -> OpFn:
    def op(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return fn(_u32(a), _u32(b))
    return op


_INT_BINARY: dict[str, OpFn] = {
    "arith.addi": np.add,
    "arith.subi": np.subtract,
    "arith.muli": np.multiply,
    "arith.divsi": _divsi,
    "arith.divui": _divui,
    "arith.remsi": _remsi,
    "arith.remui": _remui,
    "arith.maxsi": np.maximum,
    "arith.minsi": np.minimum,
    "arith.maxui": _unsigned(np.maximum),
    "arith.minui": _unsigned(np.minimum),
    "arith.andi": np.bitwise_and,
    "arith.ori": np.bitwise_or,
    "arith.xori": np.bitwise_xor,
    "arith.shli": _shli,
    "arith.shrsi": _shrsi,
    "arith.shrui": _shrui,
}

# i1 is arithmetic modulo 2: add and sub are xor, mul is and.
_I1_BINARY: dict[str, OpFn] = {
    "arith.addi": np.logical_xor,
    "arith.subi": np.logical_xor,
    "arith.muli": np.logical_and,
    "arith.andi": np.logical_and,
    "arith.ori": np.logical_or,
    "arith.xori": np.logical_xor,
}

_CMPI: dict[str, OpFn] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "slt": np.less,
    "sle": np.less_equal,
    "sgt": np.greater,
    "sge": np.greater_equal,
    "ult": _unsigned_compare(np.less),
    "ule": _unsigned_compare(np.less_equal),
    "ugt": _unsigned_compare(np.greater),
    "uge": _unsigned_compare(np.greater_equal),
}


def _cmpi_i1(predicate: str) -> OpFn:
    """i1 compares as a 1-bit integer: signed, true is -1; unsigned, true is 1."""
    compare = _CMPI[predicate]
    signed = predicate[0] == "s"

    def op(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if signed:
            return compare(-a.astype(np.int32), -b.astype(np.int32))
        return compare(a.astype(np.int32), b.astype(np.int32))
    return op


# --- casts -----------------------------------------------------------------------------------

def _fptosi(a: np.ndarray) -> np.ndarray:
    x = np.trunc(a.astype(np.float64))
    x = np.where(np.isnan(x), 0.0, np.clip(x, _INT_MIN, _INT_MAX))
    return x.astype(np.int32)


def _fptoui(a: np.ndarray) -> np.ndarray:
    x = np.trunc(a.astype(np.float64))
    x = np.where(np.isnan(x), 0.0, np.clip(x, 0, _UINT_MAX))
    return x.astype(np.uint32).view(np.int32)


def _sitofp_i1(a: np.ndarray) -> np.ndarray:
    return np.where(a, np.float32(-1), np.float32(0))


def _bitcast(dtype: np.dtype) -> OpFn:
    def op(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a).view(dtype)
    return op


def _identity(a: np.ndarray) -> np.ndarray:
    return a


# (op name, operand type) -> (result type, function)
_CASTS: dict[tuple[str, str], tuple[str, OpFn]] = {
    ("arith.sitofp", I32): (F32, lambda a: a.astype(np.float32)),
    ("arith.sitofp", I1): (F32, _sitofp_i1),
    ("arith.uitofp", I32): (F32, lambda a: _u32(a).astype(np.float32)),
    ("arith.uitofp", I1): (F32, lambda a: a.astype(np.float32)),
    ("arith.fptosi", F32): (I32, _fptosi),
    ("arith.fptoui", F32): (I32, _fptoui),
    ("arith.extui", I1): (I32, lambda a: a.astype(np.int32)),
    ("arith.extsi", I1): (I32, lambda a: np.negative(a.astype(np.int32))),
    ("arith.trunci", I32): (I1, lambda a: (a & 1).astype(np.bool_)),
    ("arith.bitcast", F32): (I32, _bitcast(np.dtype(np.int32))),
    ("arith.bitcast", I32): (F32, _bitcast(np.dtype(np.float32))),
    ("arith.index_cast", I32): (I32, _identity),
    ("arith.index_castui", I32): (I32, _identity),
    ("math.absi", I32): (I32, np.abs),  # abs(INT_MIN) wraps to INT_MIN
}


# --- compilation -----------------------------------------------------------------------------

def _constant(attrs: OpAttrs, types: list[str]) -> tuple[OpFn, str]:
    _arity(attrs, types, 0)
    rtype = attrs.result_type
    if rtype == F32:
        value = np.array([attrs.float_value], dtype=np.float32)
    elif rtype == I32:
        if not _INT_MIN <= attrs.int_value <= _UINT_MAX:
            raise OpError(f"int_value {attrs.int_value} does not fit in i32")
        value = np.array([attrs.int_value & _UINT_MAX], dtype=np.uint32).view(np.int32)
    elif rtype == I1:
        if attrs.int_value not in (0, 1, -1):
            raise OpError(f"int_value {attrs.int_value} is not an i1 (0, 1 or -1)")
        value = np.array([attrs.int_value != 0], dtype=np.bool_)
    else:
        raise OpError(f"result_type {rtype!r} is not a constant type (f32, i32, i1, index)")
    value.flags.writeable = False
    return (lambda: value), rtype


def _float_unary(attrs: OpAttrs, types: list[str]) -> tuple[OpFn, str]:
    _arity(attrs, types, 1)
    _expect(attrs, types, (F32,))
    return _FLOAT_UNARY[attrs.name], _result(attrs, F32)


def _float_binary(attrs: OpAttrs, types: list[str]) -> tuple[OpFn, str]:
    _arity(attrs, types, 2)
    _expect(attrs, types, (F32, F32))
    return _FLOAT_BINARY[attrs.name], _result(attrs, F32)


def _fma_op(attrs: OpAttrs, types: list[str]) -> tuple[OpFn, str]:
    _arity(attrs, types, 3)
    _expect(attrs, types, (F32, F32, F32))
    return _fma, _result(attrs, F32)


def _int_binary(attrs: OpAttrs, types: list[str]) -> tuple[OpFn, str]:
    _arity(attrs, types, 2)
    if types == [I1, I1] and attrs.name in _I1_BINARY:
        return _I1_BINARY[attrs.name], _result(attrs, I1)
    _expect(attrs, types, (I32, I32))
    return _INT_BINARY[attrs.name], _result(attrs, I32)


def _cmpf(attrs: OpAttrs, types: list[str]) -> tuple[OpFn, str]:
    _arity(attrs, types, 2)
    _expect(attrs, types, (F32, F32))
    fn = _CMPF.get(attrs.predicate or "")
    if fn is None:
        raise OpError(f"predicate {attrs.predicate!r} is not one of {', '.join(_CMPF)}")
    return fn, _result(attrs, I1)


def _cmpi(attrs: OpAttrs, types: list[str]) -> tuple[OpFn, str]:
    _arity(attrs, types, 2)
    predicate = attrs.predicate or ""
    if predicate not in _CMPI:
        raise OpError(f"predicate {attrs.predicate!r} is not one of {', '.join(_CMPI)}")
    if types == [I1, I1]:
        return _cmpi_i1(predicate), _result(attrs, I1)
    _expect(attrs, types, (I32, I32))
    return _CMPI[predicate], _result(attrs, I1)


def _select(attrs: OpAttrs, types: list[str]) -> tuple[OpFn, str]:
    _arity(attrs, types, 3)
    if types[0] != I1 or types[1] != types[2]:
        raise OpError(f"operand types {types} are not (i1, T, T)")
    return np.where, _result(attrs, types[1])


def _cast(attrs: OpAttrs, types: list[str]) -> tuple[OpFn, str]:
    _arity(attrs, types, 1)
    entry = _CASTS.get((attrs.name, types[0]))
    if entry is None:
        accepted = [t for (n, t) in _CASTS if n == attrs.name]
        raise OpError(f"operand type {types[0]} is not accepted (expected {' or '.join(accepted)})")
    rtype, fn = entry
    return fn, _result(attrs, rtype)


def _arity(attrs: OpAttrs, types: list[str], count: int) -> None:
    if len(types) != count:
        raise OpError(f"has {len(types)} operands, expected {count}")


def _expect(attrs: OpAttrs, types: list[str], expected: tuple[str, ...]) -> None:
    if tuple(types) != expected:
        raise OpError(f"operand types ({', '.join(types)}) are not ({', '.join(expected)})")


def _result(attrs: OpAttrs, inferred: str) -> str:
    if attrs.result_type is not None and attrs.result_type != inferred:
        raise OpError(f"result_type {attrs.result_type!r} should be {inferred!r}")
    return inferred


_COMPILERS: dict[str, Callable[[OpAttrs, list[str]], tuple[OpFn, str]]] = {
    "arith.constant": _constant,
    "arith.cmpf": _cmpf,
    "arith.cmpi": _cmpi,
    "arith.select": _select,
    "math.fma": _fma_op,
    **{name: _float_unary for name in _FLOAT_UNARY},
    **{name: _float_binary for name in _FLOAT_BINARY},
    **{name: _int_binary for name in _INT_BINARY},
    **{name: _cast for name, _ in _CASTS},
}

SUPPORTED_OPS: tuple[str, ...] = tuple(sorted([*_COMPILERS, "linalg.index"]))


def compile_op(attrs: OpAttrs, operand_types: list[str]) -> tuple[OpFn, str]:
    """The function that evaluates `attrs` over a tile, and its result type; raises OpError."""
    compiler = _COMPILERS.get(attrs.name)
    if compiler is None:
        raise OpError(f"unsupported op (supported: {', '.join(SUPPORTED_OPS)})")
    return compiler(attrs, operand_types)
