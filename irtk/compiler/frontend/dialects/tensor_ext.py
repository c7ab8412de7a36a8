"""`tensor` ops missing from xDSL 0.75."""
from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, result_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from irtk.compiler.frontend.dialects.cast_syntax import parse_cast, print_cast


@irdl_op_definition
class BitcastOp(IRDLOperation):
    """`tensor.bitcast %t : tensor<4xi32> to tensor<4xf32>`: elementwise bitcast between
    element types of one width."""

    name = "tensor.bitcast"
    source = operand_def(TensorType)
    result = result_def(TensorType)

    @classmethod
    def parse(cls, parser: Parser) -> "BitcastOp":
        source, attrs, result = parse_cast(parser)
        op = cls(operands=[source], result_types=[result])
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        print_cast(printer, self.source, self.result)

    def verify_(self) -> None:
        source, result = self.source.type, self.result.type
        assert isinstance(source, TensorType) and isinstance(result, TensorType), \
            "IRDL checks the operand and result types before verify_"
        if source.get_shape() != result.get_shape():
            raise VerifyException("tensor.bitcast keeps the shape")


OPS: list[type[Operation]] = [BitcastOp]
