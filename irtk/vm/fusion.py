"""Fuses straight-line runs of simple ops into one generated Python function per run.

The interpreter's closures cost one Python call per instruction; a loop body of a dozen integer
and float ops spends most of its time in those calls. For ops that cannot fail (arithmetic that
wraps, compares, moves, selects, constants, exact casts) a run inside one block is instead
written out as Python statements on the frame's register list `R`, compiled once per function
at load, and ended by the run's `br` / `cond_br` when it has one. A fused run returns the index
of the next instruction, so the run loop treats it like a branch.

Only ops that never raise are fused, so a fault still happens in a per-instruction closure that
knows its bytecode offset. The generated source holds nothing but register slot numbers,
instruction indices and the fixed templates below; immediates are passed in as named constants,
so no text from the module file ever reaches `compile`.
"""
from __future__ import annotations

from typing import Any, Callable

from irtk.vm import numerics as n

# Wrapping arithmetic: compute, then wrap only when out of range (the common case is a compare).
_W32 = ("{{0}} = {}\nif not -0x80000000 <= {{0}} <= 0x7FFFFFFF: "
        "{{0}} = (({{0}} + 0x80000000) & 0xFFFFFFFF) - 0x80000000")
_W64 = ("{{0}} = {}\nif not -0x8000000000000000 <= {{0}} <= 0x7FFFFFFFFFFFFFFF: "
        "{{0}} = (({{0}} + 0x8000000000000000) & 0xFFFFFFFFFFFFFFFF) - 0x8000000000000000")
_MASK = {"i32": "0xFFFFFFFF", "i64": "0xFFFFFFFFFFFFFFFF"}

# Operand placeholders {0}, {1}, ... are the op's operands in `isa.OPS` order: a local holding a
# register (r<slot>), or K<i> for an immediate. {0} is always the register written.
TEMPLATES: dict[str, str] = {
    "const.ref.null": "{0} = None",
    "cmp.eq.ref": "{0} = 1 if {1} is {2} else 0",
    "cmp.nz.ref": "{0} = 0 if {1} is None else 1",
    "mov.ref": "{0} = {1}",
    "select.ref": "{0} = {2} if {1} else {3}",
    "ext.i32.i64.s": "{0} = {1}",
    "ext.i32.i64.u": "{0} = {1} & 0xFFFFFFFF",
    "trunc.i64.i32": _W32.format("{1}"),
    "ext.i8.i32.s": "{0} = (({1} & 0xFF) ^ 0x80) - 0x80",
    "ext.i8.i32.u": "{0} = {1} & 0xFF",
    "ext.i16.i32.s": "{0} = (({1} & 0xFFFF) ^ 0x8000) - 0x8000",
    "ext.i16.i32.u": "{0} = {1} & 0xFFFF",
    "trunc.i32.i8": "{0} = {1} & 0xFF",
    "trunc.i32.i16": "{0} = {1} & 0xFFFF",
    "cast.si32.f64": "{0} = float({1})",
    "cast.ui32.f64": "{0} = float({1} & 0xFFFFFFFF)",
    "cast.si32.f32": "{0} = F32(float({1}))",        # exact in double, rounded once
    "cast.ui32.f32": "{0} = INT_TO_F32({1} & 0xFFFFFFFF)",
    "cast.si64.f32": "{0} = INT_TO_F32({1})",
    "cast.f32.f64": "{0} = {1}",
    "cast.f64.f32": "{0} = F32({1})",
}
for _bank in ("i32", "i64", "f32", "f64"):
    TEMPLATES[f"const.{_bank}"] = "{0} = {1}"
    TEMPLATES[f"mov.{_bank}"] = "{0} = {1}"
    TEMPLATES[f"select.{_bank}"] = "{0} = {2} if {1} else {3}"
