"""Fit the polynomial coefficients of irtk's own f32 math sequences (irtk/compiler/codegen/
spirv/math_f32.py, math_trig.py, math_pow.py).

Each fit is a weighted least-squares fit on Chebyshev nodes, refined by Lawson's iteration
towards the minimax (equioscillating) relative error, in float64; coefficients are then rounded
to f32 and the error of the rounded polynomial is reported. Run it to regenerate the tuples
those modules hold (`python scripts/math_coefficients.py`);
tests/compiler/codegen_spirv/test_math_coefficients.py checks that they match.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

F = Callable[[np.ndarray], np.ndarray]


def fit(target: F, powers: list[int], lo: float, hi: float, scale: F, n: int = 2000,
        iterations: int = 60) -> tuple[np.ndarray, float]:
    """Coefficients c of sum(c_i * t**p_i) ~ target(t) / scale(t) minimising the relative
    error max |sum * scale - target| / |target| on [lo, hi]."""
    k = np.arange(n)
    t = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(math.pi * (k + 0.5) / n)
    y = target(t)
    s = scale(t)
    a = np.stack([t ** p * s for p in powers], axis=1) / y[:, None]
    b = np.ones(n)
    w = np.ones(n) / n
    c = np.zeros(len(powers))
    for _ in range(iterations):
        sw = np.sqrt(w)
        c = np.linalg.lstsq(a * sw[:, None], b * sw, rcond=None)[0]
        err = np.abs(a @ c - b)
        w = w * err
        w /= w.sum()
    c32 = c.astype(np.float32).astype(np.float64)
    rel = np.max(np.abs(np.stack([t ** p * s for p in powers], axis=1) @ c32 - y) / np.abs(y))
    return c32, float(rel)


def _vec(f: Callable[[float], float]) -> F:
    return np.vectorize(f, otypes=[np.float64])


LN2_HALF = math.log(2.0) / 2
PI4_SQ = (math.pi / 4 * 1.01) ** 2

# name: (target, powers, lo, hi, scale) -- fitted part times scale approximates target.
FITS: dict[str, tuple[F, list[int], float, float, F]] = {
    # expm1(r) = r + r^2 * Q(r) on |r| <= ln2/2 (exp reduces to this interval).
    "EXPM1_Q": (lambda r: np.expm1(r) - r, list(range(0, 6)), -LN2_HALF * 1.01,
                LN2_HALF * 1.01, lambda r: r * r),
    # 2 atanh(s) = 2s + s * z * R(z), z = s^2, s = f / (2 + f), f in [sqrt(.5) - 1, sqrt(2) - 1).
    "LOG_R": (lambda z: 2 * np.arctanh(np.sqrt(z)) / np.sqrt(z) - 2, list(range(0, 4)),
              1e-12, (3 - 2 * math.sqrt(2)) ** 2 * 1.01, lambda z: z),
    # For pow's double-f32 log: 2 atanh(s) = 2s + 2s^3/3 + s^5 R2(s^2) (series summed).
    "POW_LOG_R2": (lambda z: sum(2 * z ** (n - 2) / (2 * n + 1) for n in range(2, 40)),
                   list(range(0, 4)), 1e-12, (3 - 2 * math.sqrt(2)) ** 2 * 1.01,
                   lambda z: np.ones_like(z)),
    # tanh(x) = x + x^3 * P(x^2) on |x| <= 0.55.
    "TANH_P": (lambda z: np.tanh(np.sqrt(z)) / np.sqrt(z) - 1, list(range(0, 6)), 1e-12,
               0.3025 * 1.01, lambda z: z),
    # erf(x) = x * (c0 + x^2 * P(x^2)) on |x| <= 0.9; c0 = 2 / sqrt(pi) is split hi/lo.
    "ERF_P": (lambda z: _vec(math.erf)(np.sqrt(z)) / np.sqrt(z) - 2 / math.sqrt(math.pi),
              list(range(0, 7)), 1e-12, 0.81 * 1.01, lambda z: z),
    # erfc(x) = exp(-x^2) * R(x) on [0.9, 4]: R as a polynomial in t = x - 2.45.
    "ERFC_R": (lambda t: _vec(math.erfc)(t + 2.45) * np.exp((t + 2.45) ** 2),
               list(range(0, 14)), 0.9 - 2.45, 4.0 - 2.45, lambda t: np.ones_like(t)),
    # atan(u) = u + u^3 P(u^2) on |u| <= tan(pi/8).
    "ATAN_P": (lambda z: np.arctan(np.sqrt(z)) / np.sqrt(z) - 1, list(range(0, 7)), 1e-12,
               math.tan(math.pi / 8) ** 2 * 1.01, lambda z: z),
    # sin(r) = r + r^3 S(r^2), cos(r) = 1 - r^2/2 + r^4 C(r^2), tan(r) = r + r^3 T(r^2) on
    # |r| <= pi/4 (the reduced argument of sin, cos and tan).
    "SIN_S": (lambda z: np.sin(np.sqrt(z)) / np.sqrt(z) - 1, list(range(0, 4)), 1e-12,
              PI4_SQ, lambda z: z),
    "COS_C": (lambda z: z / 2 - 2 * np.sin(np.sqrt(z) / 2) ** 2, list(range(0, 4)), 1e-4, PI4_SQ,
              lambda z: z * z),
    "TAN_T": (lambda z: np.tan(np.sqrt(z)) / np.sqrt(z) - 1, list(range(0, 10)), 1e-12,
              PI4_SQ, lambda z: z),
}


def main() -> None:
    for name, (target, powers, lo, hi, scale) in FITS.items():
        c, rel = fit(target, powers, lo, hi, scale)
        print(f"# max relative error of the fitted part: {rel:.3g}")
        print(f"{name} = ({', '.join(repr(float(np.float32(v))) for v in c)})")


if __name__ == "__main__":
    main()
