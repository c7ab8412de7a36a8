"""`arith` ops missing from xDSL 0.75."""
from __future__ import annotations

from xdsl.dialects.arith import FloatingPointLikeBinaryOperation
from xdsl.irdl import irdl_op_definition, traits_def
from xdsl.traits import Pure


@irdl_op_definition
class RemfOp(FloatingPointLikeBinaryOperation):
    """Floating-point remainder with the sign of the dividend (C's fmod)."""

    name = "arith.remf"

    traits = traits_def(Pure())
