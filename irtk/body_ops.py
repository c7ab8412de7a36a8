"""The kernel IR's body ops, declared once: name, type rule, attributes and meaning.

A kernel body (irtk/compiler/kernel.py) is a list of scalar ops named as in MLIR. This module is
the one list of them. Each backend registers its implementation of an op into a `Backend` table
(the SPIR-V generator, the CPU drivers' numpy executor, the VM code generator for host
scalars), and says which operand types it handles; `tests/test_body_ops.py` compiles every op
on every type each backend claims and checks that the rest are refused by name. `infer` is the
one type checker: the CPU executable loader runs it on untrusted kernels. docs/body_ops.md is
generated from the declarations (`python -m irtk.body_ops`).

Types here are kernel types: `index` is i32 inside a kernel (`kernel_type`), so the rules never
see it. Adding an op: declare it below, then register one implementation per backend.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar, overload

from irtk.types import FLOAT_TYPES, INT_TYPES, SCALAR_TYPES

VALUE_TYPES = INT_TYPES + FLOAT_TYPES
FLOAT_PREDICATES = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt",
                    "uge", "ult", "ule", "une", "uno", "true")
INT_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")


class OpTypeError(ValueError):
    """An op's operand types or attributes do not fit its declaration."""


# (op, operand types, result type or None, predicate) -> the result type, or OpTypeError.
Check = Callable[[str, list[str], "str | None", "str | None"], str]


@dataclass(frozen=True)
class Rule:
    """A type rule: how many operands, which types they take, what the result is."""

    name: str
    arity: int
    text: str          # the rule as the docs write it
    check: Check


@dataclass(frozen=True)
class BodyOp:
    name: str
    rule: Rule
    semantics: str
    attributes: str = ""     # the Op attributes it reads besides its operands


@overload
def kernel_type(name: str) -> str: ...
@overload
def kernel_type(name: None) -> None: ...
def kernel_type(name: str | None) -> str | None:
    """MLIR's `index` is 32 bits wide in irtk kernels, like i32."""
    return "i32" if name == "index" else name


# The types of a kernel's params (push constants, read by `kernel.param`): each takes its
# storage size (`irtk.types`) and is aligned to it, in order (`Kernel.param_offsets`).
PARAM_TYPES = ("index", "i32", "f32", "i64", "f64")


def _bits(t: str) -> int:
    return SCALAR_TYPES[t].bits


def _is_int(t: str) -> bool:
    return t in INT_TYPES


def _is_float(t: str) -> bool:
    return t in FLOAT_TYPES


def _result(result_type: str | None, inferred: str) -> str:
    if result_type is not None and result_type != inferred:
        raise OpTypeError(f"result_type {result_type!r} should be {inferred!r}")
    return inferred


def _same(kind: str, test: Callable[[str], bool]) -> Check:
    def check(op: str, types: list[str], result: str | None, predicate: str | None) -> str:
        if not test(types[0]) or any(t != types[0] for t in types):
            raise OpTypeError(f"operand types ({', '.join(types)}) are not one {kind} type")
        return _result(result, types[0])
    return check


def _int_unary(op: str, types: list[str], result: str | None, predicate: str | None) -> str:
    if not _is_int(types[0]):
        raise OpTypeError(f"operand type {types[0]} is not an integer type")
    return _result(result, types[0])


def _predicate(predicate: str | None, known: tuple[str, ...]) -> None:
    if (predicate or "") not in known:
        raise OpTypeError(f"predicate {predicate!r} is not one of {', '.join(known)}")


def _cmpf(op: str, types: list[str], result: str | None, predicate: str | None) -> str:
    if not _is_float(types[0]) or types[1] != types[0]:
        raise OpTypeError(f"operand types ({', '.join(types)}) are not one float type")
    _predicate(predicate, FLOAT_PREDICATES)
    return _result(result, "i1")


def _cmpi(op: str, types: list[str], result: str | None, predicate: str | None) -> str:
    _predicate(predicate, INT_PREDICATES)
    if not _is_int(types[0]) or types[1] != types[0]:
        raise OpTypeError(f"operand types ({', '.join(types)}) are not one integer type")
    return _result(result, "i1")


def _select(op: str, types: list[str], result: str | None, predicate: str | None) -> str:
    if types[0] != "i1" or types[1] != types[2]:
        raise OpTypeError(f"operand types {types} are not (i1, T, T)")
    return _result(result, types[1])


def _fpowi(op: str, types: list[str], result: str | None, predicate: str | None) -> str:
    if not _is_float(types[0]) or not _is_int(types[1]):
        raise OpTypeError(f"operand types ({', '.join(types)}) are not (float, integer)")
    return _result(result, types[0])


