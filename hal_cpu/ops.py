"""The op table of the kernel executor: MLIR scalar op -> numpy function, for every scalar type.

`compile_op` is called once per body op at load time; it checks the operand and result types
and returns a closure with the attributes (predicate, constant, types) bound, so running a block
is one call per op. Values are numpy arrays in each type's compute dtype
(`irtk.types.ScalarType.compute_dtype`): bool for i1, int8 (sign-extended) for i4/i2, float32 for bf16
and the f8/f4 types. Every op returns values of its result type: integers wrap to their width,
and bf16/f8/f4 results are rounded to the type after every op, as `arith.truncf` would. No op
mutates its operands (values may be views of buffers).

Rules where MLIR leaves the result undefined are the SPIR-V generator's, written down in
docs/cpu_kernels.md: division and remainder by zero give 0, signed MIN / -1 wraps to MIN (rem 0),
shifts by >= the width give 0 (shrsi: the sign fill), fptosi/fptoui saturate and take NaN to 0.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from irtk import types
from irtk.body_ops import EXECUTOR_OPS, Backend, OpTypeError, infer
from irtk.hal import numerics

F32, I32, I1 = "f32", "i32", "i1"
INT_TYPES = types.INT_TYPES
SUB_BYTE_INTS = tuple(t for t in INT_TYPES if types.SCALAR_TYPES[t].packed)
FLOAT_TYPES = types.FLOAT_TYPES
VALUE_TYPES = INT_TYPES + FLOAT_TYPES
# Floats numpy computes in natively (the others are rounded to their type after every op).
NATIVE_FLOATS = tuple(t for t in FLOAT_TYPES if not types.SCALAR_TYPES[t].emulated_float)
_WIDTH = {t: types.SCALAR_TYPES[t].bits for t in VALUE_TYPES}

OpFn = Callable[..., np.ndarray]


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


def dtype(t: str) -> np.dtype:
    return types.scalar_type(t).compute_dtype


# --- helpers ---------------------------------------------------------------------------------

def _finish(t: str) -> Callable[[np.ndarray], np.ndarray]:
    """What makes a raw numpy result a value of `t`."""
    d = dtype(t)
    if t in NATIVE_FLOATS:
        return lambda r: r if r.dtype == d else r.astype(d)
    return lambda r: numerics.round_to(t, r)


def _float(t: str, fn: OpFn) -> OpFn:
    finish = _finish(t)
    return lambda *a: finish(fn(*a))


def as_unsigned(t: str, x: np.ndarray) -> np.ndarray:
    """The bits of integer values read as unsigned (a uint dtype)."""
    if t == "i1":
        return x.astype(np.uint8)
    if t in SUB_BYTE_INTS:
        return x.astype(np.uint8) & np.uint8((1 << _WIDTH[t]) - 1)
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def from_unsigned(t: str, u: np.ndarray) -> np.ndarray:
    """Unsigned bits back to `t`'s values."""
    if t in ("i1", *SUB_BYTE_INTS):
        return numerics.wrap_int(t, u.astype(np.int64))
    d = dtype(t)
    return u.astype(np.dtype(f"u{d.itemsize}"), copy=False).view(d)


def _int_range(t: str) -> tuple[int, int]:
    w = _WIDTH[t]
    return -(1 << (w - 1)), (1 << (w - 1)) - 1


# --- float ops -------------------------------------------------------------------------------

