"""MLIR scalar ops in a body block -> kernel body ops, in a `Body` under construction.

`linalg.generic` regions, the regions of `linalg.map`/`reduce` and `tensor.pad`'s are
translated op by op: arith/math ops (with `scaling_extf`/`scaling_truncf` expanded),
`linalg.index`, `tensor.extract` of a gather input, constants, and host scalars the body reads
(captured through the importer as `kernel.param`s).
"""
from __future__ import annotations

from typing import Any

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, TensorType
from xdsl.ir import Block, Operation, SSAValue

from irtk import body_ops
from irtk.compiler import tir
from irtk.compiler.frontend.assertions import check_body_assert, constant_value
from irtk.compiler.frontend.body import Body, Unsupported
from irtk.compiler.frontend.convert import element_type_name
from irtk.compiler.frontend.dialects.linalg import IndexOp
from irtk.compiler.frontend.import_context import ImportContext

_CMPI = arith.CMPI_COMPARISON_OPERATIONS
_CMPF = arith.CMPF_COMPARISON_OPERATIONS


def body_op_attrs(op: Operation) -> dict[str, Any]:
    """The kernel-Op attributes of an arith op (predicate, constant value)."""
    if isinstance(op, arith.CmpiOp):
        return {"predicate": _CMPI[op.predicate.value.data]}
    if isinstance(op, arith.CmpfOp):
        return {"predicate": _CMPF[op.predicate.value.data]}
    return {}


def translate_scalar_op(body: Body, op: Operation, args: list[int], arg_types: list[str],
                        result_type: str) -> int:
    """One scalar arith/math op into `body` (scaling_extf/truncf expanded)."""
    if op.name == "arith.scaling_extf":
        x = body.cast(args[0], arg_types[0], result_type)
        s = body.cast(args[1], arg_types[1], result_type)
        return body.add("arith.mulf", (x, s), result_type)
    if op.name == "arith.scaling_truncf":
        s = body.cast(args[1], arg_types[1], arg_types[0])
        q = body.add("arith.divf", (args[0], s), arg_types[0])
        return body.cast(q, arg_types[0], result_type)
    if op.name not in body_ops.SCALAR_OPS:
        raise Unsupported(f"unsupported op '{op.name}' in a generic body", op)
    attrs = body_op_attrs(op)
    return body.add(op.name, args, result_type, predicate=attrs.get("predicate", ""))


def translate_block(imp: ImportContext, body: Body, block: Block, env: dict[SSAValue, int],
                    captures: list[tir.Value], gather_pos: dict[SSAValue, int]) -> list[int]:
    """An MLIR body block into `body`; returns the yielded values. `env` maps the block's
    arguments (and values already translated) to body values; `gather_pos` maps a tensor the
    block reads with tensor.extract to its gather input."""
    from xdsl.dialects.linalg import ops as xops

    def use(v: SSAValue, user: Operation) -> int:
        if v in env:
            return env[v]
        owner = v.owner
        if isinstance(owner, arith.ConstantOp) and not isinstance(v.type, TensorType):
            env[v] = scalar_constant(body, owner)
            return env[v]
        if v in imp.values:
            host = imp.values[v]
            if isinstance(host.type, tir.ScalarType):
                env[v] = imp.capture(body, captures, host)
                return env[v]
        raise Unsupported("a generic body uses a tensor or value it cannot read", user)

    for bop in block.ops:
        if isinstance(bop, (xops.YieldOp, tensor.YieldOp)):
            return [use(v, bop) for v in bop.operands]
        if bop.regions:
            raise Unsupported(f"'{bop.name}' with regions inside a generic body", bop)
        if isinstance(bop, IndexOp):
            env[bop.result] = body.index(bop.dim.value.data)
        elif isinstance(bop, arith.ConstantOp):
            env[bop.result] = scalar_constant(body, bop)
        elif isinstance(bop, tensor.ExtractOp):
            env[bop.result] = body.extract(gather_pos[bop.tensor],
                                           [use(i, bop) for i in bop.indices],
                                           element_type_name(bop.result.type, bop))
        elif bop.name == "cf.assert":   # proved now, or left to constant evaluation
            message = check_body_assert(bop)
            if message is not None:
                body.asserts.append((use(bop.operands[0], bop), message, imp.loc(bop)))
        elif bop.name in ("arith.truncf", "arith.extf") and \
                (value := constant_value(bop.results[0], 4)) is not None:
            # A constant converted (BatchNorm's f64 epsilon truncated to f32): the converted
            # constant, so the kernel does not compute in the wider type for it.
            env[bop.results[0]] = body.const(float(value),
                                             element_type_name(bop.results[0].type, bop))
        elif bop.name == "math.fpowi" and \
                element_type_name(bop.operands[1].type, bop) == "i64" and \
                isinstance(n := constant_value(bop.operands[1], 4), int) and \
                -2**31 <= n < 2**31:
            # x ** 3 as torch-mlir writes it (GELU's tanh form): a constant i64 exponent
            # taken as i32, so a device without 64-bit integers computes it too.
            ft = element_type_name(bop.results[0].type, bop)
            env[bop.results[0]] = translate_scalar_op(
                body, bop, [use(bop.operands[0], bop), body.const(n, "i32")], [ft, "i32"], ft)
        elif len(bop.results) != 1:   # a branch, ...: no kernel body op
            raise Unsupported(f"unsupported op '{bop.name}' in a generic body", bop)
        else:
            args = [use(v, bop) for v in bop.operands]
            types = [element_type_name(v.type, bop) for v in bop.operands]
            env[bop.results[0]] = translate_scalar_op(
                body, bop, args, types, element_type_name(bop.results[0].type, bop))
    raise Unsupported("a generic body without a terminator", block.parent_op())


def scalar_constant(body: Body, op: arith.ConstantOp) -> int:
    t = element_type_name(op.result.type, op)
    attr = op.value
    if isinstance(attr, FloatAttr):
        return body.const(float(attr.value.data), t)
    if isinstance(attr, IntegerAttr):
        return body.const(int(attr.value.data), t)
    raise Unsupported(f"constant {attr} is not supported in a body", op)
