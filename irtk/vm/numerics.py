"""Scalar semantics of VM ops: two's-complement wrapping, float32 rounding, IEEE results.

Python's ints are unbounded and its math module raises where IEEE 754 returns inf or NaN; these
helpers give each op the result the same op has in C on the host (IREE's VM semantics), so a
host-side computation agrees with the device.
"""
from __future__ import annotations

import math
import struct
from collections.abc import Callable
from fractions import Fraction

from irtk.vm.refs import Trap

INF = math.inf
NAN = math.nan
M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF
_F32 = struct.Struct("<f")
_I32 = struct.Struct("<i")
_D64 = struct.Struct("<d")
_Q64 = struct.Struct("<q")


def w32(x: int) -> int:
    """Wrap to a signed 32-bit value."""
    return ((x + 0x80000000) & M32) - 0x80000000


def w64(x: int) -> int:
    return ((x + 0x8000000000000000) & M64) - 0x8000000000000000


def f32(x: float) -> float:
    """Round a double to the nearest float32 (overflow gives a signed infinity)."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:
        return math.copysign(INF, x)


# -- integers (width-generic; `wrap` is w32 or w64, `mask` M32 or M64) ---------------------------

def div_s(a: int, b: int, wrap: Callable[[int], int]) -> int:
    if b == 0:
        raise Trap("integer division by zero")
    q = abs(a) // abs(b)
    return wrap(q if (a < 0) == (b < 0) else -q)


def rem_s(a: int, b: int, wrap: Callable[[int], int]) -> int:
    if b == 0:
        raise Trap("integer remainder by zero")
    r = abs(a) % abs(b)
    return wrap(-r if a < 0 else r)


def div_u(a: int, b: int, wrap: Callable[[int], int], mask: int) -> int:
    if b == 0:
        raise Trap("integer division by zero")
    return wrap((a & mask) // (b & mask))


def rem_u(a: int, b: int, wrap: Callable[[int], int], mask: int) -> int:
    if b == 0:
        raise Trap("integer remainder by zero")
    return wrap((a & mask) % (b & mask))


# -- floats --------------------------------------------------------------------------------------

def fdiv(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a != a or a == 0:
            return NAN
        return math.copysign(INF, a) * math.copysign(1.0, b)


def frem(a: float, b: float) -> float:
    try:
        return math.fmod(a, b)
    except ValueError:
        return NAN


def fmin(a: float, b: float) -> float:
    if a != a or b != b:
        return NAN
    if a == b:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


def fmax(a: float, b: float) -> float:
    if a != a or b != b:
        return NAN
    if a == b:
        return b if math.copysign(1.0, a) < 0 else a
    return a if a > b else b


def fma(a: float, b: float, c: float) -> float:
    """a * b + c rounded once (exact rational arithmetic when all are finite)."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return a * b + c
    try:
        return float(exact)
    except OverflowError:
        return math.copysign(INF, exact)


def exp(a: float) -> float:
    try:
        return math.exp(a)
    except OverflowError:
        return INF


def exp2(a: float) -> float:
    try:
        return math.pow(2.0, a)
    except OverflowError:
        return INF


def log(a: float) -> float:
    if a == 0:
        return -INF
    if a < 0 or a != a:
        return NAN
    return math.log(a)


def log2(a: float) -> float:
    if a == 0:
        return -INF
    if a < 0 or a != a:
        return NAN
    return math.log2(a)


def sqrt(a: float) -> float:
    return NAN if a < 0 else math.sqrt(a)


def rsqrt(a: float) -> float:
    if a == 0:
        return math.copysign(INF, a)
    if a < 0 or a != a:
        return NAN
    return 1.0 / math.sqrt(a)


def sin(a: float) -> float:
    return math.sin(a) if math.isfinite(a) else NAN


def cos(a: float) -> float:
    return math.cos(a) if math.isfinite(a) else NAN


def _is_odd_integer(y: float) -> bool:
    return math.isfinite(y) and y == math.floor(y) and math.fmod(y, 2.0) != 0


def fpow(a: float, b: float) -> float:
    try:
        return math.pow(a, b)
    except OverflowError:
        return -INF if a < 0 and _is_odd_integer(b) else INF
    except ValueError:
        if a == 0 and b < 0:
            return math.copysign(INF, a) if _is_odd_integer(b) else INF
        return NAN


def _keep_sign(r: float, a: float) -> float:
    return math.copysign(r, a) if r == 0 else r


def floor(a: float) -> float:
    return a if not math.isfinite(a) else _keep_sign(float(math.floor(a)), a)


def ceil(a: float) -> float:
    return a if not math.isfinite(a) else _keep_sign(float(math.ceil(a)), a)


def round_away(a: float) -> float:
    """Round half away from zero (C's round)."""
    if not math.isfinite(a):
        return a
    m = abs(a)
    r = float(math.floor(m))
    if m - r >= 0.5:
        r += 1.0
    return math.copysign(r, a)


# -- conversions ---------------------------------------------------------------------------------

def int_to_f32(n: int) -> float:
    """Round an integer to the nearest float32 once (ties to even), as C's conversion does."""
    m = abs(n)
    shift = m.bit_length() - 24
    if shift > 0:
        q, rem = divmod(m, 1 << shift)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and q & 1):
            q += 1
        m = q << shift
    return f32(math.copysign(float(m), n) if n else 0.0)


def float_to_int(a: float, lo: int, hi: int) -> int:
    """Truncate toward zero, saturating to [lo, hi]; NaN gives 0."""
    if a != a:
        return 0
    if a >= hi:
        return hi
    if a <= lo:
        return lo
    return int(a)


def bits_f32_to_i32(a: float) -> int:
    return _I32.unpack(_F32.pack(a))[0]


def bits_i32_to_f32(a: int) -> float:
    return _F32.unpack(_I32.pack(a))[0]


def bits_f64_to_i64(a: float) -> int:
    return _Q64.unpack(_D64.pack(a))[0]


def bits_i64_to_f64(a: int) -> float:
    return _D64.unpack(_Q64.pack(a))[0]
