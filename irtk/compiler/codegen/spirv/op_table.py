"""The SPIR-V backend's implementations of the kernel body ops (`irtk.body_ops`), in one table.

Each implementation is registered with the types it handles and one of three forms, which
says what `typed_ops.emit_typed` does around it:
- "class": computes on the 32-bit register classes (f32, i32, i1: scalar_ops.py). The driver
  zero-extends the operands of unsigned ops and brings the result back to its type (wraps a
  narrow integer, rounds a narrow float), so one implementation serves every type of a class.
- "extra": gets the real kernel types (it reads a width or zero-extends itself); the driver
  brings the result back to its type.
- "typed": gets the real types and returns the final value (constants, conversions, selects and
  the 64-bit ops of wide_ops.py).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from irtk.body_ops import Backend, Claim
from irtk.types import SCALAR_TYPES

Signature = tuple[tuple[str, ...], str]
WIDE = ("i64", "f64")


@dataclass(frozen=True)
class SpirvOp:
    """One implementation: `emit(e, ...)` with the arguments its form takes (module docstring);
    `signatures` lists the register-class signatures of a "class" implementation."""

    form: str
    emit: Callable[..., int]
    signatures: tuple[Signature, ...] = ()


SPIRV_OPS: Backend[SpirvOp] = Backend("vulkan-spirv")


def register_class(kind: str) -> str:
    """"i1", "i32", "i64", "f32" or "f64": the register a kernel type computes in."""
    return SCALAR_TYPES[kind].register


def classes_of(operands: tuple[str, ...], result: str) -> tuple[tuple[str, ...], str] | None:
    """The register classes of a signature (None if a type is not a kernel type)."""
    if any(t not in SCALAR_TYPES for t in (*operands, result)):
        return None
    return tuple(register_class(t) for t in operands), register_class(result)


def narrow_classes(operands: tuple[str, ...], result: str) -> bool:
    """Every operand and the result in an i32 or f32 register."""
    sig = classes_of(operands, result)
    return sig is not None and all(c in ("i32", "f32") for c in (*sig[0], sig[1]))


def no_wide_class(operands: tuple[str, ...], result: str) -> bool:
    sig = classes_of(operands, result)
    return sig is not None and not any(c in WIDE for c in (*sig[0], sig[1]))


def class_signatures(*signatures: Signature) -> Claim:
    """A claim: the types' register classes form one of `signatures`."""
    def claim(operands: tuple[str, ...], result: str) -> bool:
        return classes_of(operands, result) in signatures
    return claim


def register_op(name: str, types: list[str] | tuple[str, ...], result: str) -> SpirvOp | None:
    """An implementation of `name` on values that are register classes themselves, computing
    nothing wider: a "class" emitter, or a constant, select or conversion among f32, i32 and
    i1 (what a kernel of f32/i32 buffers computes without width-aware code)."""
    if any(t not in SCALAR_TYPES or register_class(t) != t for t in (*types, result)):
        return None
    for impl in SPIRV_OPS.candidates(name, tuple(types), result):
        if impl.form == "class" or (impl.form == "typed" and name in _REGISTER_TYPED):
            return impl
    return None


# The typed implementations a kernel on 32-bit registers uses as they are.
_REGISTER_TYPED = frozenset((
    "arith.constant", "arith.select", "arith.sitofp", "arith.uitofp", "arith.fptosi",
    "arith.fptoui", "arith.extui", "arith.extsi", "arith.trunci", "arith.bitcast",
    "arith.index_cast", "arith.index_castui"))


def class_op(name: str, types: list[str] | tuple[str, ...], result: str) -> SpirvOp | None:
    """The "class" implementation of `name` on values that are register classes themselves
    (f32, i32, i1: not a narrower type held in one), if there is one."""
    if any(t not in SCALAR_TYPES or register_class(t) != t for t in (*types, result)):
        return None
    for impl in SPIRV_OPS.candidates(name, tuple(types), result):
        if impl.form == "class":
            return impl
    return None

