"""Proves a module safe to run before anything runs, so the interpreter never re-checks.

Checked: calling conventions, exports, the init function, global counts, and for every
function every instruction — register indices in range and in the right bank, rodata, global,
function and import ordinals in range, branch targets on instruction starts inside the
function, argument and result banks of calls and returns against the callee's calling
convention (variadic imports: segment sizes x tuple banks), type ordinals in range, every block
ending in a terminator (no fall-through into a branch target, a terminator last), no truncated
instruction. Failures name the function and the bytecode offset.
"""
from __future__ import annotations

from irtk.errors import VerificationError
from irtk.vm import calling_convention, isa
from irtk.vm.calling_convention import Signature
from irtk.vm.encoding import DecodeError, Instr, decode_function
from irtk.vm.module import BytecodeModule, FunctionDef

MAX_GLOBALS_PER_BANK = 1 << 20
MAX_REGISTERS_IN_ALL = 1 << 22   # every function's frame template is built at load
INIT_CALLING_CONVENTION = "0v_v"


def _signature(text: str, what: str) -> Signature:
    try:
        return calling_convention.parse(text)
    except ValueError as e:
        raise VerificationError(f"{what}: {e}") from None


_TERMINATORS = ", ".join(op.name for op in isa.OPS if op.is_terminator)


def _banks(regs: tuple[tuple[str, int], ...]) -> str:
    return "(" + ", ".join(bank for bank, _ in regs) + ")"


def verify_module(module: BytecodeModule) -> None:
    """Raise VerificationError at the first problem; fills in signatures and decoded code."""
    for bank, count in module.global_counts.items():
        if count > MAX_GLOBALS_PER_BANK:
            raise VerificationError(f"module declares {count} {bank} globals "
                                    f"(limit {MAX_GLOBALS_PER_BANK})")
    total = sum(sum(fn.register_counts.values()) for fn in module.functions)
    if total > MAX_REGISTERS_IN_ALL:
        raise VerificationError(f"module declares {total} registers in all "
                                f"(limit {MAX_REGISTERS_IN_ALL})")
    for index, name in enumerate(module.types):
        if not name.startswith("!"):
            raise VerificationError(f"type {index} '{name}' is not a ref type name ('!...')")
    for imp in module.imports:
        if "." not in imp.full_name:
            raise VerificationError(f"import '{imp.full_name}' is not 'module.function'")
        imp.signature = _signature(imp.calling_convention, f"import '{imp.full_name}'")
    signatures = []
    for fn in module.functions:
        fn.signature = signature = _signature(fn.calling_convention, f"function '{fn.name}'")
        signatures.append(signature)
        if signature.is_variadic:
            raise VerificationError(f"function '{fn.name}': internal functions cannot be "
                                    f"variadic ({fn.calling_convention})")
        for bank in isa.BANKS:
            needed = signature.arg_banks().count(bank)
            if needed > fn.register_counts[bank]:
                raise VerificationError(
                    f"function '{fn.name}': needs {needed} {bank} registers for its arguments, "
                    f"has {fn.register_counts[bank]}")
    seen = set()
    for exp in module.exports:
        if exp.function >= len(module.functions):
            raise VerificationError(f"export '{exp.name}' refers to function {exp.function} "
                                    f"({len(module.functions)} functions)")
        if exp.name in seen:
            raise VerificationError(f"export '{exp.name}' is defined twice")
        seen.add(exp.name)
    if module.init_function != -1:
        if not 0 <= module.init_function < len(module.functions):
            raise VerificationError(f"init function {module.init_function} out of range "
                                    f"({len(module.functions)} functions)")
        init = module.functions[module.init_function]
        if init.calling_convention != INIT_CALLING_CONVENTION:
            raise VerificationError(f"init function '{init.name}' must be "
                                    f"{INIT_CALLING_CONVENTION}, is {init.calling_convention}")
    for fn, signature in zip(module.functions, signatures):
        fn.instructions = _FunctionVerifier(module, fn, signature).run()


