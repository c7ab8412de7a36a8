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


_LOCATED = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): error: ")
_QUOTE_WIDTH = 160   # longer source lines are shown as a window around the column


def quote_source(message: str, filename: str, text: str) -> str:
    """`message` with the source line and a caret under the column after each of its
    `filename:line:col: error:` lines, as MLIR tools print them."""
    lines = text.split("\n")
    out: list[str] = []
    for message_line in message.split("\n"):
        out.append(message_line)
        m = _LOCATED.match(message_line)
        if m is None or m["file"] != filename or not 1 <= int(m["line"]) <= len(lines):
            continue
        source, col = lines[int(m["line"]) - 1].rstrip("\r"), int(m["col"]) - 1
        prefix = ""
        if len(source) > _QUOTE_WIDTH:
            start = max(0, min(col - _QUOTE_WIDTH // 2, len(source) - _QUOTE_WIDTH))
            prefix = "..." if start else ""
            suffix = "..." if start + _QUOTE_WIDTH < len(source) else ""
            source, col = prefix + source[start:start + _QUOTE_WIDTH] + suffix, \
                col - start + len(prefix)
        if not source.strip():
            continue
        col = max(0, min(col, len(source)))
        out.append(source)
        out.append("".join("\t" if c == "\t" else " " for c in source[:col]) + "^")
    return "\n".join(out)
