"""Host scalar arithmetic: arith/math ops on host values -> VM instructions.

Host scalars live in the VM bank `irtk.types` gives each type: i1 as 0/1 and narrow ints kept
sign-extended in i32, index in i64, f16/bf16 and the f8/f4 small floats as their values in f32
(as tensor.extract decodes them).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from irtk.body_ops import Backend
from irtk.compiler import tir
from irtk.errors import CompileError
from irtk.types import SCALAR_TYPES
from irtk.compiler.regalloc import VirtualBuilder
from irtk.vm.writer import Reg

_INT_BINARY = {"arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul",
               "arith.divsi": "div.s", "arith.divui": "div.u", "arith.remsi": "rem.s",
               "arith.remui": "rem.u", "arith.andi": "and", "arith.ori": "or",
               "arith.xori": "xor", "arith.shli": "shl", "arith.shrsi": "shr.s",
               "arith.shrui": "shr.u", "arith.maxsi": "max.s", "arith.minsi": "min.s",
               "arith.maxui": "max.u", "arith.minui": "min.u"}
_FLOAT_BINARY = {"arith.addf": "add", "arith.subf": "sub", "arith.mulf": "mul",
                 "arith.divf": "div", "arith.remf": "rem", "arith.maximumf": "max",
                 "arith.minimumf": "min", "arith.maxnumf": "max", "arith.minnumf": "min",
                 "math.powf": "pow"}
_FLOAT_UNARY = {"arith.negf": "neg", "math.absf": "abs", "math.exp": "exp", "math.exp2": "exp2",
                "math.log": "log", "math.log2": "log2", "math.sqrt": "sqrt",
                "math.rsqrt": "rsqrt", "math.tanh": "tanh", "math.sin": "sin",
                "math.cos": "cos", "math.floor": "floor", "math.ceil": "ceil",
                "math.round": "round"}
# (op, swap operands, negate result) per predicate, for the signed/unsigned compares the VM has.
_CMPI = {"eq": ("cmp.eq", False, False), "ne": ("cmp.ne", False, False),
         "slt": ("cmp.lt.s", False, False), "sle": ("cmp.lte.s", False, False),
         "sgt": ("cmp.lt.s", True, False), "sge": ("cmp.lte.s", True, False),
         "ult": ("cmp.lt.u", False, False), "ule": ("cmp.lte.u", False, False),
         "ugt": ("cmp.lt.u", True, False), "uge": ("cmp.lte.u", True, False)}
_CMPF = {"oeq": ("cmp.eq", False, False), "olt": ("cmp.lt", False, False),
         "ole": ("cmp.lte", False, False), "ogt": ("cmp.lt", True, False),
         "oge": ("cmp.lte", True, False), "une": ("cmp.ne", False, False),
         "uge": ("cmp.lt", False, True), "ugt": ("cmp.lte", False, True),
         "ule": ("cmp.lt", True, True), "ult": ("cmp.lte", True, True),
         "one": ("cmp.eq", False, True), "ueq": ("cmp.ne", False, True)}


def type_name(t: tir.Type) -> str:
    assert isinstance(t, tir.ScalarType), t
    return t.name


@dataclass
class HostOp:
    """What a lowering gets: the op, its operand registers, the result register (already
    allocated in the result's bank) and the types, with the builder to emit into."""

    b: VirtualBuilder
    new: Callable[[str], Reg]
    op: tir.Op
    args: list[Reg]
    r: Reg
    in_t: str            # the first operand's type (the result's for ops without operands)
    out_t: str
    error: Callable[[str], CompileError]

    @property
    def bank(self) -> str:
        return self.r.bank

    @property
    def in_bank(self) -> str:
        return SCALAR_TYPES[self.in_t].vm_bank


Lowering = Callable[[HostOp], Reg]
# The VM code generator's implementations of the body ops on host scalars (irtk.body_ops).
HOST_OPS: Backend[Lowering] = Backend("vm")


def lower(b: VirtualBuilder, new: Callable[[str], Reg], op: tir.Op, args: list[Reg],
          error: Callable[[str], CompileError]) -> Reg:
    """Emit `op` over registers `args`; returns the result register."""
    out_t = type_name(op.result.type)
    if out_t not in SCALAR_TYPES:
        raise error(f"host scalars of type {out_t} are not supported")
    bank = SCALAR_TYPES[out_t].vm_bank
    in_t = type_name(op.operands[0].type) if op.operands else out_t
    r = new(bank)
    lowering = HOST_OPS.lookup(op.kind, [type_name(v.type) for v in op.operands], out_t)
    if lowering is None:
        raise error(f"op '{op.kind}' is not supported on the host")
    return lowering(HostOp(b, new, op, args, r, in_t, out_t, error))


@HOST_OPS.implements(*_INT_BINARY)
def _int_binary(h: HostOp) -> Reg:
    h.b.emit(f"{_INT_BINARY[h.op.kind]}.{h.bank}", h.r, h.args[0], h.args[1])
    return narrow(h.b, h.new, h.r, h.out_t)


@HOST_OPS.implements(*_FLOAT_BINARY)
def _float_binary(h: HostOp) -> Reg:
    h.b.emit(f"{_FLOAT_BINARY[h.op.kind]}.{h.bank}", h.r, h.args[0], h.args[1])
    return h.r


@HOST_OPS.implements(*_FLOAT_UNARY)
def _float_unary(h: HostOp) -> Reg:
    h.b.emit(f"{_FLOAT_UNARY[h.op.kind]}.{h.bank}", h.r, h.args[0])
    return h.r


@HOST_OPS.implements("arith.ceildivui", "arith.ceildivsi", "arith.floordivsi")
def _rounded(h: HostOp) -> Reg:
    return _rounded_division(h.b, h.new, h.op.kind, h.bank, h.args[0], h.args[1], h.r)


@HOST_OPS.implements("math.absi")
def _absi(h: HostOp) -> Reg:
    h.b.emit(f"abs.{h.bank}", h.r, h.args[0])
    return h.r


@HOST_OPS.implements("arith.select")
def _select(h: HostOp) -> Reg:
    h.b.emit(f"select.{h.bank}", h.r, h.args[0], h.args[1], h.args[2])
    return h.r


@HOST_OPS.implements("arith.cmpi", "arith.cmpf")
def _compare(h: HostOp) -> Reg:
    k, b, r = h.op.kind, h.b, h.r
    table = _CMPI if k == "arith.cmpi" else _CMPF
    pred = h.op.attrs.get("predicate", "")
    if pred not in table:
        raise h.error(f"{k} predicate '{pred}' is not supported on the host")
    name, swap, negate = table[pred]
    a, c = (h.args[1], h.args[0]) if swap else (h.args[0], h.args[1])
    b.emit(f"{name}.{h.in_bank}", r, a, c)
    if negate:
        one = h.new("i32")
        b.emit("const.i32", one, 1)
        b.emit("xor.i32", r, r, one)
    return r


@HOST_OPS.implements("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui",
                     "arith.trunci")
def _int_cast(h: HostOp) -> Reg:
    b, new, r, bank, in_t = h.b, h.new, h.r, h.bank, h.in_t
    unsigned = h.op.kind in ("arith.index_castui", "arith.extui")
    if h.in_bank == bank:
        b.emit(f"mov.{bank}", r, h.args[0])
        if unsigned and _narrow_int(in_t):
            _zero_extend(b, new, r, in_t)
        return narrow(b, new, r, h.out_t)
    if h.in_bank == "i32":
        src = h.args[0]
        if unsigned and _narrow_int(in_t):
            src = new("i32")
            b.emit("mov.i32", src, h.args[0])
            _zero_extend(b, new, src, in_t)
        b.emit("ext.i32.i64.u" if unsigned else "ext.i32.i64.s", r, src)
        return r
    b.emit("trunc.i64.i32", r, h.args[0])
    return narrow(b, new, r, h.out_t)


@HOST_OPS.implements("arith.sitofp", "arith.uitofp")
def _int_to_float(h: HostOp) -> Reg:
    s = "u" if h.op.kind == "arith.uitofp" else "s"
    width = "32" if h.in_bank == "i32" else "64"
    h.b.emit(f"cast.{s}i{width}.{h.bank}", h.r, h.args[0])
    return h.r


@HOST_OPS.implements("arith.fptosi", "arith.fptoui")
def _float_to_int(h: HostOp) -> Reg:
    s = "u" if h.op.kind == "arith.fptoui" else "s"
    width = "32" if h.bank == "i32" else "64"
    h.b.emit(f"cast.{h.in_bank}.{s}i{width}", h.r, h.args[0])
    return narrow(h.b, h.new, h.r, h.out_t)


def _bank_move(instruction: str) -> Callable[[HostOp], Reg]:
    """A cast that is a `mov` within a bank and `<instruction>.<from>.<to>` between two."""
    def lower(h: HostOp) -> Reg:
        if h.in_bank == h.bank:
            h.b.emit(f"mov.{h.bank}", h.r, h.args[0])
        else:
            h.b.emit(f"{instruction}.{h.in_bank}.{h.bank}", h.r, h.args[0])
        return h.r
    return lower


HOST_OPS.register(("arith.extf", "arith.truncf"), _bank_move("cast"))
HOST_OPS.register("arith.bitcast", _bank_move("bitcast"))


def _rounded_division(b: VirtualBuilder, new: Callable[[str], Reg], k: str, bank: str,
                      a: Reg, d: Reg, q: Reg) -> Reg:
    """ceil/floor division from the truncating one: adjust the quotient by one when the
    remainder is nonzero and (ceil) has the divisor's sign / (floor) has the other sign."""
    s = "u" if k == "arith.ceildivui" else "s"
    rem = new(bank)
    b.emit(f"div.{s}.{bank}", q, a, d)
    b.emit(f"rem.{s}.{bank}", rem, a, d)
    nonzero = new("i32")
    b.emit(f"cmp.nz.{bank}", nonzero, rem)
    adjust = nonzero
    if s == "s":
        sign = new(bank)
        b.emit(f"xor.{bank}", sign, rem, d)
        zero = new(bank)
        b.emit(f"const.{bank}", zero, 0)
        negative = new("i32")
        b.emit(f"cmp.lt.s.{bank}", negative, sign, zero)
        if k == "arith.ceildivsi":
            one = new("i32")
            b.emit("const.i32", one, 1)
            b.emit("xor.i32", negative, negative, one)
        adjust = new("i32")
        b.emit("and.i32", adjust, nonzero, negative)
    step = new(bank)
    if bank == "i64":
        b.emit("ext.i32.i64.u", step, adjust)
    else:
        b.emit("mov.i32", step, adjust)
    b.emit(f"{'sub' if k == 'arith.floordivsi' else 'add'}.{bank}", q, q, step)
    return q


def _narrow_int(t: str) -> bool:
    """An integer held sign-extended (i1: as 0/1) in a wider i32 register."""
    return SCALAR_TYPES[t].is_int and SCALAR_TYPES[t].bits < 32


def _zero_extend(b: VirtualBuilder, new: Callable[[str], Reg], r: Reg, t: str) -> None:
    bits = SCALAR_TYPES[t].bits
    if bits in (1, 8, 16):      # the VM keeps the low 8 or 16 bits (an i1 is 0/1: its byte)
        b.emit(f"trunc.i32.i{max(bits, 8)}", r, r)
        return
    mask = new("i32")
    b.emit("const.i32", mask, (1 << bits) - 1)
    b.emit("and.i32", r, r, mask)


def narrow(b: VirtualBuilder, new: Callable[[str], Reg], r: Reg, t: str) -> Reg:
    """Keep narrow integers in their canonical form (i1: 0/1, i2/i4/i8/i16 sign-extended)."""
    if t not in SCALAR_TYPES or not _narrow_int(t):
        return r
    bits = SCALAR_TYPES[t].bits
    if bits == 1:
        one = new("i32")
        b.emit("const.i32", one, 1)
        b.emit("and.i32", r, r, one)
    elif bits in (8, 16):       # the VM sign-extends 8 and 16 bits
        b.emit(f"ext.i{bits}.i32.s", r, r)
    else:
        shift = new("i32")
        b.emit("const.i32", shift, 32 - bits)
        b.emit("shl.i32", r, r, shift)
        b.emit("shr.s.i32", r, r, shift)
    return r
