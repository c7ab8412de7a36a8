"""Building small programs for VM tests without the compiler."""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Sequence

from irtk.vm import Context, NativeModule, isa, load_module
from irtk.vm.calling_convention import format_banks
from irtk.vm.writer import FunctionBuilder, ModuleWriter, Reg

# Registers spelled as the assembly spells them: `i32(3)` is `i32:3`, that is `Reg("i32", 3)`.
i32 = partial(Reg, "i32")
i64 = partial(Reg, "i64")
f32 = partial(Reg, "f32")
f64 = partial(Reg, "f64")
ref = partial(Reg, "ref")


def module_with(cc: str, body: Callable[[FunctionBuilder], None], name: str = "main",
                setup: Callable[[ModuleWriter], None] | None = None) -> bytes:
    """A module exporting one function `name` whose body `body` emits."""
    w = ModuleWriter("test")
    if setup is not None:
        setup(w)
    b = FunctionBuilder()
    body(b)
    w.add_export(name, w.add_function(name, cc, b))
    return w.to_bytes()


def run(cc: str, body: Callable[[FunctionBuilder], None], args: Sequence[Any] = (),
        natives: Sequence[NativeModule] = ()) -> list[Any]:
    return Context(load_module(module_with(cc, body)), natives).call("main", list(args))


def apply(op_name: str, *values: Any) -> Any:
    """Run one register-only op on `values` (its read operands, in order); return its result."""
    op = isa.lookup(op_name)
    reads = [k for k in op.operands if k in isa.READ_KINDS]
    (write,) = [k[:-1] for k in op.operands if k in isa.WRITE_KINDS]
    assert len(reads) == len(values), op_name
    dst = reads.count(write)   # the first register after the arguments of its bank
    used = {bank: 0 for bank in isa.BANKS}
    operands = []
    for kind in op.operands:
        if kind in isa.READ_KINDS:
            operands.append(Reg(kind, used[kind]))
            used[kind] += 1
        else:
            operands.append(Reg(write, dst))
    cc = format_banks(reads, [write])

    def body(b: FunctionBuilder) -> None:
        b.emit(op.name, *operands)
        b.emit("return", [Reg(write, dst)])
    return run(cc, body, values)[0]


def run_asm(text: str, args: Sequence[Any] = (), natives: Sequence[NativeModule] = (),
            function: str = "main", **context_options: Any) -> list[Any]:
    """Assemble `text` (VM assembly), instantiate it and call `function` with raw VM values."""
    from irtk.vm.assembler import assemble
    ctx = Context(load_module(assemble(text)), natives, **context_options)
    return ctx.call(function, list(args))
