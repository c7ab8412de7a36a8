"""xDSL attributes -> TIR: scalar and tensor types, dense constants, affine maps.

The leaf helpers of the front end: the importer, the named-op and tensor-op lowerings, the CFG
lifting and the verifier all convert through these.
"""
from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import (ArrayAttr, DenseIntOrFPElementsAttr, IndexType, IntegerAttr,
                                   IntegerType, TensorType)
from xdsl.ir import Attribute, Operation
from xdsl.ir.affine import (AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr,
                            AffineDimExpr, AffineExpr)
from xdsl.ir.affine import AffineMap as XdslAffineMap

from irtk.compiler import kernel, tir
from irtk.compiler.frontend.body import Unsupported, is_float
from irtk.types import SCALAR_TYPES


def constant_dtype(element_type: str) -> np.dtype:
    """The numpy dtype a TIR constant holds `element_type` values in: the type's compute dtype,
    except i1 as int8 (0/1 numbers) and index at its host width (int64)."""
    if element_type == "i1":
        return np.dtype(np.int8)
    if element_type == "index":
        return np.dtype(np.int64)
    return SCALAR_TYPES[element_type].compute_dtype


def element_type_name(t: Attribute, op: Operation | None = None) -> str:
    """The kernel IR's name for a scalar xDSL type; Unsupported if it has none."""
    if isinstance(t, IndexType):
        return "index"
    if isinstance(t, IntegerType):
        name = f"i{t.width.data}"
    else:
        name = getattr(t, "name", str(t))
    if name not in SCALAR_TYPES:
        raise Unsupported(f"element type {name} is not supported", op)
    return name


# Sizes, shapes and byte offsets are 64-bit signed on the host (VM i64 registers): a static
# tensor whose element count or byte size does not fit cannot be addressed.
MAX_TENSOR_SIZE = (1 << 63) - 1


def convert_type(t: Attribute, op: Operation | None = None) -> tir.Type:
    if isinstance(t, TensorType):
        shape = tuple(None if d < 0 else int(d) for d in t.get_shape())
        element_type = element_type_name(t.element_type, op)
        static = [d for d in shape if d is not None]
        count = int(np.prod(static, dtype=object)) if static else 1
        bits = SCALAR_TYPES[element_type].bits if element_type != "index" else 64
        if any(d > MAX_TENSOR_SIZE for d in static) or count * max(bits, 8) // 8 > MAX_TENSOR_SIZE:
            raise Unsupported(f"tensor type {t} is too large: its size in bytes must fit in a "
                              f"64-bit signed integer (at most 2^63 - 1)", op)
        return tir.TensorType(shape, element_type)
    if isinstance(t, (IndexType, IntegerType)) or t.name in SCALAR_TYPES:
        return tir.ScalarType(element_type_name(t, op))
    raise Unsupported(f"type {t} is not supported (only tensors and scalars are)", op)


def convert_tensor_type(t: Attribute, op: Operation | None = None) -> tir.TensorType:
    """`convert_type` of a type that must be a tensor's (Unsupported if it is not)."""
    converted = convert_type(t, op)
    if not isinstance(converted, tir.TensorType):
        raise Unsupported(f"type {t} is not a tensor type", op)
    return converted


def dense_array(attr: DenseIntOrFPElementsAttr, t: tir.TensorType) -> np.ndarray:
    """A dense attribute's values as a numpy array of `constant_dtype(element type)`."""
    elt = t.element_type
    dtype = constant_dtype(elt)
    shape = tuple(attr.get_shape())
    # xDSL holds these as their own numpy type (index as i64): read the bytes directly.
    raw = np.dtype(np.int64) if elt == "index" else SCALAR_TYPES[elt].numpy_dtype
    if elt == "i1":
        raw = None
    data = attr.data.data
    count = int(np.prod(shape))
    if raw is not None and len(data) == count * np.dtype(raw).itemsize:
        return np.frombuffer(data, dtype=raw).reshape(shape).astype(dtype)
    return np.array(attr.get_values(), dtype=np.float64 if is_float(elt) else np.int64) \
        .reshape(shape).astype(dtype)


def int_array(attr: Attribute | None) -> list[int] | None:
    """The values of an array of integer attributes (`[1, 0, 2]`, as linalg's keyword lists
    are parsed); None for any other attribute."""
    if not isinstance(attr, ArrayAttr):
        return None
    values = [int(a.value.data) for a in attr.data if isinstance(a, IntegerAttr)]
    return values if len(values) == len(attr.data) else None


def affine_map(m: XdslAffineMap, op: Operation | None = None) -> kernel.AffineMap:
    """xDSL AffineMap (dims, constants, +, * by a constant) -> kernel.AffineMap."""
    if m.num_symbols:
        raise Unsupported("affine maps with symbols are not supported", op)
    n = m.num_dims

    def row(e: AffineExpr) -> list[int]:
        if isinstance(e, AffineDimExpr):
            r = [0] * (n + 1)
            r[e.position] = 1
            return r
        if isinstance(e, AffineConstantExpr):
            return [0] * n + [e.value]
        if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Add:
            return [a + b for a, b in zip(row(e.lhs), row(e.rhs))]
        if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Mul:
            lhs, rhs = row(e.lhs), row(e.rhs)
            if not any(rhs[:n]):
                return [x * rhs[n] for x in lhs]
            if not any(lhs[:n]):
                return [x * lhs[n] for x in rhs]
        raise Unsupported(f"affine expression {e} is not supported", op)
    return kernel.AffineMap(n, tuple(tuple(row(e)) for e in m.results))
