"""Parse MLIR with xDSL through one entry point that keeps op locations and turns every xDSL
failure into an `irtk.ParseError` that starts with `file:line:col: error:`.

xDSL does not attach source locations to ops it parses, so a parser subclass records where each
op starts; later phases report unsupported ops at that place through the `SourceMap`.
"""
from __future__ import annotations

import functools
import math
import re
import struct
from typing import TypeAlias

from xdsl.context import Context
from xdsl.dialects import get_all_dialects
from xdsl.dialects.builtin import (DYNAMIC_INDEX, AnyDenseElement, AnyFloat, BFloat16Type,
                                   ComplexType, DenseIntOrFPElementsAttr, DenseResourceAttr,
                                   Float16Type,
                                   Float32Type, Float64Type, IndexType, IntegerType, ModuleOp,
                                   RankedStructure, ReducedPrecisionFloatType, ShapedType,
                                   Signedness)
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.irdl import AttrConstraint, base
from xdsl.ir import Operation, TypeAttribute
from xdsl.parser import AttrParser, Parser
from xdsl.utils.mlir_lexer import MLIRTokenKind
from xdsl.utils.exceptions import ParseError as XdslParseError
from xdsl.utils.exceptions import VerifyException

from irtk.compiler.frontend import demote, dense_literal, resources, verifier
from irtk.compiler.frontend.resources import Resources
from irtk.compiler.frontend.source_map import SourceMap
from irtk.errors import ParseError

# A ranked tensor type without encoding: `tensor<4x?xf32>`.
_TENSOR_TYPE = re.compile(r"tensor<(?:(?:[0-9]+|\?)x)*[A-Za-z][A-Za-z0-9_]*>")
_TYPE_CACHE: dict[str, TypeAttribute] = {}
# A dense literal's type, as xDSL's parser types it.
_DenseType: TypeAlias = RankedStructure[IntegerType | IndexType | AnyFloat | ComplexType]
# A dense literal element's value.
_Element: TypeAlias = int | float | tuple[int, int] | tuple[float, float]


@functools.cache
def _dense_type_constraint() -> AttrConstraint[_DenseType]:
    """What a dense literal's type may be (as xDSL checks it)."""
    # xDSL reads a union of types passed as a value; mypy types only classes there.
    return base(_DenseType)  # type: ignore[arg-type]


class _HexElement(Parser._TensorLiteralElement):
    """A dense literal element written in hex: for a float type MLIR reads it as the bit
    pattern (`0x7C : f8E5M2` is +inf), which xDSL reads as an integer value instead."""

    def to_type(self, parser: AttrParser,
                type: AnyFloat | IntegerType | IndexType | ComplexType) -> _Element:
        bits = self.to_int(parser)   # the token is an integer literal
        if isinstance(type, ReducedPrecisionFloatType):
            return type.decode_bits(bits)
        formats = {16: ("<H", "<e"), 32: ("<I", "<f"), 64: ("<Q", "<d")}
        if isinstance(type, (Float16Type, Float32Type, Float64Type)):
            raw, real = formats[type.bitwidth]
            return float(struct.unpack(real, struct.pack(raw, bits))[0])
        if isinstance(type, BFloat16Type):
            return float(struct.unpack("<f", struct.pack("<I", bits << 16))[0])
        if isinstance(type, IntegerType):
            # Hex integers are bit patterns too: 0xCA in i8 is -54.
            width = type.width.data
            value = bits & ((1 << width) - 1)
            if type.signedness.data != Signedness.UNSIGNED and width > 1 \
                    and value >= 1 << (width - 1):
                value -= 1 << width
            return value
        return super().to_type(parser, type)