def _constant(op: str, types: list[str], result: str | None, predicate: str | None) -> str:
    if result not in VALUE_TYPES:
        raise OpTypeError(f"result_type {result!r} is not a scalar type "
                          f"({', '.join(VALUE_TYPES)})")
    return result


# Casts: (source test, destination test, width relation) per op.
_CASTS: dict[str, Callable[[str, str], bool]] = {
    "arith.sitofp": lambda s, d: _is_int(s) and _is_float(d),
    "arith.uitofp": lambda s, d: _is_int(s) and _is_float(d),
    "arith.fptosi": lambda s, d: _is_float(s) and _is_int(d),
    "arith.fptoui": lambda s, d: _is_float(s) and _is_int(d),
    "arith.extsi": lambda s, d: _is_int(s) and _is_int(d) and _bits(d) > _bits(s),
    "arith.extui": lambda s, d: _is_int(s) and _is_int(d) and _bits(d) > _bits(s),
    "arith.trunci": lambda s, d: _is_int(s) and _is_int(d) and _bits(d) < _bits(s),
    "arith.extf": lambda s, d: _is_float(s) and _is_float(d) and _bits(d) > _bits(s),
    "arith.truncf": lambda s, d: _is_float(s) and _is_float(d) and _bits(d) < _bits(s),
    "arith.bitcast": lambda s, d: _bits(s) == _bits(d) and s != "i1",
    "arith.index_cast": lambda s, d: _is_int(s) and _is_int(d) and "i32" in (s, d),
    "arith.index_castui": lambda s, d: _is_int(s) and _is_int(d) and "i32" in (s, d),
}


def _cast(op: str, types: list[str], result: str | None, predicate: str | None) -> str:
    if result is None:
        raise OpTypeError("result_type is missing (a cast needs its target type)")
    if result not in VALUE_TYPES:
        raise OpTypeError(f"result_type {result!r} is not a scalar type")
    if not _CASTS[op](types[0], result):
        raise OpTypeError(f"cannot cast {types[0]} to {result}")
    return result


def _executor(op: str, types: list[str], result: str | None, predicate: str | None) -> str:
    raise OpTypeError(f"{op} is typed by the kernel (its loop, input or param), not by a rule")


RULES = {r.name: r for r in (
    Rule("constant", 0, "() -> T", _constant),
    Rule("float_unary", 1, "(F) -> F", _same("float", _is_float)),
    Rule("float_binary", 2, "(F, F) -> F", _same("float", _is_float)),
    Rule("float_ternary", 3, "(F, F, F) -> F", _same("float", _is_float)),
    Rule("int_unary", 1, "(I) -> I", _int_unary),
    Rule("int_binary", 2, "(I, I) -> I", _same("integer", _is_int)),
    Rule("cmpf", 2, "(F, F) -> i1", _cmpf),
    Rule("cmpi", 2, "(I, I) -> i1", _cmpi),
    Rule("select", 3, "(i1, T, T) -> T", _select),
    Rule("fpowi", 2, "(F, I) -> F", _fpowi),
    Rule("cast", 1, "(S) -> D", _cast),
    Rule("executor", -1, "see the op", _executor),
)}


def _declare(rule: str, semantics: str, *names: str, attributes: str = "") -> list[BodyOp]:
    return [BodyOp(n, RULES[rule], semantics, attributes) for n in names]


