"""Module file -> irtk VM assembly text (`irtk vm-dis`, `irtk dump`); `assembler` reads it back.

Works on modules that fail verification too (it only parses), so a bad module can be inspected;
an undecodable instruction ends its function's listing with `// error at offset N: ...`. The text of
a verified module assembles back to the same module. Syntax (docs/vm.md, "Assembly"):

    func @main "0i_i" registers(i32 4) {
        i32:1 = const.i32 0                             // 0
        br ^12                                          // 7
      ^12:
        i32:3 = cmp.lte.s.i32 i32:1, i32:0              // 12
        cond_br i32:3, ^12, ^30                         // 19
      ^30:
        return (i32:1)                                  // 30
    }
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from irtk.vm import isa
from irtk.vm.asm_syntax import format_float, string, symbol
from irtk.vm.encoding import DecodeError, Instr, decode_at
from irtk.vm.loader import open_source, parse_module
from irtk.vm.module import BytecodeModule

_COMMENT_COLUMN = 52


def disassemble_module(data: bytes | memoryview | str, *,
                       rodata_limit: int | None = None) -> str:
    """The whole module as assembly. Rodata segments longer than `rodata_limit` bytes are
    shown as `elided(N)` (the text then no longer assembles); None shows all bytes."""
    backing, view = open_source(data)
    module = parse_module(view, backing)
    return disassemble(module, rodata_limit=rodata_limit)


def disassemble(m: BytecodeModule, *, rodata_limit: int | None = None) -> str:
    return "\n".join(_Printer(m).lines(rodata_limit)) + "\n"


class _Printer:
    """Names each function, import and rodata segment by `@name`, or `#ordinal` when the
    name is not unique (a module the writer did not produce may repeat names)."""

    def __init__(self, m: BytecodeModule) -> None:
        self.m = m
        self.function_names = _unique([fn.name for fn in m.functions])
        self.import_names = _unique([imp.full_name for imp in m.imports])
        self.rodata_names = _unique([seg.name for seg in m.rodata])
        self.type_names = _unique(list(m.types))

    def function(self, index: int) -> str:
        if index < len(self.m.functions) and self.function_names[index]:
            return symbol(self.m.functions[index].name)
        return f"#{index}"

    def lines(self, rodata_limit: int | None) -> list[str]:
        m = self.m
        out = [f"module {symbol(m.name)}  // format version {m.version}"]
        out += [f"requirement {string(r)}" for r in m.requirements]
        out += [f"metadata {string(k)} {string(v)}" for k, v in m.metadata.items()]
        out += [f"type {string(t)}" for t in m.types]
        out += [f"import {symbol(imp.full_name)} {string(imp.calling_convention)}"
                for imp in m.imports]
        for seg in m.rodata:
            if rodata_limit is not None and len(seg.data) > rodata_limit:
                data = f"elided({len(seg.data)})"
            else:
                data = f'x"{bytes(seg.data).hex()}"'
            out.append(f"rodata {symbol(seg.name)} {string(seg.mime_type)} {data}")
        counts = [f"{b} {m.global_counts[b]}" for b in isa.BANKS if m.global_counts[b]]
        if counts:
            out.append("globals " + ", ".join(counts))
        if m.init_function >= 0:
            out.append(f"init {self.function(m.init_function)}")
        for e in m.exports:
            line = f"export {symbol(e.name)} = {self.function(e.function)}"
            if e.reflection:
                attrs = ", ".join(f"{_key(k)} = {string(v)}" for k, v in e.reflection.items())
                line += f" {{{attrs}}}"
            out.append(line)
        for index, fn in enumerate(m.functions):
            out.append("")
            out += self.function_lines(index)
        return out

    def function_lines(self, index: int) -> list[str]:
        m = self.m
        fn = m.functions[index]
        regs = ", ".join(f"{b} {n}" for b, n in fn.register_counts.items() if n)
        head = f"func {symbol(fn.name)} {string(fn.calling_convention)}"
        out = [head + (f" registers({regs})" if regs else "") + " {"]
        instrs: list[Instr] = []
        error = None
        pos = 0
        while pos < len(fn.code):
            try:
                instr = decode_at(fn.code, pos)
            except DecodeError as e:
                error = (pos, e.message)
                break
            instrs.append(instr)
            pos += instr.size
        targets = set()
        for instr in instrs:
            for kind, value in zip(instr.op.operands, instr.operands):
                if kind == "block":
                    targets.add(value)
                elif kind == "blocks":
                    targets.update(value)
        for instr in instrs:
            if instr.offset in targets:
                out.append(f"  ^{instr.offset}:")
            text = "    " + self.instruction(instr)
            loc = m.location(index, instr.offset)
            if loc is not None:
                text += f" loc({string(loc)})"
            out.append(f"{text.ljust(_COMMENT_COLUMN)}  // {instr.offset}")
        if error is not None:
            out.append(f"    // error at offset {error[0]}: {error[1]}")
        out.append("}")
        return out

    def operand(self, kind: str, value: Any, op: isa.Op) -> str:
        m = self.m
        if kind in isa.READ_KINDS:
            return f"{kind}:{value}"
        if kind == "regs":
            return "(" + ", ".join(f"{b}:{i}" for b, i in value) + ")"
        if kind == "block":
            return f"^{value}"
        if kind == "blocks":
            return "[" + ", ".join(f"^{v}" for v in value) + "]"
        if kind == "str":
            return string(value)
        if kind == "u16list":
            return "[" + ", ".join(str(v) for v in value) + "]"
        if kind == "rodata":
            if value < len(m.rodata) and self.rodata_names[value]:
                return symbol(m.rodata[value].name)
            return f"#{value}"
        if kind == "global":
            return f"global.{op.bank}[{value}]"
        if kind == "func":
            return self.function(value)
        if kind == "import":
            if value < len(m.imports) and self.import_names[value]:
                return symbol(m.imports[value].full_name)
            return f"#{value}"
        if kind == "type":
            if value < len(m.types) and self.type_names[value]:
                return string(m.types[value])
            return f"#{value}"
        if kind == "imm_f32":
            return format_float(value, "f32")
        if kind == "imm_f64":
            return format_float(value, "f64")
        return str(value)

    def instruction(self, instr: Instr) -> str:
        """Writes left of `=`; calls as `call @f(args)`, results on the left."""
        op = instr.op
        dsts, srcs = [], []
        for kind, value in zip(op.operands, instr.operands):
            if kind in isa.WRITE_KINDS:
                dsts.append(f"{kind[:-1]}:{value}")
            else:
                srcs.append((kind, value))
        if op.name.startswith("call"):
            *head, (_, args), (_, results) = srcs
            callee = " ".join(self.operand(k, v, op) for k, v in head)
            text = f"{op.name} {callee}{self.operand('regs', args, op)}"
            dsts = [f"{b}:{i}" for b, i in results]
        else:
            text = op.name
            if srcs:
                text += " " + ", ".join(self.operand(k, v, op) for k, v in srcs)
        return (", ".join(dsts) + " = " + text) if dsts else text


def _unique(names: list[str]) -> list[bool]:
    counts = Counter(names)
    return [counts[n] == 1 for n in names]


def _key(key: str) -> str:
    return key if key and all(c.isalnum() or c in "_." for c in key) and not key[0].isdigit() \
        else string(key)


def format_instruction(instr: Instr, m: BytecodeModule | None = None) -> str:
    """One instruction in assembly syntax (symbols by name when `m` is given)."""
    if m is None:
        m = BytecodeModule(name="", version=isa.BYTECODE_VERSION, requirements=[], types=[],
                           imports=[], exports=[], functions=[], rodata=[],
                           global_counts={b: 0 for b in isa.BANKS}, init_function=-1)
    return _Printer(m).instruction(instr)
