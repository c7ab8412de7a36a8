"""Body ops on every kernel scalar type, in 32-bit registers where the device lacks the type.

Register classes: i1 is a SPIR-V bool; i2, i4, i8, i16, i32 and index live in i32 registers,
always sign-extended from their width (the canonical form: every op that produces a narrow
integer wraps its result back to it, and unsigned ops first zero-extend their operands); f16,
bf16 and the f8/f4 types live in f32 registers holding exactly representable values (every op
producing one rounds to the type, float_formats.py); i64 and f64 use the device's native 64-bit
types where the profile offers them; otherwise i64 is emulated as a uvec2
(int64_emulation.py) and f64 is refused, naming the feature.

`emit_typed` looks each op up in the backend's op table (op_table.py): the 32-bit register
ops of scalar_ops.py serve every type of their class, this module registers what depends on
the width (constants, conversions, bitcasts through bit patterns, and the ops that read a
width), wide_ops.py the i64 and f64 ops.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from spirv.tables import GLSLstd450, Op as SpvOp

from irtk.body_ops import Claim, every_type
from irtk.compiler.kernel import Op
from irtk.errors import CompileError
from irtk.types import SCALAR_TYPES

from . import int64_emulation as i64e
from . import math_f32, math_trig
from . import op_table
from . import wide_ops  # noqa: F401  (registers the i64 and f64 ops)
from .emitter import Emitter
from .float_formats import FORMATS, decode, encode, round_to
from .op_table import SPIRV_OPS, SpirvOp, narrow_classes, no_wide_class
from .scalar_ops import OpCall, emit_op

# Ops that read their integer operands as unsigned numbers.
_UNSIGNED = frozenset({"arith.divui", "arith.remui", "arith.shrui", "arith.maxui",
                       "arith.minui", "arith.uitofp", "arith.ceildivui", "math.ctlz",
                       "math.cttz", "math.ctpop"})
_UNSIGNED_PREDICATES = frozenset({"ult", "ule", "ugt", "uge"})


def register_class(kind: str) -> str:
    """"i1", "i32", "i64", "f32" or "f64": the register a kernel type computes in."""
    if kind not in SCALAR_TYPES:
        raise CompileError(f"vulkan-spirv: scalar type '{kind}' is not supported")
    return op_table.register_class(kind)


def is_float(kind: str) -> bool:
    return kind in SCALAR_TYPES and SCALAR_TYPES[kind].is_float


def _is_int(kind: str) -> bool:
    return kind in SCALAR_TYPES and SCALAR_TYPES[kind].is_int


def int_width(kind: str) -> int:
    """Value bits of an integer type (index: 32, as in kernels)."""
    return SCALAR_TYPES[kind].bits


def wrap(e: Emitter, value: int, kind: str) -> int:
    """An i32 register value brought to the canonical form of the narrow integer `kind`."""
    width = int_width(kind) if _is_int(kind) else 32
    if width >= 32 or kind == "i1":
        return value
    shift = e.i32c(32 - width)
    return e.op(SpvOp.ShiftRightArithmetic, e.i32,
                e.op(SpvOp.ShiftLeftLogical, e.i32, value, shift), shift)


def zero_extend(e: Emitter, value: int, kind: str) -> int:
    """The unsigned reading of a canonical narrow integer, in an i32 register."""
    width = int_width(kind) if _is_int(kind) else 32
    if width >= 32 or kind == "i1":
        return value
    return e.op(SpvOp.BitwiseAnd, e.i32, value, e.i32c((1 << width) - 1))


def round_float(e: Emitter, value: int, kind: str) -> int:
    """An f32 register value rounded to the narrow float `kind` (f32 itself unchanged)."""
    return round_to(e, FORMATS[kind], value) if kind in FORMATS else value


def float_bits(e: Emitter, value: int, kind: str) -> int:
    """The storage bits of a float register value, as u32 (f32: its bits)."""
    if kind in FORMATS:
        return encode(e, FORMATS[kind], value)
    return e.f32_bits(value)


def float_from_bits(e: Emitter, bits: int, kind: str) -> int:
    """A float register value from its storage bits (u32)."""
    if kind in FORMATS:
        return decode(e, FORMATS[kind], bits)
    return e.op(SpvOp.Bitcast, e.f32, bits)


TypedEmit = Callable[[Emitter, Op, list[int], list[str]], int]


def _register(form: str, *names: str, claim: Claim = every_type
              ) -> Callable[[TypedEmit], TypedEmit]:
    """Decorator: register an emitter of this module in the op table (op_table.py)."""
    def register(fn: TypedEmit) -> TypedEmit:
        SPIRV_OPS.register(names, SpirvOp(form, fn), claim)
        return fn
    return register


@_register("typed", "arith.constant")
def _constant(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
    return constant(e, op.result_type, op)


@_register("typed", "arith.select", claim=no_wide_class)
def _select(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
    return e.select(e.scalar_type(op.result_type), *args)


def constant(e: Emitter, kind: str, op: Op) -> int:
    if kind == "i64" and e.emulate_i64:
        return i64e.constant(e, op.int_value)
    if kind == "i64":
        value = op.int_value & ((1 << 64) - 1)
        return e.b.constant(e.i64, value - (1 << 64) if value >> 63 else value)
    if kind == "f64":
        return e.b.constant(e.f64, float(op.float_value))
    if is_float(kind):
        return round_float(e, e.f32c(op.float_value), kind)
    if kind == "i1":
        return e.boolc(bool(op.int_value & 1))
    width = int_width(kind)
    value = op.int_value & ((1 << width) - 1)
    if value >> (width - 1):
        value -= 1 << width
    return e.i32c(value)


def emit_typed(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
    """Emit an arith/math body op on any scalar types (see the module docstring)."""
    result = op.result_type
    classes = [register_class(t) for t in types]
    result_class = register_class(result)
    impl = SPIRV_OPS.lookup(op.name, types, result)
    if impl is None:
        raise CompileError(f"vulkan-spirv: '{op.name}' on ({', '.join(types)}) -> {result} is "
                           f"not supported{_why_not(types, result)}")
    if impl.form == "typed":
        return impl.emit(e, op, args, types)
    if impl.form == "extra":
        value = impl.emit(e, op, args, types)
    else:
        unsigned = op.name in _UNSIGNED or (op.name == "arith.cmpi"
                                            and op.predicate in _UNSIGNED_PREDICATES)
        if unsigned:
            args = [zero_extend(e, a, t) for a, t in zip(args, types)]
        value = impl.emit(e, OpCall(op_with_type(op, result_class), args, classes, _no_index))
    if result_class == "i32":
        return wrap(e, value, result)
    if result_class == "f32":
        return round_float(e, value, result)
    return value


def _why_not(types: list[str], result: str) -> str:
    if "f64" in (*types, result):
        return " (GLSL.std.450 has no 64-bit transcendental functions)"
    return ""


def op_with_type(op: Op, result_class: str) -> Op:
    if op.result_type == result_class:
        return op
    return Op(op.name, op.operands, result_class, op.predicate, op.int_value, op.float_value)


def _no_index(dim: int) -> int:
    raise CompileError("vulkan-spirv: internal error: linalg.index reached the scalar op table")


# --- conversions -------------------------------------------------------------------------------

def _int_to_int(e: Emitter, op: Op, x: int, src: str, dst: str) -> int:
    if src == dst:
        return x
    unsigned = op.name in ("arith.extui", "arith.index_castui")
    if e.emulate_i64 and "i64" in (src, dst):
        return _int_to_int_emulated(e, unsigned, x, src, dst)
    if src == "i1":
        if dst == "i64":
            return e.select(e.i64, x, e.b.constant(e.i64, 1 if unsigned else -1),
                            e.b.constant(e.i64, 0))
        return e.select(e.i32, x, e.i32c(1 if unsigned else -1), e.i32c(0))
    if dst == "i1":
        low = x if src != "i64" else e.op(SpvOp.SConvert, e.i32, x)
        return e.op(SpvOp.INotEqual, e.bool, e.op(SpvOp.BitwiseAnd, e.i32, low, e.i32c(1)),
                    e.i32c(0))
    widening = int_width(dst) > int_width(src)
    if src == "i64":
        return wrap(e, e.op(SpvOp.SConvert, e.i32, x), dst)
    if dst == "i64":
        if unsigned and widening:
            wide = e.op(SpvOp.UConvert, e.u64, e.op(SpvOp.Bitcast, e.u32, zero_extend(e, x, src)))
            return e.op(SpvOp.Bitcast, e.i64, wide)
        return e.op(SpvOp.SConvert, e.i64, x)
    if unsigned and widening:
        return zero_extend(e, x, src)
    return wrap(e, x, dst)


def _int_to_int_emulated(e: Emitter, unsigned: bool, x: int, src: str, dst: str) -> int:
    if src == "i64":
        if dst == "i1":
            return e.op(SpvOp.INotEqual, e.bool, e.op(SpvOp.BitwiseAnd, e.u32, i64e.low(e, x),
                                                      e.u32c(1)), e.u32c(0))
        return wrap(e, i64e.to_i32(e, x), dst)
    if src == "i1":
        return i64e.select(e, x, i64e.constant(e, 1 if unsigned else -1), i64e.constant(e, 0))
    if unsigned:
        return i64e.from_i32(e, zero_extend(e, x, src), signed=False)
    return i64e.from_i32(e, x, signed=True)


def _int_cast(e: Emitter, op: Op, x: int, src: str, dst: str) -> int:
    if not (_is_int(src) and _is_int(dst)):
        raise CompileError(f"vulkan-spirv: {op.name} from {src} to {dst} is not an integer cast")
    return _int_to_int(e, op, x, src, dst)


def _float_cast(e: Emitter, op: Op, x: int, src: str, dst: str) -> int:
    if not (is_float(src) and is_float(dst)):
        raise CompileError(f"vulkan-spirv: {op.name} from {src} to {dst} is not a float cast")
    if src == dst:
        return x
    if dst == "f64":
        return e.op(SpvOp.FConvert, e.f64, x)
    if src == "f64":
        x = e.op(SpvOp.FConvert, e.f32, x)
    return round_float(e, x, dst)


def _int_to_float(e: Emitter, op: Op, x: int, src: str, dst: str) -> int:
    signed = op.name == "arith.sitofp"
    if src == "i1":
        one = 1.0 if not signed else -1.0
        if dst == "f64":
            return e.select(e.f64, x, e.b.constant(e.f64, one), e.b.constant(e.f64, 0.0))
        return round_float(e, e.select(e.f32, x, e.f32c(one), e.f32c(0.0)), dst)
    if src == "i64" and e.emulate_i64:
        if dst == "f64":
            raise CompileError("vulkan-spirv: i64 -> f64 conversion needs shaderInt64")
        return round_float(e, i64e.to_float(e, x, signed), dst)
    target = e.f64 if dst == "f64" else e.f32
    if src == "i64":
        source = x if signed else e.op(SpvOp.Bitcast, e.u64, x)
    else:
        source = x if signed else e.op(SpvOp.Bitcast, e.u32, zero_extend(e, x, src))
    value = e.op(SpvOp.ConvertSToF if signed else SpvOp.ConvertUToF, target, source)
    return value if dst == "f64" else round_float(e, value, dst)


def _float_to_int(e: Emitter, op: Op, x: int, src: str, dst: str) -> int:
    """Saturating to the destination's range; NaN gives 0."""
    signed = op.name == "arith.fptosi"
    width = int_width(dst)
    if dst == "i1":
        width = 1
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    if dst == "i1" and signed:
        lo, hi = -1, 0
    wide = src == "f64"
    ftype = e.f64 if wide else e.f32

    def fc(v: float) -> int:
        return e.b.constant(e.f64, v) if wide else e.f32c(v)
    nan = e.op(SpvOp.FUnordNotEqual, e.bool, x, x) if wide else e.is_nan(x)
    # hi + 1 is a power of two, exact in every float type; values >= it saturate.
    too_big = e.op(SpvOp.FOrdGreaterThanEqual, e.bool, x, fc(float(hi + 1)))
    too_small = e.op(SpvOp.FOrdLessThan, e.bool, x, fc(float(lo)))
    # A driver may fold a compare with a NaN operand to true: a NaN is never out of range.
    too_big, too_small = e.and_(too_big, e.not_(nan)), e.and_(too_small, e.not_(nan))
    in_range = e.not_(e.or_(too_big, too_small, nan))
    safe = e.select(ftype, in_range, x, fc(0.0))
    if dst == "i1":
        int_value = e.op(SpvOp.ConvertFToS, e.i32, safe)
        int_value = e.select(e.i32, too_big, e.i32c(hi), e.select(e.i32, too_small, e.i32c(lo),
                                                                  int_value))
        return e.op(SpvOp.INotEqual, e.bool, int_value, e.i32c(0))
    if dst == "i64" and e.emulate_i64:
        if wide:
            raise CompileError("vulkan-spirv: f64 -> i64 conversion needs shaderInt64")
        return i64e.from_float(e, x, signed)
    if dst == "i64":
        i64 = e.i64
        conv = (e.op(SpvOp.ConvertFToS, i64, safe) if signed else
                e.op(SpvOp.Bitcast, i64, e.op(SpvOp.ConvertFToU, e.u64, safe)))
        c_hi, c_lo = (e.b.constant(i64, hi if signed else -1), e.b.constant(i64, lo))
        return e.select(i64, too_big, c_hi, e.select(i64, too_small, c_lo, conv))
    if signed:
        conv = e.op(SpvOp.ConvertFToS, e.i32, safe)
    else:
        conv = e.op(SpvOp.Bitcast, e.i32, e.op(SpvOp.ConvertFToU, e.u32, safe))
    value = e.select(e.i32, too_big, e.i32c(hi), e.select(e.i32, too_small, e.i32c(lo), conv))
    return wrap(e, value, dst)


