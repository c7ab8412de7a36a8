"""IREE's `flow.tensor` ops that the conformance programs use."""
from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Operation, TypedAttribute
from xdsl.irdl import (IRDLOperation, attr_def, irdl_op_definition, operand_def, result_def,
                       var_operand_def)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException


def _parse_dims(parser: Parser) -> list:
    """`{%d0, %d1}` after a type: the values of its dynamic dims (index)."""
    from xdsl.dialects.builtin import IndexType
    if parser.parse_optional_punctuation("{") is None:
        return []
    if parser.parse_optional_punctuation("}") is not None:
        return []
    names = parser.parse_comma_separated_list(Parser.Delimiter.NONE,
                                              parser.parse_unresolved_operand)
    parser.parse_punctuation("}")
    return [parser.resolve_operand(n, IndexType()) for n in names]


def _dynamic_count(type: Attribute) -> int:
    return sum(1 for d in type.get_shape() if d < 0) if isinstance(type, TensorType) else 0


@irdl_op_definition
class TensorDynamicConstantOp(IRDLOperation):
    """`flow.tensor.dynamic_constant dense<...> : tensor<4xf32> -> tensor<?xf32>`: a constant
    whose static shape the compiler must forget."""

    name = "flow.tensor.dynamic_constant"
    value = attr_def(Attribute)
    result = result_def(TensorType)

    @classmethod
    def parse(cls, parser: Parser) -> "TensorDynamicConstantOp":
        attrs = parser.parse_optional_attr_dict()
        value = parser.parse_attribute()
        if not isinstance(value, TypedAttribute):
            parser.raise_error("flow.tensor.dynamic_constant expects a typed attribute")
        parser.parse_punctuation("->")
        type = parser.parse_type()
        return cls(result_types=[type], attributes={"value": value, **attrs})

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.value)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        static = self.value.get_type() if isinstance(self.value, TypedAttribute) else None
        dyn = self.result.type
        if not isinstance(static, TensorType) or len(static.get_shape()) != len(dyn.get_shape()) \
                or static.element_type != dyn.element_type \
                or any(d >= 0 and d != s for s, d in zip(static.get_shape(), dyn.get_shape())):
            raise VerifyException("flow.tensor.dynamic_constant result type does not match its value")


@irdl_op_definition
class TensorTieShapeOp(IRDLOperation):
    """`flow.tensor.tie_shape %t : tensor<?x?xi32>{%h, %w}`: the tensor, with its dynamic dims."""

    name = "flow.tensor.tie_shape"
    operand = operand_def(TensorType)
    dynamic_dims = var_operand_def()
    result = result_def(TensorType)

    @classmethod
    def parse(cls, parser: Parser) -> "TensorTieShapeOp":
        name = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        type = parser.parse_type()
        dims = _parse_dims(parser)
        attrs = parser.parse_optional_attr_dict()
        op = cls(operands=[parser.resolve_operand(name, type), dims], result_types=[type])
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.operand)
        printer.print_string(" : ")
        printer.print_attribute(self.operand.type)
        printer.print_string("{")
        printer.print_list(self.dynamic_dims, printer.print_operand)
        printer.print_string("}")

    def verify_(self) -> None:
        if len(self.dynamic_dims) != _dynamic_count(self.operand.type):
            raise VerifyException("flow.tensor.tie_shape needs one value per dynamic dim")


@irdl_op_definition
class TensorBitCastOp(IRDLOperation):
    """`flow.tensor.bitcast %t : tensor<4xi8> -> tensor<8xf4E2M1FN>`: same bytes, new type.
    `dims` holds the source's dynamic dims, then the result's."""

    name = "flow.tensor.bitcast"
    source = operand_def(TensorType)
    dims = var_operand_def()
    result = result_def(TensorType)

    @classmethod
    def parse(cls, parser: Parser) -> "TensorBitCastOp":
        name = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        source_dims = _parse_dims(parser)
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        result_dims = _parse_dims(parser)
        attrs = parser.parse_optional_attr_dict()
        op = cls(operands=[parser.resolve_operand(name, source_type), source_dims + result_dims],
                 result_types=[result_type])
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        if len(self.dims) != _dynamic_count(self.source.type) + _dynamic_count(self.result.type):
            raise VerifyException("flow.tensor.bitcast needs one value per dynamic dim")


OPS: list[type[Operation]] = [TensorDynamicConstantOp, TensorTieShapeOp, TensorBitCastOp]
