"""Fast paths for `dense<...>` literals, which dominate parse time in real programs.

xDSL lexes every element of a dense literal as its own token and packs splats value by value
(a `dense<1.0> : tensor<2048x1024xf32>` splat packs two million Python floats). Here a literal
made only of plain decimal numbers, brackets and commas is read in one go (validated with one
regular expression, nested with `json`, converted with numpy), and a splat packs one element
and repeats its bytes. Anything else (hex, booleans, complex, bf16 and the small float types,
integers that need wrapping, malformed text) is left to xDSL, which also reports the errors.
"""
from __future__ import annotations

import json
import re

import numpy as np
from xdsl.dialects.builtin import (AnyDenseElement, BytesAttr, DenseIntOrFPElementsAttr,
                                   Float16Type, Float32Type, Float64Type, IndexType, IntegerType,
                                   RankedStructure, Signedness)
from xdsl.ir import Attribute

# The largest constant accepted (its storage): larger ones are refused with a located error
# rather than exhausting memory when a splat is expanded.
MAX_BYTES = 1 << 28

_NUMBER = r"-?[0-9]+(?:\.[0-9]*(?:[eE][-+]?[0-9]+)?)?"
# A whole bracketed literal of plain numbers: validated in one pass (no nested quantifiers
# that could backtrack: each step consumes a bracket, a comma or a number).
_LITERAL = re.compile(r"\[(?:\s*(?:\[|\]|,|" + _NUMBER + r"))*\s*")
_SPLAT = re.compile(r"\s*(" + _NUMBER + r"|0x[0-9a-fA-F]+)\s*>")
_BARE_DOT = re.compile(r"\.(?![0-9])")
_FLOATS: dict[type[Attribute], str] = {Float16Type: "<f2", Float32Type: "<f4",
                                       Float64Type: "<f8"}


def scan_literal(text: str, start: int) -> tuple[np.ndarray, int] | None:
    """The bracketed literal at `text[start]` as a numpy array (int64 or float64, its nesting
    as the shape) and the offset just past it; None if it is not a plain numeric literal."""
    m = _LITERAL.match(text, start)
    if m is None:
        return None
    end = text.rfind("]", start, m.end()) + 1
    if end <= start:
        return None
    body = text[start:end]
    is_float = "." in body
    try:
        nested = json.loads(_BARE_DOT.sub(".0", body) if is_float else body)
        # json reads an unbalanced or ragged literal, or one whose brackets close early, as
        # an error or a non-rectangular list: both go back to xDSL for its message.
        array = np.array(nested, dtype=np.float64 if is_float else np.int64)
    except (ValueError, OverflowError, RecursionError):
        return None
    if array.size == 0 or array.ndim == 0:
        return None
    return array, end


def literal_bytes(array: np.ndarray, element_type: Attribute) -> bytes | None:
    """The little-endian storage of `array` in `element_type`, or None where xDSL's own
    conversion is needed (types it alone handles, values out of range, floats for ints)."""
    fmt = _FLOATS.get(type(element_type))
    if fmt is not None:
        with np.errstate(over="ignore"):
            out = array.astype(fmt)
        if np.isinf(out).any() and not np.isinf(array).any():
            return None   # out of range: xDSL reports it
        return out.tobytes()
    if array.dtype.kind != "i":
        return None
    if isinstance(element_type, IndexType):
        return array.astype("<i8").tobytes()
    if isinstance(element_type, IntegerType):
        width = element_type.width.data
        if width not in (8, 16, 32, 64) or element_type.signedness.data == Signedness.UNSIGNED:
            return None
        lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
        if array.min() < lo or array.max() > hi:
            return None
        return array.astype(f"<i{width // 8}").tobytes()
    return None


def splat_follows(text: str, start: int) -> bool:
    """Whether `text[start:]` is one scalar element and the closing `>` (a splat)."""
    return _SPLAT.match(text, start) is not None


def dense_attr(type_: RankedStructure[AnyDenseElement], data: bytes) -> DenseIntOrFPElementsAttr:
    """The attribute xDSL would build from the same values (its storage is these bytes)."""
    return DenseIntOrFPElementsAttr(type_, BytesAttr(data))
