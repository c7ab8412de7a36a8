"""i64 in 32-bit code, for profiles without shaderInt64: a value is a uvec2 (low word, high
word), the layout it has in memory.

Covered: constants, add, sub, mul (OpUMulExtended for the low product), and/or/xor, shifts
(amounts >= 64 give 0 or the sign fill), every cmpi predicate, min/max, select, absi, and
conversions to and from the narrower integers, i1, index and f32 (fptosi/fptoui saturate; an
i64 beyond 2^24 converts to f32 through two roundings, which may differ from a single correctly
rounded conversion in the last bit), division and remainder (divsi, divui, remsi, remui,
ceildivsi, ceildivui, floordivsi: a 64-step restoring division in straight-line code, no loop,
so it takes none of llvmpipe's loop trip budget; by zero gives 0, as the native path) and bit
counting (ctlz, cttz, ctpop). Profiles with native i64 use these too for the ops SPIR-V has no
instruction for (a uvec2 is an i64's bitcast). i64 <-> f64 needs f64, so it needs shaderInt64.
"""
from __future__ import annotations

from spirv.tables import GLSLstd450, Op as SpvOp

from irtk.errors import CompileError

from .emitter import Emitter

_TWO_32 = 4294967296.0


def vector_type(e: Emitter) -> int:
    return e.b.type_vector(e.u32, 2)


def make(e: Emitter, lo: int, hi: int) -> int:
    return e.op(SpvOp.CompositeConstruct, vector_type(e), lo, hi)


def low(e: Emitter, x: int) -> int:
    return e.op(SpvOp.CompositeExtract, e.u32, x, 0)


def high(e: Emitter, x: int) -> int:
    return e.op(SpvOp.CompositeExtract, e.u32, x, 1)


def constant(e: Emitter, value: int) -> int:
    value &= (1 << 64) - 1
    return e.b.constant_composite(vector_type(e), [e.u32c(value & 0xFFFFFFFF),
                                                   e.u32c(value >> 32)])


def select(e: Emitter, cond: int, a: int, b: int) -> int:
    """OpSelect on uvec2 (before SPIR-V 1.4 the condition must be a bool vector)."""
    bvec = e.b.type_vector(e.bool, 2)
    return e.op(SpvOp.Select, vector_type(e), e.op(SpvOp.CompositeConstruct, bvec, cond, cond),
                a, b)


def from_i32(e: Emitter, x: int, signed: bool) -> int:
    """Widen an i32 register value (already zero-extended when `signed` is False)."""
    lo = e.op(SpvOp.Bitcast, e.u32, x)
    hi = e.op(SpvOp.Bitcast, e.u32, e.op(SpvOp.ShiftRightArithmetic, e.i32, x, e.i32c(31))) \
        if signed else e.u32c(0)
    return make(e, lo, hi)


def to_i32(e: Emitter, x: int) -> int:
    """The low word as i32 (truncation)."""
    return e.op(SpvOp.Bitcast, e.i32, low(e, x))


def add(e: Emitter, a: int, b: int) -> int:
    lo = e.op(SpvOp.IAdd, e.u32, low(e, a), low(e, b))
    carry = e.select(e.u32, e.op(SpvOp.ULessThan, e.bool, lo, low(e, a)), e.u32c(1), e.u32c(0))
    hi = e.op(SpvOp.IAdd, e.u32, e.op(SpvOp.IAdd, e.u32, high(e, a), high(e, b)), carry)
    return make(e, lo, hi)


def negate(e: Emitter, a: int) -> int:
    return sub(e, constant(e, 0), a)


def sub(e: Emitter, a: int, b: int) -> int:
    lo = e.op(SpvOp.ISub, e.u32, low(e, a), low(e, b))
    borrow = e.select(e.u32, e.op(SpvOp.ULessThan, e.bool, low(e, a), low(e, b)), e.u32c(1),
                      e.u32c(0))
    hi = e.op(SpvOp.ISub, e.u32, e.op(SpvOp.ISub, e.u32, high(e, a), high(e, b)), borrow)
    return make(e, lo, hi)


def mul(e: Emitter, a: int, b: int) -> int:
    pair = e.b.type_struct([e.u32, e.u32])
    product = e.op(SpvOp.UMulExtended, pair, low(e, a), low(e, b))
    lo = e.op(SpvOp.CompositeExtract, e.u32, product, 0)
    hi = e.op(SpvOp.CompositeExtract, e.u32, product, 1)
    cross = e.op(SpvOp.IAdd, e.u32, e.op(SpvOp.IMul, e.u32, low(e, a), high(e, b)),
                 e.op(SpvOp.IMul, e.u32, high(e, a), low(e, b)))
    return make(e, lo, e.op(SpvOp.IAdd, e.u32, hi, cross))


