"""MLIR scalar ops (arith, math, linalg.index) as SPIR-V instructions on 32-bit registers.

Each emitter is registered in the backend's op table (op_table.py) as a "class" implementation
with the register-class signatures it accepts (f32, i32, i1); typed_ops.py maps every narrower
type onto these classes. Where
SPIR-V or GLSL.std.450 leaves a case undefined that MLIR programs (and the CPU reference driver)
give a value, the emitter guards it explicitly with selects, so the shader never executes an
undefined operation: integer division by zero gives 0, INT_MIN / -1 gives INT_MIN, shifts by
32 or more give 0 (or the sign fill), float-to-int conversions saturate (NaN -> 0), NaN
handling of min/max and comparisons does not rely on the driver honouring NaNs, and pow is defined
over its whole domain, correcting what SwiftShader and lavapipe get wrong (measured; see
docs/codegen_spirv.md, which lists the rules). exp, exp2, log, log2 and tanh are irtk's own
sequences (math_f32.py), since the drivers' built-ins miss the accuracy contract.
"""
from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from spirv.tables import GLSLstd450, Op as SpvOp

from irtk.compiler.kernel import Op
from irtk.errors import CompileError

from . import math_f32, math_pow
from .emitter import Emitter
from .op_table import SPIRV_OPS, SpirvOp, class_op, class_signatures

INT_MIN = -(1 << 31)


@dataclass
class OpCall:
    """One op to emit: the op, its operand ids and their kernel types, and the loop indices."""

    op: Op
    args: list[int]
    types: list[str]
    loop_index: Callable[[int], int]  # loop dimension -> i32 id

    @property
    def result_type(self) -> str:
        return self.op.result_type


Emit = Callable[[Emitter, OpCall], int]
Signature = tuple[tuple[str, ...], str]


def _sig(text: str) -> Signature:
    """"f32,f32->i1" -> (("f32", "f32"), "i1")."""
    ins, out = text.split("->")
    return tuple(t for t in ins.split(",") if t), out


def _op(*names: str, sigs: tuple[str, ...]) -> Callable[[Emit], Emit]:
    """Register an emitter for ops `names` on the register-class signatures `sigs`."""
    def register(fn: Emit) -> Emit:
        signatures = tuple(_sig(s) for s in sigs)
        SPIRV_OPS.register(names, SpirvOp("class", fn, signatures),
                           class_signatures(*signatures))
        return fn
    return register


def emit_op(e: Emitter, call: OpCall) -> int:
    """Emit `call.op` on register-class values; CompileError if no class emitter takes it."""
    impl = class_op(call.op.name, call.types, call.result_type)
    if impl is None:
        raise CompileError(f"vulkan-spirv: '{call.op.name}' on ({', '.join(call.types)}) -> "
                           f"{call.result_type} is not supported")
    return impl.emit(e, call)


_FF_F = ("f32,f32->f32",)
_F_F = ("f32->f32",)
_II_I = ("i32,i32->i32",)
_II_I_BOOL = ("i32,i32->i32", "i1,i1->i1")


# --- constants and indices ---------------------------------------------------------------------

@_op("linalg.index", sigs=("->i32",))
def _index(e: Emitter, c: OpCall) -> int:
    return c.loop_index(c.op.int_value)


def _copysign_bits(e: Emitter, magnitude: int, sign: int) -> int:
    """|magnitude| with the sign bit of `sign` (also for zeros and NaNs)."""
    m = e.op(SpvOp.BitwiseAnd, e.u32, e.f32_bits(magnitude), e.u32c(0x7FFFFFFF))
    s = e.op(SpvOp.BitwiseAnd, e.u32, e.f32_bits(sign), e.u32c(0x80000000))
    return e.op(SpvOp.Bitcast, e.f32, e.op(SpvOp.BitwiseOr, e.u32, m, s))


# --- float arithmetic --------------------------------------------------------------------------

def _float_binary(name: str, opcode: SpvOp) -> None:
    _op(name, sigs=_FF_F)(lambda e, c: e.op(opcode, e.f32, *c.args))


