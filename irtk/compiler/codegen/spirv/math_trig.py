"""irtk's own f32 sin, cos, tan and atan (see math_f32.py for why the built-ins are not used).

sin/cos/tan reduce |x| = q pi/2 + r exactly for every finite f32 (Payne-Hanek): the 24-bit
significand times a 96-bit window of 2/pi's bits, chosen by the exponent, gives q mod 4 and r
in quarter turns to about 64 bits, in 32-bit integer multiplies (OpUMulExtended); no float step
needs a fused multiply-add, which neither SwiftShader nor lavapipe provides (their GLSL Fma
rounds twice). r then feeds polynomials on |r| <= pi/4 (scripts/math_coefficients.py).
"""
from __future__ import annotations

import math

from spirv.tables import GLSLstd450, Op as SpvOp

from .emitter import Emitter
from .math_f32 import F32, split_f32

SIN_S = (-0.1666666716337204, 0.008333331905305386, -0.00019840033201035112,
         2.7243245313002262e-06)
COS_C = (0.0416666679084301, -0.00138888880610466, 2.4800558094284497e-05, -2.7295504878566135e-07)
TAN_T = (0.3333333432674408, 0.13333334028720856, 0.05396820232272148, 0.021870490163564682,
         0.00885308999568224, 0.0036506098695099354, 0.0012534898705780506, 0.0010132535826414824,
         -0.00027175003197044134, 0.00040015869308263063)
ATAN_P = (-0.3333333432674408, 0.19999998807907104, -0.14285609126091003, 0.11107395589351654,
          -0.09027712047100067, 0.0712796077132225, -0.04027428478002548)

PIO2_12 = 1.57080078125            # pi/2 to 12 significant bits: products with 12-bit parts
PIO2_12_LO = math.pi / 2 - PIO2_12  # are exact
PI_2_HI, PI_2_LO = split_f32(math.pi / 2)
PI_4_HI, PI_4_LO = split_f32(math.pi / 4)
TAN_PI_8 = math.tan(math.pi / 8)