_DECLARATIONS: list[BodyOp] = [
    *_declare("constant", "the constant `int_value` (integers, i1) or `float_value` (floats), "
              "rounded to the type", "arith.constant", attributes="int_value / float_value"),
    *_declare("float_binary", "a + b", "arith.addf"),
    *_declare("float_binary", "a - b", "arith.subf"),
    *_declare("float_binary", "a * b", "arith.mulf"),
    *_declare("float_binary", "a / b", "arith.divf"),
    *_declare("float_binary", "C fmod: the remainder has the dividend's sign", "arith.remf"),
    *_declare("float_binary", "IEEE maximum, minimum: NaN wins, -0 < +0",
              "arith.maximumf", "arith.minimumf"),
    *_declare("float_binary", "maxNum, minNum: the number wins over NaN, -0 < +0",
              "arith.maxnumf", "arith.minnumf"),
    *_declare("float_unary", "-a", "arith.negf"),
    *_declare("int_binary", "a + b, wrapping (i1: xor)", "arith.addi"),
    *_declare("int_binary", "a - b, wrapping (i1: xor)", "arith.subi"),
    *_declare("int_binary", "a * b, wrapping (i1: and)", "arith.muli"),
    *_declare("int_binary", "signed division, truncated; by 0 gives 0, MIN / -1 gives MIN",
              "arith.divsi"),
    *_declare("int_binary", "unsigned division; by 0 gives 0", "arith.divui"),
    *_declare("int_binary", "signed remainder (the dividend's sign); by 0 or MIN % -1 gives 0",
              "arith.remsi"),
    *_declare("int_binary", "unsigned remainder; by 0 gives 0", "arith.remui"),
    *_declare("int_binary", "signed division rounded up; by 0 gives 0", "arith.ceildivsi"),
    *_declare("int_binary", "unsigned division rounded up; by 0 gives 0", "arith.ceildivui"),
    *_declare("int_binary", "signed division rounded down; by 0 gives 0", "arith.floordivsi"),
    *_declare("int_binary", "signed maximum, minimum", "arith.maxsi", "arith.minsi"),
    *_declare("int_binary", "unsigned maximum, minimum", "arith.maxui", "arith.minui"),
    *_declare("int_binary", "bitwise and, or, xor", "arith.andi", "arith.ori", "arith.xori"),
    *_declare("int_binary", "a << b; an amount >= the width (read unsigned) gives 0",
              "arith.shli"),
    *_declare("int_binary", "a >> b, arithmetic; an amount >= the width gives the sign fill",
              "arith.shrsi"),
    *_declare("int_binary", "a >> b, logical; an amount >= the width gives 0", "arith.shrui"),
    *_declare("cmpf", "LLVM's ordered / unordered float predicates", "arith.cmpf",
              attributes="predicate"),
    *_declare("cmpi", "integer predicates; i1 true is -1 signed, 1 unsigned", "arith.cmpi",
              attributes="predicate"),
    *_declare("select", "c ? a : b", "arith.select"),
    *_declare("cast", "signed integer to float, rounded once (i1 true: -1)", "arith.sitofp"),
    *_declare("cast", "unsigned integer to float, rounded once (i1 true: 1)", "arith.uitofp"),
    *_declare("cast", "float to signed, unsigned integer: truncated, saturated to the range; "
              "NaN gives 0", "arith.fptosi", "arith.fptoui"),
    *_declare("cast", "zero-extend", "arith.extui"),
    *_declare("cast", "sign-extend", "arith.extsi"),
    *_declare("cast", "the low bits", "arith.trunci"),
    *_declare("cast", "a wider float (exact)", "arith.extf"),
    *_declare("cast", "a narrower float, rounded to nearest even", "arith.truncf"),
    *_declare("cast", "the same bits read as the other type", "arith.bitcast"),
    *_declare("cast", "index <-> integer, sign-extending", "arith.index_cast"),
    *_declare("cast", "index <-> integer, zero-extending", "arith.index_castui"),
    *_declare("float_unary", "e^a", "math.exp"),
    *_declare("float_unary", "2^a", "math.exp2"),
    *_declare("float_unary", "e^a - 1, exact near 0", "math.expm1"),
    *_declare("float_unary", "ln a", "math.log"),
    *_declare("float_unary", "log2 a", "math.log2"),
    *_declare("float_unary", "log10 a", "math.log10"),
    *_declare("float_unary", "ln(1 + a), exact near 0", "math.log1p"),
    *_declare("float_unary", "tanh a", "math.tanh"),
    *_declare("float_unary", "sqrt a", "math.sqrt"),
    *_declare("float_unary", "1 / sqrt a", "math.rsqrt"),
    *_declare("float_unary", "|a|", "math.absf"),
    *_declare("float_unary", "rounded down", "math.floor"),
    *_declare("float_unary", "rounded up", "math.ceil"),
    *_declare("float_unary", "rounded half away from zero", "math.round"),
    *_declare("float_unary", "rounded half to even", "math.roundeven"),
    *_declare("float_unary", "rounded toward zero", "math.trunc"),
    *_declare("float_unary", "sin a", "math.sin"),
    *_declare("float_unary", "cos a", "math.cos"),
    *_declare("float_unary", "tan a", "math.tan"),
    *_declare("float_unary", "atan a", "math.atan"),
    *_declare("float_unary", "the error function", "math.erf"),
    *_declare("float_binary", "C99 pow over the whole domain", "math.powf"),
    *_declare("float_binary", "atan2(a, b)", "math.atan2"),
    *_declare("float_binary", "|a| with the sign bit of b", "math.copysign"),
    *_declare("float_ternary", "a * b + c, rounded once", "math.fma"),
    *_declare("fpowi", "a ^ b for an integer exponent, computed in f64 and rounded", "math.fpowi"),
    *_declare("int_binary", "a ^ b wrapping; a negative exponent gives 1 for a = 1, +-1 for "
              "a = -1, else 0", "math.ipowi"),
    *_declare("int_unary", "|a| (|MIN| wraps to MIN)", "math.absi"),
    *_declare("int_unary", "leading zeros, trailing zeros (of 0: the width), set bits",
              "math.ctlz", "math.cttz", "math.ctpop"),
    *_declare("executor", "the point's index on loop `int_value`; result index",
              "linalg.index", attributes="int_value"),
    *_declare("executor", "the element of gather input `int_value` at the operand indices, each "
              "clamped into its extent", "tensor.extract", attributes="int_value"),
    *_declare("executor", "the value of push-constant param `int_value`; result its type",
              "kernel.param", attributes="int_value"),
]