for _name, _opcode in (("arith.addf", SpvOp.FAdd), ("arith.subf", SpvOp.FSub),
                       ("arith.mulf", SpvOp.FMul), ("arith.divf", SpvOp.FDiv)):
    _float_binary(_name, _opcode)


@_op("arith.remf", sigs=_FF_F)
def _remf(e: Emitter, c: OpCall) -> int:
    """C fmod. Drivers compute x - y * trunc(x / y): when x / y rounds up to an integer the
    remainder comes out with the wrong sign or a full |y| too large, and lavapipe gives NaN for
    an infinite y; each is corrected here."""
    x, y = c.args
    f32 = e.f32
    r = e.op(SpvOp.FRem, f32, x, y)
    step = _copysign_bits(e, e.glsl(f32, GLSLstd450.FAbs, y), x)   # |y| with the sign of x
    nonzero = e.op(SpvOp.FOrdNotEqual, e.bool, r, e.f32c(0.0))
    wrong_sign = e.and_(nonzero, e.op(SpvOp.LogicalNotEqual, e.bool, e.sign_bit(r),
                                      e.sign_bit(x)))
    r = e.select(f32, wrong_sign, e.op(SpvOp.FAdd, f32, r, step), r)
    too_big = e.op(SpvOp.FOrdGreaterThanEqual, e.bool, e.glsl(f32, GLSLstd450.FAbs, r),
                   e.glsl(f32, GLSLstd450.FAbs, y))
    r = e.select(f32, too_big, e.op(SpvOp.FSub, f32, r, step), r)
    return e.select(f32, e.and_(e.is_inf(y), e.is_finite(x)), x, r)


@_op("arith.negf", sigs=_F_F)
def _negf(e: Emitter, c: OpCall) -> int:
    return e.op(SpvOp.FNegate, e.f32, c.args[0])


def _fminmax(e: Emitter, a: int, b: int, is_max: bool, propagate_nan: bool) -> int:
    """IEEE minimum/maximum (NaN wins) or minNum/maxNum (the number wins); -0 < +0 in both.

    NaN is tested on the bits, and no select is a float compare's pick between its own
    operands: the drivers' optimizers turn that pattern into their native min/max, which
    keeps neither rule. Against a constant (relu's max(x, 0)) it is an integer compare
    (`_fminmax_constant`)."""
    for x, k in ((a, b), (b, a)):
        value = e.b.constant_value(k)
        if isinstance(value, float) and not math.isnan(value):
            return _fminmax_constant(e, x, k, value, is_max, propagate_nan)
    a_nan, b_nan = e.is_nan(a), e.is_nan(b)
    ordered = e.not_(e.or_(a_nan, b_nan))
    greater = e.and_(ordered, e.op(SpvOp.FOrdGreaterThan, e.bool, a, b))
    less = e.and_(ordered, e.op(SpvOp.FOrdLessThan, e.bool, a, b))
    # Equal operands: AND of the bits picks +0 over -0 for max, OR picks -0 for min.
    combine = SpvOp.BitwiseAnd if is_max else SpvOp.BitwiseOr
    tie = e.op(SpvOp.Bitcast, e.f32, e.op(combine, e.u32, e.f32_bits(a), e.f32_bits(b)))
    if propagate_nan:  # a + b is a quiet NaN when either operand is NaN
        tie = e.select(e.f32, ordered, tie, e.op(SpvOp.FAdd, e.f32, a, b))
    else:
        tie = e.select(e.f32, a_nan, b, e.select(e.f32, b_nan, a, tie))
    a_wins, b_wins = (greater, less) if is_max else (less, greater)
    return e.select(e.f32, a_wins, a, e.select(e.f32, b_wins, b, tie))


def _order_key(bits: int) -> int:
    """An f32's bits as a signed integer that orders as the floats do, -0 just below +0 (the
    magnitude bits flipped for negative numbers); NaNs land beyond the infinities."""
    return bits if bits < 1 << 31 else (bits ^ 0x7FFFFFFF) - (1 << 32)


