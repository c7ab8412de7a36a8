"""|x| ** y in f32 to a few ULP, as 2 ** (y log2 |x|) carried in two f32 parts (hi + lo).

An error d in y log2|x| is a relative error d ln 2 of the result, and y log2|x| reaches 150
before pow overflows, so log2|x| and the product need about 32 bits: both are double-f32
values. Neither driver fuses GLSL Fma, so exact products use Dekker's splitting (Veltkamp) on
NoContraction ops instead. GLSL Pow computes exp2(y * log2(x)) in f32 (77 ULP measured).
"""
from __future__ import annotations

import math

from spirv.tables import GLSLstd450, Op as SpvOp

from .emitter import Emitter
from .math_f32 import (F32, LN2_F_HI, LN2_F_LO, LOG2E_HI, LOG2E_LO, expm1_reduced,
                       scale_pow2, split_exponent)

POW_LOG_R2 = (0.4000000059604645, 0.28571534156799316, 0.2220439314842224,
              0.19130367040634155)
TWO_THIRDS_HI = 0.6666666865348816
TWO_THIRDS_LO = 2.0 / 3.0 - TWO_THIRDS_HI


def _two_sum(f: F32, a: int, b: int) -> tuple[int, int]:
    """a + b = s + err exactly (Knuth)."""
    s = f.add(a, b)
    bb = f.sub(s, a)
    return s, f.add(f.sub(a, f.sub(s, bb)), f.sub(b, bb))


def _fast_two_sum(f: F32, a: int, b: int) -> tuple[int, int]:
    """a + b = s + err exactly, for |a| >= |b|."""
    s = f.add(a, b)
    return s, f.sub(b, f.sub(s, a))


class F64(F32):
    """The same instructions on f64 (the profile has shaderFloat64 and shaderInt64)."""

    SPLIT = 2.0 ** 27 + 1
    BIG, SCALE = 2.0 ** 900, 2.0 ** 450

    def c(self, v: float) -> int:
        return self.e.b.constant(self.e.f64, v)

    def add(self, a: int, b: int) -> int:
        return self.e.exact_op(SpvOp.FAdd, self.e.f64, a, b)

    def sub(self, a: int, b: int) -> int:
        return self.e.exact_op(SpvOp.FSub, self.e.f64, a, b)

    def mul(self, a: int, b: int) -> int:
        return self.e.exact_op(SpvOp.FMul, self.e.f64, a, b)

    def glsl(self, inst: GLSLstd450, *args: int) -> int:
        return self.e.glsl(self.e.f64, inst, *args)

    def _magnitude(self, x: int) -> int:
        e = self.e
        bits = e.op(SpvOp.Bitcast, e.u64, x)
        return e.op(SpvOp.BitwiseAnd, e.u64, bits, e.b.constant(e.u64, (1 << 63) - 1))

    def is_zero(self, x: int) -> int:
        return self.e.op(SpvOp.IEqual, self.e.bool, self._magnitude(x),
                         self.e.b.constant(self.e.u64, 0))

    def is_finite(self, x: int) -> int:
        return self.e.op(SpvOp.ULessThan, self.e.bool, self._magnitude(x),
                         self.e.b.constant(self.e.u64, 0x7FF << 52))


def _is_finite(f: F32, x: int) -> int:
    return f.is_finite(x) if isinstance(f, F64) else f.e.is_finite(x)


def _veltkamp(f: F32, a: int) -> tuple[int, int]:
    """a = hi + lo with half the significant bits in hi (f32: |a| < 2**115)."""
    c = f.mul(f.c(F64.SPLIT if isinstance(f, F64) else 4097.0), a)
    hi = f.sub(c, f.sub(c, a))
    return hi, f.sub(a, hi)


def _two_prod(f: F32, a: int, b: int) -> tuple[int, int]:
    """a * b = p + err exactly (Dekker)."""
    p = f.mul(a, b)
    ah, al = _veltkamp(f, a)
    bh, bl = _veltkamp(f, b)
    err = f.add(f.add(f.add(f.sub(f.mul(ah, bh), p), f.mul(ah, bl)), f.mul(al, bh)),
                f.mul(al, bl))
    return p, err


