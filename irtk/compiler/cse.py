"""Common subexpression elimination on TIR, before dispatch formation.

Exported models compute the same thing twice more often than one would think: PyTorch's layer
norm takes the mean once in f64 for the variance and once in f32 for the normalization, and
once f64 is demoted to f32 (frontend/demote.py) the two are the same sum of the same tensor.
Each copy would become a dispatch of its own. An op whose kind, operands and attributes equal
those of an earlier op that dominates it (earlier in the same region, or in an enclosing one)
is dropped, and its results' uses take the earlier op's results. A generic that only copies
its input (what demotion leaves of an `arith.extf`) is dropped the same way, its uses taking
the input.

Only ops without effects whose result depends on nothing but their operands and attributes
take part: `generic`, `empty`, `reshape`, `tensor.dim`, foldable `constant`s and host
`arith.*`/`math.*` scalars. A `barrier` stays (it is there to keep things apart), as do
global loads, calls, checks and `cast`s (which check at run time). Float attributes compare
by their bits, so 0.0 and -0.0 stay apart.
"""
from __future__ import annotations

import struct
from typing import Any

import numpy as np

from irtk.compiler import kernel as K
from irtk.compiler import tir

# Constants are compared by their bytes; past this many a duplicate is unlikely and the
# comparison costs more than it saves.
MAX_CONSTANT_BYTES = 1 << 16

_PURE_KINDS = frozenset({"generic", "empty", "reshape", "tensor.dim", "constant"})


def eliminate_common_subexpressions(program: tir.Program) -> int:
    """Drop the repeated pure ops of every function (in place); returns how many went."""
    dropped = 0
    for f in program.functions:
        replaced: dict[int, tir.Value] = {}
        dropped += _region(f.body, {}, replaced)
    return dropped


def _region(region: tir.Region, seen: dict[Any, tir.Op], replaced: dict[int, tir.Value]
            ) -> int:
    """CSE of `region`'s ops given the dominating ops `seen` (by key); `replaced` maps a
    dropped result's id to the value that stands for it."""
    dropped = 0
    scope = dict(seen)
    kept: list[tir.Op] = []
    for op in region.ops:
        op.operands = [replaced.get(v.id, v) for v in op.operands]
        for r in op.regions:
            dropped += _region(r, scope, replaced)
        copied = _copied_value(op)
        if copied is not None:
            replaced[op.result.id] = copied
            dropped += 1
            continue
        key = _key(op)
        if key is not None:
            earlier = scope.get(key)
            if earlier is not None:
                for mine, theirs in zip(op.results, earlier.results):
                    replaced[mine.id] = theirs
                dropped += 1
                continue
            scope[key] = op
        kept.append(op)
    region.ops = kept
    return dropped


def _copied_value(op: tir.Op) -> tir.Value | None:
    """The input of a generic that only copies it (identity maps, the body yields the input
    as loaded, the same type out): demoting f64 turns `arith.extf` into such a copy, and the
    copy would hide that two ops read the same tensor."""
    if op.kind != "generic" or op.attrs.get("num_inputs") != 1 or len(op.results) != 1 \
            or op.attrs.get("num_captures", 0) or op.attrs.get("asserts") \
            or op.attrs.get("ops") or op.attrs.get("yields") != [0]:
        return None
    source, result = op.operands[0], op.result
    maps = op.attrs["maps"]
    rank = len(result.tensor_type.shape)
    if source.type != result.type or any(m != K.AffineMap.identity(rank) for m in maps) \
            or any(t != "parallel" for t in op.attrs["iterator_types"]):
        return None
    return source


def is_pure(op: tir.Op) -> bool:
    """Whether `op` has no effect and its results depend on its operands and attributes
    alone (the module docstring's list)."""
    return (op.kind in _PURE_KINDS or op.kind.startswith(("arith.", "math."))) \
        and not op.regions


def _key(op: tir.Op) -> Any:
    """What makes `op` equal to another op (None: it never is)."""
    kind = op.kind
    if not is_pure(op):
        return None
    if kind == "constant" and op.attrs.get("unfoldable"):
        return None
    try:
        attrs = tuple(sorted((name, _canonical(value)) for name, value in op.attrs.items()))
    except _Incomparable:
        return None
    return (kind, tuple(v.id for v in op.operands), attrs, tuple(r.type for r in op.results))


class _Incomparable(Exception):
    """An attribute this pass does not know how to compare: the op is left alone."""


def _canonical(value: Any) -> Any:
    """A hashable form of an attribute value in which equal means interchangeable."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return (type(value).__name__, value)
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(_canonical(v) for v in value))
    if isinstance(value, K.Op):
        return ("kernel.Op", value.name, value.operands, value.result_type, value.predicate,
                value.int_value, struct.pack("<d", value.float_value))
    if isinstance(value, K.AffineMap):
        return ("map", value)
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.nbytes > MAX_CONSTANT_BYTES or array.dtype == object:
            raise _Incomparable
        return ("array", array.dtype.str, array.shape, array.tobytes())
    raise _Incomparable


__all__ = ["MAX_CONSTANT_BYTES", "eliminate_common_subexpressions", "is_pure"]