for _bank, _wrap in (("i32", _W32), ("i64", _W64)):
    _bits = 32 if _bank == "i32" else 64
    _m = _MASK[_bank]
    TEMPLATES.update({
        f"add.{_bank}": _wrap.format("{1} + {2}"),
        f"sub.{_bank}": _wrap.format("{1} - {2}"),
        f"mul.{_bank}": _wrap.format("{1} * {2}"),
        f"and.{_bank}": "{0} = {1} & {2}",
        f"or.{_bank}": "{0} = {1} | {2}",
        f"xor.{_bank}": "{0} = {1} ^ {2}",
        f"not.{_bank}": "{0} = ~{1}",
        f"neg.{_bank}": _wrap.format("-{1}"),
        f"shl.{_bank}": _wrap.format("{1} << ({2} & %d)" % (_bits - 1)),
        f"shr.s.{_bank}": "{0} = {1} >> ({2} & %d)" % (_bits - 1),
        f"shr.u.{_bank}": _wrap.format("({1} & %s) >> ({2} & %d)" % (_m, _bits - 1)),
        f"min.s.{_bank}": "{0} = {1} if {1} < {2} else {2}",
        f"max.s.{_bank}": "{0} = {1} if {1} > {2} else {2}",
        f"cmp.eq.{_bank}": "{0} = 1 if {1} == {2} else 0",
        f"cmp.ne.{_bank}": "{0} = 1 if {1} != {2} else 0",
        f"cmp.lt.s.{_bank}": "{0} = 1 if {1} < {2} else 0",
        f"cmp.lte.s.{_bank}": "{0} = 1 if {1} <= {2} else 0",
        f"cmp.lt.u.{_bank}": "{0} = 1 if ({1} & %s) < ({2} & %s) else 0" % (_m, _m),
        f"cmp.lte.u.{_bank}": "{0} = 1 if ({1} & %s) <= ({2} & %s) else 0" % (_m, _m),
        f"cmp.nz.{_bank}": "{0} = 1 if {1} else 0",
    })
for _bank in ("f32", "f64"):
    _round = "F32({})" if _bank == "f32" else "{}"
    TEMPLATES.update({
        f"add.{_bank}": "{0} = " + _round.format("{1} + {2}"),
        f"sub.{_bank}": "{0} = " + _round.format("{1} - {2}"),
        f"mul.{_bank}": "{0} = " + _round.format("{1} * {2}"),
        f"neg.{_bank}": "{0} = -{1}",
        f"abs.{_bank}": "{0} = abs({1})",
        f"cmp.eq.{_bank}": "{0} = 1 if {1} == {2} else 0",
        f"cmp.ne.{_bank}": "{0} = 1 if {1} != {2} else 0",
        f"cmp.lt.{_bank}": "{0} = 1 if {1} < {2} else 0",
        f"cmp.lte.{_bank}": "{0} = 1 if {1} <= {2} else 0",
        f"cmp.nan.{_bank}": "{0} = 1 if {1} != {1} else 0",
    })

_NAMESPACE: dict[str, Any] = {"F32": n.f32, "INT_TO_F32": n.int_to_f32, "abs": abs,
                              "float": float, "__builtins__": {}}

Statement = tuple[str, tuple[Any, ...]]   # (op name, operands: slots / immediates / targets)


def fusible(op_name: str) -> bool:
    return op_name in TEMPLATES


def compile_runs(runs: list[tuple[list[Statement], Any]]) -> list[Callable[[list], int]]:
    """One function per run: its statements, then `return <next index>` (an int), or for a
    run that ends in a branch the branch's choice. Each run is (statements, ending) where the
    ending is ("next", index), ("br", target) or ("cond_br", slot, if_true, if_false).

    Registers live in locals inside a run: those read before being written are loaded first,
    those written are stored back before the return."""
    constants: dict[str, Any] = {}
    source: list[str] = []
    for number, (statements, ending) in enumerate(runs):
        body: list[str] = []
        loads: list[int] = []
        written: list[int] = []
        for name, operands in statements:
            texts = []
            for position, (kind, value) in enumerate(operands):
                if kind == "slot":
                    slot = int(value)
                    if position and slot not in written and slot not in loads:
                        loads.append(slot)   # read before any write in this run
                    texts.append(f"r{slot}")
                else:
                    key = f"K{len(constants)}"
                    constants[key] = value
                    texts.append(key)
            target = int(operands[0][1])
            if target not in written:
                written.append(target)
            body += TEMPLATES[name].format(*texts).split("\n")
        if ending[0] == "cond_br":
            slot = int(ending[1])
            if slot not in written and slot not in loads:
                loads.append(slot)
        source.append(f"def run_{number}(R):")
        source += [f"    r{slot} = R[{slot}]" for slot in loads]
        source += ["    " + line for line in body]
        source += [f"    R[{slot}] = r{slot}" for slot in written]
        if ending[0] == "cond_br":
            _, slot, if_true, if_false = ending
            source.append(f"    return {int(if_true)} if r{int(slot)} else {int(if_false)}")
        else:
            source.append(f"    return {int(ending[1])}")
    namespace = dict(_NAMESPACE, **constants)
    exec(compile("\n".join(source) + "\n", "<irtk vm fused block>", "exec"), namespace)
    return [namespace[f"run_{i}"] for i in range(len(runs))]