OPS: dict[str, BodyOp] = {op.name: op for op in _DECLARATIONS}
NAMES = frozenset(OPS)
# Ops typed by the kernel's structure (a loop, a gather input, a param), not by a rule.
EXECUTOR_OPS = tuple(name for name, op in OPS.items() if op.rule.name == "executor")
# Ops computed from their operands alone: the ones a host program may use on scalars too.
SCALAR_OPS = NAMES - frozenset(EXECUTOR_OPS)


def infer(name: str, operand_types: list[str], result_type: str | None = None,
          predicate: str | None = None, int_value: int = 0) -> str:
    """The result type of op `name` on `operand_types` (kernel types: index is i32); raises
    OpTypeError naming what does not fit. `result_type`, when given, must be that type."""
    op = OPS.get(name)
    if op is None:
        raise OpTypeError(f"unsupported op (supported: {', '.join(sorted(OPS))})")
    for t in operand_types:
        if t not in VALUE_TYPES:
            raise OpTypeError(f"operand type {t!r} is not a scalar type")
    rule = op.rule
    if rule.arity >= 0 and len(operand_types) != rule.arity:
        raise OpTypeError(f"has {len(operand_types)} operands, expected {rule.arity}")
    result = rule.check(name, operand_types, result_type, predicate)
    if name == "arith.constant" and _is_int(result):
        w = _bits(result)
        lo = -(1 << (w - 1)) if w > 1 else -1
        if not lo <= int_value < (1 << w):
            raise OpTypeError(f"int_value {int_value} does not fit in {result}")
    return result


def signatures(name: str) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every (operand types, result type) the rule of op `name` accepts, over VALUE_TYPES."""
    rule = OPS[name].rule
    if rule.name == "executor":
        return
    results: tuple[str | None, ...] = VALUE_TYPES if rule.name in ("constant", "cast") else (None,)
    for operands in itertools.product(VALUE_TYPES, repeat=rule.arity):
        for result in results:
            predicate = "oeq" if name == "arith.cmpf" else "eq" if name == "arith.cmpi" else None
            try:
                yield operands, infer(name, list(operands), result, predicate)
            except OpTypeError:
                continue


Impl = TypeVar("Impl")
Claim = Callable[[tuple[str, ...], str], bool]


def every_type(operands: tuple[str, ...], result: str) -> bool:
    return True


@dataclass(frozen=True)
class Registration(Generic[Impl]):
    impl: Impl
    claim: Claim


class Backend(Generic[Impl]):
    """One backend's implementations of the body ops. An op may have several implementations,
    each claiming the signatures it handles (e.g. 32-bit registers and 64-bit ones); the first
    whose claim holds is used. Registering an op this module does not declare is an error, so a
    backend cannot grow an op the kernel IR does not have."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._table: dict[str, list[Registration[Impl]]] = {}

    def register(self, names: tuple[str, ...] | list[str] | str, impl: Impl,
                 claim: Claim = every_type) -> None:
        for name in [names] if isinstance(names, str) else names:
            if name not in OPS:
                raise KeyError(f"{self.name}: '{name}' is not a declared body op")
            self._table.setdefault(name, []).append(Registration(impl, claim))

    def implements(self, *names: str, claim: Claim = every_type) -> Callable[[Impl], Impl]:
        """Decorator form of `register`."""
        def decorate(impl: Impl) -> Impl:
            self.register(names, impl, claim)
            return impl
        return decorate

    def lookup(self, name: str, operands: tuple[str, ...] | list[str] = (),
               result: str = "") -> Impl | None:
        """The implementation of `name` for these types (None: the backend lacks it)."""
        for reg in self._table.get(name, ()):
            if reg.claim(tuple(operands), result):
                return reg.impl
        return None

    def candidates(self, name: str, operands: tuple[str, ...] | list[str] = (),
                   result: str = "") -> list[Impl]:
        """Every implementation of `name` whose claim holds for these types, in order."""
        return [reg.impl for reg in self._table.get(name, ())
                if reg.claim(tuple(operands), result)]

    def supports(self, name: str, operands: tuple[str, ...] | list[str], result: str) -> bool:
        return self.lookup(name, operands, result) is not None

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._table)
