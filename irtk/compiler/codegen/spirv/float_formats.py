"""Floats narrower than f32 (f16, bf16, the f8 and f4 types) in 32-bit shader code.

Their values live in f32 registers, and every op producing one rounds its f32 result to the
type, so a device needs no 16-bit or 8-bit float support. Conversion goes through the type's
bit pattern: `encode` rounds an f32 to the type's bits (round to nearest, ties to even, on the
bits, so drivers cannot fold it away), `decode` turns bits back into the exact f32 value.

Special values follow the type's kind (as MLIR's APFloat does), as `irtk.types` defines the
formats and their kinds.
"""
from __future__ import annotations

import math
import struct

from spirv.tables import GLSLstd450, Op

from irtk.types import FLOAT_FORMATS, FloatFormat

from .emitter import Emitter

# The formats computed in f32 registers (everything narrower than f32).
FORMATS: dict[str, FloatFormat] = {name: f for name, f in FLOAT_FORMATS.items() if f.bits < 32}


def _u(e: Emitter, opcode: Op, *args: int) -> int:
    return e.op(opcode, e.u32, *args)


def encode(e: Emitter, fmt: FloatFormat, x: int) -> int:
    """The f32 `x` rounded to `fmt`, as a u32 holding the type's bits."""
    u32c = e.u32c
    bits = e.f32_bits(x)
    magnitude = _u(e, Op.BitwiseAnd, bits, u32c(0x7FFFFFFF))
    nan = e.op(Op.UGreaterThan, e.bool, magnitude, u32c(0x7F800000))
    inf = e.op(Op.IEqual, e.bool, magnitude, u32c(0x7F800000))
    negative = e.op(Op.UGreaterThan, e.bool, bits, u32c(0x7FFFFFFF))
    shift = 23 - fmt.mantissa_bits

    def round_shift(value: int, amount: int) -> int:
        """value >> amount, rounded to nearest with ties to even (amount >= 1)."""
        half_minus_one = _u(e, Op.ISub, _u(e, Op.ShiftLeftLogical, u32c(1),
                                           _u(e, Op.ISub, amount, u32c(1))), u32c(1))
        odd = _u(e, Op.BitwiseAnd, _u(e, Op.ShiftRightLogical, value, amount), u32c(1))
        return _u(e, Op.ShiftRightLogical,
                  _u(e, Op.IAdd, value, _u(e, Op.IAdd, half_minus_one, odd)), amount)

    if fmt.kind == "e8m0":
        rounded = round_shift(magnitude, u32c(23))
        bad = e.or_(nan, inf, negative, e.op(Op.IEqual, e.bool, magnitude, u32c(0)),
                    e.op(Op.UGreaterThan, e.bool, rounded, u32c(fmt.max_bits)))
        return e.select(e.u32, bad, u32c(0xFF), rounded)

    exponent = _u(e, Op.ShiftRightLogical, magnitude, u32c(23))
    emin_biased = 1 - fmt.bias + 127          # f32 exponent field of the smallest normal
    if emin_biased > 0:
        subnormal = e.op(Op.ULessThan, e.bool, exponent, u32c(emin_biased))
        fraction = _u(e, Op.BitwiseAnd, magnitude, u32c(0x7FFFFF))
        mantissa = e.select(e.u32, e.op(Op.IEqual, e.bool, exponent, u32c(0)), fraction,
                            _u(e, Op.BitwiseOr, fraction, u32c(0x800000)))
        effective = e.glsl(e.u32, GLSLstd450.UMax, exponent, u32c(1))
        amount = _u(e, Op.IAdd, u32c(shift + emin_biased), e.op(Op.Bitcast, e.u32, e.op(
            Op.SNegate, e.i32, e.op(Op.Bitcast, e.i32, effective))))
        amount = e.select(e.u32, e.op(Op.UGreaterThan, e.bool, amount, u32c(31)), u32c(31),
                          e.select(e.u32, e.op(Op.ULessThan, e.bool, amount, u32c(1)), u32c(1),
                                   amount))
        sub_bits = round_shift(mantissa, amount)
    else:
        subnormal, sub_bits = e.boolc(False), u32c(0)
    normal = round_shift(magnitude, u32c(shift)) if shift else magnitude
    offset = (127 - fmt.bias) << fmt.mantissa_bits
    if offset:
        normal = _u(e, Op.ISub, normal, u32c(offset & 0xFFFFFFFF))
    result = e.select(e.u32, subnormal, sub_bits, normal)
    overflow = e.or_(inf, e.and_(e.not_(subnormal),
                                 e.op(Op.UGreaterThan, e.bool, result, u32c(fmt.max_bits))))
    overflow_bits = {"ieee": ((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits,
                     "fn": fmt.nan_bits, "fnuz": fmt.nan_bits,
                     "finite": fmt.max_bits}[fmt.kind]
    result = e.select(e.u32, overflow, u32c(overflow_bits), result)
    sign_bit = u32c(1 << (fmt.exponent_bits + fmt.mantissa_bits))
    signed = _u(e, Op.BitwiseOr, result, sign_bit)
    if fmt.kind == "fnuz":  # no negative zero: -0 and values rounding to it give +0
        negative = e.and_(negative, e.op(Op.INotEqual, e.bool, result, u32c(0)))
    result = e.select(e.u32, negative, signed, result)
    if fmt.kind == "finite":
        return e.select(e.u32, nan, u32c(0), result)
    return e.select(e.u32, nan, u32c(fmt.nan_bits), result)


def decode(e: Emitter, fmt: FloatFormat, bits: int) -> int:
    """The exact f32 value of `fmt` bits held in the low bits of the u32 `bits`."""
    u32c = e.u32c
    m = fmt.mantissa_bits
    if fmt.kind == "e8m0":
        # Bits 0 are 2^-127, an f32 denormal (0x00400000), which devices that flush denormals
        # read as 0.
        shifted = e.select(e.u32, e.op(Op.IEqual, e.bool, bits, u32c(0)), u32c(0x00400000),
                           _u(e, Op.ShiftLeftLogical, bits, u32c(23)))
        value = e.op(Op.Bitcast, e.f32, shifted)
        nan = e.op(Op.IEqual, e.bool, bits, u32c(0xFF))
        return e.select(e.f32, nan, e.f32c(float("nan")), value)
    exp_mask = (1 << fmt.exponent_bits) - 1
    sign = _u(e, Op.BitwiseAnd, bits, u32c(1 << (fmt.exponent_bits + m)))
    exponent = _u(e, Op.BitwiseAnd, _u(e, Op.ShiftRightLogical, bits, u32c(m)), u32c(exp_mask))
    mantissa = _u(e, Op.BitwiseAnd, bits, u32c((1 << m) - 1))
    normal_bits = _u(e, Op.BitwiseOr,
                     _u(e, Op.ShiftLeftLogical,
                        _u(e, Op.IAdd, exponent, u32c(127 - fmt.bias)), u32c(23)),
                     _u(e, Op.ShiftLeftLogical, mantissa, u32c(23 - m)))
    normal = e.op(Op.Bitcast, e.f32, normal_bits)
    if 127 - fmt.bias > 0:   # subnormals of the type are normal f32 numbers: compute them
        sub = e.op(Op.FMul, e.f32, e.op(Op.ConvertUToF, e.f32, mantissa),
                   e.f32c(2.0 ** (1 - fmt.bias - m)))
    else:                    # bf16: its subnormals are f32's own
        sub = normal
    is_sub = e.op(Op.IEqual, e.bool, exponent, u32c(0))
    value = e.select(e.f32, is_sub, sub, normal)
    if fmt.kind == "ieee":
        special = e.op(Op.IEqual, e.bool, exponent, u32c(exp_mask))
        inf_nan = e.op(Op.Bitcast, e.f32, _u(e, Op.BitwiseOr, u32c(0x7F800000),
                                             _u(e, Op.ShiftLeftLogical, mantissa, u32c(23 - m))))
        value = e.select(e.f32, special, inf_nan, value)
    magnitude_bits = _u(e, Op.BitwiseAnd, e.f32_bits(value), u32c(0x7FFFFFFF))
    value = e.op(Op.Bitcast, e.f32, _u(e, Op.BitwiseOr, magnitude_bits,
                                       _u(e, Op.ShiftLeftLogical, sign,
                                          u32c(31 - fmt.exponent_bits - m))))
    if fmt.kind == "fn":
        nan = e.op(Op.IEqual, e.bool, _u(e, Op.BitwiseAnd, bits, u32c(fmt.nan_bits)),
                   u32c(fmt.nan_bits))
        value = e.select(e.f32, nan, e.f32c(float("nan")), value)
    elif fmt.kind == "fnuz":
        nan = e.op(Op.IEqual, e.bool, bits, u32c(fmt.nan_bits))
        value = e.select(e.f32, nan, e.f32c(float("nan")), value)
    return value


def round_to(e: Emitter, fmt: FloatFormat, x: int) -> int:
    """The f32 `x` rounded to `fmt` (still an f32 register value): the value
    `decode(encode(x))` gives, in about a fifth of its instructions, because every op on an
    emulated narrow float ends with one of these (two per multiply-add of an f16 matmul).

    `(|x| + c) - c` rounds |x| to a multiple of c's f32 ulp (f32 addition rounds to nearest
    even; NoContraction keeps drivers from folding the pair): with c = 2^(E + 23 - m) for |x|
    in the binade 2^E, that ulp is the type's 2^(E - m), and c is never less than
    2^(emin - m + 23), so below the smallest normal the quantum stays the type's fixed
    2^(emin - m). bf16 shares f32's exponent range, so its bits round in place instead (add
    half an ulp less one plus the kept lowest bit, clear the dropped bits). Magnitudes from
    the first that overflows up (inf and NaN included) take the type's overflow, NaN and zero
    rules (module docstring). Where the profile has shaderFloat16, f16 converts natively
    instead (two instructions; the kernel then needs the feature)."""
    if fmt.kind == "e8m0":
        return decode(e, fmt, encode(e, fmt, x))
    if fmt.name == "f16" and e.native_float16:
        return e.round_f16_natively(x)
    u32c = e.u32c
    m = fmt.mantissa_bits
    bits = e.f32_bits(x)
    magnitude = _u(e, Op.BitwiseAnd, bits, u32c(0x7FFFFFFF))
    sign = _u(e, Op.BitwiseAnd, bits, u32c(0x80000000))
    shift = 23 - m
    emin = 1 - fmt.bias
    if emin > -126:   # the type's range lies inside f32's normal range
        binade = _u(e, Op.BitwiseAnd, magnitude, u32c(0x7F800000))
        c_bits = e.glsl(e.u32, GLSLstd450.UMax, _u(e, Op.IAdd, binade, u32c(shift << 23)),
                        u32c(_f32_bits(2.0 ** (emin - m + 23))))
        c = e.op(Op.Bitcast, e.f32, c_bits)
        absolute = e.op(Op.Bitcast, e.f32, magnitude)
        rounded = e.f32_bits(e.exact_op(Op.FSub, e.f32,
                                        e.exact_op(Op.FAdd, e.f32, absolute, c), c))
    else:
        odd = _u(e, Op.BitwiseAnd, _u(e, Op.ShiftRightLogical, magnitude, u32c(shift)),
                 u32c(1))
        rounded = _u(e, Op.BitwiseAnd,
                     _u(e, Op.IAdd, magnitude, _u(e, Op.IAdd, odd, u32c((1 << (shift - 1)) - 1))),
                     u32c(~((1 << shift) - 1)))
    big = e.op(Op.UGreaterThanEqual, e.bool, magnitude, u32c(_overflow_threshold(fmt)))
    if fmt.kind == "ieee":   # inf, keeping a NaN's bits
        rounded = e.select(e.u32, big, e.glsl(e.u32, GLSLstd450.UMax, magnitude,
                                              u32c(0x7F800000)), rounded)
    elif fmt.kind == "finite":   # saturate
        rounded = e.select(e.u32, big, u32c(_f32_bits(fmt.value(fmt.max_bits))), rounded)
    if fmt.kind == "fnuz":   # no negative zero
        sign = e.select(e.u32, e.op(Op.IEqual, e.bool, rounded, u32c(0)), u32c(0), sign)
    value = e.op(Op.Bitcast, e.f32, _u(e, Op.BitwiseOr, rounded, sign))
    if fmt.kind == "finite":   # NaN is not representable: +0
        nan = e.op(Op.UGreaterThan, e.bool, magnitude, u32c(0x7F800000))
        return e.select(e.f32, nan, e.f32c(0.0), value)
    if fmt.kind in ("fn", "fnuz"):   # overflow, inf and NaN are all NaN
        return e.select(e.f32, big, e.f32c(float("nan")), value)
    return value


def _overflow_threshold(fmt: FloatFormat) -> int:
    """f32 bits of the smallest magnitude that rounds past the type's largest finite value:
    the midpoint above it, which rounds up (ties to even) unless that value's last mantissa
    bit is 0 (f8E4M3FN's 448 = 1.110b x 2^8)."""
    top = fmt.value(fmt.max_bits)
    half_ulp = 2.0 ** (math.floor(math.log2(top)) - fmt.mantissa_bits - 1)
    midpoint = _f32_bits(top + half_ulp)
    return midpoint + 1 if fmt.max_bits % 2 == 0 else midpoint


def _f32_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]
