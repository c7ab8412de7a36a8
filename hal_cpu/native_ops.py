"""The native backend of the body ops: MLIR scalar op -> LLVM IR, with the reference's rules.

`hal_cpu.native_codegen` builds a kernel's loop nest and calls these once per body op with
scalar `llvmlite.ir` values; LLVM's loop vectorizer turns the scalar body into vector code for
the host. Every op gives the result the numpy reference (`hal_cpu/ops.py`) gives, with the
rules docs/cpu_kernels.md states where MLIR leaves a result undefined: division by zero is 0,
signed MIN / -1 wraps, shifts by >= the width give 0 (shrsi: the sign fill), fptosi/fptoui
saturate and take NaN to 0 (`llvm.fptosi.sat`), maximumf/minimumf are `llvm.maximum/minimum`,
maxnumf/minnumf `llvm.maximumnum/minimumnum` (the number wins, -0 < +0).

Register types: i1..i64 as LLVM integers, f16/f32/f64 as half/float/double; bf16 is held in a
float register holding a value exactly representable in bf16 and rounded to bf16 (to nearest,
ties to even) after every op, as the reference computes it. Math functions call the C library
through LLVM's intrinsics (`llvm.exp` -> `expf`), or its functions by name where LLVM has no
intrinsic (`erf`, `expm1`, `log1p`); f16 and bf16 compute them in f32 and round, as numpy's
float16 loops do. Types the backend does not claim (i2, i4, the f8 and f4 types) keep a kernel
on the numpy executor.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from llvmlite import ir

from irtk.body_ops import Backend
from hal_cpu.ops import OpAttrs

NATIVE_TYPES = ("i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64")
INTS = ("i1", "i8", "i16", "i32", "i64")
FLOATS = ("f16", "bf16", "f32", "f64")
WIDTH = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "f16": 16, "bf16": 16, "f32": 32,
         "f64": 64}

F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))


def register_type(t: str) -> ir.Type:
    """The LLVM type a value of kernel type `t` is held in."""
    if t in INTS:
        return ir.IntType(WIDTH[t])
    return {"f16": F16, "bf16": F32, "f32": F32, "f64": F64}[t]


@dataclass
class Emitter:
    """The builder and module an op emits into, with intrinsic and C function declarations."""

    builder: ir.IRBuilder
    module: ir.Module
    _functions: dict[str, ir.Function] = field(default_factory=dict)

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        key = f"{name}|{ret}|{','.join(map(str, args))}"
        if key not in self._functions:
            overloads = [ret] if name.endswith((".sat",)) else []
            self._functions[key] = self.module.declare_intrinsic(
                name, overloads + [args[0]] if overloads else [args[0]],
                ir.FunctionType(ret, args))
        return self._functions[key]

    def call_intrinsic(self, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
        return self.builder.call(self.intrinsic(name, ret, [a.type for a in args]), args)

    def libcall(self, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
        """A C library function by name (the JIT resolves it in the process: libm)."""
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, [a.type for a in args]), name)
            fn.attributes.add("nounwind")
        return self.builder.call(fn, args)


# (emitter, operand values, attrs, operand types, result type) -> value
NativeOp = Callable[[Emitter, list[ir.Value], OpAttrs, list[str], str], ir.Value]
NATIVE: Backend[NativeOp] = Backend("native")


def _claims(*allowed: tuple[str, ...]) -> Callable[[tuple[str, ...], str], bool]:
    """Claim: every operand and the result are in `allowed` (one tuple, or one per position)."""
    kinds = allowed[0]

    def claim(operands: tuple[str, ...], result: str) -> bool:
        return all(t in kinds for t in operands) and result in kinds
    return claim


_ANY = _claims(NATIVE_TYPES)
_FLOAT = _claims(FLOATS + ("i1",))        # cmpf/select results are i1
_INT = _claims(INTS)


# --- bf16 ------------------------------------------------------------------------------------

def round_bf16(e: Emitter, x: ir.Value) -> ir.Value:
    """An f32 rounded to the nearest bf16 (ties to even; NaN stays a quiet NaN), as f32."""
    b = e.builder
    bits = b.bitcast(x, I32)
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.add(bits, b.add(ir.Constant(I32, 0x7FFF), lsb))
    nan = b.fcmp_unordered("uno", x, x)
    quiet = b.or_(bits, ir.Constant(I32, 0x00400000))
    out = b.select(nan, quiet, rounded)
    out = b.and_(out, ir.Constant(I32, 0xFFFF0000))
    return b.bitcast(out, F32)


def finish(e: Emitter, t: str, value: ir.Value) -> ir.Value:
    """Round a computed value to its type where the register is wider (bf16)."""
    return round_bf16(e, value) if t == "bf16" else value


# --- constants -------------------------------------------------------------------------------

@NATIVE.implements("arith.constant", claim=_ANY)
def _constant(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
              ) -> ir.Value:
    import numpy as np
    from hal_cpu.ops import compile_op
    fn, _ = compile_op(attrs, [])
    value = np.asarray(fn())                 # the reference's constant, rounded to the type
    if t in INTS:
        v = int(value)
        return ir.Constant(register_type(t), v & ((1 << WIDTH[t]) - 1))
    if t == "f16":
        bits = int(value.astype(np.float16).view(np.uint16))
        return ir.Constant(I16, bits).bitcast(F16)
    if t == "f64":
        bits = int(value.astype(np.float64).view(np.uint64))
        return ir.Constant(I64, bits).bitcast(F64)
    bits = int(value.astype(np.float32).view(np.uint32))      # f32, bf16 (held as f32)
    return ir.Constant(I32, bits).bitcast(F32)


# --- float arithmetic ------------------------------------------------------------------------

_FLOAT_BINARY = {"arith.addf": "fadd", "arith.subf": "fsub", "arith.mulf": "fmul",
                 "arith.divf": "fdiv", "arith.remf": "frem"}


@NATIVE.implements(*_FLOAT_BINARY, claim=_claims(FLOATS))
def _float_binary(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
                  ) -> ir.Value:
    op = getattr(e.builder, _FLOAT_BINARY[attrs.name])
    return finish(e, t, op(*args))


_MINMAX = {"arith.maximumf": "llvm.maximum", "arith.minimumf": "llvm.minimum",
           "arith.maxnumf": "llvm.maximumnum", "arith.minnumf": "llvm.minimumnum",
           "math.copysign": "llvm.copysign"}


@NATIVE.implements(*_MINMAX, claim=_claims(FLOATS))
def _float_minmax(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
                  ) -> ir.Value:
    # Exact in any type: the result is one of the operands (bf16 needs no rounding).
    return e.call_intrinsic(_MINMAX[attrs.name], args[0].type, args)


@NATIVE.implements("arith.negf", claim=_claims(FLOATS))
def _negf(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
          ) -> ir.Value:
    return e.builder.fneg(args[0])


# Exact operations (the result is representable in the operand's type: no rounding).
_EXACT_UNARY = {"math.absf": "llvm.fabs", "math.floor": "llvm.floor", "math.ceil": "llvm.ceil",
                "math.trunc": "llvm.trunc", "math.roundeven": "llvm.roundeven",
                "math.round": "llvm.round", "math.sqrt": "llvm.sqrt"}


@NATIVE.implements(*_EXACT_UNARY, claim=_claims(FLOATS))
def _exact_unary(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
                 ) -> ir.Value:
    v = e.call_intrinsic(_EXACT_UNARY[attrs.name], args[0].type, args)
    return finish(e, t, v) if attrs.name == "math.sqrt" else v


@NATIVE.implements("math.rsqrt", claim=_claims(FLOATS))
def _rsqrt(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
           ) -> ir.Value:
    # bf16 computes 1/sqrt in f32 and rounds once, as the reference does; the IEEE types
    # round the root and the quotient, as numpy's loops do.
    root = e.call_intrinsic("llvm.sqrt", args[0].type, args)
    return finish(e, t, e.builder.fdiv(ir.Constant(args[0].type, 1.0), root))


# Transcendentals: (LLVM intrinsic or None, C function of the f32 / f64 form).
_MATH = {"math.exp": ("llvm.exp", "expf", "exp"), "math.exp2": ("llvm.exp2", "exp2f", "exp2"),
         "math.log": ("llvm.log", "logf", "log"), "math.log2": ("llvm.log2", "log2f", "log2"),
         "math.log10": ("llvm.log10", "log10f", "log10"),
         "math.expm1": (None, "expm1f", "expm1"), "math.log1p": (None, "log1pf", "log1p"),
         "math.tanh": ("llvm.tanh", "tanhf", "tanh"), "math.sin": ("llvm.sin", "sinf", "sin"),
         "math.cos": ("llvm.cos", "cosf", "cos"), "math.tan": ("llvm.tan", "tanf", "tan"),
         "math.atan": ("llvm.atan", "atanf", "atan"),
         "math.powf": ("llvm.pow", "powf", "pow"), "math.atan2": ("llvm.atan2", "atan2f", "atan2")}


def _in_f32(e: Emitter, t: str, args: list[ir.Value], compute: Callable[[list[ir.Value]],
                                                                          ir.Value]) -> ir.Value:
    """f16 computes in f32 and rounds back; bf16 is already held in f32 and rounds after."""
    b = e.builder
    if t == "f16":
        return b.fptrunc(compute([b.fpext(a, F32) for a in args]), F16)
    return finish(e, t, compute(args))


# Below these magnitudes tanh(x) rounds to x (x - x**3/3 is within half an ULP of x); the
# C library's tanhf rounds x * (1 + x) there instead, an ULP off (tanh(1e-7)).
_TANH_IDENTITY = {32: 2.0 ** -12, 64: 2.0 ** -27}


def exp_f32(e: Emitter, x: ir.Value) -> ir.Value:
    """e**x in f32 without a library call, so loops vectorize (softmax, sigmoid): x = n*ln2 + r
    with |r| <= ln2/2 (Cody-Waite, ln2 split in two), e**r by its Taylor polynomial to degree 7
    (truncation below 1e-8 relative) with fused multiply-adds, then scaled by 2**n in two steps
    so subnormal results round once. Within 1 ULP of the correctly rounded result; inf, -inf,
    NaN, overflow and underflow as the C library gives them."""
    b = e.builder

    def c(v: float) -> ir.Constant:
        return ir.Constant(F32, v)

    def fma(a: ir.Value, m: ir.Value, add: ir.Value) -> ir.Value:
        return e.call_intrinsic("llvm.fma", F32, [a, m, add])

    clamped = e.call_intrinsic("llvm.minnum", F32, [
        e.call_intrinsic("llvm.maxnum", F32, [x, c(-104.0)]), c(89.0)])
    n = e.call_intrinsic("llvm.roundeven", F32, [b.fmul(clamped, c(1.4426950408889634))])
    r = fma(b.fneg(n), c(0.693145751953125), clamped)
    r = fma(b.fneg(n), c(1.4286067653301870e-06), r)
    p = c(1.0 / 5040.0)
    for k in (720, 120, 24, 6, 2, 1, 1):
        p = fma(p, r, c(1.0 / k))
    ni = b.fptosi(n, I32)
    half = b.ashr(ni, ir.Constant(I32, 1))
    rest = b.sub(ni, half)

    def pow2(k: ir.Value) -> ir.Value:
        return b.bitcast(b.shl(b.add(k, ir.Constant(I32, 127)), ir.Constant(I32, 23)), F32)
    out = b.fmul(b.fmul(p, pow2(half)), pow2(rest))
    return b.select(b.fcmp_unordered("uno", x, x), x, out)


@NATIVE.implements(*_MATH, claim=_claims(FLOATS))
def _math(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
          ) -> ir.Value:
    intrinsic, c32, c64 = _MATH[attrs.name]

    def compute(xs: list[ir.Value]) -> ir.Value:
        ty = xs[0].type
        if attrs.name == "math.exp" and ty == F32:
            return exp_f32(e, xs[0])
        if intrinsic is not None:
            r = e.call_intrinsic(intrinsic, ty, xs)
        else:
            r = e.libcall(c64 if ty == F64 else c32, ty, xs)
        if attrs.name == "math.tanh":
            small = e.builder.fcmp_ordered("<", e.call_intrinsic("llvm.fabs", ty, xs),
                                           ir.Constant(ty, _TANH_IDENTITY[64 if ty == F64
                                                                          else 32]))
            r = e.builder.select(small, xs[0], r)
        return r
    return _in_f32(e, t, args, compute)


@NATIVE.implements("math.erf", claim=_claims(FLOATS))
def _erf(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
         ) -> ir.Value:
    # The reference evaluates the C library's erf in f64 and rounds once.
    b = e.builder
    x = args[0] if t == "f64" else b.fpext(args[0], F64)
    return _from_f64(e, e.libcall("erf", F64, [x]), t)


@NATIVE.implements("math.fma", claim=_claims(FLOATS))
def _fma(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
         ) -> ir.Value:
    b = e.builder
    if t == "f64":
        return e.call_intrinsic("llvm.fma", F64, args)
    # The reference: the product is exact in f64, the sum rounds there, then to the type.
    a, m, c = (b.fpext(x, F64) for x in args)
    return _from_f64(e, b.fadd(b.fmul(a, m), c), t)


@NATIVE.implements("math.fpowi", claim=lambda ops, r: ops[0] in FLOATS
                   and ops[1] in INTS and r == ops[0])
def _fpowi(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
           ) -> ir.Value:
    b = e.builder
    x = args[0] if t == "f64" else b.fpext(args[0], F64)
    n = args[1]
    # The reference converts the exponent as numpy does: an i1 `true` is 1.
    exponent = b.uitofp(n, F64) if n.type == I1 else b.sitofp(n, F64)
    return _from_f64(e, e.call_intrinsic("llvm.pow", F64, [x, exponent]), t)


_CMPF = {"oeq": ("ord", "=="), "ogt": ("ord", ">"), "oge": ("ord", ">="), "olt": ("ord", "<"),
         "ole": ("ord", "<="), "one": ("ord", "!="), "ord": ("ord", "ord"),
         "ueq": ("uno", "=="), "ugt": ("uno", ">"), "uge": ("uno", ">="), "ult": ("uno", "<"),
         "ule": ("uno", "<="), "une": ("uno", "!="), "uno": ("uno", "uno")}


@NATIVE.implements("arith.cmpf", claim=_FLOAT)
def _cmpf(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
          ) -> ir.Value:
    p = attrs.predicate or ""
    if p in ("true", "false"):
        return ir.Constant(I1, 1 if p == "true" else 0)
    kind, op = _CMPF[p]
    b = e.builder
    return (b.fcmp_ordered if kind == "ord" else b.fcmp_unordered)(op, *args)


# --- integers --------------------------------------------------------------------------------

_INT_SIMPLE = {"arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul",
               "arith.andi": "and_", "arith.ori": "or_", "arith.xori": "xor"}
_INT_MINMAX = {"arith.maxsi": "llvm.smax", "arith.minsi": "llvm.smin",
               "arith.maxui": "llvm.umax", "arith.minui": "llvm.umin"}


@NATIVE.implements(*_INT_SIMPLE, claim=_INT)
def _int_simple(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
                ) -> ir.Value:
    return getattr(e.builder, _INT_SIMPLE[attrs.name])(*args)


@NATIVE.implements(*_INT_MINMAX, claim=_INT)
def _int_minmax(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
                ) -> ir.Value:
    return e.call_intrinsic(_INT_MINMAX[attrs.name], args[0].type, args)


def _safe_divisor(e: Emitter, t: str, a: ir.Value, d: ir.Value, signed: bool
                  ) -> tuple[ir.Value, ir.Value]:
    """(divisor with 1 where dividing is undefined, d == 0)."""
    b = e.builder
    ty = d.type
    zero = b.icmp_unsigned("==", d, ir.Constant(ty, 0))
    unsafe = zero
    if signed:
        w = WIDTH[t]
        int_min = ir.Constant(ty, 1 << (w - 1))
        overflow = b.and_(b.icmp_unsigned("==", a, int_min),
                          b.icmp_unsigned("==", d, ir.Constant(ty, (1 << w) - 1)))
        unsafe = b.or_(zero, overflow)
    return b.select(unsafe, ir.Constant(ty, 1), d), zero


_DIVISIONS = ("arith.divsi", "arith.remsi", "arith.ceildivsi", "arith.floordivsi",
              "arith.divui", "arith.remui", "arith.ceildivui")


@NATIVE.implements(*_DIVISIONS, claim=_INT)
def _division(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
              ) -> ir.Value:
    b = e.builder
    a, d = args
    ty = a.type
    name = attrs.name
    signed = name.endswith("si")
    safe, zero = _safe_divisor(e, t, a, d, signed)
    zero_c, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
    if signed:
        q, r = b.sdiv(a, safe), b.srem(a, safe)
        inexact = b.icmp_unsigned("!=", r, zero_c)
        if name == "arith.divsi":
            out = q
        elif name == "arith.remsi":
            out = r
        else:
            # The signs of a and d differ: the truncated quotient is above the floor.
            differ = b.icmp_signed("<", b.xor(a, safe), zero_c)
            if name == "arith.floordivsi":
                out = b.sub(q, b.zext(b.and_(inexact, differ), ty))
            else:
                out = b.add(q, b.zext(b.and_(inexact, b.not_(differ)), ty))
    else:
        q, r = b.udiv(a, safe), b.urem(a, safe)
        if name == "arith.divui":
            out = q
        elif name == "arith.remui":
            out = r
        else:
            out = b.add(q, b.zext(b.icmp_unsigned("!=", r, zero_c), ty))
    if t == "i1":
        # x / 0 is 0, -1 / -1 wraps back to -1: division is `and`, remainder 0.
        if name in ("arith.remsi", "arith.remui"):
            return ir.Constant(I1, 0)
        return b.and_(a, d)
    del one
    return b.select(zero, zero_c, out)


@NATIVE.implements("arith.shli", "arith.shrsi", "arith.shrui", claim=_INT)
def _shift(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
           ) -> ir.Value:
    b = e.builder
    a, s = args
    ty = a.type
    w = WIDTH[t]
    if t == "i1":
        # Shifting an i1 by 1 (true) moves everything out; by 0 keeps it.
        if attrs.name == "arith.shrsi":
            return a
        return b.and_(a, b.not_(s))
    big = b.icmp_unsigned(">=", s, ir.Constant(ty, w))
    if attrs.name == "arith.shrsi":
        return b.ashr(a, b.select(big, ir.Constant(ty, w - 1), s))
    safe = b.select(big, ir.Constant(ty, 0), s)
    shifted = b.shl(a, safe) if attrs.name == "arith.shli" else b.lshr(a, safe)
    return b.select(big, ir.Constant(ty, 0), shifted)


@NATIVE.implements("math.ipowi", claim=_INT)
def _ipowi(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
           ) -> ir.Value:
    b = e.builder
    a, n = args
    ty = a.type
    if t == "i1":
        return b.or_(a, b.not_(n))        # a**0 = 1; true(-1)**n = +-1 -> true; false**n = 0
    w = WIDTH[t]
    one, zero = ir.Constant(ty, 1), ir.Constant(ty, 0)
    result, base, exp = one, a, n
    for _ in range(w):
        odd = b.trunc(exp, I1)
        result = b.select(odd, b.mul(result, base), result)
        base = b.mul(base, base)
        exp = b.lshr(exp, one)
    minus_one = ir.Constant(ty, (1 << w) - 1)
    negative = b.icmp_signed("<", n, zero)
    is_one = b.icmp_unsigned("==", a, one)
    is_minus_one = b.icmp_unsigned("==", a, minus_one)
    odd_n = b.trunc(n, I1)
    neg = b.select(is_one, one, b.select(is_minus_one, b.select(odd_n, minus_one, one), zero))
    return b.select(negative, neg, result)


@NATIVE.implements("math.absi", "math.ctlz", "math.cttz", "math.ctpop", claim=_INT)
def _int_unary(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
               ) -> ir.Value:
    a = args[0]
    if t == "i1":
        # abs(-1) wraps to -1; ctlz/cttz of 1-bit: 0 when set, 1 when clear; ctpop: itself.
        if attrs.name in ("math.absi", "math.ctpop"):
            return a
        return e.builder.not_(a)
    if attrs.name == "math.ctpop":
        return e.call_intrinsic("llvm.ctpop", a.type, [a])
    name = {"math.absi": "llvm.abs", "math.ctlz": "llvm.ctlz", "math.cttz": "llvm.cttz"}
    return e.call_intrinsic(name[attrs.name], a.type, [a, ir.Constant(I1, 0)])


_CMPI = {"eq": ("u", "=="), "ne": ("u", "!="), "slt": ("s", "<"), "sle": ("s", "<="),
         "sgt": ("s", ">"), "sge": ("s", ">="), "ult": ("u", "<"), "ule": ("u", "<="),
         "ugt": ("u", ">"), "uge": ("u", ">=")}


@NATIVE.implements("arith.cmpi", claim=_INT)
def _cmpi(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
          ) -> ir.Value:
    kind, op = _CMPI[attrs.predicate or ""]
    b = e.builder
    return (b.icmp_signed if kind == "s" else b.icmp_unsigned)(op, *args)


@NATIVE.implements("arith.select", claim=_ANY)
def _select(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], t: str
            ) -> ir.Value:
    return e.builder.select(*args)


# --- casts -----------------------------------------------------------------------------------

@NATIVE.implements("arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui",
                   "arith.extsi", "arith.extui", "arith.trunci", "arith.extf", "arith.truncf",
                   "arith.bitcast", "arith.index_cast", "arith.index_castui", claim=_ANY)
def _cast(e: Emitter, args: list[ir.Value], attrs: OpAttrs, types: list[str], dst: str
          ) -> ir.Value:
    b = e.builder
    a = args[0]
    src, name = types[0], attrs.name
    rt = register_type(dst)
    if name in ("arith.sitofp", "arith.uitofp"):
        convert = b.sitofp if name == "arith.sitofp" else b.uitofp
        if dst == "bf16":
            # One rounding: through f64 for integers f32 cannot hold exactly.
            wide = convert(a, F64)
            return _bf16_from_f64(e, wide)
        return convert(a, rt)
    if name in ("arith.fptosi", "arith.fptoui"):
        sat = "llvm.fptosi.sat" if name == "arith.fptosi" else "llvm.fptoui.sat"
        if a.type == F16:
            a = b.fpext(a, F32)           # exact; LLVM 22 saturates a half NaN to MIN
        fn = e.module.declare_intrinsic(sat, [rt, a.type], ir.FunctionType(rt, [a.type]))
        return b.call(fn, [a])
    if name in ("arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast",
                "arith.index_castui"):
        ws, wd = WIDTH[src], WIDTH[dst]
        if ws == wd:
            return a
        if wd < ws:
            return b.trunc(a, rt)
        return b.zext(a, rt) if name in ("arith.extui", "arith.index_castui") else b.sext(a, rt)
    if name in ("arith.extf", "arith.truncf"):
        if src == dst:
            return a
        if dst == "bf16":
            return _bf16_from_f64(e, b.fpext(a, F64) if a.type != F64 else a)
        if src == "bf16":
            return b.fpext(a, rt) if rt == F64 else (b.fptrunc(a, rt) if rt == F16 else a)
        return b.fpext(a, rt) if WIDTH[dst] > WIDTH[src] else narrow(e, a, rt)
    # bitcast
    if src == dst:
        return a
    if src == "bf16":                    # f32 register -> its top 16 bits
        bits16 = b.trunc(b.lshr(b.bitcast(a, I32), ir.Constant(I32, 16)), I16)
        return bits16 if rt == I16 else b.bitcast(bits16, rt)
    if dst == "bf16":
        bits16 = a if a.type == I16 else b.bitcast(a, I16)
        return b.bitcast(b.shl(b.zext(bits16, I32), ir.Constant(I32, 16)), F32)
    return b.bitcast(a, rt)


def _odd_f32(e: Emitter, x: ir.Value) -> ir.Value:
    """An f64 rounded to odd at f32's precision (truncated towards zero, the last bit set when
    inexact): a second rounding from there to a type of p <= 11 bits is then the single
    correct rounding of `x` (24 >= 2 * p + 2)."""
    b = e.builder
    t32 = b.fptrunc(x, F32)
    bits = b.bitcast(t32, I32)
    absx = e.call_intrinsic("llvm.fabs", F64, [x])
    over = b.fcmp_ordered(">", e.call_intrinsic("llvm.fabs", F64, [b.fpext(t32, F64)]), absx)
    bits = b.select(over, b.sub(bits, ir.Constant(I32, 1)), bits)
    inexact = b.fcmp_ordered("!=", b.fpext(b.bitcast(bits, F32), F64), x)
    bits = b.select(inexact, b.or_(bits, ir.Constant(I32, 1)), bits)
    return b.bitcast(bits, F32)


def _bf16_from_f64(e: Emitter, x: ir.Value) -> ir.Value:
    """An f64 rounded once to bf16 (held as f32), through f32 rounded to odd."""
    return round_bf16(e, _odd_f32(e, x))


def _from_f64(e: Emitter, x: ir.Value, t: str) -> ir.Value:
    """An f64 result rounded once to float type `t` (bf16 through f32 rounded to odd)."""
    if t == "f64":
        return x
    if t == "bf16":
        return _bf16_from_f64(e, x)
    return narrow(e, x, register_type(t))


def narrow(e: Emitter, x: ir.Value, rt: ir.Type) -> ir.Value:
    """`fptrunc`, except that f64 -> f16 goes through f32 rounded to odd: LLVM lowers that
    conversion to a runtime-library call (`__truncdfhf2`, GCC 12's libgcc) on CPUs without
    AVX512-FP16, and machine code must not depend on what a process happens to have loaded."""
    if x.type == F64 and rt == F16:
        return e.builder.fptrunc(_odd_f32(e, x), F16)
    return e.builder.fptrunc(x, rt)


__all__ = ["Emitter", "NATIVE", "NATIVE_TYPES", "NativeOp", "register_type", "round_bf16"]
