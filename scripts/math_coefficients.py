"""Fit the polynomial coefficients of irtk's own f32 math sequences (irtk/compiler/codegen/
spirv/math_f32.py, math_trig.py, math_pow.py).

Each fit is a weighted least-squares fit on Chebyshev nodes, refined by Lawson's iteration
towards the minimax (equioscillating) relative error; coefficients are then rounded to f32 and
the error of the rounded polynomial is reported. Run it to regenerate the tuples those modules
hold (`python scripts/math_coefficients.py`); tests/compiler/codegen_spirv/
test_math_coefficients.py checks that they match.

The result must not depend on the machine or on library versions, since a test compares it
bit for bit: the nodes and target values come from mpmath at 40 digits (numpy's transcendental
functions change between releases, and targets such as atan(u)/u - 1 cancel in float64), and
the fit itself uses only correctly rounded float64 operations: elementwise numpy arithmetic,
sums in a fixed pairwise order (`_sum`), and a Householder least-squares solve written here (LAPACK's and
BLAS's summation orders vary by version and CPU).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import mpmath
import numpy as np

MpF = Callable[[mpmath.mpf], mpmath.mpf]
DIGITS = 40


def fit(target: MpF, powers: list[int], lo: float, hi: float, scale: MpF, n: int = 2000,
        iterations: int = 60) -> tuple[np.ndarray, float]:
    """Coefficients c of sum(c_i * t**p_i) ~ target(t) / scale(t) minimising the relative
    error max |sum * scale - target| / |target| on [lo, hi]."""
    a = _columns(target, powers, lo, hi, scale, n)
    ones = np.ones(n)
    w = np.full(n, 1.0 / n)
    c = np.zeros(len(powers))
    for _ in range(iterations):
        sw = np.sqrt(w)
        c = _least_squares(a * sw[:, None], sw)
        w = w * np.abs(_matvec(a, c) - ones)
        w = w / _sum(w)
    c32 = c.astype(np.float32).astype(np.float64)
    return c32, float(np.max(np.abs(_matvec(a, c32) - ones)))


def _columns(target: MpF, powers: list[int], lo: float, hi: float, scale: MpF,
             n: int) -> np.ndarray:
    """a[i, j] = t_i**p_j * scale(t_i) / target(t_i) at the n Chebyshev nodes t_i (floats),
    each entry correctly rounded from 40 digits."""
    rows = []
    with mpmath.workdps(DIGITS):
        mid, half = (mpmath.mpf(lo) + hi) / 2, (mpmath.mpf(hi) - lo) / 2
        for k in range(n):
            t = float(mid + half * mpmath.cos(mpmath.pi * (k + mpmath.mpf(0.5)) / n))
            tm = mpmath.mpf(t)
            ratio = scale(tm) / target(tm)
            rows.append([float(tm ** p * ratio) for p in powers])
    return np.array(rows)


def _matvec(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a @ c summed in column order (the same rounding everywhere)."""
    acc = np.zeros(a.shape[0])
    for j in range(a.shape[1]):
        acc = acc + a[:, j] * c[j]
    return acc


def _sum(x: np.ndarray) -> float:
    """The sum of `x` added pairwise in a fixed tree (numpy's own reductions may change
    their order between releases and CPUs; elementwise additions cannot)."""
    size = 1 << max(0, (len(x) - 1).bit_length())
    x = np.concatenate([x, np.zeros(size - len(x))])
    while len(x) > 1:
        x = x[0::2] + x[1::2]
    return float(x[0])


def _dot(x: np.ndarray, y: np.ndarray) -> float:
    return _sum(x * y)


