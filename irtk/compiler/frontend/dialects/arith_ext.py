"""`arith` as the front end parses it: xDSL 0.75's ops, plus the ones it lacks (remf,
scaling_extf/truncf), with the cast ops replaced by ones that also accept tensors
(`arith.extsi %t : tensor<3x4xi8> to tensor<3x4xi32>`, elementwise as in MLIR)."""
from __future__ import annotations

from xdsl.dialects.arith import FloatingPointLikeBinaryOperation
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Dialect, Operation
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, result_def, traits_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from irtk.compiler.frontend.dialects.cast_syntax import parse_cast, print_cast


@irdl_op_definition
class RemfOp(FloatingPointLikeBinaryOperation):
    """Floating-point remainder with the sign of the dividend (C's fmod)."""

    name = "arith.remf"

    traits = traits_def(Pure())


class _ScalingOp(IRDLOperation):
    """`%r = arith.scaling_extf %x, %scale : f4E2M1FN, f8E8M0FNU to f32`: x times the scale
    (extf) or x divided by the scale, then truncated (truncf)."""

    input = operand_def()
    scale = operand_def()
    result = result_def()

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "_ScalingOp":
        pos = parser.pos
        names = [parser.parse_unresolved_operand()]
        parser.parse_punctuation(",")
        names.append(parser.parse_unresolved_operand())
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types: list[Attribute] = [parser.parse_type()]
        parser.parse_punctuation(",")
        types.append(parser.parse_type())
        parser.parse_keyword("to")
        result = parser.parse_type()
        op = cls(operands=parser.resolve_operands(names, types, pos), result_types=[result])
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_operand)
        printer.print_string(" : ")
        printer.print_list([o.type for o in self.operands], printer.print_attribute)
        printer.print_string(" to ")
        printer.print_attribute(self.result.type)


@irdl_op_definition
class ScalingExtfOp(_ScalingOp):
    name = "arith.scaling_extf"


@irdl_op_definition
class ScalingTruncfOp(_ScalingOp):
    name = "arith.scaling_truncf"


CAST_NAMES = ("extsi extui trunci sitofp uitofp fptosi fptoui extf truncf index_cast "
              "index_castui bitcast").split()


class _CastOp(IRDLOperation):
    """`%r = arith.NAME %x : T to U` on scalars or, elementwise, on tensors."""

    input = operand_def()
    result = result_def()

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "_CastOp":
        source, attrs, result = parse_cast(parser)
        op = cls(operands=[source], result_types=[result])
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        print_cast(printer, self.input, self.result)

    def verify_(self) -> None:
        source, result = self.input.type, self.result.type
        if isinstance(source, TensorType) and isinstance(result, TensorType):
            same = source.get_shape() == result.get_shape()
        else:   # scalars both, or a tensor and a scalar
            same = not isinstance(source, TensorType) and not isinstance(result, TensorType)
        if not same:
            raise VerifyException(f"{self.name}: operand and result shapes differ")


def _cast_class(short: str) -> type[_CastOp]:
    cls = type("".join(p.capitalize() for p in short.split("_")) + "Op", (_CastOp,),
               {"name": f"arith.{short}", "__doc__": f"arith.{short} (see _CastOp)."})
    return irdl_op_definition(cls)


OPS: list[type[Operation]] = [RemfOp, ScalingExtfOp, ScalingTruncfOp,
                              *(_cast_class(n) for n in CAST_NAMES)]


def arith_dialect() -> Dialect:
    """xDSL's arith dialect with the ops above added or replaced."""
    from xdsl.dialects.arith import Arith
    mine = {op.name for op in OPS}
    return Dialect("arith", [op for op in Arith.operations if op.name not in mine] + OPS,
                   list(Arith.attributes))
