"""Ops that xDSL 0.75 lacks or gets wrong, declared with xDSL's IRDL the way xDSL declares its
own, each with its MLIR custom syntax.

Each module holds one dialect's additions; `OPS` lists every op the front end loads on top of
xDSL's dialects, and `DIALECTS` replaces xDSL's linalg and arith dialects.
"""
from irtk.compiler.frontend.dialects import check, flow, tensor_ext, util
from irtk.compiler.frontend.dialects.arith_ext import RemfOp, arith_dialect
from irtk.compiler.frontend.dialects.linalg import Linalg

OPS = [*util.OPS, *check.OPS, *flow.OPS, *tensor_ext.OPS]
# Dialects that replace xDSL's own, by name.
DIALECTS = {"linalg": lambda: Linalg, "arith": arith_dialect}

__all__ = ["DIALECTS", "OPS", "RemfOp"]
