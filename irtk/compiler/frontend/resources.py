"""`dense_resource` constants and the file's `dialect_resources` section, as torch-mlir writes
every weight of an exported model:

    %w = arith.constant dense_resource<torch_tensor_4_torch.float32> : tensor<4xf32>
    ...
    {-# dialect_resources: { builtin: { torch_tensor_4_torch.float32: "0x04000000..." } } #-}

A blob is a hex string whose first 4 bytes are its alignment (little-endian) and the rest the
elements in their storage layout (i1 one byte each). The parser (parser.py) records each
blob and each use with its offset, keeping them out of xDSL's resource storage, which is
process-wide and renames a handle parsed twice; `resolve` then replaces every use by the dense
elements attribute with those bytes, so the rest of the compiler sees ordinary constants.
A missing blob, a malformed one or one of the wrong size is a located error.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects.builtin import (DenseIntOrFPElementsAttr, DenseResourceAttr, IntegerType,
                                   ModuleOp, TensorType)
from xdsl.ir import Attribute, Operation

from irtk.compiler.frontend import dense_literal
from irtk.compiler.frontend.source_map import SourceMap
from irtk.errors import ParseError


@dataclass
class Resources:
    """What the parser saw: blobs by handle (hex text and the offset of its string) and the
    offset of each `dense_resource` use, in order."""

    blobs: dict[str, tuple[str, int]] = field(default_factory=dict)
    uses: dict[str, list[int]] = field(default_factory=dict)

    def use(self, handle: str, offset: int) -> None:
        self.uses.setdefault(handle, []).append(offset)


def _element_bytes(element_type: Attribute) -> int | None:
    width = getattr(element_type, "bitwidth", None)
    if isinstance(element_type, IntegerType) and element_type.width.data == 1:
        return 1
    if not isinstance(width, int) or width % 8:
        return None
    return width // 8


def resolve(module: ModuleOp, resources: Resources, source_map: SourceMap) -> None:
    """Replace each DenseResourceAttr held by an op by the dense attribute of its blob."""
    decoded: dict[str, bytes] = {}
    seen: dict[str, int] = {}   # uses of a handle met so far: which recorded offset is this one
    for op in module.walk():
        for store in (op.properties, op.attributes):
            for key, attr in list(store.items()):
                if isinstance(attr, DenseResourceAttr):
                    store[key] = _dense(op, attr, resources, source_map, decoded, seen)


def _where(op: Operation, handle: str, resources: Resources, seen: dict[str, int],
           source_map: SourceMap) -> str:
    offsets = resources.uses.get(handle, [])
    index = seen.get(handle, 0)
    seen[handle] = index + 1
    if index < len(offsets):
        line, col = source_map.line_col(offsets[index])
        return f"{source_map.filename}:{line}:{col}"
    return source_map.location(op)


def _dense(op: Operation, attr: DenseResourceAttr, resources: Resources,
           source_map: SourceMap, decoded: dict[str, bytes],
           seen: dict[str, int]) -> DenseIntOrFPElementsAttr:
    handle = attr.resource_handle.data
    where = _where(op, handle, resources, seen, source_map)
    type_ = attr.type
    if not isinstance(type_, TensorType) or any(d < 0 for d in type_.get_shape()):
        raise ParseError(f"{where}: error: dense_resource '{handle}' needs a static tensor "
                         f"type, got {type_}")
    if handle not in resources.blobs:
        raise ParseError(f"{where}: error: dense_resource '{handle}' has no blob: the file's "
                         "'{-# dialect_resources: { builtin: { ... } } #-}' section does not "
                         "define it")
    element_bytes = _element_bytes(type_.element_type)
    if element_bytes is None:
        raise ParseError(f"{where}: error: dense_resource of element type "
                         f"{type_.element_type} is not supported (whole-byte element types "
                         "and i1)")
    if handle not in decoded:
        decoded[handle] = _decode(handle, *resources.blobs[handle], source_map)
    data = decoded[handle]
    count = 1
    for dim in type_.get_shape():
        count *= dim
    need = count * element_bytes
    if len(data) != need:
        held = f"{len(data)} byte" + ("" if len(data) == 1 else "s")
        raise ParseError(f"{where}: error: dense_resource '{handle}' holds {held} after its "
                         f"4-byte alignment header; {type_} needs {need}")
    if need > dense_literal.MAX_BYTES:
        raise ParseError(f"{where}: error: dense_resource '{handle}' of {need} bytes is larger "
                         f"than the {dense_literal.MAX_BYTES >> 20} MiB a constant may hold")
    if isinstance(type_.element_type, IntegerType) and type_.element_type.width.data == 1:
        data = bytes(0xFF if b else 0 for b in data)   # as xDSL stores parsed booleans
    return dense_literal.dense_attr(type_, data)


def _decode(handle: str, text: str, offset: int, source_map: SourceMap) -> bytes:
    line, col = source_map.line_col(offset)
    where = f"{source_map.filename}:{line}:{col}"
    if not text.startswith("0x") or len(text) % 2:
        raise ParseError(f"{where}: error: blob '{handle}' must be a hex string \"0x...\" of "
                         "whole bytes")
    try:
        raw = bytes.fromhex(text[2:])
    except ValueError:
        raise ParseError(f"{where}: error: blob '{handle}' is not hexadecimal") from None
    if len(raw) < 4:
        raise ParseError(f"{where}: error: blob '{handle}' is shorter than its 4-byte "
                         "alignment header")
    return raw[4:]
