"""irtk's own f32 sequences for the transcendental math ops, accurate to a few ULP everywhere.

GLSL.std.450 only promises about 3 ULP for Exp/Log "outside a small range" and nothing for
Tanh; the drivers use that freedom (SwiftShader and lavapipe: tanh(1e-7) = 1.19e-7, exp 55 ULP
off at -57, log 5 ULP off, erf from a 1.5e-7 absolute approximation), so these ops are built
here from exactly computable steps: Cody-Waite range reduction (ln2 split so k * LN2_HI is
exact), exponent-bit scaling, and polynomials fitted by scripts/math_coefficients.py. Each
function takes and returns f32 ids; special values (NaN, +-inf, +-0) are selected at the end.
The contract and the measured errors are in docs/codegen_spirv.md ("Math accuracy").
"""
from __future__ import annotations

import math
import struct

from spirv.tables import GLSLstd450, Op as SpvOp

from .emitter import Emitter

# From scripts/math_coefficients.py (f32-rounded minimax fits, ascending powers).
EXPM1_Q = (0.5, 0.1666666716337204, 0.04166645556688309, 0.008333361707627773,
           0.0013934497255831957, 0.00019858127052430063)
LOG_R = (0.6666666865348816, 0.40000125765800476, 0.2855037450790405, 0.23342479765415192)
TANH_P = (-0.3333333432674408, 0.1333332359790802, -0.05396457016468048, 0.021817076951265335,
          -0.008520545437932014, 0.0025179495569318533)
ERF_P = (-0.37612637877464294, 0.11283791065216064, -0.02686608023941517, 0.0052233110181987286,
         -0.0008524909499101341, 0.00011626919149421155, -1.0916725841525476e-05)
ERFC_R_CENTER = 2.45
ERFC_R = (0.21458709239959717, -0.07690241187810898, 0.02617616020143032, -0.008513861335814,
          0.0026587159372866154, -0.0008000991074368358, 0.0002325280220247805,
          -6.562974886037409e-05, 1.8291313608642668e-05, -4.838908807869302e-06,
          1.066301024366112e-06, -2.8422351761037135e-07, 1.292067537406183e-07,
          -2.9587102545747257e-08)

LN2_HI = 0.693145751953125          # 16 significant bits: k * LN2_HI is exact for |k| < 256
LN2_LO = 1.4286068203094173e-06     # ln 2 - LN2_HI
LOG10_2_HI = 0.30102539062500000     # 12 significant bits
LOG10_2_LO = math.log10(2.0) - LOG10_2_HI


def split_f32(value: float) -> tuple[float, float]:
    """value as f32 hi + f32 lo (for products that need more than 24 bits of a constant)."""
    hi = struct.unpack("<f", struct.pack("<f", value))[0]
    return hi, struct.unpack("<f", struct.pack("<f", value - hi))[0]


LOG2E_HI, LOG2E_LO = split_f32(1.0 / math.log(2.0))
LOG10E_HI, LOG10E_LO = split_f32(1.0 / math.log(10.0))
LN2_F_HI, LN2_F_LO = split_f32(math.log(2.0))
TWO_OVER_SQRT_PI_HI, TWO_OVER_SQRT_PI_LO = split_f32(2.0 / math.sqrt(math.pi))


