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


def _veltkamp(f: F32, a: int) -> tuple[int, int]:
    """a = hi + lo with 12 significant bits in hi (|a| < 2**115)."""
    c = f.mul(f.c(4097.0), a)
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
    kf = f.glsl(GLSLstd450.RoundEven, th)
    d = f.add(f.sub(th, kf), tl)
    r = f.add(f.mul(d, f.c(LN2_F_HI)), f.mul(d, f.c(LN2_F_LO)))
    k = e.op(SpvOp.ConvertFToS, e.i32, kf)
    result = scale_pow2(f, k, expm1_reduced(f, r))
    y_pos = e.op(SpvOp.FOrdGreaterThan, e.bool, y, f.c(0.0))
    inf_base = e.select(e.f32, y_pos, f.c(math.inf), f.c(0.0))
    return e.select(e.f32, finite, result, inf_base)
