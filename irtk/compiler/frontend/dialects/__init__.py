"""Ops that xDSL 0.75 lacks, declared with xDSL's IRDL the way xDSL declares its own.

Each module holds one dialect's additions; `OPS` lists every op the front end loads on top of
xDSL's dialects.
"""
from irtk.compiler.frontend.dialects.arith_ext import RemfOp

OPS = [RemfOp]

__all__ = ["OPS", "RemfOp"]