def compare(e: Emitter, predicate: str, a: int, b: int) -> int:
    lo_a, lo_b, hi_a, hi_b = low(e, a), low(e, b), high(e, a), high(e, b)
    hi_equal = e.op(SpvOp.IEqual, e.bool, hi_a, hi_b)
    equal = e.and_(hi_equal, e.op(SpvOp.IEqual, e.bool, lo_a, lo_b))
    if predicate == "eq":
        return equal
    if predicate == "ne":
        return e.not_(equal)
    signed = predicate.startswith("s")
    if signed:
        hi_less = e.op(SpvOp.SLessThan, e.bool, e.op(SpvOp.Bitcast, e.i32, hi_a),
                       e.op(SpvOp.Bitcast, e.i32, hi_b))
    else:
        hi_less = e.op(SpvOp.ULessThan, e.bool, hi_a, hi_b)
    less = e.or_(hi_less, e.and_(hi_equal, e.op(SpvOp.ULessThan, e.bool, lo_a, lo_b)))
    rel = predicate[1:]
    if rel == "lt":
        return less
    if rel == "ge":
        return e.not_(less)
    if rel == "le":
        return e.or_(less, equal)
    if rel == "gt":
        return e.not_(e.or_(less, equal))
    raise CompileError(f"vulkan-spirv: arith.cmpi predicate '{predicate}' is unknown")


def shift(e: Emitter, kind: str, a: int, amount: int) -> int:
    """shli / shrui / shrsi by an unsigned 64-bit amount."""
    u32 = e.u32
    too_far = e.or_(e.op(SpvOp.INotEqual, e.bool, high(e, amount), e.u32c(0)),
                    e.op(SpvOp.UGreaterThanEqual, e.bool, low(e, amount), e.u32c(64)))
    n = e.op(SpvOp.BitwiseAnd, u32, low(e, amount), e.u32c(63))
    small = e.op(SpvOp.ULessThan, e.bool, n, e.u32c(32))
    zero = e.op(SpvOp.IEqual, e.bool, n, e.u32c(0))
    n_small = e.op(SpvOp.BitwiseAnd, u32, n, e.u32c(31))
    back = e.op(SpvOp.BitwiseAnd, u32, e.op(SpvOp.ISub, u32, e.u32c(32), n_small), e.u32c(31))
    lo, hi = low(e, a), high(e, a)
    if kind == "arith.shli":
        carried = e.select(u32, zero, e.u32c(0), e.op(SpvOp.ShiftRightLogical, u32, lo, back))
        hi_small = e.op(SpvOp.BitwiseOr, u32, e.op(SpvOp.ShiftLeftLogical, u32, hi, n_small),
                        carried)
        lo_small = e.op(SpvOp.ShiftLeftLogical, u32, lo, n_small)
        hi_big = e.op(SpvOp.ShiftLeftLogical, u32, lo, n_small)
        result = make(e, e.select(u32, small, lo_small, e.u32c(0)),
                      e.select(u32, small, hi_small, hi_big))
        return select(e, too_far, constant(e, 0), result)
    arithmetic = kind == "arith.shrsi"
    fill = e.op(SpvOp.Bitcast, u32, e.op(SpvOp.ShiftRightArithmetic, e.i32,
                                         e.op(SpvOp.Bitcast, e.i32, hi), e.i32c(31))) \
        if arithmetic else e.u32c(0)

    def shr(x: int, count: int) -> int:
        if arithmetic:
            return e.op(SpvOp.Bitcast, u32, e.op(SpvOp.ShiftRightArithmetic, e.i32,
                                                 e.op(SpvOp.Bitcast, e.i32, x), count))
        return e.op(SpvOp.ShiftRightLogical, u32, x, count)
    carried = e.select(u32, zero, e.u32c(0), e.op(SpvOp.ShiftLeftLogical, u32, hi, back))
    lo_small = e.op(SpvOp.BitwiseOr, u32, e.op(SpvOp.ShiftRightLogical, u32, lo, n_small),
                    carried)
    hi_small = shr(hi, n_small)
    lo_big = shr(hi, n_small)
    result = make(e, e.select(u32, small, lo_small, lo_big), e.select(u32, small, hi_small, fill))
    return select(e, too_far, make(e, fill, fill), result)