def _bitcast(e: Emitter, op: Op, x: int, src: str, dst: str) -> int:
    if src == dst:
        return x
    if register_class(src) in ("i64", "f64") or register_class(dst) in ("i64", "f64"):
        if e.emulate_i64:
            raise CompileError(f"vulkan-spirv: bitcast {src} -> {dst} needs shaderInt64")
        return e.op(SpvOp.Bitcast, e.scalar_type(dst), x)
    if src == "f32" or dst == "f32":       # f32 <-> a 32-bit integer: the register's bits
        return e.op(SpvOp.Bitcast, e.scalar_type(dst), x)
    if is_float(src) and is_float(dst):
        return float_from_bits(e, float_bits(e, x, src), dst)
    if is_float(src):
        return wrap(e, e.op(SpvOp.Bitcast, e.i32, float_bits(e, x, src)), dst)
    if src == "i1" or dst == "i1":
        return x
    bits = e.op(SpvOp.Bitcast, e.u32, zero_extend(e, x, src))
    if is_float(dst):
        return float_from_bits(e, bits, dst)
    return wrap(e, x, dst)


Conversion = Callable[[Emitter, Op, int, str, str], int]


def _conversion(fn: Conversion, *names: str) -> None:
    """Register a conversion (x, source type, destination type) for ops `names`."""
    _register("typed", *names)(
        lambda e, op, args, types: fn(e, op, args[0], types[0], op.result_type))


