"""f64 -> f32 demotion of a parsed module, by default, as IREE's
`--iree-input-demote-f64-to-f32` does (`demote_f64=False`, `--keep-f64`: off).

PyTorch exports compute parts of models in f64 (LayerNorm's mean and variance, BatchNorm's
epsilon); devices without 64-bit floats (SwiftShader) cannot run them, and the model's own
precision is f32. Demotion rewrites, before import: every f64 result and block argument type
(scalars, tensors, function signatures), f64 float and dense attributes (values rounded to
f32), and then drops the `extf`/`truncf` between f32 and f64 that became f32 -> f32. An op that
reinterprets f64 bits (`arith.bitcast`) cannot be demoted and is a located error.
"""
from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import (DenseIntOrFPElementsAttr, Float32Type, Float64Type, FloatAttr,
                                   FunctionType, ModuleOp, TensorType)
from xdsl.ir import Attribute, SSAValue, TypeAttribute
from xdsl.rewriter import Rewriter

from irtk.compiler.frontend import dense_literal
from irtk.compiler.frontend.source_map import SourceMap
from irtk.errors import ParseError

F32 = Float32Type()


def demoted(t: Attribute) -> Attribute:
    """`t` with every f64 in it made f32 (the same object when there is none)."""
    if isinstance(t, Float64Type):
        return F32
    if isinstance(t, TensorType) and isinstance(t.element_type, Float64Type):
        return TensorType(F32, t.get_shape(), t.encoding)
    if isinstance(t, FunctionType):
        inputs = [demoted(i) for i in t.inputs.data]
        outputs = [demoted(o) for o in t.outputs.data]
        if inputs != list(t.inputs.data) or outputs != list(t.outputs.data):
            return FunctionType.from_lists(inputs, outputs)
    return t


def _attribute(attr: Attribute) -> Attribute:
    if isinstance(attr, FloatAttr) and isinstance(attr.type, Float64Type):
        return FloatAttr(float(np.float32(attr.value.data)), F32)
    if isinstance(attr, DenseIntOrFPElementsAttr) and isinstance(attr.get_type(), TensorType) \
            and isinstance(attr.get_element_type(), Float64Type):
        values = np.frombuffer(attr.data.data, dtype="<f8").astype("<f4")
        new_type = demoted(attr.get_type())
        assert isinstance(new_type, TensorType)
        return dense_literal.dense_attr(new_type, values.tobytes())
    if isinstance(attr, TypeAttribute):
        return demoted(attr)
    return attr


def demote_f64(module: ModuleOp, source_map: SourceMap) -> None:
    """Rewrite `module` in place (module docstring)."""
    ops = list(module.walk())
    for op in ops:
        if op.name == "arith.bitcast" and any(
                isinstance(v.type, Float64Type) or (isinstance(v.type, TensorType) and
                                                    isinstance(v.type.element_type, Float64Type))
                for v in (*op.operands, *op.results)):
            raise ParseError(f"{source_map.location(op)}: error: arith.bitcast of f64 cannot "
                             "be demoted to f32: keep f64 (--keep-f64, demote_f64=False) and "
                             "compile for a device with 64-bit floats")
        for store in (op.properties, op.attributes):
            for key, attr in list(store.items()):
                new = _attribute(attr)
                if new is not attr:
                    store[key] = new
        for result in list(op.results):
            _retype(result)
        for region in op.regions:
            for block in region.blocks:
                for arg in list(block.args):
                    _retype(arg)
    for op in ops:
        if op.name in ("arith.extf", "arith.truncf") and \
                op.operands[0].type == op.results[0].type:
            op.results[0].replace_all_uses_with(op.operands[0])
            Rewriter.erase_op(op)


def _retype(value: SSAValue) -> None:
    new = demoted(value.type)
    if new is not value.type:
        Rewriter.replace_value_with_new_type(value, new)


