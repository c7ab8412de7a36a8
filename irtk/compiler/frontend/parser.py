"""Parse MLIR with xDSL through one entry point that keeps op locations and turns every xDSL
failure into an `irtk.ParseError` that starts with `file:line:col: error:`.

xDSL does not attach source locations to ops it parses, so a parser subclass records where each
op starts; later phases report unsupported ops at that place through the `SourceMap`.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import get_all_dialects
from xdsl.dialects.builtin import (BFloat16Type, Float16Type, Float32Type, Float64Type,
                                   IntegerType, ModuleOp, ReducedPrecisionFloatType, Signedness)
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.mlir_lexer import MLIRTokenKind
from xdsl.utils.exceptions import ParseError as XdslParseError
from xdsl.utils.exceptions import VerifyException

from irtk.errors import ParseError


@dataclass
class SourceMap:
    """Where each parsed op came from: `file:line:col` strings by op."""

    filename: str
    text: str
    _locations: dict[Operation, tuple[int, int]] = field(default_factory=dict)
    _line_starts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        starts = [0]
        for i, ch in enumerate(self.text):
            if ch == "\n":
                starts.append(i + 1)
        self._line_starts = starts

    def line_col(self, offset: int) -> tuple[int, int]:
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - self._line_starts[lo] + 1

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


class _HexElement(Parser._TensorLiteralElement):
    """A dense literal element written in hex: for a float type MLIR reads it as the bit
    pattern (`0x7C : f8E5M2` is +inf), which xDSL reads as an integer value instead."""

    def to_type(self, parser, type):  # type: ignore[override]
        if isinstance(type, ReducedPrecisionFloatType):
            return type.decode_bits(int(self.value))
        formats = {16: ("<H", "<e"), 32: ("<I", "<f"), 64: ("<Q", "<d")}
        if isinstance(type, (Float16Type, Float32Type, Float64Type)):
            raw, real = formats[type.bitwidth]
            return struct.unpack(real, struct.pack(raw, int(self.value)))[0]
        if isinstance(type, BFloat16Type):
            return struct.unpack("<f", struct.pack("<I", int(self.value) << 16))[0]
        if isinstance(type, IntegerType):
            # Hex integers are bit patterns too: 0xCA in i8 is -54.
            width = type.width.data
            value = int(self.value) & ((1 << width) - 1)
            if type.signedness.data != Signedness.UNSIGNED and width > 1 \
                    and value >= 1 << (width - 1):
                value -= 1 << width
            return value
        return super().to_type(parser, type)


class _LocatingParser(Parser):
    """xDSL's parser, recording the start offset of every op it parses, and reading hex dense
    elements as bit patterns."""

    source_map: SourceMap

    def parse_operation(self) -> Operation:
        start = self._current_token.span.start
        try:
            op = super().parse_operation()
        except (XdslParseError, ParseError):
            raise
        except Exception as e:  # an op's own parser or constructor failing: locate it
            line, col = self.source_map.line_col(start)
            raise ParseError(f"{self.source_map.filename}:{line}:{col}: error: "
                             f"{_first_line(str(e)) or type(e).__name__}") from None
        self.source_map.record(op, start)
        return op

    def _parse_tensor_literal_element(self):  # type: ignore[override]
        token = self._current_token
        element = super()._parse_tensor_literal_element()
        if token.kind == MLIRTokenKind.INTEGER_LIT and token.text.lower().startswith("0x"):
            return _HexElement(element.is_negative, element.value, element.span)
        return element


_CONTEXT: Context | None = None


def _context() -> Context:
    global _CONTEXT
    if _CONTEXT is None:
        ctx = Context()
        from irtk.compiler.frontend.dialects import DIALECTS, OPS
        for name, factory in get_all_dialects().items():
            ctx.register_dialect(name, DIALECTS.get(name, factory))
        for op in OPS:
            ctx.load_op(op)
        _CONTEXT = ctx
    return _CONTEXT


def parse_mlir(text: str, filename: str = "<string>") -> tuple[ModuleOp, SourceMap]:
    """Parse and verify MLIR text; raises ParseError with `file:line:col: error: ...`."""
    source_map = SourceMap(filename, text)
    parser = _LocatingParser(_context(), text, filename)
    parser.source_map = source_map
    try:
        module = parser.parse_module()
    except ParseError:
        raise
    except XdslParseError as e:
        offset = _unregistered_op_offset(text, e.span.start, e.msg)
        line, col = source_map.line_col(offset)
        raise ParseError(f"{filename}:{line}:{col}: error: {_first_line(e.msg)}") from None
    except Exception as e:  # xDSL raises plain exceptions from some custom parsers
        raise ParseError(f"{filename}:1:1: error: {_first_line(str(e)) or type(e).__name__}") from None
    try:
        module.verify()
    except VerifyException as e:
        raise ParseError(f"{source_map.location(_failing_op(module, e))}: error: "
                         f"{_first_line(str(e))}") from None
    except Exception as e:
        raise ParseError(f"{filename}:1:1: error: {_first_line(str(e))}") from None
    return module, source_map


def _unregistered_op_offset(text: str, offset: int, message: str) -> int:
    """xDSL points past an unregistered op's name; point at the name itself."""
    m = re.match(r"Operation (\S+) is not registered", message)
    if m:
        found = text.rfind(m.group(1), text.rfind("\n", 0, offset) + 1, offset)
        if found >= 0:
            return found
    return offset


def _first_line(message: str) -> str:
    for line in message.splitlines():
        if line.strip():
            return line.strip()
    return message.strip()


def _failing_op(module: ModuleOp, exc: VerifyException) -> Operation | None:
    """The innermost op whose own verification fails (xDSL does not say which)."""
    failing = None
    for op in module.walk():
        try:
            op.verify_()
        except Exception:
            failing = op
    return failing