def _fminmax_constant(e: Emitter, x: int, k: int, value: float, is_max: bool,
                      propagate_nan: bool) -> int:
    """min/max of `x` and the constant `k` (`value`, not NaN): x where it wins, else k.

    x wins when its order key (`_order_key`) is beyond k's, which settles signed zeros with no
    tie case (equal keys are equal bits); a NaN x wins for the NaN-propagating forms and
    loses for minNum/maxNum. For max against k >= +0 the key compare is the plain signed
    compare of the bits (every negative float is below k either way)."""
    bits = e.op(SpvOp.Bitcast, e.i32, x)
    key_k = _order_key(struct.unpack("<I", struct.pack("<f", value))[0])
    if is_max and key_k >= 0:
        key = bits
    else:
        flip = e.op(SpvOp.BitwiseAnd, e.i32, e.op(SpvOp.ShiftRightArithmetic, e.i32, bits,
                                                    e.i32c(31)), e.i32c(0x7FFFFFFF))
        key = e.op(SpvOp.BitwiseXor, e.i32, bits, flip)
    beyond = e.op(SpvOp.SGreaterThan if is_max else SpvOp.SLessThan, e.bool, key,
                  e.i32c(key_k))
    nan = e.is_nan(x)
    wins = e.or_(beyond, nan) if propagate_nan else e.and_(beyond, e.not_(nan))
    return e.select(e.f32, wins, x, k)


def _fminmax_op(e: Emitter, c: OpCall, is_max: bool, propagate_nan: bool) -> int:
    a, b = c.args
    return _fminmax(e, a, b, is_max, propagate_nan)


for _name, _is_max, _nan in (("arith.maximumf", True, True), ("arith.minimumf", False, True),
                             ("arith.maxnumf", True, False), ("arith.minnumf", False, False)):
    _op(_name, sigs=_FF_F)(partial(_fminmax_op, is_max=_is_max, propagate_nan=_nan))


# --- integer arithmetic ------------------------------------------------------------------------

def _int_binary(name: str, opcode: SpvOp, bool_opcode: SpvOp) -> None:
    def emit(e: Emitter, c: OpCall) -> int:
        if c.result_type == "i1":
            return e.op(bool_opcode, e.bool, *c.args)
        return e.op(opcode, e.i32, *c.args)
    _op(name, sigs=_II_I_BOOL)(emit)


# On i1 (arithmetic modulo 2): add and sub are xor, mul is and.
for _name, _opcode, _bool_opcode in (
        ("arith.addi", SpvOp.IAdd, SpvOp.LogicalNotEqual),
        ("arith.subi", SpvOp.ISub, SpvOp.LogicalNotEqual),
        ("arith.muli", SpvOp.IMul, SpvOp.LogicalAnd),
        ("arith.andi", SpvOp.BitwiseAnd, SpvOp.LogicalAnd),
        ("arith.ori", SpvOp.BitwiseOr, SpvOp.LogicalOr),
        ("arith.xori", SpvOp.BitwiseXor, SpvOp.LogicalNotEqual)):
    _int_binary(_name, _opcode, _bool_opcode)


def _division(e: Emitter, c: OpCall, signed: bool, remainder: bool) -> int:
    """x / 0 -> 0 and x % 0 -> 0; INT_MIN / -1 -> INT_MIN and INT_MIN % -1 -> 0 (no overflow)."""
    a, b = c.args
    by_zero = e.op(SpvOp.IEqual, e.bool, b, e.i32c(0))
    unsafe = by_zero
    if signed:
        overflow = e.and_(e.op(SpvOp.IEqual, e.bool, a, e.i32c(INT_MIN)),
                          e.op(SpvOp.IEqual, e.bool, b, e.i32c(-1)))
        unsafe = e.or_(by_zero, overflow)
    divisor = e.select(e.i32, unsafe, e.i32c(1), b)
    if signed:
        result = e.op(SpvOp.SRem if remainder else SpvOp.SDiv, e.i32, a, divisor)
    else:
        ua, ub = e.op(SpvOp.Bitcast, e.u32, a), e.op(SpvOp.Bitcast, e.u32, divisor)
        result = e.op(SpvOp.Bitcast, e.i32,
                      e.op(SpvOp.UMod if remainder else SpvOp.UDiv, e.u32, ua, ub))
    return e.select(e.i32, by_zero, e.i32c(0), result)


