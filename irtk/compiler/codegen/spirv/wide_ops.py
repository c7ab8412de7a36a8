"""The body ops on i64 and f64 values, registered in the backend's op table (op_table.py).

i64 ops use the device's 64-bit integers where the profile has them, and the 32-bit emulation
of int64_emulation.py where it does not: each op below is registered with both. SPIR-V has no
instruction for the rounded divisions and bit counts, so they run the emulation's code on an
i64's (low, high) words even with native i64. f64 ops need the device's 64-bit floats (the
interface refuses a kernel that computes in f64 on a profile without them); GLSL.std.450 has
no 64-bit transcendental functions, so only the ops below exist on f64.
"""
from __future__ import annotations

from collections.abc import Callable

from spirv.tables import GLSLstd450, Op as SpvOp

from irtk.compiler.kernel import Op

from . import int64_emulation as i64e
from .emitter import Emitter
from .op_table import SPIRV_OPS, WIDE, SpirvOp, classes_of
from .scalar_ops import _FLOAT_COMPARE

Native = Callable[[Emitter, Op, list[int]], int]


def _first_operand(kind: str) -> Callable[[tuple[str, ...], str], bool]:
    return lambda operands, result: bool(operands) and operands[0] == kind


def _i64(*names: str, emulated: Native) -> Callable[[Native], Native]:
    """Register `native` (decorated) and `emulated` as the i64 form of ops `names`."""
    def register(native: Native) -> Native:
        def emit(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
            return emulated(e, op, args) if e.emulate_i64 else native(e, op, args)
        SPIRV_OPS.register(names, SpirvOp("typed", emit), _first_operand("i64"))
        return native
    return register


def _f64(*names: str) -> Callable[[Native], Native]:
    def register(native: Native) -> Native:
        SPIRV_OPS.register(names, SpirvOp("typed", lambda e, op, args, types: native(e, op, args)),
                           _first_operand("f64"))
        return native
    return register


def _wide_result(operands: tuple[str, ...], result: str) -> bool:
    sig = classes_of(operands, result)
    return sig is not None and sig[1] in WIDE


def _select(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
    kind = op.result_type
    if kind == "i64" and e.emulate_i64:
        return i64e.select(e, *args)
    return e.select(e.scalar_type(kind), *args)


SPIRV_OPS.register("arith.select", SpirvOp("typed", _select), _wide_result)


# --- i64 ---------------------------------------------------------------------------------------

_I64_BINARY = {"arith.addi": SpvOp.IAdd, "arith.subi": SpvOp.ISub, "arith.muli": SpvOp.IMul,
               "arith.andi": SpvOp.BitwiseAnd, "arith.ori": SpvOp.BitwiseOr,
               "arith.xori": SpvOp.BitwiseXor}
_I64_COMPARE = {"eq": SpvOp.IEqual, "ne": SpvOp.INotEqual, "slt": SpvOp.SLessThan,
                "sle": SpvOp.SLessThanEqual, "sgt": SpvOp.SGreaterThan,
                "sge": SpvOp.SGreaterThanEqual, "ult": SpvOp.ULessThan,
                "ule": SpvOp.ULessThanEqual, "ugt": SpvOp.UGreaterThan,
                "uge": SpvOp.UGreaterThanEqual}
_MINMAX = {"arith.maxsi": "sgt", "arith.minsi": "slt", "arith.maxui": "ugt",
           "arith.minui": "ult"}


def _c(e: Emitter, value: int) -> int:
    return e.b.constant(e.i64, value)


def _emulated_arithmetic(e: Emitter, op: Op, args: list[int]) -> int:
    if op.name in i64e.BITWISE:
        return e.op(i64e.BITWISE[op.name], i64e.vector_type(e), *args)
    return {"arith.addi": i64e.add, "arith.subi": i64e.sub, "arith.muli": i64e.mul}[op.name](
        e, *args)


@_i64(*_I64_BINARY, emulated=_emulated_arithmetic)
def _binary(e: Emitter, op: Op, args: list[int]) -> int:
    return e.op(_I64_BINARY[op.name], e.i64, *args)


@_i64("arith.cmpi", emulated=lambda e, op, args: i64e.compare(e, op.predicate, *args))
def _cmpi(e: Emitter, op: Op, args: list[int]) -> int:
    return e.op(_I64_COMPARE[op.predicate], e.bool, *args)


@_i64(*_MINMAX, emulated=lambda e, op, args: i64e.select(
    e, i64e.compare(e, _MINMAX[op.name], *args), *args))
def _minmax(e: Emitter, op: Op, args: list[int]) -> int:
    return e.select(e.i64, e.op(_I64_COMPARE[_MINMAX[op.name]], e.bool, *args), *args)


@_i64(*i64e.DIVISIONS[:4], emulated=lambda e, op, args: i64e.divide(e, op.name, *args))
def _division(e: Emitter, op: Op, args: list[int]) -> int:
    """x / 0 -> 0 and x % 0 -> 0; MIN / -1 -> MIN and MIN % -1 -> 0, as on 32 bits."""
    i64, name = e.i64, op.name
    a, b = args
    by_zero = e.op(SpvOp.IEqual, e.bool, b, _c(e, 0))
    unsafe = by_zero
    if name in ("arith.divsi", "arith.remsi"):
        unsafe = e.or_(by_zero, e.and_(e.op(SpvOp.IEqual, e.bool, a, _c(e, -(1 << 63))),
                                       e.op(SpvOp.IEqual, e.bool, b, _c(e, -1))))
        divisor = e.select(i64, unsafe, _c(e, 1), b)
        value = e.op(SpvOp.SDiv if name == "arith.divsi" else SpvOp.SRem, i64, a, divisor)
    else:
        divisor = e.op(SpvOp.Bitcast, e.u64, e.select(i64, unsafe, _c(e, 1), b))
        value = e.op(SpvOp.Bitcast, i64, e.op(
            SpvOp.UDiv if name == "arith.divui" else SpvOp.UMod, e.u64,
            e.op(SpvOp.Bitcast, e.u64, a), divisor))
    return e.select(i64, by_zero, _c(e, 0), value)


def _words_emulated(e: Emitter, op: Op, args: list[int]) -> int:
    if op.name in i64e.BIT_COUNTS:
        return i64e.bit_count(e, op.name, args[0])
    return i64e.divide(e, op.name, *args)


@_i64(*i64e.DIVISIONS[4:], *i64e.BIT_COUNTS, emulated=_words_emulated)
def _on_words(e: Emitter, op: Op, args: list[int]) -> int:
    """No SPIR-V instruction: the emulation's code on the value's (low, high) words."""
    words = [e.op(SpvOp.Bitcast, i64e.vector_type(e), a) for a in args]
    return e.op(SpvOp.Bitcast, e.i64, _words_emulated(e, op, words))


@_i64("arith.shli", "arith.shrui", "arith.shrsi",
      emulated=lambda e, op, args: i64e.shift(e, op.name, *args))
def _shift(e: Emitter, op: Op, args: list[int]) -> int:
    """Amounts are unsigned; >= 64 gives 0 (shli, shrui) or the sign fill (shrsi)."""
    i64, name = e.i64, op.name
    a, b = args
    too_far = e.op(SpvOp.UGreaterThanEqual, e.bool, e.op(SpvOp.Bitcast, e.u64, b),
                   e.b.constant(e.u64, 64))
    amount = e.op(SpvOp.BitwiseAnd, i64, b, _c(e, 63))
    opcode = {"arith.shli": SpvOp.ShiftLeftLogical, "arith.shrui": SpvOp.ShiftRightLogical,
              "arith.shrsi": SpvOp.ShiftRightArithmetic}[name]
    if name == "arith.shrsi":
        return e.op(opcode, i64, a, e.select(i64, too_far, _c(e, 63), amount))
    return e.select(i64, too_far, _c(e, 0), e.op(opcode, i64, a, amount))


@_i64("math.absi", emulated=lambda e, op, args: i64e.select(
    e, i64e.compare(e, "slt", args[0], i64e.constant(e, 0)), i64e.negate(e, args[0]), args[0]))
def _absi(e: Emitter, op: Op, args: list[int]) -> int:
    return e.select(e.i64, e.op(SpvOp.SLessThan, e.bool, args[0], _c(e, 0)),
                    e.op(SpvOp.SNegate, e.i64, args[0]), args[0])


# --- f64 ---------------------------------------------------------------------------------------

_F64_BINARY = {"arith.addf": SpvOp.FAdd, "arith.subf": SpvOp.FSub, "arith.mulf": SpvOp.FMul,
               "arith.divf": SpvOp.FDiv}
_F64_GLSL = {"math.sqrt": GLSLstd450.Sqrt, "math.absf": GLSLstd450.FAbs,
             "math.floor": GLSLstd450.Floor, "math.ceil": GLSLstd450.Ceil,
             "math.trunc": GLSLstd450.Trunc, "math.roundeven": GLSLstd450.RoundEven,
             "math.rsqrt": GLSLstd450.InverseSqrt}


@_f64(*_F64_BINARY)
def _f64_binary(e: Emitter, op: Op, args: list[int]) -> int:
    return e.op(_F64_BINARY[op.name], e.f64, *args)


@_f64("arith.negf")
def _f64_negate(e: Emitter, op: Op, args: list[int]) -> int:
    return e.op(SpvOp.FNegate, e.f64, args[0])


@_f64(*_F64_GLSL)
def _f64_glsl(e: Emitter, op: Op, args: list[int]) -> int:
    return e.glsl(e.f64, _F64_GLSL[op.name], args[0])


@_f64("math.fma")
def _f64_fma(e: Emitter, op: Op, args: list[int]) -> int:
    """Emulated (lavapipe's GLSL Fma rounds the product first; math_pow.py)."""
    from .math_pow import fma
    return fma(e, args[0], args[1], args[2], wide=True)


def _is_nan(e: Emitter, v: int) -> int:
    bits = e.op(SpvOp.Bitcast, e.u64, v)
    magnitude = e.op(SpvOp.BitwiseAnd, e.u64, bits, e.b.constant(e.u64, (1 << 63) - 1))
    return e.op(SpvOp.UGreaterThan, e.bool, magnitude, e.b.constant(e.u64, 0x7FF << 52))


@_f64("arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf")
def _f64_minmax(e: Emitter, op: Op, args: list[int]) -> int:
    f64, name = e.f64, op.name
    a, b = args
    is_max = "max" in name
    pick_a = e.op(SpvOp.FOrdGreaterThan if is_max else SpvOp.FOrdLessThan, e.bool, a, b)
    value = e.select(f64, pick_a, a, b)
    if name in ("arith.maximumf", "arith.minimumf"):
        return e.select(f64, e.or_(_is_nan(e, a), _is_nan(e, b)), e.op(SpvOp.FAdd, f64, a, b),
                        value)
    return e.select(f64, _is_nan(e, a), b, e.select(f64, _is_nan(e, b), a, value))


@_f64("arith.cmpf")
def _f64_cmpf(e: Emitter, op: Op, args: list[int]) -> int:
    a, b = args
    pred = op.predicate
    ordered = e.not_(e.or_(_is_nan(e, a), _is_nan(e, b)))
    if pred in ("true", "false"):
        return e.boolc(pred == "true")
    if pred in ("ord", "uno"):
        return ordered if pred == "ord" else e.not_(ordered)
    opcode, unordered = _FLOAT_COMPARE[pred]
    compare = e.op(opcode, e.bool, a, b)
    return e.or_(e.not_(ordered), compare) if unordered else e.and_(ordered, compare)
