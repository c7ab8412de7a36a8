"""Where each parsed op came from, since xDSL keeps no source locations.

The parser records the start of every op it parses; every later message about an op (the
verifier's, the importer's) is located through this map as `file:line:col`.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from xdsl.ir import Operation

_NEWLINE = re.compile("\n")


@dataclass
class SourceMap:
    """Where each parsed op came from: `file:line:col` strings by op."""

    filename: str
    text: str
    _locations: dict[Operation, tuple[int, int]] = field(default_factory=dict)
    _line_starts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._line_starts = [0] + [m.end() for m in _NEWLINE.finditer(self.text)]

    def line_col(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return line + 1, offset - self._line_starts[line] + 1

    def record(self, op: Operation, offset: int) -> None:
        self._locations[op] = self.line_col(offset)

    def location(self, op: Operation | None) -> str:
        """`file:line:col` of `op`, or of its closest located ancestor."""
        while op is not None:
            if op in self._locations:
                line, col = self._locations[op]
                return f"{self.filename}:{line}:{col}"
            op = op.parent_op()
        return f"{self.filename}:1:1"

    def error(self, op: Operation | None, message: str) -> str:
        return f"{self.location(op)}: error: {message}"