for _name, _signed, _rem in (("arith.divsi", True, False), ("arith.divui", False, False),
                             ("arith.remsi", True, True), ("arith.remui", False, True)):
    _op(_name, sigs=_II_I)(partial(_division, signed=_signed, remainder=_rem))


_INT_COMPARE = {
    "eq": SpvOp.IEqual, "ne": SpvOp.INotEqual,
    "slt": SpvOp.SLessThan, "sle": SpvOp.SLessThanEqual,
    "sgt": SpvOp.SGreaterThan, "sge": SpvOp.SGreaterThanEqual,
    "ult": SpvOp.ULessThan, "ule": SpvOp.ULessThanEqual,
    "ugt": SpvOp.UGreaterThan, "uge": SpvOp.UGreaterThanEqual,
}


def _as_i32(e: Emitter, value: int, kind: str, signed: bool) -> int:
    """An i1 widened the way a signed (true = -1) or unsigned (true = 1) compare reads it."""
    if kind == "i1":
        return e.select(e.i32, value, e.i32c(-1 if signed else 1), e.i32c(0))
    return value


def _int_compare(e: Emitter, predicate: str, a: int, b: int, kind: str) -> int:
    if predicate not in _INT_COMPARE:
        raise CompileError(f"vulkan-spirv: arith.cmpi predicate '{predicate}' is unknown; "
                           f"expected one of {', '.join(_INT_COMPARE)}")
    signed = predicate.startswith("s")
    return e.op(_INT_COMPARE[predicate], e.bool,
                _as_i32(e, a, kind, signed), _as_i32(e, b, kind, signed))


@_op("arith.cmpi", sigs=("i32,i32->i1", "i1,i1->i1"))
def _cmpi(e: Emitter, c: OpCall) -> int:
    a, b = c.args
    return _int_compare(e, c.op.predicate, a, b, c.types[0])


for _name, _pred in (("arith.maxsi", "sgt"), ("arith.minsi", "slt"),
                     ("arith.maxui", "ugt"), ("arith.minui", "ult")):
    def _minmax(e: Emitter, c: OpCall, pred: str = _pred) -> int:
        a, b = c.args
        return e.select(e.scalar_type(c.result_type),
                        _int_compare(e, pred, a, b, c.types[0]), a, b)
    _op(_name, sigs=_II_I_BOOL)(_minmax)


def _shift(e: Emitter, c: OpCall, opcode: SpvOp) -> int:
    """Amounts are unsigned; >= the bit width gives 0 (shli, shrui) or the sign fill (shrsi)."""
    a, b = c.args
    if c.result_type == "i1":  # every nonzero amount is >= the width 1
        return a if opcode == SpvOp.ShiftRightArithmetic else e.and_(a, e.not_(b))
    known = e.b.constant_value(b)
    if isinstance(known, int) and not isinstance(known, bool):   # a constant amount: folded
        amount_bits = known & 0xFFFFFFFF
        if amount_bits < 32:
            return e.op(opcode, e.i32, a, e.i32c(amount_bits))
        if opcode == SpvOp.ShiftRightArithmetic:
            return e.op(opcode, e.i32, a, e.i32c(31))
        return e.i32c(0)
    too_far = e.op(SpvOp.UGreaterThanEqual, e.bool, e.op(SpvOp.Bitcast, e.u32, b), e.u32c(32))
    amount = e.op(SpvOp.BitwiseAnd, e.i32, b, e.i32c(31))
    if opcode == SpvOp.ShiftRightArithmetic:
        return e.op(opcode, e.i32, a, e.select(e.i32, too_far, e.i32c(31), amount))
    return e.select(e.i32, too_far, e.i32c(0), e.op(opcode, e.i32, a, amount))


