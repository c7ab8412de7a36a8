"""Host scalar arithmetic: arith/math ops on host values -> VM instructions.

Host scalars live in the VM bank `irtk.types` gives each type: i1 as 0/1 and narrow ints kept
sign-extended in i32, index in i64, f16/bf16 and the f8/f4 small floats as their values in f32
(as tensor.extract decodes them).
"""
from __future__ import annotations

from typing import Callable

from irtk.compiler import tir
from irtk.errors import CompileError
from irtk.types import SCALAR_TYPES
from irtk.vm.writer import FunctionBuilder, Reg

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


def lower(b: FunctionBuilder, new: Callable[[str], Reg], op: tir.Op, args: list[Reg],
          error: Callable[[str], CompileError]) -> Reg:
    """Emit `op` over registers `args`; returns the result register."""
    out_t = type_name(op.result.type)
    if out_t not in SCALAR_TYPES:
        raise error(f"host scalars of type {out_t} are not supported")
    bank = SCALAR_TYPES[out_t].vm_bank
    in_t = type_name(op.operands[0].type) if op.operands else out_t
    r = new(bank)
    k = op.kind
    if k in _INT_BINARY:
        b.emit(f"{_INT_BINARY[k]}.{bank}", r.index, args[0].index, args[1].index)
        return narrow(b, new, r, out_t)
    if k in _FLOAT_BINARY:
        b.emit(f"{_FLOAT_BINARY[k]}.{bank}", r.index, args[0].index, args[1].index)
        return r
    if k in _FLOAT_UNARY:
        b.emit(f"{_FLOAT_UNARY[k]}.{bank}", r.index, args[0].index)
        return r
    if k in ("arith.ceildivui", "arith.ceildivsi", "arith.floordivsi"):
        return _rounded_division(b, new, k, bank, args[0], args[1], r)
    if k == "math.absi":
        b.emit(f"abs.{bank}", r.index, args[0].index)
        return r
    if k == "arith.select":
        b.emit(f"select.{bank}", r.index, args[0].index, args[1].index, args[2].index)
        return r
    if k in ("arith.cmpi", "arith.cmpf"):
        table = _CMPI if k == "arith.cmpi" else _CMPF
        pred = op.attrs.get("predicate", "")
        if pred not in table:
            raise error(f"{k} predicate '{pred}' is not supported on the host")
        name, swap, negate = table[pred]
        a, c = (args[1], args[0]) if swap else (args[0], args[1])
        src_bank = SCALAR_TYPES[in_t].vm_bank
        b.emit(f"{name}.{src_bank}", r.index, a.index, c.index)
        if negate:
            one = new("i32")
            b.emit("const.i32", one.index, 1)
            b.emit("xor.i32", r.index, r.index, one.index)
        return r
    if k in ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui",
             "arith.trunci"):
        src_bank = SCALAR_TYPES[in_t].vm_bank
        unsigned = k in ("arith.index_castui", "arith.extui")
        if src_bank == bank:
            b.emit(f"mov.{bank}", r.index, args[0].index)
            if unsigned and _narrow_int(in_t):
                _zero_extend(b, new, r, in_t)
            return narrow(b, new, r, out_t)
        if src_bank == "i32":
            src = args[0]
            if unsigned and _narrow_int(in_t):
                src = new("i32")
                b.emit("mov.i32", src.index, args[0].index)
                _zero_extend(b, new, src, in_t)
            b.emit("ext.i32.i64.u" if unsigned else "ext.i32.i64.s", r.index, src.index)
            return r
        b.emit("trunc.i64.i32", r.index, args[0].index)
        return narrow(b, new, r, out_t)
    if k in ("arith.sitofp", "arith.uitofp"):
        s = "u" if k == "arith.uitofp" else "s"
        width = "32" if SCALAR_TYPES[in_t].vm_bank == "i32" else "64"
        b.emit(f"cast.{s}i{width}.{bank}", r.index, args[0].index)
        return r
    if k in ("arith.fptosi", "arith.fptoui"):
        s = "u" if k == "arith.fptoui" else "s"
        width = "32" if bank == "i32" else "64"
        b.emit(f"cast.{SCALAR_TYPES[in_t].vm_bank}.{s}i{width}", r.index, args[0].index)
        return narrow(b, new, r, out_t)
    if k in ("arith.extf", "arith.truncf"):
        src_bank = SCALAR_TYPES[in_t].vm_bank
        if src_bank == bank:
            b.emit(f"mov.{bank}", r.index, args[0].index)
        else:
            b.emit(f"cast.{src_bank}.{bank}", r.index, args[0].index)
        return r
    if k == "arith.bitcast":
        src_bank = SCALAR_TYPES[in_t].vm_bank
        if src_bank == bank:
            b.emit(f"mov.{bank}", r.index, args[0].index)
        else:
            b.emit(f"bitcast.{src_bank}.{bank}", r.index, args[0].index)
        return r
    raise error(f"op '{k}' is not supported on the host")