class F32:
    """Short names for the f32 instructions the sequences are written in."""

    def __init__(self, e: Emitter) -> None:
        self.e = e

    def c(self, v: float) -> int:
        return self.e.f32c(v)

    def add(self, a: int, b: int) -> int:
        return self.e.exact_op(SpvOp.FAdd, self.e.f32, a, b)

    def sub(self, a: int, b: int) -> int:
        return self.e.exact_op(SpvOp.FSub, self.e.f32, a, b)

    def mul(self, a: int, b: int) -> int:
        return self.e.exact_op(SpvOp.FMul, self.e.f32, a, b)

    def div(self, a: int, b: int) -> int:
        return self.e.op(SpvOp.FDiv, self.e.f32, a, b)

    def fma(self, a: int, b: int, c: int) -> int:
        return self.e.glsl(self.e.f32, GLSLstd450.Fma, a, b, c)

    def glsl(self, inst: GLSLstd450, *args: int) -> int:
        return self.e.glsl(self.e.f32, inst, *args)

    def horner(self, t: int, coeffs: tuple[float, ...]) -> int:
        p = self.c(coeffs[-1])
        for coeff in reversed(coeffs[:-1]):
            p = self.fma(p, t, self.c(coeff))
        return p

    def round_even(self, t: int) -> int:
        """t rounded to the nearest integer, ties to even, for |t| < 2**22: (t + 1.5 * 2**23)
        - 1.5 * 2**23, exact ops (SwiftShader takes GLSL RoundEven far slower than two adds)."""
        magic = self.c(1.5 * 2.0 ** 23)
        return self.sub(self.add(t, magic), magic)

    def floor_half(self, k: int) -> int:
        """floor(k / 2) of an i32 k with |k| < 2**24, through f32 (exact): an arithmetic right
        shift is taken lane by lane on SwiftShader (see emitter.py)."""
        e = self.e
        return e.op(SpvOp.ConvertFToS, e.i32, self.glsl(GLSLstd450.Floor, self.mul(
            e.op(SpvOp.ConvertSToF, e.f32, k), self.c(0.5))))

    def shift_right(self, v: int, c: int) -> int:
        """v >> c, arithmetic, for an i32 v and 8 <= c < 32, through f32: v with its low c bits
        cleared is q * 2**c with |q| <= 2**(31 - c), exact in f32, and so is the scaling
        (SwiftShader takes a shift lane by lane: see `floor_half`)."""
        assert 8 <= c < 32, "exact in f32 only for shifts of at least 8 bits"
        e = self.e
        cleared = e.op(SpvOp.BitwiseAnd, e.i32, v, e.i32c(-(1 << c)))
        return e.op(SpvOp.ConvertFToS, e.i32, self.mul(e.op(SpvOp.ConvertSToF, e.f32, cleared),
                                                       self.c(2.0 ** -c)))

    def less(self, a: int, b: float) -> int:
        return self.e.op(SpvOp.FOrdLessThan, self.e.bool, a, self.c(b))

    def clamp(self, x: int, lo: float, hi: float) -> int:
        return self.glsl(GLSLstd450.FMin, self.glsl(GLSLstd450.FMax, x, self.c(lo)), self.c(hi))

    def pow2(self, k: int) -> int:
        """2**k for an i32 k in [-126, 127], from the exponent bits."""
        e = self.e
        biased = e.op(SpvOp.IAdd, e.i32, k, e.i32c(127))
        return e.op(SpvOp.Bitcast, e.f32, e.op(SpvOp.ShiftLeftLogical, e.i32, biased,
                                               e.i32c(23)))

    def copysign(self, magnitude: int, sign: int) -> int:
        e = self.e
        m = e.op(SpvOp.BitwiseAnd, e.u32, e.f32_bits(magnitude), e.u32c(0x7FFFFFFF))
        s = e.op(SpvOp.BitwiseAnd, e.u32, e.f32_bits(sign), e.u32c(0x80000000))
        return e.op(SpvOp.Bitcast, e.f32, e.op(SpvOp.BitwiseOr, e.u32, m, s))

    def is_zero(self, x: int) -> int:
        e = self.e
        magnitude = e.op(SpvOp.BitwiseAnd, e.u32, e.f32_bits(x), e.u32c(0x7FFFFFFF))
        return e.op(SpvOp.IEqual, e.bool, magnitude, e.u32c(0))

    def keep_nan(self, x: int, result: int) -> int:
        return self.e.select(self.e.f32, self.e.is_nan(x), x, result)


# --- exp family --------------------------------------------------------------------------------

def _reduce(f: F32, x: int) -> tuple[int, int]:
    """x = k ln2 + r with |r| <= ln2/2 (x clamped to a range where k fits); (i32 k, r)."""
    kf = f.round_even(f.mul(x, f.c(LOG2E_HI)))
    r = f.sub(f.sub(x, f.mul(kf, f.c(LN2_HI))), f.mul(kf, f.c(LN2_LO)))
    return f.e.op(SpvOp.ConvertFToS, f.e.i32, kf), r


def expm1_reduced(f: F32, r: int) -> int:
    """e**r - 1 for |r| <= ln2/2: r + r^2 Q(r), exact for tiny r."""
    return f.fma(f.mul(r, r), f.horner(r, EXPM1_Q), r)


def scale_pow2(f: F32, k: int, p: int) -> int:
    """(1 + p) * 2**k for k in [-150, 128], in two exponent steps (each a normal power of
    two) so overflow and subnormal results round once at the end."""
    e = f.e
    k1 = f.floor_half(k)
    s1, s2 = f.pow2(k1), f.pow2(e.op(SpvOp.ISub, e.i32, k, k1))
    return f.mul(f.fma(s2, p, s2), s1)