def _maximumf(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.maximum(a, b)
    zeros = (a == 0) & (b == 0)  # +0 and -0: the larger zero is +0
    return np.where(zeros, a + b, r) if zeros.any() else r


def _minimumf(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.minimum(a, b)
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, -((-a) + (-b)), r) if zeros.any() else r


def _maxnumf(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.fmax(a, b)            # the number wins over NaN; numpy leaves the zeros' order open
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, a + b, r) if zeros.any() else r


def _minnumf(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.fmin(a, b)
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, -((-a) + (-b)), r) if zeros.any() else r


def _rsqrt(a: np.ndarray) -> np.ndarray:
    return a.dtype.type(1) / np.sqrt(a)


def _round_half_away(a: np.ndarray) -> np.ndarray:
    m = np.abs(a)
    r = np.floor(m)
    r = r + (m - r >= a.dtype.type(0.5)).astype(a.dtype)
    return np.copysign(r, a)


_ERF = np.frompyfunc(math.erf, 1, 1)


def _erf(a: np.ndarray) -> np.ndarray:
    return np.asarray(_ERF(a.astype(np.float64)), dtype=np.float64)


def _wide(fn: OpFn) -> OpFn:
    """Evaluate in float64 (one rounding to the result type afterwards)."""
    return lambda *a: fn(*[x.astype(np.float64) for x in a])


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c rounded once: narrower floats through float64 (their product is exact
    there); float64 through Dekker's exact product and Knuth's exact sum, since numpy has no
    fused multiply-add (non-finite and zero results take the plain a * b + c)."""
    if a.dtype != np.float64:
        return a.astype(np.float64) * b + c
    with np.errstate(all="ignore"):
        p = a * b

        def split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            t = x * 134217729.0
            hi = t - (t - x)
            return hi, x - hi
        # Scale an operand above 2**900 so splitting cannot overflow (the product stays).
        big_a, big_b = np.abs(a) >= 2.0 ** 900, np.abs(b) >= 2.0 ** 900
        a_s = np.where(big_a, a * 2.0 ** -450, np.where(big_b, a * 2.0 ** 450, a))
        b_s = np.where(big_a, b * 2.0 ** 450, np.where(big_b, b * 2.0 ** -450, b))
        ah, al = split(a_s)
        bh, bl = split(b_s)
        pe = ((ah * bh - p) + ah * bl + al * bh) + al * bl
        s = p + c
        bb = s - p
        t = (p - (s - bb)) + (c - bb)
        result = s + (t + pe)
        plain = a * b + c
        usable = np.isfinite(result) & np.isfinite(pe) & (result != 0)
        return np.where(usable, result, plain)


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
    "math.sin": np.sin,
    "math.cos": np.cos,
    "math.tan": np.tan,
    "math.atan": np.arctan,
    "math.erf": _erf,
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
    "arith.maxnumf": _maxnumf,
    "arith.minnumf": _minnumf,
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

def _wrapping(t: str, fn: OpFn) -> OpFn:
    """An op numpy computes modulo 2**8k in the compute dtype; i4/i2 wrap again to their
    width."""
    if t in SUB_BYTE_INTS:
        return lambda a, b: numerics.wrap_int(t, fn(a, b))
    return fn


def _safe_divisor(t: str, a: np.ndarray, b: np.ndarray, signed: bool
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(divisor with 1 where dividing is undefined, where b == 0)."""
    zero = b == 0
    unsafe = zero
    if signed:
        unsafe = zero | ((a == _int_range(t)[0]) & (b == -1))
    return np.where(unsafe, b.dtype.type(1), b), zero


def _signed_division(t: str, kind: str) -> OpFn:
    def op(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        d, zero = _safe_divisor(t, a, b, True)
        floor = a // d
        rem = a - floor * d                    # has the sign of d
        inexact = rem != 0
        if kind == "floordiv":
            r = floor
        elif kind == "ceildiv":
            r = floor + inexact.astype(a.dtype)
        else:
            trunc = floor + (inexact & ((a < 0) != (d < 0))).astype(a.dtype)
            r = trunc if kind == "div" else a - trunc * d
        return numerics.wrap_int(t, np.where(zero, a.dtype.type(0), r))
    return op


def _unsigned_division(t: str, kind: str) -> OpFn:
    def op(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ua, ub = as_unsigned(t, a), as_unsigned(t, b)
        d, zero = _safe_divisor(t, ua, ub, False)
        if kind == "rem":
            r = ua % d
        else:
            r = ua // d
            if kind == "ceildiv":
                r = r + (ua % d != 0).astype(r.dtype)
        return from_unsigned(t, np.where(zero, ua.dtype.type(0), r))
    return op


def _shift(t: str, kind: str) -> OpFn:
    w = _WIDTH[t]

    def op(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        amount = as_unsigned(t, b)
        big = amount >= w
        amt = np.where(big, 0, amount).astype(np.uint8)
        if kind == "shrsi":
            s = a.astype(np.int8) if t == "i1" else a
            r = np.right_shift(s, np.where(big, w - 1, amt).astype(s.dtype))
            return (r != 0) if t == "i1" else r
        u = as_unsigned(t, a)
        r = np.left_shift(u, amt.astype(u.dtype)) if kind == "shli" else \
            np.right_shift(u, amt.astype(u.dtype))
        return from_unsigned(t, np.where(big, u.dtype.type(0), r))
    return op


def _unsigned_minmax(t: str, fn: OpFn) -> OpFn:
    return lambda a, b: from_unsigned(t, fn(as_unsigned(t, a), as_unsigned(t, b)))


def _popcount(u: np.ndarray) -> np.ndarray:
    return np.bitwise_count(u).astype(np.int64)


def _ctlz(t: str) -> OpFn:
    w = _WIDTH[t]

    def op(a: np.ndarray) -> np.ndarray:
        u = as_unsigned(t, a).astype(np.uint64)
        length = np.zeros(u.shape, dtype=np.int64)
        for bit in range(w):                       # bit length = index of the highest set bit
            length = np.where((u >> np.uint64(bit)) & np.uint64(1), bit + 1, length)
        return numerics.wrap_int(t, w - length)
    return op


def _cttz(t: str) -> OpFn:
    w = _WIDTH[t]

    def op(a: np.ndarray) -> np.ndarray:
        u = as_unsigned(t, a).astype(np.uint64)
        zero = u == 0
        low = (~u) & (u - np.uint64(1))            # the trailing zeros as ones
        return numerics.wrap_int(t, np.where(zero, w, _popcount(low)))
    return op


def _ctpop(t: str) -> OpFn:
    return lambda a: numerics.wrap_int(t, _popcount(as_unsigned(t, a)))


def _absi(t: str) -> OpFn:
    if t == "i1":
        return lambda a: a
    return lambda a: numerics.wrap_int(t, np.abs(a.astype(np.int64)) if t in SUB_BYTE_INTS
                                       else np.abs(a))


def _ipowi(t: str) -> OpFn:
    """Wrapping integer power by squaring; a negative exponent gives 1/a**-b truncated
    (1 for a == 1, ±1 for a == -1, else 0)."""
    w = _WIDTH[t]

    def op(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(a, b)
        if t == "i1":
            return a | ~b   # a**0 = 1; true(-1)**b = ±1 -> true; false**b>0 = 0
        base = a.astype(np.int64)
        e = as_unsigned(t, b).astype(np.uint64)
        result = np.ones(a.shape, dtype=np.int64)
        for _ in range(w):
            odd = (e & np.uint64(1)).astype(np.bool_)
            result = np.where(odd, result * base, result)
            base = base * base
            e = e >> np.uint64(1)
        negative = b < 0
        neg_result = np.where(a == 1, 1, np.where(a == -1, np.where(b & 1, -1, 1), 0))
        return numerics.wrap_int(t, np.where(negative, neg_result, result))
    return op


_CMPI: dict[str, OpFn] = {
    "eq": np.equal, "ne": np.not_equal,
    "slt": np.less, "sle": np.less_equal, "sgt": np.greater, "sge": np.greater_equal,
    "ult": np.less, "ule": np.less_equal, "ugt": np.greater, "uge": np.greater_equal,
}


def _cmpi(t: str, predicate: str) -> OpFn:
    compare = _CMPI[predicate]
    if t == "i1":  # a 1-bit integer: signed, true is -1; unsigned, true is 1
        signed = predicate[0] == "s"
        return lambda a, b: compare(-a.astype(np.int8) if signed else a.astype(np.int8),
                                    -b.astype(np.int8) if signed else b.astype(np.int8))
    if predicate[0] == "u":
        return lambda a, b: compare(as_unsigned(t, a), as_unsigned(t, b))
    return compare


def _int_binary_fn(name: str, t: str) -> OpFn:
    if t == "i1":
        table: dict[str, OpFn] = {
            "arith.addi": np.logical_xor, "arith.subi": np.logical_xor,
            "arith.muli": np.logical_and, "arith.andi": np.logical_and,
            "arith.ori": np.logical_or, "arith.xori": np.logical_xor,
            "arith.maxsi": np.logical_and, "arith.minsi": np.logical_or,
            "arith.maxui": np.logical_or, "arith.minui": np.logical_and,
            # x / 0 is 0, and -1 / -1 wraps back to -1: division is `and`, remainder 0.
            "arith.divsi": np.logical_and, "arith.divui": np.logical_and,
            "arith.ceildivsi": np.logical_and, "arith.ceildivui": np.logical_and,
            "arith.floordivsi": np.logical_and,
            "arith.remsi": _always(False), "arith.remui": _always(False),
        }
        if name in table:
            return table[name]
    simple = {"arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply,
              "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or,
              "arith.xori": np.bitwise_xor, "arith.maxsi": np.maximum,
              "arith.minsi": np.minimum}
    if name in simple:
        return _wrapping(t, simple[name])
    if name in ("arith.maxui", "arith.minui"):
        return _unsigned_minmax(t, np.maximum if name == "arith.maxui" else np.minimum)
    if name in ("arith.divsi", "arith.remsi", "arith.ceildivsi", "arith.floordivsi"):
        kind = {"arith.divsi": "div", "arith.remsi": "rem", "arith.ceildivsi": "ceildiv",
                "arith.floordivsi": "floordiv"}[name]
        return _signed_division(t, kind)
    if name in ("arith.divui", "arith.remui", "arith.ceildivui"):
        return _unsigned_division(t, {"arith.divui": "div", "arith.remui": "rem",
                                      "arith.ceildivui": "ceildiv"}[name])
    if name in ("arith.shli", "arith.shrsi", "arith.shrui"):
        return _shift(t, name.split(".")[1])
    if name == "math.ipowi":
        return _ipowi(t)
    raise OpError(f"no integer form of {name}")


_INT_BINARY_NAMES = ("arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.divui",
                     "arith.remsi", "arith.remui", "arith.ceildivsi", "arith.ceildivui",
                     "arith.floordivsi", "arith.maxsi", "arith.minsi", "arith.maxui",
                     "arith.minui", "arith.andi", "arith.ori", "arith.xori", "arith.shli",
                     "arith.shrsi", "arith.shrui", "math.ipowi")


# --- casts -----------------------------------------------------------------------------------

def _to_float(src: str, dst: str, unsigned: bool) -> OpFn:
    d = dtype(dst)

    def op(a: np.ndarray) -> np.ndarray:
        if src == "i1":
            v = a.astype(np.int8)
            v = v if unsigned else -v           # signed i1 true is -1
        else:
            v = as_unsigned(src, a) if unsigned else a
        if dst in NATIVE_FLOATS:
            return v.astype(d)                  # numpy converts with one rounding
        return numerics.round_to(dst, v.astype(np.float64))
    return op


def _to_int(src: str, dst: str, unsigned: bool) -> OpFn:
    w = _WIDTH[dst]
    lo, hi = (0, (1 << w) - 1) if unsigned else _int_range(dst)
    if dst == "i1":
        lo, hi = (0, 1) if unsigned else (-1, 0)

    def op(a: np.ndarray) -> np.ndarray:
        x = np.trunc(a.astype(np.float64))
        nan = np.isnan(x)
        x = np.where(nan, 0.0, x)
        low, high = x <= lo, x >= hi
        safe = np.where(low | high, 0.0, x)
        if unsigned and w == 64:
            r = safe.astype(np.uint64)
            r = np.where(low, np.uint64(lo), np.where(high, np.uint64(hi), r))
            return from_unsigned(dst, r)
        r = safe.astype(np.int64)
        r = np.where(low, lo, np.where(high, hi, r))
        if dst == "i1":
            return r != 0
        return from_unsigned(dst, r.astype(np.uint64)) if unsigned else numerics.wrap_int(dst, r)
    return op


def _int_resize(src: str, dst: str, kind: str) -> OpFn:
    """extsi / extui / trunci and the index casts."""
    if kind == "zext":
        return lambda a: numerics.wrap_int(dst, as_unsigned(src, a).astype(np.int64)) \
            if dst != "i64" else as_unsigned(src, a).astype(np.uint64).view(np.int64)
    if kind == "sext":
        if src == "i1":
            return lambda a: numerics.wrap_int(dst, -a.astype(np.int64))
        return lambda a: a.astype(dtype(dst))
    return lambda a: numerics.wrap_int(dst, a.astype(np.int64) if src != "i64" else a)


def _bitcast(src: str, dst: str) -> OpFn:
    return lambda a: numerics.from_bits(dst, numerics.to_bits(src, a))


def _identity(a: np.ndarray) -> np.ndarray:
    return a


# --- the numpy backend of the body ops ----------------------------------------------------------

# A maker builds an op's numpy function from its attributes once the types are known (checked
# by `irtk.body_ops.infer`): (attrs, operand types, result type) -> OpFn.
Maker = Callable[[OpAttrs, list[str], str], OpFn]
NUMPY: Backend[Maker] = Backend("cpu")


@NUMPY.implements("arith.constant")
def _constant(attrs: OpAttrs, types: list[str], t: str) -> OpFn:
    if t in FLOAT_TYPES:
        value = numerics.round_to(t, np.array([attrs.float_value], dtype=np.float64))
    else:
        w = _WIDTH[t]
        value = numerics.from_bits(t, np.array([attrs.int_value & ((1 << w) - 1)],
                                               dtype=np.uint64))
    value = value.reshape(())            # a scalar: broadcasts into boxes of any rank
    value.flags.writeable = False
    return lambda: value


@NUMPY.implements(*_FLOAT_UNARY, *_FLOAT_BINARY)
def _float_op(attrs: OpAttrs, types: list[str], t: str) -> OpFn:
    fn = _FLOAT_UNARY.get(attrs.name) or _FLOAT_BINARY[attrs.name]
    if attrs.name == "math.erf":
        return _float(t, fn)
    if t not in NATIVE_FLOATS and attrs.name not in ("arith.negf", "math.absf",
                                                      "math.copysign", "arith.maximumf",
                                                      "arith.minimumf", "arith.maxnumf",
                                                      "arith.minnumf"):
        return _float(t, fn)
    return fn


@NUMPY.implements("math.fma")
def _fma_op(attrs: OpAttrs, types: list[str], t: str) -> OpFn:
    return _float(t, _fma)


@NUMPY.implements("math.fpowi")
def _fpowi(attrs: OpAttrs, types: list[str], t: str) -> OpFn:
    return _float(t, _wide(np.power))


@NUMPY.implements(*_INT_BINARY_NAMES)
def _int_binary(attrs: OpAttrs, types: list[str], t: str) -> OpFn:
    return _int_binary_fn(attrs.name, t)


@NUMPY.implements("math.absi", "math.ctlz", "math.cttz", "math.ctpop")
def _int_unary(attrs: OpAttrs, types: list[str], t: str) -> OpFn:
    make = {"math.absi": _absi, "math.ctlz": _ctlz, "math.cttz": _cttz,
            "math.ctpop": _ctpop}[attrs.name]
    return make(t)


@NUMPY.implements("arith.cmpf")
def _cmpf(attrs: OpAttrs, types: list[str], t: str) -> OpFn:
    return _CMPF[attrs.predicate or ""]


@NUMPY.implements("arith.cmpi")
def _cmpi_op(attrs: OpAttrs, types: list[str], t: str) -> OpFn:
    return _cmpi(types[0], attrs.predicate or "")


@NUMPY.implements("arith.select")
def _select(attrs: OpAttrs, types: list[str], t: str) -> OpFn:
    return np.where


@NUMPY.implements("arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui",
                  "arith.extsi", "arith.extui", "arith.trunci", "arith.extf", "arith.truncf",
                  "arith.bitcast", "arith.index_cast", "arith.index_castui")
def _cast(attrs: OpAttrs, types: list[str], dst: str) -> OpFn:
    src, name = types[0], attrs.name
    ws, wd = _WIDTH[src], _WIDTH[dst]
    if name in ("arith.sitofp", "arith.uitofp"):
        return _to_float(src, dst, name == "arith.uitofp")
    if name in ("arith.fptosi", "arith.fptoui"):
        return _to_int(src, dst, name == "arith.fptoui")
    if name in ("arith.extsi", "arith.extui", "arith.trunci"):
        return _int_resize(src, dst, {"arith.extsi": "sext", "arith.extui": "zext",
                                      "arith.trunci": "trunc"}[name])
    if name in ("arith.extf", "arith.truncf"):
        return lambda a: numerics.round_to(dst, a)
    if name == "arith.bitcast":
        return _identity if src == dst else _bitcast(src, dst)
    if ws == wd:                                 # index_cast(ui) between i32 and index
        return _identity
    extend = "zext" if name == "arith.index_castui" else "sext"
    return _int_resize(src, dst, extend if wd > ws else "trunc")


@NUMPY.implements(*EXECUTOR_OPS)
def _executor_op(attrs: OpAttrs, types: list[str], t: str) -> OpFn:
    """linalg.index, tensor.extract and kernel.param read the loop position, a gather input or
    a param: the kernel executor evaluates them itself (hal_cpu/kernel.py)."""
    raise OpError(f"{attrs.name} is evaluated by the kernel executor, not the op table")


def compile_op(attrs: OpAttrs, operand_types: list[str]) -> tuple[OpFn, str]:
    """The function that evaluates `attrs` over a block, and its result type; raises OpError."""
    try:
        result = infer(attrs.name, operand_types, attrs.result_type, attrs.predicate,
                       attrs.int_value)
    except OpTypeError as e:
        raise OpError(str(e)) from None
    make = NUMPY.lookup(attrs.name, operand_types, result)
    if make is None:
        raise OpError(f"the CPU executor does not implement {attrs.name}")
    return make(attrs, operand_types, result), result