def _log2_double(f: F32, x: int) -> tuple[int, int]:
    """log2 x as hi + lo for a finite x > 0: k + 2 atanh(s) / ln 2, s = g / (2 + g) carried
    in two parts."""
    k, g = split_exponent(f, x)
    dh = f.add(f.c(2.0), g)
    dl = f.sub(g, f.sub(dh, f.c(2.0)))
    sh = f.div(g, dh)
    p, pe = _two_prod(f, sh, dh)
    sl = f.div(f.sub(f.sub(f.sub(g, p), pe), f.mul(sh, dl)), dh)
    z = f.mul(sh, sh)
    inner = f.add(f.c(TWO_THIRDS_LO), f.mul(z, f.horner(z, POW_LOG_R2)))
    tail = f.add(f.mul(f.mul(sh, z), f.add(f.c(TWO_THIRDS_HI), inner)),
                 f.mul(f.mul(f.c(2.0), z), sl))
    ln_hi, ln_lo = _fast_two_sum(f, f.mul(f.c(2.0), sh), f.add(f.mul(f.c(2.0), sl), tail))
    a, ae = _two_prod(f, ln_hi, f.c(LOG2E_HI))
    ae = f.add(ae, f.add(f.mul(ln_hi, f.c(LOG2E_LO)), f.mul(ln_lo, f.c(LOG2E_HI))))
    hi, e1 = _two_sum(f, k, a)
    return _fast_two_sum(f, hi, f.add(e1, ae))


def pow_magnitude(e: Emitter, ax: int, y: int) -> int:
    """ax ** y for ax in (0, +inf] and a non-NaN y (the caller handles zero and NaN)."""
    f = F32(e)
    finite = e.is_finite(ax)
    lh, ll = _log2_double(f, e.select(e.f32, finite, ax, f.c(2.0)))
    yc = f.clamp(y, -2.0 ** 100, 2.0 ** 100)
    th, te = _two_prod(f, yc, lh)
    th, tl = _fast_two_sum(f, th, f.add(te, f.mul(yc, ll)))
    # Beyond +-200 the result is 0 or inf; the clamp would leave a huge tl behind.
    in_range = f.less(f.glsl(GLSLstd450.FAbs, th), 200.0)
    tl = e.select(e.f32, in_range, tl, f.c(0.0))
    th = f.clamp(th, -200.0, 200.0)
    kf = f.round_even(th)
    d = f.add(f.sub(th, kf), tl)
    r = f.add(f.mul(d, f.c(LN2_F_HI)), f.mul(d, f.c(LN2_F_LO)))
    k = e.op(SpvOp.ConvertFToS, e.i32, kf)
    result = scale_pow2(f, k, expm1_reduced(f, r))
    y_pos = e.op(SpvOp.FOrdGreaterThan, e.bool, y, f.c(0.0))
    inf_base = e.select(e.f32, y_pos, f.c(math.inf), f.c(0.0))
    return e.select(e.f32, finite, result, inf_base)


def fma(e: Emitter, a: int, b: int, c: int, wide: bool = False) -> int:
    """a * b + c rounded once (near enough: within an ULP), since GLSL Fma is not fused on
    the drivers: a * b = p + pe exactly (an operand above 2**100 is scaled by 2**-50 and the
    other by 2**50 so splitting cannot overflow), then p + c = s + t exactly, s + (t + pe).
    Non-finite and zero results take the plain a * b + c, which gets them (and the sign of
    an exact zero) right. `wide`: on f64 (2**900 and 2**450 for the scaling)."""
    f = F64(e) if wide else F32(e)
    ftype = e.f64 if wide else e.f32
    big, scale = (F64.BIG, F64.SCALE) if wide else (2.0 ** 100, 2.0 ** 50)
    big_a = e.not_(f.less(f.glsl(GLSLstd450.FAbs, a), big))
    big_b = e.not_(f.less(f.glsl(GLSLstd450.FAbs, b), big))
    down, up = f.c(1.0 / scale), f.c(scale)
    a_s = e.select(ftype, big_a, f.mul(a, down), e.select(ftype, big_b, f.mul(a, up), a))
    b_s = e.select(ftype, big_a, f.mul(b, up), e.select(ftype, big_b, f.mul(b, down), b))
    p, pe = _two_prod(f, a_s, b_s)
    s, t = _two_sum(f, p, c)
    result = f.add(s, f.add(t, pe))
    plain = f.add(f.mul(a, b), c)
    usable = e.and_(_is_finite(f, result), _is_finite(f, pe), e.not_(f.is_zero(result)))
    return e.select(ftype, usable, result, plain)
