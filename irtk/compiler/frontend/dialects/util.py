"""IREE's `util` ops that the conformance programs use: constants the compiler must not fold,
an optimization barrier, and module globals."""
from __future__ import annotations

from xdsl.dialects.builtin import StringAttr, SymbolRefAttr, UnitAttr
from xdsl.ir import Attribute, Operation, TypedAttribute
from xdsl.irdl import (IRDLOperation, attr_def, irdl_op_definition, operand_def,
                       opt_attr_def, result_def, var_operand_def, var_result_def)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException


@irdl_op_definition
class UnfoldableConstantOp(IRDLOperation):
    """A constant that the compiler must treat as unknown (`util.unfoldable_constant 4 : index`)."""

    name = "util.unfoldable_constant"
    value = attr_def(Attribute)
    result = result_def()

    def __init__(self, value: Attribute, type: Attribute):
        super().__init__(result_types=[type], attributes={"value": value})

    @classmethod
    def parse(cls, parser: Parser) -> "UnfoldableConstantOp":
        value = parser.parse_attribute()
        if not isinstance(value, TypedAttribute):
            parser.raise_error("util.unfoldable_constant expects a typed attribute")
        op = cls(value, value.get_type())
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.value)


@irdl_op_definition
class OptimizationBarrierOp(IRDLOperation):
    """Identity on its operands that the compiler must not look through."""

    name = "util.optimization_barrier"
    operands_ = var_operand_def()
    results_ = var_result_def()

    @classmethod
    def parse(cls, parser: Parser) -> "OptimizationBarrierOp":
        pos = parser.pos
        names = parser.parse_comma_separated_list(Parser.Delimiter.NONE,
                                                  parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        start = parser._current_token.span.start  # noqa: SLF001 (the token, not the blank before it)
        types = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)
        if len(types) != len(names):
            parser.raise_error(f"expected {len(names)} types, got {len(types)}", start, parser.pos)
        values = parser.resolve_operands(names, types, pos)
        op = cls(operands=[values], result_types=[types])
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_operand)
        printer.print_string(" : ")
        printer.print_list([o.type for o in self.operands], printer.print_attribute)

    def verify_(self) -> None:
        if [o.type for o in self.operands] != [r.type for r in self.results]:
            raise VerifyException("util.optimization_barrier results must match its operands")


@irdl_op_definition
class GlobalOp(IRDLOperation):
    """`util.global private mutable @name = dense<...> : type` or `util.global @name : type`."""

    name = "util.global"
    sym_name = attr_def(StringAttr)
    type = attr_def(Attribute)
    initial_value = opt_attr_def(Attribute)
    is_mutable = opt_attr_def(UnitAttr)
    sym_visibility = opt_attr_def(StringAttr)

    @classmethod
    def parse(cls, parser: Parser) -> "GlobalOp":
        attrs: dict[str, Attribute] = {}
        visibility = parser.parse_optional_visibility_keyword()
        if visibility is not None:
            attrs["sym_visibility"] = visibility
        if parser.parse_optional_keyword("mutable") is not None:
            attrs["is_mutable"] = UnitAttr()
        attrs["sym_name"] = parser.parse_symbol_name()
        if parser.parse_optional_punctuation("=") is not None:
            value = parser.parse_attribute()
            attrs["initial_value"] = value
            if isinstance(value, TypedAttribute):
                attrs["type"] = value.get_type()
        if parser.parse_optional_punctuation(":") is not None:
            attrs["type"] = parser.parse_type()
        if "type" not in attrs:
            parser.raise_error("util.global needs a type")
        attrs |= parser.parse_optional_attr_dict()
        return cls(attributes=attrs)

    def print(self, printer: Printer) -> None:
        if self.sym_visibility is not None:
            printer.print_string(f" {self.sym_visibility.data}")
        if self.is_mutable is not None:
            printer.print_string(" mutable")
        printer.print_string(f" @{self.sym_name.data}")
        if self.initial_value is not None:
            printer.print_string(" = ")
            printer.print_attribute(self.initial_value)
        else:
            printer.print_string(" : ")
            printer.print_attribute(self.type)


@irdl_op_definition
class GlobalLoadOp(IRDLOperation):
    """`util.global.load @name : type`."""

    name = "util.global.load"
    global_ = attr_def(SymbolRefAttr, attr_name="global")
    result = result_def()

    @classmethod
    def parse(cls, parser: Parser) -> "GlobalLoadOp":
        symbol = parser.parse_symbol_name()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type = parser.parse_type()
        return cls(result_types=[type], attributes={"global": SymbolRefAttr(symbol), **attrs})

    def print(self, printer: Printer) -> None:
        printer.print_string(f" @{self.global_.root_reference.data} : ")
        printer.print_attribute(self.result.type)


@irdl_op_definition
class GlobalStoreOp(IRDLOperation):
    """`util.global.store %value, @name : type`."""

    name = "util.global.store"
    global_ = attr_def(SymbolRefAttr, attr_name="global")
    value = operand_def()

    @classmethod
    def parse(cls, parser: Parser) -> "GlobalStoreOp":
        name = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        symbol = parser.parse_symbol_name()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        value = parser.resolve_operand(name, parser.parse_type())
        return cls(operands=[value], attributes={"global": SymbolRefAttr(symbol), **attrs})

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.value)
        printer.print_string(f", @{self.global_.root_reference.data} : ")
        printer.print_attribute(self.value.type)


OPS: list[type[Operation]] = [UnfoldableConstantOp, OptimizationBarrierOp, GlobalOp, GlobalLoadOp,
                              GlobalStoreOp]