class _FunctionVerifier:
    def __init__(self, module: BytecodeModule, fn: FunctionDef, signature: Signature) -> None:
        self.module = module
        self.fn = fn
        self.signature = signature
        self.offset = 0

    def fail(self, message: str) -> VerificationError:
        return VerificationError(f"function '{self.fn.name}' at offset {self.offset}: {message}")

    def run(self) -> list[Instr]:
        try:
            instrs = decode_function(self.fn.code)
        except DecodeError as e:
            self.offset = e.offset
            raise self.fail(e.message) from None
        if not instrs:
            raise self.fail("function has no instructions")
        starts = {i.offset for i in instrs}
        targets: set[int] = set()
        for instr in instrs:
            self.offset = instr.offset
            self.check(instr, starts, targets)
        for before, after in zip(instrs, instrs[1:]):
            if after.offset in targets and not before.op.is_terminator:
                self.offset = before.offset
                raise self.fail(f"block ends in '{before.op.name}', not a terminator: it falls "
                                f"through into the branch target {after.offset}")
        if not instrs[-1].op.is_terminator:
            self.offset = instrs[-1].offset
            raise self.fail(f"last instruction '{instrs[-1].op.name}' is not a terminator "
                            f"({_TERMINATORS})")
        return instrs

    def register(self, bank: str, index: int) -> None:
        count = self.fn.register_counts[bank]
        if index >= count:
            raise self.fail(f"register {bank}:{index} out of range ({count} registers)")

    def target(self, value: int, starts: set[int], targets: set[int]) -> None:
        if value >= len(self.fn.code):
            raise self.fail(f"branch target {value} is outside the function "
                            f"({len(self.fn.code)} bytes)")
        if value not in starts:
            raise self.fail(f"branch target {value} is not the start of an instruction")
        targets.add(value)

    def check(self, instr: Instr, starts: set[int], targets: set[int]) -> None:
        op = instr.op
        m = self.module
        for kind, value in zip(op.operands, instr.operands):
            bank = kind.rstrip(">")
            if bank in isa.BANKS:
                self.register(bank, value)
            elif kind == "regs":
                for reg_bank, index in value:
                    self.register(reg_bank, index)
            elif kind == "block":
                self.target(value, starts, targets)
            elif kind == "blocks":
                for target in value:
                    self.target(target, starts, targets)
            elif kind == "type" and value >= len(m.types):
                raise self.fail(f"type {value} out of range ({len(m.types)} types)")
            elif kind == "rodata" and value >= len(m.rodata):
                raise self.fail(f"rodata segment {value} out of range ({len(m.rodata)} segments)")
            elif kind == "global":
                assert op.bank is not None, "an op with a global operand has a register operand"
                if value >= m.global_counts[op.bank]:
                    raise self.fail(f"global {op.bank}:{value} out of range "
                                    f"({m.global_counts[op.bank]} {op.bank} globals)")
            elif kind == "func" and value >= len(m.functions):
                raise self.fail(f"function ordinal {value} out of range "
                                f"({len(m.functions)} functions)")
            elif kind == "import" and value >= len(m.imports):
                raise self.fail(f"import ordinal {value} out of range ({len(m.imports)} imports)")
        name = op.name
        if name == "call":
            callee = m.functions[instr.operands[0]]
            self.call(f"'{callee.name}'", callee.signature, list(callee.signature.args),
                      instr.operands[1], instr.operands[2])
        elif name == "call.import":
            imp = m.imports[instr.operands[0]]
            if imp.signature.is_variadic:
                raise self.fail(f"import '{imp.full_name}' is variadic "
                                f"({imp.calling_convention}); use call.import.variadic")
            self.call(f"'{imp.full_name}'", imp.signature, imp.signature.arg_banks(),
                      instr.operands[1], instr.operands[2])
        elif name == "call.import.variadic":
            imp = m.imports[instr.operands[0]]
            sizes = instr.operands[1]
            segments = len(imp.signature.segments)
            if segments == 0:
                raise self.fail(f"import '{imp.full_name}' is not variadic "
                                f"({imp.calling_convention}); use call.import")
            if len(sizes) != segments:
                raise self.fail(f"call to '{imp.full_name}' gives {len(sizes)} segment sizes, "
                                f"its calling convention {imp.calling_convention} has {segments}")
            self.call(f"'{imp.full_name}'", imp.signature, imp.signature.arg_banks(sizes),
                      instr.operands[2], instr.operands[3])
        elif name == "return":
            results = list(self.signature.results)
            got = [bank for bank, _ in instr.operands[0]]
            if got != results:
                raise self.fail(f"return of {_banks(instr.operands[0])}, the function returns "
                                f"({', '.join(results)}) ({self.fn.calling_convention})")
        elif name == "discard.refs":
            for bank, index in instr.operands[0]:
                if bank != "ref":
                    raise self.fail(f"discard.refs of non-ref register {bank}:{index}")

    def call(self, what: str, sig: Signature, arg_banks: list[str],
             args: tuple[tuple[str, int], ...], results: tuple[tuple[str, int], ...]) -> None:
        if [bank for bank, _ in args] != arg_banks:
            raise self.fail(f"call to {what} passes {_banks(args)}, expected "
                            f"({', '.join(arg_banks)}) ({sig.text})")
        if [bank for bank, _ in results] != list(sig.results):
            raise self.fail(f"call to {what} takes results as {_banks(results)}, expected "
                            f"({', '.join(sig.results)}) ({sig.text})")