def _least_squares(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """argmin |a c - b| by Householder QR (a has full column rank)."""
    a, b = a.copy(), b.copy()
    k = a.shape[1]
    for j in range(k):
        x = a[j:, j]
        norm = math.sqrt(_dot(x, x))
        v = x.copy()
        v[0] += norm if x[0] >= 0 else -norm
        vv = _dot(v, v)
        for col in range(j, k):
            a[j:, col] -= v * (2 * _dot(v, a[j:, col]) / vv)
        b[j:] -= v * (2 * _dot(v, b[j:]) / vv)
    c = np.zeros(k)
    for i in reversed(range(k)):
        c[i] = (b[i] - _dot(a[i, i + 1:k], c[i + 1:])) / a[i, i]
    return c


LN2_HALF = math.log(2.0) / 2
PI4_SQ = (math.pi / 4 * 1.01) ** 2
mp = mpmath


def _sqrt_ratio(f: Callable[[mpmath.mpf], mpmath.mpf], z: mpmath.mpf) -> mpmath.mpf:
    """f(sqrt z) / sqrt z."""
    s = mp.sqrt(z)
    return f(s) / s


# name: (target, powers, lo, hi, scale) -- fitted part times scale approximates target.
FITS: dict[str, tuple[MpF, list[int], float, float, MpF]] = {
    # expm1(r) = r + r^2 * Q(r) on |r| <= ln2/2 (exp reduces to this interval).
    "EXPM1_Q": (lambda r: mp.expm1(r) - r, list(range(0, 6)), -LN2_HALF * 1.01,
                LN2_HALF * 1.01, lambda r: r * r),
    # 2 atanh(s) = 2s + s * z * R(z), z = s^2, s = f / (2 + f), f in [sqrt(.5) - 1, sqrt(2) - 1).
    "LOG_R": (lambda z: 2 * _sqrt_ratio(mp.atanh, z) - 2, list(range(0, 4)),
              1e-12, (3 - 2 * math.sqrt(2)) ** 2 * 1.01, lambda z: z),
    # For pow's double-f32 log: 2 atanh(s) = 2s + 2s^3/3 + s^5 R2(s^2).
    "POW_LOG_R2": (lambda z: (2 * _sqrt_ratio(mp.atanh, z) - 2 - 2 * z / 3) / (z * z),
                   list(range(0, 4)), 1e-12, (3 - 2 * math.sqrt(2)) ** 2 * 1.01,
                   lambda z: mp.mpf(1)),
    # tanh(x) = x + x^3 * P(x^2) on |x| <= 0.55.
    "TANH_P": (lambda z: _sqrt_ratio(mp.tanh, z) - 1, list(range(0, 6)), 1e-12,
               0.3025 * 1.01, lambda z: z),
    # erf(x) = x * (c0 + x^2 * P(x^2)) on |x| <= 0.9; c0 = 2 / sqrt(pi) is split hi/lo.
    "ERF_P": (lambda z: _sqrt_ratio(mp.erf, z) - 2 / mp.sqrt(mp.pi),
              list(range(0, 7)), 1e-12, 0.81 * 1.01, lambda z: z),
    # erfc(x) = exp(-x^2) * R(x) on [0.9, 4]: R as a polynomial in t = x - 2.45.
    "ERFC_R": (lambda t: mp.erfc(t + mp.mpf(2.45)) * mp.exp((t + mp.mpf(2.45)) ** 2),
               list(range(0, 14)), 0.9 - 2.45, 4.0 - 2.45, lambda t: mp.mpf(1)),
    # atan(u) = u + u^3 P(u^2) on |u| <= tan(pi/8).
    "ATAN_P": (lambda z: _sqrt_ratio(mp.atan, z) - 1, list(range(0, 7)), 1e-12,
               math.tan(math.pi / 8) ** 2 * 1.01, lambda z: z),
    # sin(r) = r + r^3 S(r^2), cos(r) = 1 - r^2/2 + r^4 C(r^2), tan(r) = r + r^3 T(r^2) on
    # |r| <= pi/4 (the reduced argument of sin, cos and tan).
    "SIN_S": (lambda z: _sqrt_ratio(mp.sin, z) - 1, list(range(0, 4)), 1e-12,
              PI4_SQ, lambda z: z),
    "COS_C": (lambda z: z / 2 - 2 * mp.sin(mp.sqrt(z) / 2) ** 2, list(range(0, 4)), 1e-4, PI4_SQ,
              lambda z: z * z),
    "TAN_T": (lambda z: _sqrt_ratio(mp.tan, z) - 1, list(range(0, 10)), 1e-12,
              PI4_SQ, lambda z: z),
}


def main() -> None:
    for name, (target, powers, lo, hi, scale) in FITS.items():
        c, rel = fit(target, powers, lo, hi, scale)
        print(f"# max relative error of the fitted part: {rel:.3g}")
        print(f"{name} = ({', '.join(repr(float(np.float32(v))) for v in c)})")


if __name__ == "__main__":
    main()