def _rounded_division(b: FunctionBuilder, new: Callable[[str], Reg], k: str, bank: str,
                      a: Reg, d: Reg, q: Reg) -> Reg:
    """ceil/floor division from the truncating one: adjust the quotient by one when the
    remainder is nonzero and (ceil) has the divisor's sign / (floor) has the other sign."""
    s = "u" if k == "arith.ceildivui" else "s"
    rem = new(bank)
    b.emit(f"div.{s}.{bank}", q.index, a.index, d.index)
    b.emit(f"rem.{s}.{bank}", rem.index, a.index, d.index)
    nonzero = new("i32")
    b.emit(f"cmp.nz.{bank}", nonzero.index, rem.index)
    adjust = nonzero
    if s == "s":
        sign = new(bank)
        b.emit(f"xor.{bank}", sign.index, rem.index, d.index)
        zero = new(bank)
        b.emit(f"const.{bank}", zero.index, 0)
        negative = new("i32")
        b.emit(f"cmp.lt.s.{bank}", negative.index, sign.index, zero.index)
        if k == "arith.ceildivsi":
            one = new("i32")
            b.emit("const.i32", one.index, 1)
            b.emit("xor.i32", negative.index, negative.index, one.index)
        adjust = new("i32")
        b.emit("and.i32", adjust.index, nonzero.index, negative.index)
    step = new(bank)
    if bank == "i64":
        b.emit("ext.i32.i64.u", step.index, adjust.index)
    else:
        b.emit("mov.i32", step.index, adjust.index)
    b.emit(f"{'sub' if k == 'arith.floordivsi' else 'add'}.{bank}", q.index, q.index,
           step.index)
    return q


def _narrow_int(t: str) -> bool:
    """An integer held sign-extended (i1: as 0/1) in a wider i32 register."""
    return SCALAR_TYPES[t].is_int and SCALAR_TYPES[t].bits < 32


def _zero_extend(b: FunctionBuilder, new: Callable[[str], Reg], r: Reg, t: str) -> None:
    if t in ("i2", "i4"):
        mask = new("i32")
        b.emit("const.i32", mask.index, (1 << SCALAR_TYPES[t].bits) - 1)
        b.emit("and.i32", r.index, r.index, mask.index)
        return
    op = {"i1": "trunc.i32.i8", "i8": "trunc.i32.i8", "i16": "trunc.i32.i16"}[t]
    b.emit(op, r.index, r.index)


def narrow(b: FunctionBuilder, new: Callable[[str], Reg], r: Reg, t: str) -> Reg:
    """Keep narrow integers in their canonical form (i1: 0/1, i2/i4/i8/i16 sign-extended)."""
    if t in ("i2", "i4"):
        shift = new("i32")
        b.emit("const.i32", shift.index, 32 - SCALAR_TYPES[t].bits)
        b.emit("shl.i32", r.index, r.index, shift.index)
        b.emit("shr.s.i32", r.index, r.index, shift.index)
    elif t == "i1":
        one = new("i32")
        b.emit("const.i32", one.index, 1)
        b.emit("and.i32", r.index, r.index, one.index)
    elif t == "i8":
        b.emit("ext.i8.i32.s", r.index, r.index)
    elif t == "i16":
        b.emit("ext.i16.i32.s", r.index, r.index)
    return r
