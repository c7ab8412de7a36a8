"""IREE's `check` ops: the assertions of the end-to-end tests, in their custom syntax
(`check.expect_almost_eq(%a, %b, atol 1.0e-02) : tensor<4xf32>`,
`check.expect_eq_const(%a, dense<...> : tensor<4xi32>) : tensor<4xi32>`)."""
from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import FloatAttr, Float64Type
from xdsl.ir import Attribute, Operation
from xdsl.irdl import IRDLOperation, attr_def, irdl_op_definition, operand_def, opt_attr_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException


class _CheckOp(IRDLOperation):
    """Shared syntax: `(` operands [`,` const-attr] [`,` atol x] [`,` rtol y] `)` `:` type."""

    HAS_RHS: ClassVar[bool] = False
    HAS_CONST: ClassVar[bool] = False
    HAS_TOLERANCE: ClassVar[bool] = False

    @classmethod
    def parse(cls, parser: Parser) -> "_CheckOp":
        parser.parse_punctuation("(")
        names = [parser.parse_unresolved_operand()]
        attrs: dict[str, Attribute] = {}
        if cls.HAS_RHS:
            parser.parse_punctuation(",")
            names.append(parser.parse_unresolved_operand())
        if cls.HAS_CONST:
            parser.parse_punctuation(",")
            attrs["value"] = parser.parse_attribute()
        while cls.HAS_TOLERANCE and parser.parse_optional_punctuation(",") is not None:
            start = parser._current_token.span.start  # noqa: SLF001 (the token, not the blank before it)
            key = parser.parse_identifier()
            if key not in ("atol", "rtol"):
                parser.raise_error(f"expected 'atol' or 'rtol', got '{key}'", start, parser.pos)
            attrs[key] = FloatAttr(parser.parse_float(), Float64Type())
        parser.parse_punctuation(")")
        attrs |= parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type = parser.parse_type()
        values = [parser.resolve_operand(n, type) for n in names]
        return cls(operands=values, attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string("(")
        printer.print_list(self.operands, printer.print_operand)
        if self.HAS_CONST:
            printer.print_string(", ")
            printer.print_attribute(self.attributes["value"])
        for key in ("atol", "rtol"):
            tolerance = self.attributes.get(key)
            if isinstance(tolerance, FloatAttr):
                printer.print_string(f", {key} {tolerance.value.data}")
        printer.print_string(") : ")
        printer.print_attribute(self.operands[0].type)

    def verify_(self) -> None:
        if self.HAS_CONST:
            value = self.attributes.get("value")
            if getattr(value, "type", None) != self.operands[0].type:
                raise VerifyException(f"{self.name}: the constant's type differs from the operand's")


@irdl_op_definition
class ExpectTrueOp(_CheckOp):
    name = "check.expect_true"
    operand = operand_def()


@irdl_op_definition
class ExpectFalseOp(_CheckOp):
    name = "check.expect_false"
    operand = operand_def()


@irdl_op_definition
class ExpectAllTrueOp(_CheckOp):
    name = "check.expect_all_true"
    operand = operand_def()


@irdl_op_definition
class ExpectEqOp(_CheckOp):
    name = "check.expect_eq"
    HAS_RHS: ClassVar[bool] = True
    lhs = operand_def()
    rhs = operand_def()


@irdl_op_definition
class ExpectEqConstOp(_CheckOp):
    name = "check.expect_eq_const"
    HAS_CONST: ClassVar[bool] = True
    lhs = operand_def()
    value = attr_def(Attribute)


@irdl_op_definition
class ExpectAlmostEqOp(_CheckOp):
    name = "check.expect_almost_eq"
    HAS_RHS: ClassVar[bool] = True
    HAS_TOLERANCE: ClassVar[bool] = True
    lhs = operand_def()
    rhs = operand_def()
    atol = opt_attr_def(FloatAttr)
    rtol = opt_attr_def(FloatAttr)


@irdl_op_definition
class ExpectAlmostEqConstOp(_CheckOp):
    name = "check.expect_almost_eq_const"
    HAS_CONST: ClassVar[bool] = True
    HAS_TOLERANCE: ClassVar[bool] = True
    lhs = operand_def()
    value = attr_def(Attribute)
    atol = opt_attr_def(FloatAttr)
    rtol = opt_attr_def(FloatAttr)


OPS: list[type[Operation]] = [ExpectTrueOp, ExpectFalseOp, ExpectAllTrueOp, ExpectEqOp,
                              ExpectEqConstOp, ExpectAlmostEqOp, ExpectAlmostEqConstOp]