def exp_finite(f: F32, x: int) -> int:
    """e**x for x in [-104, 89] (no special values)."""
    k, r = _reduce(f, x)
    return scale_pow2(f, k, expm1_reduced(f, r))


def exp(e: Emitter, x: int) -> int:
    f = F32(e)
    return f.keep_nan(x, exp_finite(f, f.clamp(x, -104.0, 89.0)))


def exp2(e: Emitter, x: int) -> int:
    """2**x: k = round(x), r = (x - k) ln2 with ln2 in two parts."""
    f = F32(e)
    xc = f.clamp(x, -151.0, 129.0)
    kf = f.round_even(xc)
    d = f.sub(xc, kf)
    r = f.fma(d, f.c(LN2_F_HI), f.mul(d, f.c(LN2_F_LO)))
    k = e.op(SpvOp.ConvertFToS, e.i32, kf)
    return f.keep_nan(x, scale_pow2(f, k, expm1_reduced(f, r)))


def expm1(e: Emitter, x: int) -> int:
    """2**k (e**r - 1) + (2**k - 1), which keeps every bit near 0; e**x beyond 44."""
    f = F32(e)
    xc = f.clamp(x, -30.0, 44.0)
    k, r = _reduce(f, xc)
    s = f.pow2(k)
    result = f.fma(s, expm1_reduced(f, r), f.sub(s, f.c(1.0)))
    big = e.op(SpvOp.FOrdGreaterThan, e.bool, x, f.c(44.0))
    result = e.select(e.f32, big, exp_finite(f, f.clamp(x, -104.0, 89.0)), result)
    return f.keep_nan(x, e.select(e.f32, f.is_zero(x), x, result))


def tanh(e: Emitter, x: int) -> int:
    """x + x^3 P(x^2) for |x| < 0.55, else 1 - 2 / (e**2|x| + 1); odd, so -0 stays -0."""
    f = F32(e)
    ax = f.glsl(GLSLstd450.FAbs, x)
    z = f.mul(ax, ax)
    small = f.fma(f.mul(ax, z), f.horner(z, TANH_P), ax)
    big_e = exp_finite(f, f.mul(f.c(2.0), f.glsl(GLSLstd450.FMin, ax, f.c(10.0))))
    large = f.sub(f.c(1.0), f.div(f.c(2.0), f.add(big_e, f.c(1.0))))
    result = e.select(e.f32, f.less(ax, 0.55), small, large)
    return f.keep_nan(x, f.copysign(result, x))


def erf(e: Emitter, x: int) -> int:
    """x (2/sqrt(pi) + x^2 P(x^2)) for |x| < 0.9; 1 - e**-x^2 R(|x|) up to 4 (x^2 split in
    two so e**-x^2 keeps its bits); 1 beyond, where erf rounds to 1; odd."""
    f = F32(e)
    ax = f.glsl(GLSLstd450.FAbs, x)
    z = f.mul(ax, ax)
    inner = f.fma(z, f.horner(z, ERF_P), f.c(TWO_OVER_SQRT_PI_LO))
    small = f.fma(ax, f.c(TWO_OVER_SQRT_PI_HI), f.mul(ax, inner))
    axc = f.glsl(GLSLstd450.FMin, ax, f.c(4.0))
    sq = f.mul(axc, axc)
    sq_lo = f.fma(axc, axc, e.op(SpvOp.FNegate, e.f32, sq))
    decay = exp_finite(f, e.op(SpvOp.FNegate, e.f32, sq))
    decay = f.fma(decay, e.op(SpvOp.FNegate, e.f32, sq_lo), decay)
    tail = f.mul(decay, f.horner(f.sub(axc, f.c(ERFC_R_CENTER)), ERFC_R))
    large = f.sub(f.c(1.0), tail)
    result = e.select(e.f32, f.less(ax, 0.9), small, large)
    result = e.select(e.f32, f.less(ax, 4.0), result, f.c(1.0))
    return f.keep_nan(x, f.copysign(result, x))


# --- log family --------------------------------------------------------------------------------

def _log_parts(f: F32, x: int) -> tuple[int, int]:
    """(k as f32, log(m)) for x = 2**k m (see split_exponent)."""
    k, g = split_exponent(f, x)
    return k, _log1p_reduced(f, g)