for _name, _opcode in (("arith.shli", SpvOp.ShiftLeftLogical),
                       ("arith.shrui", SpvOp.ShiftRightLogical),
                       ("arith.shrsi", SpvOp.ShiftRightArithmetic)):
    _op(_name, sigs=_II_I_BOOL)(partial(_shift, opcode=_opcode))


# --- float comparisons -------------------------------------------------------------------------

# Each predicate as (ordered comparison, unordered?): "u" predicates are true on NaN operands.
_FLOAT_COMPARE = {
    "oeq": (SpvOp.FOrdEqual, False), "ogt": (SpvOp.FOrdGreaterThan, False),
    "oge": (SpvOp.FOrdGreaterThanEqual, False), "olt": (SpvOp.FOrdLessThan, False),
    "ole": (SpvOp.FOrdLessThanEqual, False), "one": (SpvOp.FOrdNotEqual, False),
    "ueq": (SpvOp.FOrdEqual, True), "ugt": (SpvOp.FOrdGreaterThan, True),
    "uge": (SpvOp.FOrdGreaterThanEqual, True), "ult": (SpvOp.FOrdLessThan, True),
    "ule": (SpvOp.FOrdLessThanEqual, True), "une": (SpvOp.FOrdNotEqual, True),
}


@_op("arith.cmpf", sigs=("f32,f32->i1",))
def _cmpf(e: Emitter, c: OpCall) -> int:
    """The ordered comparison, with NaN operands decided from their bits (see emitter.py)."""
    a, b = c.args
    pred = c.op.predicate
    if pred in ("true", "false"):
        return e.boolc(pred == "true")
    if pred in ("ord", "uno"):
        ordered = e.ordered(a, b)
        return ordered if pred == "ord" else e.not_(ordered)
    if pred not in _FLOAT_COMPARE:
        raise CompileError(f"vulkan-spirv: arith.cmpf predicate '{pred}' is unknown; expected one "
                           f"of {', '.join([*_FLOAT_COMPARE, 'ord', 'uno', 'true', 'false'])}")
    opcode, unordered = _FLOAT_COMPARE[pred]
    compare = e.op(opcode, e.bool, a, b)
    ordered = e.ordered(a, b)
    if unordered:
        return e.or_(e.not_(ordered), compare)
    return e.and_(ordered, compare)


# --- math --------------------------------------------------------------------------------------

def _glsl_unary(name: str, inst: GLSLstd450) -> None:
    _op(name, sigs=_F_F)(lambda e, c: e.glsl(e.f32, inst, c.args[0]))


for _name, _inst in (("math.sqrt", GLSLstd450.Sqrt), ("math.rsqrt", GLSLstd450.InverseSqrt),
                     ("math.absf", GLSLstd450.FAbs), ("math.floor", GLSLstd450.Floor),
                     ("math.ceil", GLSLstd450.Ceil), ("math.trunc", GLSLstd450.Trunc),
                     ("math.roundeven", GLSLstd450.RoundEven)):
    _glsl_unary(_name, _inst)


@_op("math.exp", sigs=_F_F)
def _exp(e: Emitter, c: OpCall) -> int:
    return math_f32.exp(e, c.args[0])


@_op("math.exp2", sigs=_F_F)
def _exp2(e: Emitter, c: OpCall) -> int:
    return math_f32.exp2(e, c.args[0])


@_op("math.log", sigs=_F_F)
def _log(e: Emitter, c: OpCall) -> int:
    return math_f32.log(e, c.args[0], "e")


@_op("math.log2", sigs=_F_F)
def _log2(e: Emitter, c: OpCall) -> int:
    return math_f32.log(e, c.args[0], "2")


@_op("math.tanh", sigs=_F_F)
def _tanh(e: Emitter, c: OpCall) -> int:
    return math_f32.tanh(e, c.args[0])