def to_float(e: Emitter, x: int, signed: bool) -> int:
    hi = high(e, x)
    hi_f = e.op(SpvOp.ConvertSToF, e.f32, e.op(SpvOp.Bitcast, e.i32, hi)) if signed else \
        e.op(SpvOp.ConvertUToF, e.f32, hi)
    lo_f = e.op(SpvOp.ConvertUToF, e.f32, low(e, x))
    wide = e.op(SpvOp.FAdd, e.f32, e.op(SpvOp.FMul, e.f32, hi_f, e.f32c(_TWO_32)), lo_f)
    if not signed:
        fits = e.op(SpvOp.IEqual, e.bool, hi, e.u32c(0))
        return e.select(e.f32, fits, lo_f, wide)
    # Values that fit in i32 convert exactly rounded in one step.
    lo_i = e.op(SpvOp.Bitcast, e.i32, low(e, x))
    fits = e.op(SpvOp.IEqual, e.bool, hi, e.op(SpvOp.Bitcast, e.u32, e.op(
        SpvOp.ShiftRightArithmetic, e.i32, lo_i, e.i32c(31))))
    return e.select(e.f32, fits, e.op(SpvOp.ConvertSToF, e.f32, lo_i), wide)


def from_float(e: Emitter, x: int, signed: bool) -> int:
    """Saturating truncation of an f32 (NaN gives 0)."""
    lo_limit, hi_limit = (-(2.0 ** 63), 2.0 ** 63) if signed else (0.0, 2.0 ** 64)
    nan = e.is_nan(x)
    too_big = e.and_(e.not_(nan), e.op(SpvOp.FOrdGreaterThanEqual, e.bool, x,
                                       e.f32c(hi_limit)))
    too_small = e.and_(e.not_(nan), e.op(SpvOp.FOrdLessThan, e.bool, x, e.f32c(lo_limit)))
    t = e.glsl(e.f32, GLSLstd450.Trunc, e.select(
        e.f32, e.or_(nan, too_big, too_small), e.f32c(0.0), x))
    # Split |t| into words: its bits below 2^32 are representable on their own (exactly).
    magnitude = e.glsl(e.f32, GLSLstd450.FAbs, t)
    hi_f = e.glsl(e.f32, GLSLstd450.Floor, e.op(SpvOp.FMul, e.f32, magnitude,
                                                e.f32c(1.0 / _TWO_32)))
    rest = e.op(SpvOp.FSub, e.f32, magnitude, e.op(SpvOp.FMul, e.f32, hi_f, e.f32c(_TWO_32)))
    value = make(e, e.op(SpvOp.ConvertFToU, e.u32, rest), e.op(SpvOp.ConvertFToU, e.u32, hi_f))
    if signed:
        value = select(e, e.op(SpvOp.FOrdLessThan, e.bool, t, e.f32c(0.0)), negate(e, value),
                       value)
    big = constant(e, (1 << 63) - 1 if signed else (1 << 64) - 1)
    small = constant(e, -(1 << 63) if signed else 0)
    return select(e, too_big, big, select(e, too_small, small, value))


def divmod_unsigned(e: Emitter, a: int, b: int) -> tuple[int, int]:
    """(a / b, a % b) as unsigned 64-bit values, b != 0: restoring division, one quotient bit
    per step from the top."""
    u32 = e.u32
    q_lo, q_hi = e.u32c(0), e.u32c(0)
    r_lo, r_hi = e.u32c(0), e.u32c(0)
    a_lo, a_hi = low(e, a), high(e, a)
    for bit in range(63, -1, -1):
        word, k = (a_hi, bit - 32) if bit >= 32 else (a_lo, bit)
        incoming = e.op(SpvOp.BitwiseAnd, u32, e.op(SpvOp.ShiftRightLogical, u32, word,
                                                     e.u32c(k)), e.u32c(1))
        carry = e.op(SpvOp.INotEqual, e.bool, e.op(SpvOp.ShiftRightLogical, u32, r_hi,
                                                   e.u32c(31)), e.u32c(0))
        r_hi = e.op(SpvOp.BitwiseOr, u32, e.op(SpvOp.ShiftLeftLogical, u32, r_hi, e.u32c(1)),
                    e.op(SpvOp.ShiftRightLogical, u32, r_lo, e.u32c(31)))
        r_lo = e.op(SpvOp.BitwiseOr, u32, e.op(SpvOp.ShiftLeftLogical, u32, r_lo, e.u32c(1)),
                    incoming)
        r = make(e, r_lo, r_hi)
        take = e.or_(carry, e.not_(compare(e, "ult", r, b)))   # r (65 bits) >= b
        r = select(e, take, sub(e, r, b), r)
        r_lo, r_hi = low(e, r), high(e, r)
        bit_value = e.select(u32, take, e.u32c(1 << (bit % 32)), e.u32c(0))
        if bit >= 32:
            q_hi = e.op(SpvOp.BitwiseOr, u32, q_hi, bit_value)
        else:
            q_lo = e.op(SpvOp.BitwiseOr, u32, q_lo, bit_value)
    return make(e, q_lo, q_hi), make(e, r_lo, r_hi)