def _two_over_pi_words(count: int = 8) -> list[int]:
    """2/pi's binary digits as u32 words after one zero word (so the window below never
    starts before the point); pi from Machin's formula in exact integer arithmetic."""
    bits = 32 * count + 64
    one = 1 << bits

    def arctan_inv(n: int) -> int:
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k, sign = k + 2, -sign
        return total
    pi = 16 * arctan_inv(5) - 4 * arctan_inv(239)
    frac = (2 * one * one // pi) >> (bits - 32 * (count - 1))   # 2/pi * 2**(32 (count - 1))
    return [0] + [(frac >> (32 * (count - 2 - i))) & 0xFFFFFFFF for i in range(count - 1)]


TWO_OVER_PI = _two_over_pi_words()


def _reduce(f: F32, ax: int) -> tuple[int, int]:
    """(q mod 4 as u32, r) with |x| = q pi/2 + r, |r| <= pi/4, for a finite |x| >= pi/4."""
    e = f.e
    u32 = e.u32

    def u(v: int) -> int:
        return e.u32c(v)

    def op(opcode: SpvOp, *args: int) -> int:
        return e.op(opcode, u32, *args)

    bits = e.f32_bits(ax)
    # |x| = M 2**E; the window starts after bit E + 30 of the table (>= 6 for |x| >= pi/4).
    exponent = e.op(SpvOp.Bitcast, e.i32, op(SpvOp.ShiftRightLogical, bits, u(23)))
    start = e.glsl(e.i32, GLSLstd450.SClamp, e.op(SpvOp.IAdd, e.i32, exponent, e.i32c(-120)),
                   e.i32c(0), e.i32c(134))
    start = e.op(SpvOp.Bitcast, u32, start)
    word, shift = op(SpvOp.ShiftRightLogical, start, u(5)), op(SpvOp.BitwiseAnd, start, u(31))
    significand = op(SpvOp.BitwiseOr, op(SpvOp.BitwiseAnd, bits, u(0x7FFFFF)), u(0x800000))

    def pick(index: int) -> int:
        value = u(TWO_OVER_PI[-1])
        for k in range(len(TWO_OVER_PI) - 2, -1, -1):
            value = e.select(u32, e.op(SpvOp.IEqual, e.bool, index, u(k)), u(TWO_OVER_PI[k]),
                             value)
        return value

    def shl(a: int, n: int) -> int:
        return op(SpvOp.ShiftLeftLogical, a, n)

    def shr(a: int, n: int) -> int:
        return op(SpvOp.ShiftRightLogical, a, n)

    raw = [pick(op(SpvOp.IAdd, word, u(i))) for i in range(4)]
    aligned = e.op(SpvOp.IEqual, e.bool, shift, u(0))
    back = op(SpvOp.BitwiseAnd, op(SpvOp.ISub, u(32), shift), u(31))
    window = [e.select(u32, aligned, raw[i],
                       op(SpvOp.BitwiseOr, shl(raw[i], shift), shr(raw[i + 1], back)))
              for i in range(3)]
    pair = e.b.type_struct([u32, u32])
    products = []
    for w in window:     # significand * window word as (low, high)
        wide = e.op(SpvOp.UMulExtended, pair, significand, w)
        products.append((e.op(SpvOp.CompositeExtract, u32, wide, 0),
                         e.op(SpvOp.CompositeExtract, u32, wide, 1)))
    (l0, h0), (l1, h1), (l2, h2) = products
    p0 = l2
    p1 = op(SpvOp.IAdd, h2, l1)
    carry = e.select(u32, e.op(SpvOp.ULessThan, e.bool, p1, h2), u(1), u(0))
    p2 = op(SpvOp.IAdd, op(SpvOp.IAdd, h1, l0), carry)
    # P = significand * window; |x| 2/pi mod 4 = P / 2**94: q is bits 94-95, the fraction below.
    q = shr(p2, u(30))
    hi = op(SpvOp.BitwiseOr, shl(p2, u(2)), shr(p1, u(30)))
    lo = op(SpvOp.BitwiseOr, shl(p1, u(2)), shr(p0, u(30)))
    # A fraction of a half or more is the next quarter minus a remainder.
    negative = e.op(SpvOp.UGreaterThanEqual, e.bool, hi, u(0x80000000))
    q = e.select(u32, negative, op(SpvOp.IAdd, q, u(1)), q)
    neg_lo = op(SpvOp.IAdd, op(SpvOp.Not, lo), u(1))
    neg_hi = op(SpvOp.IAdd, op(SpvOp.Not, hi),
                e.select(u32, e.op(SpvOp.IEqual, e.bool, lo, u(0)), u(1), u(0)))
    hi, lo = e.select(u32, negative, neg_hi, hi), e.select(u32, negative, neg_lo, lo)
    # Normalise the 64-bit magnitude so its top 32 bits hold its leading bits.
    hi_zero = e.op(SpvOp.IEqual, e.bool, hi, u(0))
    hi, lo = e.select(u32, hi_zero, lo, hi), e.select(u32, hi_zero, u(0), lo)
    msb = e.op(SpvOp.Bitcast, e.i32, e.glsl(u32, GLSLstd450.FindUMsb, hi))
    lead = e.glsl(e.i32, GLSLstd450.SClamp, e.op(SpvOp.ISub, e.i32, e.i32c(31), msb),
                  e.i32c(0), e.i32c(31))
    lead_u = e.op(SpvOp.Bitcast, u32, lead)
    top = e.select(u32, e.op(SpvOp.IEqual, e.bool, lead_u, u(0)), hi, op(
        SpvOp.BitwiseOr, shl(hi, lead_u), shr(lo, op(SpvOp.BitwiseAnd, op(SpvOp.ISub, u(32),
                                                                          lead_u), u(31)))))
    drop = e.op(SpvOp.ISub, e.i32, e.op(SpvOp.ISub, e.i32, e.i32c(-32), lead),
                e.select(e.i32, hi_zero, e.i32c(32), e.i32c(0)))
    scale = f.pow2(drop)
    fh = f.mul(e.op(SpvOp.ConvertUToF, e.f32, op(SpvOp.BitwiseAnd, top, u(0xFFF00000))), scale)
    fl = f.mul(e.op(SpvOp.ConvertUToF, e.f32, op(SpvOp.BitwiseAnd, top, u(0x000FFFFF))), scale)
    r = f.add(f.mul(fh, f.c(PIO2_12)), f.add(f.mul(fh, f.c(PIO2_12_LO)),
                                             f.mul(fl, f.c(math.pi / 2))))
    r = e.select(e.f32, e.op(SpvOp.IEqual, e.bool, top, u(0)), f.c(0.0), r)
    r = e.select(e.f32, negative, e.op(SpvOp.FNegate, e.f32, r), r)
    return op(SpvOp.BitwiseAnd, q, u(3)), r


def _reduced(f: F32, x: int) -> tuple[int, int, int]:
    """(|x|, q mod 4, r): no reduction below pi/4."""
    e = f.e
    ax = f.glsl(GLSLstd450.FAbs, x)
    q, r = _reduce(f, ax)
    small = f.less(ax, math.pi / 4)
    return ax, e.select(e.u32, small, e.u32c(0), q), e.select(e.f32, small, ax, r)


def _sin_poly(f: F32, r: int) -> int:
    z = f.mul(r, r)
    return f.add(r, f.mul(f.mul(r, z), f.horner(z, SIN_S)))


def _cos_poly(f: F32, r: int) -> int:
    z = f.mul(r, r)
    return f.add(f.sub(f.c(1.0), f.mul(f.c(0.5), z)), f.mul(f.mul(z, z), f.horner(z, COS_C)))


def _quadrant(f: F32, q: int, values: tuple[int, int, int, int]) -> int:
    e = f.e
    result = values[3]
    for k in (2, 1, 0):
        result = e.select(e.f32, e.op(SpvOp.IEqual, e.bool, q, e.u32c(k)), values[k], result)
    return result


def _flip_sign(f: F32, value: int, sign_of: int) -> int:
    """value with its sign flipped where `sign_of` is negative (odd functions)."""
    e = f.e
    s = e.op(SpvOp.BitwiseAnd, e.u32, e.f32_bits(sign_of), e.u32c(0x80000000))
    return e.op(SpvOp.Bitcast, e.f32, e.op(SpvOp.BitwiseXor, e.u32, e.f32_bits(value), s))


def _finite_only(f: F32, x: int, result: int) -> int:
    """NaN for +-inf and NaN."""
    return f.e.select(f.e.f32, f.e.is_finite(x), result, f.c(math.nan))


def sin(e: Emitter, x: int) -> int:
    f = F32(e)
    _, q, r = _reduced(f, x)
    s, c = _sin_poly(f, r), _cos_poly(f, r)
    neg = e.op(SpvOp.FNegate, e.f32, s), e.op(SpvOp.FNegate, e.f32, c)
    return _finite_only(f, x, _flip_sign(f, _quadrant(f, q, (s, c, neg[0], neg[1])), x))


def cos(e: Emitter, x: int) -> int:
    f = F32(e)
    _, q, r = _reduced(f, x)
    s, c = _sin_poly(f, r), _cos_poly(f, r)
    neg = e.op(SpvOp.FNegate, e.f32, s), e.op(SpvOp.FNegate, e.f32, c)
    return _finite_only(f, x, _quadrant(f, q, (c, neg[0], neg[1], s)))


def tan(e: Emitter, x: int) -> int:
    """tan(r) for even q, -1 / tan(r) for odd q."""
    f = F32(e)
    _, q, r = _reduced(f, x)
    z = f.mul(r, r)
    t = f.add(r, f.mul(f.mul(r, z), f.horner(z, TAN_T)))
    cot = e.op(SpvOp.FNegate, e.f32, f.div(f.c(1.0), t))
    odd = e.op(SpvOp.IEqual, e.bool, e.op(SpvOp.BitwiseAnd, e.u32, q, e.u32c(1)), e.u32c(1))
    return _finite_only(f, x, _flip_sign(f, e.select(e.f32, odd, cot, t), x))


def atan(e: Emitter, x: int) -> int:
    """atan(u) on |u| <= tan(pi/8), shifted by pi/4 ((|x| - 1) / (|x| + 1)) or pi/2
    (-1 / |x|); odd."""
    f = F32(e)
    ax = f.glsl(GLSLstd450.FAbs, x)
    big = e.op(SpvOp.FOrdGreaterThan, e.bool, ax, f.c(1.0 / TAN_PI_8))
    mid = e.op(SpvOp.FOrdGreaterThan, e.bool, ax, f.c(TAN_PI_8))
    u = e.select(e.f32, big, e.op(SpvOp.FNegate, e.f32, f.div(f.c(1.0), ax)),
                 e.select(e.f32, mid, f.div(f.sub(ax, f.c(1.0)), f.add(ax, f.c(1.0))), ax))
    base_hi = e.select(e.f32, big, f.c(PI_2_HI), e.select(e.f32, mid, f.c(PI_4_HI), f.c(0.0)))
    base_lo = e.select(e.f32, big, f.c(PI_2_LO), e.select(e.f32, mid, f.c(PI_4_LO), f.c(0.0)))
    z = f.mul(u, u)
    poly = f.add(u, f.add(f.mul(f.mul(u, z), f.horner(z, ATAN_P)), base_lo))
    result = f.add(base_hi, poly)
    return f.keep_nan(x, f.copysign(result, x))


def atan2(e: Emitter, y: int, x: int) -> int:
    """B + s atan(min / max) of |x|, |y| (B = 0, pi/2 or pi; the ratio is in [0, 1]), signed
    by y; C99's values for zeros and infinities (both infinite: the ratio is taken as 1)."""
    f = F32(e)
    ax, ay = f.glsl(GLSLstd450.FAbs, x), f.glsl(GLSLstd450.FAbs, y)
    both_inf = e.and_(e.is_inf(x), e.is_inf(y))
    steep = e.op(SpvOp.FOrdGreaterThan, e.bool, ay, ax)
    ratio = f.div(e.select(e.f32, steep, ax, ay), e.select(e.f32, steep, ay, ax))
    ratio = e.select(e.f32, both_inf, f.c(1.0), ratio)
    both_zero = e.and_(f.is_zero(x), f.is_zero(y))
    ratio = e.select(e.f32, both_zero, f.c(0.0), ratio)
    a = atan(e, ratio)
    x_neg = e.sign_bit(x)
    # steep: pi/2 - a (x >= 0) or pi/2 + a (x < 0); else a (x >= 0) or pi - a (x < 0).
    subtract = e.select(e.bool, steep, e.not_(x_neg), x_neg)
    base_hi = e.select(e.f32, steep, f.c(PI_2_HI), e.select(e.f32, x_neg, f.c(2 * PI_2_HI),
                                                             f.c(0.0)))
    base_lo = e.select(e.f32, steep, f.c(PI_2_LO), e.select(e.f32, x_neg, f.c(2 * PI_2_LO),
                                                             f.c(0.0)))
    signed = e.select(e.f32, subtract, e.op(SpvOp.FNegate, e.f32, a), a)
    result = f.add(base_hi, f.add(signed, base_lo))
    result = f.copysign(result, y)
    return e.select(e.f32, e.or_(e.is_nan(x), e.is_nan(y)), f.c(math.nan), result)