_conversion(_int_cast, "arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast",
            "arith.index_castui")
_conversion(_float_cast, "arith.extf", "arith.truncf")
_conversion(_int_to_float, "arith.sitofp", "arith.uitofp")
_conversion(_float_to_int, "arith.fptosi", "arith.fptoui")
_conversion(_bitcast, "arith.bitcast")


# --- 32-bit ops that read their types ----------------------------------------------------------
# Registered as "extra" (op_table.py): on i32 and f32 registers (not i1: they compute on the
# integer value), given the kernel types; emit_typed brings the result back to its type.

def _f(e: Emitter, inst: GLSLstd450, *args: int) -> int:
    return e.glsl(e.f32, inst, *args)


def _expm1(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
    return math_f32.expm1(e, args[0])


def _log1p(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
    return math_f32.log1p(e, args[0])


def _log10(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
    return math_f32.log(e, args[0], "10")


def _own(fn: Callable[[Emitter, int], int]) -> TypedEmit:
    return lambda e, op, args, types: fn(e, args[0])


def _atan2(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
    return math_trig.atan2(e, *args)


def _erf(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
    return math_f32.erf(e, args[0])


def _round(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
    """Half away from zero: trunc(x) plus sign(x) when |x - trunc(x)| >= 0.5 (exact)."""
    x = args[0]
    t = _f(e, GLSLstd450.Trunc, x)
    frac = _f(e, GLSLstd450.FAbs, e.op(SpvOp.FSub, e.f32, x, t))
    up = e.op(SpvOp.FOrdGreaterThanEqual, e.bool, frac, e.f32c(0.5))
    bumped = e.op(SpvOp.FAdd, e.f32, t, _f(e, GLSLstd450.FSign, x))
    return e.select(e.f32, e.and_(up, e.is_finite(x)), bumped, t)


def _fpowi(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
    y = e.op(SpvOp.ConvertSToF, e.f32, args[1])
    return emit_op(e, OpCall(Op("math.powf", (0, 1), "f32"), [args[0], y], ["f32", "f32"],
                             _no_index))


def _ipowi(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
    """Square-and-multiply over the exponent's bits; negative exponents give 1 / x^n
    truncated: 1 for x = 1, +-1 for x = -1, 0 otherwise (0 for x = 0 too)."""
    x, n = args
    i32 = e.i32
    result, base = e.i32c(1), x
    width = int_width(types[1])
    for bit in range(min(width, 32) - 1):
        on = e.op(SpvOp.INotEqual, e.bool, e.op(SpvOp.BitwiseAnd, i32, n, e.i32c(1 << bit)),
                  e.i32c(0))
        result = e.select(i32, on, e.op(SpvOp.IMul, i32, result, base), result)
        base = e.op(SpvOp.IMul, i32, base, base)
    negative = e.op(SpvOp.SLessThan, e.bool, n, e.i32c(0))
    odd = e.op(SpvOp.INotEqual, e.bool, e.op(SpvOp.BitwiseAnd, i32, n, e.i32c(1)), e.i32c(0))
    minus_one = e.op(SpvOp.IEqual, e.bool, x, e.i32c(-1))
    one = e.op(SpvOp.IEqual, e.bool, x, e.i32c(1))
    negative_result = e.select(i32, one, e.i32c(1), e.select(
        i32, minus_one, e.select(i32, odd, e.i32c(-1), e.i32c(1)), e.i32c(0)))
    return e.select(i32, negative, negative_result, result)


def _divide(e: Emitter, name: str, a: int, b: int) -> int:
    return emit_op(e, OpCall(Op(name, (0, 1), "i32"), [a, b], ["i32", "i32"], _no_index))


def _rounded_signed_division(up: bool) -> TypedEmit:
    """ceildivsi (`up`) and floordivsi: the truncated quotient, one step up where the remainder
    is not 0 and the signs agree (floordivsi: one step down where they differ)."""
    def emit(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
        a, b = args
        q, r = _divide(e, "arith.divsi", a, b), _divide(e, "arith.remsi", a, b)
        signs = e.op(SpvOp.LogicalEqual if up else SpvOp.LogicalNotEqual, e.bool,
                     e.op(SpvOp.SLessThan, e.bool, a, e.i32c(0)),
                     e.op(SpvOp.SLessThan, e.bool, b, e.i32c(0)))
        bump = e.and_(e.op(SpvOp.INotEqual, e.bool, r, e.i32c(0)), signs)
        return e.select(e.i32, bump, e.op(SpvOp.IAdd if up else SpvOp.ISub, e.i32, q,
                                          e.i32c(1)), q)
    return emit


def _ceildivui(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
    a, b = (zero_extend(e, v, t) for v, t in zip(args, types))
    q, r = _divide(e, "arith.divui", a, b), _divide(e, "arith.remui", a, b)
    return e.select(e.i32, e.op(SpvOp.INotEqual, e.bool, r, e.i32c(0)),
                    e.op(SpvOp.IAdd, e.i32, q, e.i32c(1)), q)


def _bit_count(kind: str) -> TypedEmit:
    def emit(e: Emitter, op: Op, args: list[int], types: list[str]) -> int:
        x = zero_extend(e, args[0], types[0])
        width = int_width(types[0])
        if kind == "ctpop":
            return e.op(SpvOp.BitCount, e.i32, x)
        zero = e.op(SpvOp.IEqual, e.bool, x, e.i32c(0))
        if kind == "cttz":
            return e.select(e.i32, zero, e.i32c(width), e.glsl(e.i32, GLSLstd450.FindILsb, x))
        msb = e.glsl(e.i32, GLSLstd450.FindUMsb, e.op(SpvOp.Bitcast, e.u32, x))
        msb = e.op(SpvOp.Bitcast, e.i32, msb)
        return e.select(e.i32, zero, e.i32c(width),
                        e.op(SpvOp.ISub, e.i32, e.i32c(width - 1), msb))
    return emit


for _names, _emit in ((("math.expm1",), _expm1), (("math.log1p",), _log1p),
                      (("math.log10",), _log10), (("math.sin",), _own(math_trig.sin)),
                      (("math.cos",), _own(math_trig.cos)),
                      (("math.tan",), _own(math_trig.tan)),
                      (("math.atan",), _own(math_trig.atan)), (("math.atan2",), _atan2),
                      (("math.erf",), _erf), (("math.round",), _round),
                      (("math.fpowi",), _fpowi), (("math.ipowi",), _ipowi),
                      (("arith.ceildivsi",), _rounded_signed_division(up=True)),
                      (("arith.ceildivui",), _ceildivui),
                      (("arith.floordivsi",), _rounded_signed_division(up=False)),
                      (("math.ctlz",), _bit_count("ctlz")), (("math.cttz",), _bit_count("cttz")),
                      (("math.ctpop",), _bit_count("ctpop"))):
    _register("extra", *_names, claim=narrow_classes)(_emit)