class _LocatingParser(Parser):
    """xDSL's parser, recording the start offset of every op it parses, reading hex dense
    elements as bit patterns, and keeping `dense_resource` uses and blobs (resources.py)."""

    source_map: SourceMap
    resources: Resources

    def _parse_builtin_dense_resource_attr(self) -> DenseResourceAttr:
        """`dense_resource<HANDLE> : TYPE`, recorded here instead of in xDSL's process-wide
        resource storage."""
        self.parse_characters("<", " in dense_resource attribute")
        start = self._current_token.span.start
        handle = self.parse_identifier(context_msg=" for resource handle")
        self.resources.use(handle, start)
        self.parse_characters(">", " in dense_resource attribute")
        self.parse_characters(":", " in dense_resource attribute")
        type = self.parse_type()
        if not isinstance(type, ShapedType):
            self.raise_error(f"dense resource should have a shaped type, got: {type}")
        return DenseResourceAttr.from_params(handle, type)

    def _parse_resource(self, dialect_name: str, interface: OpAsmDialectInterface) -> None:
        """One `HANDLE: "0x..."` entry of `dialect_resources`: builtin blobs are kept here."""
        if dialect_name != "builtin":
            super()._parse_resource(dialect_name, interface)
            return
        handle = self.parse_identifier(context_msg=" for resource handle")
        self._parse_token(MLIRTokenKind.COLON, "expected `:`")
        start = self._current_token.span.start
        self.resources.blobs[handle] = (self.parse_str_literal(), start)

    def parse_operation(self) -> Operation:
        start = self._current_token.span.start
        try:
            op = super().parse_operation()
        except (XdslParseError, ParseError):
            raise
        except Exception as e:  # an op's own parser or constructor failing: locate it
            line, col = self.source_map.line_col(start)
            raise ParseError(f"{self.source_map.filename}:{line}:{col}: error: "
                             f"{_describe(e)}") from None
        self.source_map.record(op, start)
        return op

    def parse_optional_type(self) -> TypeAttribute | None:
        """Ranked tensor types, written over and over in a program, are parsed once each
        (types are immutable, so one instance serves every use)."""
        token = self._current_token
        if token.kind != MLIRTokenKind.BARE_IDENT or token.text != "tensor":
            return super().parse_optional_type()
        m = _TENSOR_TYPE.match(self.lexer.input.content, token.span.start)
        if m is None:
            return super().parse_optional_type()
        cached = _TYPE_CACHE.get(m.group())
        if cached is not None:
            self._resume_from(m.end())
            return cached
        parsed = super().parse_optional_type()
        if parsed is not None and len(_TYPE_CACHE) < 4096:
            _TYPE_CACHE[m.group()] = parsed
        return parsed

    def parse_dense_int_or_fp_elements_attr(
            self, type: RankedStructure[AnyDenseElement] | None) -> DenseIntOrFPElementsAttr:
        """Plain numeric literals and splats on a fast path (dense_literal.py); the rest, and
        every error, through xDSL. xDSL checks the element count after reading the type, where
        its current token is the next op's: such an error is reported at the literal."""
        literal = self._current_token.span
        fast = self._fast_dense(type)
        if fast is not None:
            return fast
        try:
            return super().parse_dense_int_or_fp_elements_attr(type)
        except XdslParseError as e:
            if e.span.start > literal.start and (e.msg.startswith("Shape mismatch in dense")
                                                 or e.msg.startswith("Expected at least one")):
                self.raise_error(e.msg, literal)
            raise

    def _fast_dense(self, type: RankedStructure[AnyDenseElement] | None
                    ) -> DenseIntOrFPElementsAttr | None:
        text = self.lexer.input.content
        if self._current_token.text != "<":
            return None
        start = self._current_token.span.end
        while start < len(text) and text[start] in " \t\r\n":
            start += 1
        if text.startswith("[", start):
            scanned = dense_literal.scan_literal(text, start)
            if scanned is None:
                return None
            array, end = scanned
            at = self._current_token.span.start
            self.parse_punctuation("<")
            self._resume_from(end)
            self.parse_punctuation(">", " in dense attribute")
            if type is None:
                self.parse_punctuation(":", " in dense attribute")
                type = self._parse_dense_literal_type()
            data = None
            if list(type.get_shape()) == list(array.shape):
                data = dense_literal.literal_bytes(array, type.element_type)
            if data is None:   # xDSL converts (and reports) what the fast path does not take
                self._resume_from(at)
                return None
            return dense_literal.dense_attr(type, data)
        if not dense_literal.splat_follows(text, start):
            return None
        self.parse_punctuation("<")
        element = self._parse_tensor_literal_element()
        self.parse_punctuation(">", " in dense attribute")
        if type is None:
            self.parse_punctuation(":", " in dense attribute")
            type = self._parse_dense_literal_type()
        if isinstance(type.element_type, ComplexType):
            self.raise_error("complex dense literals need (re, im) pairs")
        # One element packed, its bytes repeated: from_list does this for a 1-element list.
        # to_type gives the value the element type holds, a pairing of union members that
        # from_list's overloads state and mypy cannot follow.
        value = element.to_type(self, type.element_type)
        return DenseIntOrFPElementsAttr.from_list(type, [value])  # type: ignore[type-var]

    def _parse_dense_literal_type(self) -> _DenseType:
        """The type after a dense literal, refused before a splat is expanded to a size that
        would not fit in memory."""
        start = self.pos
        # xDSL's own version rebuilds its type constraint on every call (tens of ms each).
        type = self.expect(self.parse_optional_type, "Dense attribute must be typed!")
        if not _dense_type_constraint().verifies(type):
            self.raise_error("Expected memref, vector or tensor type of integer, index, float, "
                             "or complex type", start, self.pos)
        if any(dim == DYNAMIC_INDEX for dim in type.get_shape()):
            self.raise_error("Dense literal attribute should have a static shape.", start,
                             self.pos)
        count = math.prod(type.get_shape())
        size = count * max(1, type.element_type.bitwidth // 8) \
            if hasattr(type.element_type, "bitwidth") else count * 16
        if size > dense_literal.MAX_BYTES:
            self.raise_error(f"dense constant of {count} elements is larger than the "
                             f"{dense_literal.MAX_BYTES >> 20} MiB a constant may hold",
                             start, self.pos)
        return type

    def _parse_tensor_literal_element(self) -> Parser._TensorLiteralElement:
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


def parse_mlir(text: str, filename: str = "<string>", *,
               demote_f64: bool = False) -> tuple[ModuleOp, SourceMap]:
    """Parse and verify MLIR text (with `demote_f64`, every f64 made f32 first: demote.py);
    raises ParseError with `file:line:col: error: ...`."""
    source_map = SourceMap(filename, text)
    parser: _LocatingParser | None = None
    try:
        parser = _LocatingParser(_context(), text, filename)   # lexes the first token
        parser.source_map = source_map
        parser.resources = Resources()
        module = parser.parse_module()
    except ParseError:
        raise
    except XdslParseError as e:
        undefined = _first_undefined_use(text, e.msg)
        if undefined is not None:
            line, col = source_map.line_col(undefined[1])
            raise ParseError(f"{filename}:{line}:{col}: error: use of undefined value "
                             f"'{undefined[0]}'") from None
        offset = _unregistered_op_offset(text, e.span.start, e.msg)
        line, col = source_map.line_col(offset)
        raise ParseError(f"{filename}:{line}:{col}: error: {_first_line(e.msg)}") from None
    except Exception as e:  # xDSL raises plain exceptions from some custom parsers
        offset = parser._current_token.span.start if parser is not None else 0  # noqa: SLF001
        line, col = source_map.line_col(offset)
        raise ParseError(f"{filename}:{line}:{col}: error: {_describe(e)}") from None
    resources.resolve(module, parser.resources, source_map)
    if demote_f64:
        demote.demote_f64(module, source_map)
    try:
        module.verify()
    except VerifyException as e:
        raise ParseError(f"{source_map.location(_failing_op(module, e))}: error: "
                         f"{_first_line(str(e))}") from None
    except Exception as e:
        raise ParseError(f"{source_map.location(_failing_op(module, e))}: error: "
                         f"{_first_line(str(e)) or type(e).__name__}") from None
    try:
        verifier.verify_module(module)
    except verifier.Invalid as e:
        raise ParseError(source_map.error(e.op, str(e))) from None
    return module, source_map


def _first_undefined_use(text: str, message: str) -> tuple[str, int] | None:
    """For xDSL's "values used but not defined: [%b, ...]" (reported at the end of the region):
    the first such name and the offset of its first use (it has no definition, so its first
    occurrence is a use)."""
    m = re.match(r"values used but not defined: \[([^\],]+)", message)
    if m is None:
        return None
    name = m.group(1).strip()
    use = re.search(re.escape(name) + r"(?![\w$.\-])", text)
    return (name, use.start()) if use is not None else None


def _unregistered_op_offset(text: str, offset: int, message: str) -> int:
    """xDSL points past an unregistered op's name; point at the name itself."""
    m = re.match(r"Operation (\S+) is not registered", message)
    if m:
        found = text.rfind(m.group(1), text.rfind("\n", 0, offset) + 1, offset)
        if found >= 0:
            return found
    return offset


def _describe(e: Exception) -> str:
    """A one-line message for an exception that xDSL or an op's parser raised."""
    if isinstance(e, RecursionError):
        return "nesting too deep to parse"
    return _first_line(str(e)) or type(e).__name__


def _first_line(message: str) -> str:
    for line in message.splitlines():
        if line.strip():
            return line.strip()
    return message.strip()


def _failing_op(module: ModuleOp, exc: Exception) -> Operation | None:
    """The innermost op whose own verification fails (xDSL does not say which)."""
    failing = None
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except Exception:
            failing = op
    return failing