def split_exponent(f: F32, x: int) -> tuple[int, int]:
    """x = 2**k m with m in [sqrt(.5), sqrt(2)) for a finite x > 0, subnormals included (their
    significand is converted as an integer, exact, so no multiply can flush them);
    returns (k as f32, m - 1, exact)."""
    e = f.e
    bits = e.f32_bits(x)
    sub = e.op(SpvOp.ULessThan, e.bool, bits, e.u32c(0x00800000))
    bits = e.select(e.u32, sub, e.f32_bits(e.op(SpvOp.ConvertUToF, e.f32, bits)), bits)
    ibits = e.op(SpvOp.Bitcast, e.i32, bits)
    k = f.shift_right(e.op(SpvOp.ISub, e.i32, ibits, e.i32c(0x3F3504F3)), 23)
    m = e.op(SpvOp.Bitcast, e.f32, e.op(SpvOp.ISub, e.i32, ibits,
                                         e.op(SpvOp.ShiftLeftLogical, e.i32, k, e.i32c(23))))
    k = e.op(SpvOp.IAdd, e.i32, k, e.select(e.i32, sub, e.i32c(-149), e.i32c(0)))
    return e.op(SpvOp.ConvertSToF, e.f32, k), f.sub(m, f.c(1.0))


def _log1p_reduced(f: F32, g: int) -> int:
    """log(1 + g) for g in [sqrt(.5) - 1, sqrt(2) - 1): with s = g / (2 + g),
    g - (g^2/2 - s (g^2/2 + s^2 R(s^2)))."""
    s = f.div(g, f.add(f.c(2.0), g))
    z = f.mul(s, s)
    hfsq = f.mul(f.c(0.5), f.mul(g, g))
    tail = f.mul(z, f.horner(z, LOG_R))
    return f.sub(g, f.sub(hfsq, f.mul(s, f.add(hfsq, tail))))


def _from_natural(f: F32, k: int, lm: int, base: str) -> int:
    """k log_b(2) + lm / ln(b), with the constants in two parts."""
    if base == "e":
        return f.add(f.mul(k, f.c(LN2_HI)), f.add(lm, f.mul(k, f.c(LN2_LO))))
    if base == "2":
        return f.add(k, f.fma(lm, f.c(LOG2E_HI), f.mul(lm, f.c(LOG2E_LO))))
    t = f.fma(lm, f.c(LOG10E_HI), f.mul(lm, f.c(LOG10E_LO)))
    return f.add(f.mul(k, f.c(LOG10_2_HI)), f.add(t, f.mul(k, f.c(LOG10_2_LO))))


def _log_specials(f: F32, x: int, zero: int, result: int) -> int:
    """+inf -> +inf, `zero` -> -inf, below the domain or NaN -> NaN."""
    e = f.e
    result = e.select(e.f32, e.is_inf(x), x, result)
    return e.select(e.f32, zero, f.c(-math.inf), result)


def log(e: Emitter, x: int, base: str = "e") -> int:
    """log, log2 (base "2") or log10 (base "10") of x."""
    f = F32(e)
    k, lm = _log_parts(f, x)
    zero = f.is_zero(x)
    result = _log_specials(f, x, zero, _from_natural(f, k, lm, base))
    invalid = e.or_(e.is_nan(x), e.and_(e.sign_bit(x), e.not_(zero)))
    return e.select(e.f32, invalid, f.c(math.nan), result)


def log1p(e: Emitter, x: int) -> int:
    """log(u) + (x - (u - 1)) / u for u = 1 + x: the correction restores what the rounding of
    u dropped (exactly x for tiny x)."""
    f = F32(e)
    u = f.add(f.c(1.0), x)
    k, lm = _log_parts(f, u)
    ge_two = e.op(SpvOp.FOrdGreaterThanEqual, e.bool, u, f.c(2.0))
    lost = e.select(e.f32, ge_two, f.sub(f.c(1.0), f.sub(u, x)), f.sub(x, f.sub(u, f.c(1.0))))
    lm = f.add(lm, f.div(lost, u))
    minus_one = e.op(SpvOp.FOrdEqual, e.bool, x, f.c(-1.0))
    result = _log_specials(f, x, minus_one, _from_natural(f, k, lm, "e"))
    result = e.select(e.f32, f.is_zero(x), x, result)
    invalid = e.or_(e.is_nan(x), f.less(x, -1.0))
    return e.select(e.f32, invalid, f.c(math.nan), result)
