"""Text form of a module file, for `irtk dump` and for reading what the compiler emitted.

Works on modules that fail verification too (it only parses), so a bad module can be inspected;
an undecodable instruction ends its function's listing with the reason. Syntax (docs/vm.md):

    12: i32:1 = add.i32 i32:1, i32:2
    20: cond_br i32:3, ^12, ^40
    40: i64:0 = call.import @hal.buffer.length(ref:0)
"""
from __future__ import annotations

import json
from typing import Any

from irtk.vm import isa
from irtk.vm.encoding import DecodeError, Instr, decode_at
from irtk.vm.loader import open_source, parse_module
from irtk.vm.module import BytecodeModule


def disassemble_module(data: bytes | memoryview | str) -> str:
    """The whole module as text: header, imports, exports, globals, rodata, functions."""
    backing, view = open_source(data)
    module = parse_module(view, backing)
    return "\n".join(_lines(module)) + "\n"


def _lines(m: BytecodeModule) -> list[str]:
    out = [f"module '{m.name}' (format version {m.version})"]
    if m.requirements:
        out.append(f"requirements: {', '.join(m.requirements)}")
    if m.types:
        out.append("types:")
        out += [f"  [{i}] {t}" for i, t in enumerate(m.types)]
    out.append(f"imports ({len(m.imports)}):")
    out += [f"  [{i}] {imp.full_name} {imp.calling_convention}"
            for i, imp in enumerate(m.imports)]
    out.append(f"exports ({len(m.exports)}):")
    for e in m.exports:
        target = m.functions[e.function].name if e.function < len(m.functions) else "?"
        line = f"  {e.name} -> function {e.function} '{target}'"
        if e.reflection:
            attrs = ", ".join(f"{k} = {json.dumps(v)}" for k, v in e.reflection.items())
            line += f" {{{attrs}}}"
        out.append(line)
    out.append("globals: " + ", ".join(f"{b} {m.global_counts[b]}" for b in isa.BANKS))
    if m.init_function >= 0:
        name = m.functions[m.init_function].name if m.init_function < len(m.functions) else "?"
        out.append(f"init function: {m.init_function} '{name}'")
    out.append(f"rodata ({len(m.rodata)}):")
    out += [f"  [{i}] '{seg.name}' {seg.mime_type} {len(seg.data)} bytes"
            for i, seg in enumerate(m.rodata)]
    out.append(f"functions ({len(m.functions)}):")
    for index, fn in enumerate(m.functions):
        regs = ", ".join(f"{b} {n}" for b, n in fn.register_counts.items() if n)
        out.append(f"  function {index} '{fn.name}' {fn.calling_convention} "
                   f"(registers: {regs or 'none'})")
        pos = 0
        while pos < len(fn.code):
            try:
                instr = decode_at(fn.code, pos)
            except DecodeError as e:
                out.append(f"    {pos:5d}: <error: {e.message}>")
                break
            loc = m.location(index, pos)
            text = format_instruction(instr, m)
            out.append(f"    {pos:5d}: {text}" + (f"  // {loc}" if loc else ""))
            pos += instr.size
    return out


def _reg(bank: str, index: int) -> str:
    return f"{bank}:{index}"


def _operand(kind: str, value: Any, op: isa.Op, m: BytecodeModule | None) -> str:
    if kind in isa.READ_KINDS:
        return _reg(kind, value)
    if kind == "regs":
        return "(" + ", ".join(_reg(b, i) for b, i in value) + ")"
    if kind == "block":
        return f"^{value}"
    if kind == "str":
        return json.dumps(value)
    if kind == "u16list":
        return "[" + ", ".join(str(v) for v in value) + "]"
    if kind == "rodata":
        name = m.rodata[value].name if m and value < len(m.rodata) else "?"
        return f"rodata[{value}] '{name}'"
    if kind == "global":
        return f"global.{op.bank}[{value}]"
    if kind == "func":
        name = m.functions[value].name if m and value < len(m.functions) else str(value)
        return f"@{name}"
    if kind == "import":
        name = m.imports[value].full_name if m and value < len(m.imports) else str(value)
        return f"@{name}"
    if kind in ("imm_f32", "imm_f64"):
        return repr(value)
    return str(value)


def format_instruction(instr: Instr, m: BytecodeModule | None = None) -> str:
    """One instruction: writes on the left, call arguments in parentheses, results after ->."""
    op = instr.op
    dsts, srcs = [], []
    for kind, value in zip(op.operands, instr.operands):
        if kind in isa.WRITE_KINDS:
            dsts.append(_reg(kind[:-1], value))
        else:
            srcs.append((kind, value))
    if op.name.startswith("call"):
        *head, (_, args), (_, results) = srcs
        callee = " ".join(_operand(k, v, op, m) for k, v in head)
        text = f"{op.name} {callee}{_operand('regs', args, op, m)}"
        if results:
            return ", ".join(_reg(b, i) for b, i in results) + " = " + text
        return text
    text = op.name
    if srcs:
        text += " " + ", ".join(_operand(k, v, op, m) for k, v in srcs)
    return (", ".join(dsts) + " = " + text) if dsts else text
