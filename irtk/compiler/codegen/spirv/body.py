"""Evaluation of a kernel body at one iteration point, shared by every strategy.

A strategy supplies how to read what the body reads (mapped inputs, outputs' current values,
loop indices); this module walks the ops and handles the three ops that touch more than
registers: `linalg.index`, `kernel.param` and `tensor.extract` (a bounds-safe gather).
"""
from __future__ import annotations

from collections.abc import Callable

from irtk.compiler.kernel import Kernel
from irtk.errors import CompileError

from .interface import ShaderInterface
from .op_table import SPIRV_OPS, SpirvOp
from .typed_ops import emit_typed, wrap


def _evaluated_here(*_: object) -> int:
    raise CompileError("vulkan-spirv: internal error: kernel.param and tensor.extract are "
                       "evaluated by body.evaluate, not emitted as scalar ops")


# These two read the shader interface (a push constant, a bounds-safe gather), so `evaluate`
# emits them itself; they are registered so the op table covers every body op.
SPIRV_OPS.register(("kernel.param", "tensor.extract"), SpirvOp("executor", _evaluated_here))


def used_values(kernel: Kernel) -> set[int]:
    return {v for op in kernel.ops for v in op.operands} | set(kernel.yields)


def _needed(kernel: Kernel, given: dict[int, int]) -> set[int]:
    """The body values the yields need, given `given` (all used values when it is empty)."""
    if not given:
        return used_values(kernel)
    first = len(kernel.inputs) + len(kernel.outputs)
    needed: set[int] = set()
    pending = list(kernel.yields)
    while pending:
        v = pending.pop()
        if v in needed:
            continue
        needed.add(v)
        if v >= first and v not in given:
            pending.extend(kernel.ops[v - first].operands)
    return needed


def evaluate(iface: ShaderInterface, kernel: Kernel, operand_value: Callable[[int], int],
             loop_index: Callable[[int], int], given: dict[int, int] | None = None
             ) -> list[int]:
    """Every body value (operands first, then ops); `operand_value(i)` is called only for the
    operands the body uses; `loop_index(d)` returns loop index d as an i32. `given` holds
    values already computed (by body position: a contraction's sum, whose epilogue this
    evaluates): those ops are not emitted, and neither are ops only they read; the entries
    for ops skipped that way are 0."""
    e = iface.e
    given = given or {}
    needed = _needed(kernel, given)
    operands = kernel.inputs + kernel.outputs
    values: list[int] = [operand_value(i) if i in needed and (i >= len(kernel.inputs)
                                                              or operands[i].map is not None)
                         else 0 for i in range(len(operands))]
    types = [o.element_type for o in operands]
    for position, op in enumerate(kernel.ops, start=len(operands)):
        if given and (position in given or position not in needed):
            values.append(given.get(position, 0))
            types.append(op.result_type)
            continue
        if op.name == "linalg.index":
            value = loop_index(op.int_value)
        elif op.name == "kernel.param":
            value = iface.param(op.int_value)
        elif op.name == "tensor.extract":
            source = kernel.inputs[op.int_value]
            indices = [values[v] for v in op.operands]
            value = iface.load(source, iface.gather_offset(source, indices))
        else:
            value = emit_typed(e, op, [values[v] for v in op.operands],
                               [types[v] for v in op.operands])
        if op.name == "linalg.index":
            value = wrap(e, value, op.result_type)
        values.append(value)
        types.append(op.result_type)
    return values
