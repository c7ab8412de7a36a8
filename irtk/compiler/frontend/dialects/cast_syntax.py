"""The `%r = OP %x {attrs} : T to U` form shared by casts (arith) and tensor.bitcast."""
from __future__ import annotations

from xdsl.ir import Attribute, SSAValue
from xdsl.parser import Parser
from xdsl.printer import Printer


def parse_cast(parser: Parser) -> tuple[SSAValue, dict[str, Attribute], Attribute]:
    """The operand (resolved with its type), the attribute dict and the result type."""
    name = parser.parse_unresolved_operand()
    attrs = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    source = parser.parse_type()
    parser.parse_keyword("to")
    result = parser.parse_type()
    return parser.resolve_operand(name, source), attrs, result


def print_cast(printer: Printer, source: SSAValue, result: SSAValue) -> None:
    printer.print_string(" ")
    printer.print_operand(source)
    printer.print_string(" : ")
    printer.print_attribute(source.type)
    printer.print_string(" to ")
    printer.print_attribute(result.type)