@_op("math.absi", sigs=("i32->i32",))
def _absi(e: Emitter, c: OpCall) -> int:
    """abs(INT_MIN) wraps to INT_MIN (two's complement), as numpy and the CPU driver do."""
    x = c.args[0]
    negative = e.op(SpvOp.SLessThan, e.bool, x, e.i32c(0))
    return e.select(e.i32, negative, e.op(SpvOp.SNegate, e.i32, x), x)


@_op("math.fma", sigs=("f32,f32,f32->f32",))
def _fma(e: Emitter, c: OpCall) -> int:
    """Emulated: the drivers' GLSL Fma rounds the product first (math_pow.py)."""
    return math_pow.fma(e, c.args[0], c.args[1], c.args[2])


@_op("math.copysign", sigs=_FF_F)
def _copysign(e: Emitter, c: OpCall) -> int:
    return _copysign_bits(e, *c.args)


@_op("math.powf", sigs=_FF_F)
def _powf(e: Emitter, c: OpCall) -> int:
    """C99 pow over the whole domain; GLSL Pow is only defined for x > 0 (or x = 0 < y).

    |x| ** y comes from math_pow.py (GLSL Pow is 77 ULP off); the sign is negative for a
    negative base and an odd integer
    exponent; a finite negative base with a non-integer exponent is NaN; zero bases give 0 or
    inf by the sign of y; pow(x, 0) = 1 and pow(1, y) = 1 even for NaN, pow(-1, +-inf) = 1.
    """
    x, y = c.args
    f32 = e.f32
    # Every float compare is guarded: drivers may fold NaN == c to true (x86 ucomiss without PF).
    x_ok, y_ok = e.not_(e.is_nan(x)), e.not_(e.is_nan(y))

    def equals(a: int, a_ok: int, value: float) -> int:
        return e.and_(a_ok, e.op(SpvOp.FOrdEqual, e.bool, a, e.f32c(value)))

    ax = e.glsl(f32, GLSLstd450.FAbs, x)
    ax_zero = equals(ax, x_ok, 0.0)
    safe_ax = e.select(f32, ax_zero, e.f32c(1.0), ax)
    magnitude = math_pow.pow_magnitude(e, safe_ax, y)
    y_pos = e.op(SpvOp.FOrdGreaterThan, e.bool, y, e.f32c(0.0))
    zero_base = e.select(f32, y_pos, e.f32c(0.0), e.f32c(float("inf")))
    magnitude = e.select(f32, ax_zero, zero_base, magnitude)

    floor_y = e.glsl(f32, GLSLstd450.Floor, y)
    integral = e.and_(y_ok, e.op(SpvOp.FOrdEqual, e.bool, floor_y, y))
    half = e.op(SpvOp.FMul, f32, y, e.f32c(0.5))
    half_fraction = e.op(SpvOp.FSub, f32, half, e.glsl(f32, GLSLstd450.Floor, half))
    odd = e.and_(e.is_finite(y), e.op(SpvOp.FOrdEqual, e.bool, half_fraction, e.f32c(0.5)))
    negative = e.sign_bit(x)
    result = e.select(f32, e.and_(negative, odd), e.op(SpvOp.FNegate, f32, magnitude), magnitude)

    finite_negative = e.and_(negative, e.is_finite(x), e.not_(ax_zero))
    result = e.select(f32, e.and_(finite_negative, e.not_(integral)), e.f32c(float("nan")),
                      result)
    # NaN operands give NaN (GLSL Pow need not propagate it), except the cases below.
    result = e.select(f32, e.and_(x_ok, y_ok), result, e.f32c(float("nan")))
    unit_base_inf = e.and_(equals(ax, x_ok, 1.0), e.is_inf(y))
    is_one = e.or_(equals(y, y_ok, 0.0), equals(x, x_ok, 1.0), unit_base_inf)
    return e.select(f32, is_one, e.f32c(1.0), result)
