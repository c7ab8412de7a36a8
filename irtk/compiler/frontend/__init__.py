"""Front end: MLIR text -> verified xDSL module (parser.py) -> TIR (importer.py), with source
locations kept for diagnostics."""
from irtk.compiler import tir
from irtk.compiler.frontend.importer import import_program
from irtk.compiler.frontend.parser import parse_mlir
from irtk.compiler.frontend.source_map import SourceMap


def parse_program(text: str, filename: str = "<string>", *,
                  demote_f64: bool = False) -> tir.Program:
    """Parse MLIR text and import it; raises irtk.ParseError for text that does not parse.
    `demote_f64` makes every f64 f32 first (demote.py)."""
    module, source_map = parse_mlir(text, filename, demote_f64=demote_f64)
    return import_program(module, source_map, filename)


__all__ = ["SourceMap", "import_program", "parse_mlir", "parse_program"]
