"""Front end: MLIR text -> verified xDSL module, with source locations kept for diagnostics."""
from irtk.compiler.frontend.parser import SourceMap, parse_mlir

__all__ = ["SourceMap", "parse_mlir"]
