"""irtk VM assembly text -> module file (`irtk vm-as`); the disassembler writes the same syntax.

Lets tests and people write VM programs directly, without the compiler. One statement per
line; `//` starts a comment. Top level, in any order (ordinals follow the order of lines):

    module @name
    requirement "i64"
    type "!hal.buffer"
    import @hal.buffer.length "0r_I"
    rodata @greeting "text/plain" x"68656c6c6f"
    globals i32 2, ref 1
    init @__init
    export @main = @main {abi.args = "4xf32", abi.results = "4xf32"}
    func @main "0r_r" registers(ref 2) {
      ^entry:
        ref:1 = call @helper(ref:0) loc("model.mlir:3:5")
        return (ref:1)
    }

Inside a function, each instruction is `writes = op operands` with operands in the op's order
(docs/vm.md lists them); labels `^name:` mark branch targets (falling through into a label
inserts a `br`). Functions, imports and rodata are referenced as `@name` or `#ordinal`.
Errors are `ParseError`s that start with `file:line:col: error:`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtk.errors import ParseError
from irtk.vm import calling_convention, isa
from irtk.vm.asm_syntax import LexError, Token, float_from_bits, tokenize
from irtk.vm.writer import FunctionBuilder, Label, ModuleWriter, Reg

_INT_RANGES = {"imm_i32": 32, "imm_i64": 64}


class _Error(Exception):
    def __init__(self, column: int, message: str) -> None:
        super().__init__(message)
        self.column = column
        self.message = message


@dataclass
class _Func:
    name: str
    calling_convention: str
    counts: dict[str, int] | None
    line: int
    body: list[tuple[int, str]] = field(default_factory=list)


def assemble(text: str, filename: str = "<assembly>") -> bytes:
    """The module file for assembly `text`; ParseError names file:line:col on any mistake."""
    return _Assembler(text, filename).run()


def assemble_file(path: str | Path) -> bytes:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ParseError(f"{path}:1:1: error: cannot read the file: "
                         f"{getattr(e, 'strerror', None) or e}") from None
    return assemble(text, str(path))


class _Cursor:
    """Tokens of one line with helpers that raise `_Error` at the right column."""

    def __init__(self, tokens: list[Token], end_column: int) -> None:
        self.tokens = tokens
        self.pos = 0
        self.end_column = end_column

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def column(self) -> int:
        tok = self.peek()
        return tok.column if tok is not None else self.end_column

    def next(self, what: str) -> Token:
        tok = self.peek()
        if tok is None:
            raise _Error(self.end_column, f"expected {what}, found the end of the line")
        self.pos += 1
        return tok

    def expect(self, kind: str, what: str, text: str | None = None) -> Token:
        tok = self.next(what)
        if tok.kind != kind or (text is not None and tok.text != text):
            raise _Error(tok.column, f"expected {what}, found '{tok.text}'")
        return tok

    def accept(self, text: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.kind == "punct" and tok.text == text:
            self.pos += 1
            return True
        return False

    def done(self) -> bool:
        return self.pos >= len(self.tokens)

    def end(self) -> None:
        tok = self.peek()
        if tok is not None:
            raise _Error(tok.column, f"unexpected '{tok.text}'")

    def integer(self, what: str) -> int:
        tok = self.next(what)
        if tok.kind != "number":
            raise _Error(tok.column, f"expected {what}, found '{tok.text}'")
        try:
            return int(tok.text, 0)
        except ValueError:
            raise _Error(tok.column, f"expected {what} (an integer), found '{tok.text}'") \
                from None


class _Assembler:
    def __init__(self, text: str, filename: str) -> None:
        self.lines = text.splitlines()
        self.filename = filename
        self.w = ModuleWriter("")  # named by the `module` line, found in the first pass
        self.functions: list[_Func] = []
        self.imports: list[str] = []
        self.rodata: list[str] = []
        self.types: list[str] = []
        self.line = 0

    def error(self, column: int, message: str) -> ParseError:
        return ParseError(f"{self.filename}:{self.line}:{column}: error: {message}")

    def run(self) -> bytes:
        deferred: list[tuple[int, _Cursor, str]] = []   # init and exports: need function names
        name = None
        top: list[tuple[int, _Cursor, str]] = []
        current: _Func | None = None
        for number, raw in enumerate(self.lines, 1):
            self.line = number
            try:
                tokens = tokenize(raw)
            except LexError as e:
                raise self.error(e.column, str(e)) from None
            if current is not None:
                if len(tokens) == 1 and tokens[0].text == "}":
                    current = None
                elif tokens:
                    current.body.append((number, raw))
                continue
            if not tokens:
                continue
            cur = _Cursor(tokens, len(raw) + 1)
            keyword = cur.next("a statement")
            try:
                if keyword.kind != "word":
                    raise _Error(keyword.column, f"expected a statement, found '{keyword.text}'")
                if keyword.text == "module":
                    if name is not None:
                        raise _Error(keyword.column, "a second 'module' line")
                    name = cur.expect("sym", "the module name (@name)").value
                    cur.end()
                elif keyword.text == "func":
                    current = self.func_header(cur, number)
                elif keyword.text in ("init", "export"):
                    deferred.append((number, cur, keyword.text))
                elif keyword.text in ("requirement", "metadata", "type", "import", "rodata",
                                      "globals"):
                    top.append((number, cur, keyword.text))
                else:
                    raise _Error(keyword.column, f"unknown statement '{keyword.text}' (module, "
                                 "requirement, metadata, type, import, rodata, globals, init, "
                                 "export, func)")
            except _Error as e:
                raise self.error(e.column, e.message) from None
        if current is not None:
            self.line = current.line
            raise self.error(1, f"function {current.name!r} has no closing '}}'")
        if name is None:
            self.line = 1
            raise self.error(1, "missing 'module @name' line")
        self.w.name = name
        self.statements(top)
        for fn in self.functions:
            self.line = fn.line
            try:
                self.w.declare_function(fn.name, fn.calling_convention)
            except ValueError as e:
                raise self.error(1, str(e)) from None
        self.statements(deferred)
        for ordinal, fn in enumerate(self.functions):
            self.w.define_function(ordinal, self.body(fn))
        try:
            return self.w.to_bytes()
        except ValueError as e:
            self.line = len(self.lines)
            raise self.error(1, str(e)) from None

    # -- top-level statements ----------------------------------------------------------------

    def statements(self, statements: list[tuple[int, _Cursor, str]]) -> None:
        """Run each (line, cursor, keyword) statement's `stmt_<keyword>` method, in order."""
        for number, cur, keyword in statements:
            self.line = number
            try:
                getattr(self, f"stmt_{keyword}")(cur)
            except _Error as e:
                raise self.error(e.column, e.message) from None

    def func_header(self, cur: _Cursor, number: int) -> _Func:
        name = cur.expect("sym", "the function name (@name)").value
        cc = cur.expect("string", "the calling convention (e.g. \"0i_i\")")
        self.check_cc(cc)
        counts = None
        tok = cur.peek()
        if tok is not None and tok.kind == "word" and tok.text == "registers":
            cur.next("registers")
            counts = self.bank_counts(cur, "registers", parens=True)
        cur.expect("punct", "'{'", "{")
        cur.end()
        fn = _Func(name, cc.value, counts, number)
        self.functions.append(fn)
        return fn

    def check_cc(self, tok: Token) -> None:
        try:
            calling_convention.parse(tok.value)
        except ValueError as e:
            raise _Error(tok.column, str(e)) from None

    def bank_counts(self, cur: _Cursor, what: str, parens: bool) -> dict[str, int]:
        counts = {bank: 0 for bank in isa.BANKS}
        if parens:
            cur.expect("punct", "'('", "(")
            if cur.accept(")"):
                return counts
        while True:
            bank = cur.expect("word", f"a bank ({', '.join(isa.BANKS)})")
            if bank.text not in isa.BANKS:
                raise _Error(bank.column, f"unknown bank '{bank.text}' in {what}")
            value = cur.integer(f"the number of {bank.text} {what}")
            if not 0 <= value <= 0xFFFFFFFF:
                raise _Error(bank.column, f"{value} {bank.text} {what} is out of range")
            counts[bank.text] = value
            if parens and cur.accept(")"):
                return counts
            if not parens and cur.done():
                return counts
            cur.expect("punct", "','", ",")

    def stmt_requirement(self, cur: _Cursor) -> None:
        self.w.add_requirement(cur.expect("string", "a requirement string").value)
        cur.end()

    def stmt_metadata(self, cur: _Cursor) -> None:
        key = cur.expect("string", "a metadata key string").value
        self.w.metadata[key] = cur.expect("string", "a metadata value string").value
        cur.end()

    def stmt_type(self, cur: _Cursor) -> None:
        tok = cur.expect("string", "a type name string (\"!hal.buffer\")")
        self.types.append(tok.value)
        self.w.add_type(tok.value, unique=False)
        cur.end()

    def stmt_import(self, cur: _Cursor) -> None:
        name = cur.expect("sym", "the import name (@module.function)").value
        cc = cur.expect("string", "the calling convention")
        self.check_cc(cc)
        cur.end()
        self.imports.append(name)
        self.w.add_import(name, cc.value, unique=False)

    def stmt_rodata(self, cur: _Cursor) -> None:
        name = cur.expect("sym", "the segment name (@name)").value
        mime = cur.expect("string", "the mime type string").value
        tok = cur.next("the data (x\"hex\")")
        if tok.kind == "word" and tok.text == "elided":
            raise _Error(tok.column, f"rodata {name!r} was elided by `irtk dump`; use "
                         "`irtk vm-dis` for text that assembles")
        if tok.kind != "hex" or (len(tok.text) - 3) % 2:
            raise _Error(tok.column, f"expected the data as x\"hex\" (an even number of digits), "
                         f"found '{tok.text}'")
        cur.end()
        self.rodata.append(name)
        self.w.add_rodata(name, mime, bytes.fromhex(tok.text[2:-1]))

    def stmt_globals(self, cur: _Cursor) -> None:
        for bank, count in self.bank_counts(cur, "globals", parens=False).items():
            self.w._globals[bank] += count

    def stmt_init(self, cur: _Cursor) -> None:
        self.w.set_init_function(self.reference(cur, "func"))
        cur.end()

    def stmt_export(self, cur: _Cursor) -> None:
        name = cur.expect("sym", "the export name (@name)").value
        cur.expect("punct", "'='", "=")
        function = self.reference(cur, "func")
        reflection = {}
        if cur.accept("{"):
            while not cur.accept("}"):
                key = cur.next("a reflection key")
                if key.kind not in ("word", "string"):
                    raise _Error(key.column, f"expected a reflection key, found '{key.text}'")
                cur.expect("punct", "'='", "=")
                reflection[key.value] = cur.expect("string", "a string value").value
                if not cur.accept(","):
                    cur.expect("punct", "'}'", "}")
                    break
        cur.end()
        self.w.add_export(name, function, reflection)

    def reference(self, cur: _Cursor, kind: str) -> int:
        """An ordinal from `@name` or `#N` among functions, imports or rodata segments."""
        names = {"func": [f.name for f in self.functions], "import": self.imports,
                 "rodata": self.rodata, "type": self.types}[kind]
        noun = {"func": "function", "import": "import", "rodata": "rodata segment",
                "type": "type"}[kind]
        tok = cur.next(f"a {noun} (@name or #ordinal)")
        if tok.kind == "ordinal":
            index = int(tok.text[1:])
            if index >= len(names):
                raise _Error(tok.column, f"{noun} #{index} out of range ({len(names)})")
            return index
        if kind == "rodata" and tok.kind == "word" and tok.text == "rodata":
            cur.expect("punct", "'['", "[")
            index = cur.integer("a rodata ordinal")
            cur.expect("punct", "']'", "]")
            if not 0 <= index < len(names):
                raise _Error(tok.column, f"rodata segment {index} out of range ({len(names)})")
            return index
        if kind == "type" and tok.kind == "string" or kind != "type" and tok.kind == "sym":
            matches = [i for i, n in enumerate(names) if n == tok.value]
            if not matches:
                raise _Error(tok.column, f"unknown {noun} {tok.text}")
            if len(matches) > 1:
                raise _Error(tok.column, f"{noun} name {tok.text} is ambiguous; use "
                             f"#{matches[0]}..#{matches[-1]}")
            return matches[0]
        raise _Error(tok.column, f"expected a {noun} (@name or #ordinal), found '{tok.text}'")

    # -- function bodies ---------------------------------------------------------------------

    def body(self, fn: _Func) -> FunctionBuilder:
        b = FunctionBuilder()
        labels: dict[str, Label] = {}
        uses: dict[str, tuple[int, int]] = {}

        def label(tok: Token) -> Label:
            name = tok.text[1:]
            uses.setdefault(name, (self.line, tok.column))
            return labels.setdefault(name, Label())

        for number, raw in fn.body:
            self.line = number
            cur = _Cursor(tokenize(raw), len(raw) + 1)
            try:
                first = cur.peek()
                if first is not None and first.kind == "label" and len(cur.tokens) >= 2 \
                        and cur.tokens[1].text == ":":
                    cur.pos = 2
                    target = label(first)
                    if target.offset is not None:
                        raise _Error(first.column, f"label {first.text} is defined twice")
                    b.bind(target)
                    cur.end()
                    continue
                self.instruction(b, cur, label)
            except _Error as e:
                raise self.error(e.column, e.message) from None
            except ValueError as e:   # the writer's own checks
                raise self.error(1, str(e)) from None
        for name, lab in labels.items():
            if lab.offset is None:
                self.line, column = uses[name]
                raise self.error(column, f"label ^{name} is never defined in function "
                                 f"{fn.name!r}")
        if fn.counts is not None:
            b.set_register_counts(**fn.counts)
        return b

    def instruction(self, b: FunctionBuilder, cur: _Cursor, label: Any) -> None:
        writes: list[Token] = []
        if cur.tokens and cur.tokens[0].kind == "reg":
            while True:
                writes.append(cur.expect("reg", "a register"))
                if cur.accept("="):
                    break
                cur.expect("punct", "',' or '='", ",")
        op_tok = cur.expect("word", "an op name")
        try:
            op = isa.lookup(op_tok.text)
        except KeyError:
            raise _Error(op_tok.column, f"unknown VM op '{op_tok.text}'") from None
        is_call = op.name.startswith("call")
        write_kinds = [k for k in op.operands if k in isa.WRITE_KINDS]
        if is_call:
            results = [self.register(t, None) for t in writes]
        elif len(writes) != len(write_kinds):
            column = writes[0].column if writes else op_tok.column
            raise _Error(column, f"'{op.name}' writes {len(write_kinds)} register(s) "
                         f"({op.operand_text}), {len(writes)} given")
        operands: list[Any] = []
        written = iter(writes)
        reads = [k for k in op.operands if k not in isa.WRITE_KINDS]
        if is_call:
            reads = reads[:-1]
        for i, kind in enumerate(op.operands):
            if kind in isa.WRITE_KINDS:
                operands.append(self.register(next(written), kind[:-1]))
                continue
            if is_call and i == len(op.operands) - 1:
                operands.append(results)
                continue
            if operands and cur.accept(","):
                pass
            operands.append(self.operand(cur, kind, op, label))
        if not cur.done():
            tok = cur.peek()
            if tok is not None and tok.kind == "word" and tok.text == "loc":
                cur.next("loc")
                cur.expect("punct", "'('", "(")
                b.location(cur.expect("string", "a location string").value)
                cur.expect("punct", "')'", ")")
        cur.end()
        b.emit(op.name, *operands)

    def register(self, tok: Token, bank: str | None) -> Reg:
        reg_bank, _, index = tok.text.partition(":")
        if bank is not None and reg_bank != bank:
            raise _Error(tok.column, f"expected an {bank} register, found {tok.text}")
        value = int(index)
        if value > 0xFFFF:
            raise _Error(tok.column, f"register {tok.text} is out of range (at most 65535)")
        return Reg(reg_bank, value)

    def operand(self, cur: _Cursor, kind: str, op: isa.Op, label: Callable[[Token], Label]) -> Any:
        if kind in isa.READ_KINDS:
            return self.register(cur.expect("reg", f"an {kind} register"), kind)
        if kind in _INT_RANGES:
            tok = cur.peek()
            value = cur.integer("an integer")
            bits = _INT_RANGES[kind]
            if not -(1 << (bits - 1)) <= value < (1 << bits):
                raise _Error(tok.column if tok else 1, f"{value} does not fit {bits} bits")
            return value
        if kind in ("imm_f32", "imm_f64"):
            return self.float_operand(cur, kind[4:])
        if kind == "regs":
            cur.expect("punct", "'('", "(")
            regs: list[Reg] = []
            while not cur.accept(")"):
                if regs:
                    cur.expect("punct", "','", ",")
                regs.append(self.register(cur.expect("reg", "a register"), None))
            return regs
        if kind == "block":
            return label(cur.expect("label", "a block label (^name)"))
        if kind == "blocks":
            cur.expect("punct", "'['", "[")
            targets: list[Label] = []
            while not cur.accept("]"):
                if targets:
                    cur.expect("punct", "','", ",")
                targets.append(label(cur.expect("label", "a block label (^name)")))
            return targets
        if kind == "u16list":
            cur.expect("punct", "'['", "[")
            values: list[int] = []
            while not cur.accept("]"):
                if values:
                    cur.expect("punct", "','", ",")
                tok = cur.peek()
                value = cur.integer("a segment size")
                if not 0 <= value <= 0xFFFF:
                    raise _Error(tok.column if tok else 1, f"{value} is not a u16")
                values.append(value)
            return values
        if kind == "str":
            return cur.expect("string", "a string").value
        if kind == "global":
            tok = cur.expect("word", "a global (global.BANK[N])")
            if tok.text not in ("global", f"global.{op.bank}"):
                raise _Error(tok.column, f"expected global.{op.bank}[N], found '{tok.text}'")
            cur.expect("punct", "'['", "[")
            index = cur.integer("a global ordinal")
            cur.expect("punct", "']'", "]")
            if not 0 <= index <= 0xFFFFFFFF:
                raise _Error(tok.column, f"global ordinal {index} is out of range")
            return index
        if kind in ("func", "import", "rodata", "type"):
            return self.reference(cur, kind)
        raise _Error(cur.column(), f"operand kind '{kind}' has no text form")

    def float_operand(self, cur: _Cursor, bank: str) -> float:
        tok = cur.next("a float")
        if tok.kind == "word" and tok.text == "bits":
            cur.expect("punct", "'('", "(")
            bits = cur.integer("the bits (0x...)")
            cur.expect("punct", "')'", ")")
            if not 0 <= bits < (1 << (32 if bank == "f32" else 64)):
                raise _Error(tok.column, f"bits {bits:#x} do not fit {bank}")
            return float_from_bits(bits, bank)
        if tok.kind != "number":
            raise _Error(tok.column, f"expected a float, found '{tok.text}'")
        try:
            value = float(int(tok.text, 16)) if tok.text.lower().lstrip("+-").startswith("0x") \
                else float(tok.text)
        except ValueError:
            raise _Error(tok.column, f"expected a float, found '{tok.text}'") from None
        return value