def divide(e: Emitter, name: str, a: int, b: int) -> int:
    """divsi / divui / remsi / remui / ceildivsi / ceildivui / floordivsi; by zero gives 0 and
    INT64_MIN / -1 gives INT64_MIN (remainder 0), as the native path does."""
    zero = constant(e, 0)
    by_zero = compare(e, "eq", b, zero)
    b = select(e, by_zero, constant(e, 1), b)
    if name in ("arith.divui", "arith.remui", "arith.ceildivui"):
        q, r = divmod_unsigned(e, a, b)
        if name == "arith.ceildivui":
            q = select(e, compare(e, "ne", r, zero), add(e, q, constant(e, 1)), q)
        return select(e, by_zero, zero, r if name == "arith.remui" else q)
    a_neg, b_neg = compare(e, "slt", a, zero), compare(e, "slt", b, zero)
    q, r = divmod_unsigned(e, select(e, a_neg, negate(e, a), a),
                           select(e, b_neg, negate(e, b), b))
    q = select(e, e.op(SpvOp.LogicalNotEqual, e.bool, a_neg, b_neg), negate(e, q), q)
    r = select(e, a_neg, negate(e, r), r)          # the remainder takes the dividend's sign
    inexact = compare(e, "ne", r, zero)
    if name == "arith.ceildivsi":
        bump = e.and_(inexact, e.op(SpvOp.LogicalEqual, e.bool, a_neg, b_neg))
        q = select(e, bump, add(e, q, constant(e, 1)), q)
    elif name == "arith.floordivsi":
        bump = e.and_(inexact, e.op(SpvOp.LogicalNotEqual, e.bool, a_neg, b_neg))
        q = select(e, bump, sub(e, q, constant(e, 1)), q)
    return select(e, by_zero, zero, r if name == "arith.remsi" else q)


def bit_count(e: Emitter, name: str, x: int) -> int:
    """math.ctpop / ctlz / cttz of a 64-bit value, as an i64."""
    lo, hi = low(e, x), high(e, x)
    if name == "math.ctpop":
        count = e.op(SpvOp.IAdd, e.u32, e.op(SpvOp.BitCount, e.u32, lo),
                     e.op(SpvOp.BitCount, e.u32, hi))
        return make(e, count, e.u32c(0))

    def word_count(w: int) -> int:   # ctlz / cttz of one 32-bit word, 32 for 0
        is_zero = e.op(SpvOp.IEqual, e.bool, w, e.u32c(0))
        if name == "math.cttz":
            found = e.op(SpvOp.Bitcast, e.u32, e.glsl(e.i32, GLSLstd450.FindILsb, w))
        else:
            msb = e.op(SpvOp.Bitcast, e.u32, e.glsl(e.i32, GLSLstd450.FindUMsb, w))
            found = e.op(SpvOp.ISub, e.u32, e.u32c(31), msb)
        return e.select(e.u32, is_zero, e.u32c(32), found)
    first, second = (lo, hi) if name == "math.cttz" else (hi, lo)
    count = e.select(e.u32, e.op(SpvOp.IEqual, e.bool, first, e.u32c(0)),
                     e.op(SpvOp.IAdd, e.u32, e.u32c(32), word_count(second)), word_count(first))
    return make(e, count, e.u32c(0))


DIVISIONS = ("arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.ceildivsi",
             "arith.ceildivui", "arith.floordivsi")
BIT_COUNTS = ("math.ctpop", "math.ctlz", "math.cttz")

BITWISE = {"arith.andi": SpvOp.BitwiseAnd, "arith.ori": SpvOp.BitwiseOr,
           "arith.xori": SpvOp.BitwiseXor}
