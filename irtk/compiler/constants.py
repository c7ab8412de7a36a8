"""Constants into dispatches without a buffer: fills of outputs, and constants in bodies.

- Fill fusion: a generic that only yields a constant and initializes other dispatches'
  outputs becomes a fill of those outputs' buffers, recorded just before each dispatch, when a
  HAL fill pattern (`fill_pattern`, which the host lowering uses too) writes the value.
- Inlining: host constants a body reads as scalars (captured scalars, splat tensors read
  through a map) become `arith.constant`s of the body. Other constants, and every
  `unfoldable` one, stay buffers.

`uses` counts the ops that use each value (by id) in the function, `defs` gives the op that
defines it.
"""
from __future__ import annotations

import struct

import numpy as np

from irtk.compiler import tir
from irtk.compiler.cluster import Cluster, Node
from irtk.types import SCALAR_TYPES

# A new output buffer that starts as a constant of at most this many bytes (a fill's pattern, a
# folded bias broadcast) is written by the host as it is allocated, from rodata the module
# holds at full length, instead of by a fill or copy command on the device: the output's
# dispatch can then be in a segment `__init` records once (host_dispatch.py), and a broadcast
# that only starts an output is worth folding at compile time (consteval.py).
HOST_INIT_BYTES = 16 << 10


def fill_pattern(element_type: str, value: float | int) -> tuple[int, int] | None:
    """(pattern, pattern length in bytes) that fills a buffer of `element_type` with `value`;
    None when no pattern of at most 4 bytes does (wide values with unequal halves)."""
    bits = SCALAR_TYPES[element_type].storage_bits
    if element_type in ("f32",):
        raw = struct.unpack("<I", struct.pack("<f", float(value)))[0]
    elif element_type == "f16":
        raw = int(np.array(value, np.float16).view(np.uint16))
    elif element_type == "bf16":
        raw = int(np.array(value, np.float32).view(np.uint32)) >> 16
    elif element_type == "f64":
        raw = struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    elif SCALAR_TYPES[element_type].is_int:
        raw = int(value) & ((1 << max(bits, 8)) - 1)
        if element_type == "i1":
            raw = 1 if int(value) else 0
        elif bits < 8:   # packed: the code repeated across the byte
            code = raw & ((1 << bits) - 1)
            raw = sum(code << (j * bits) for j in range(8 // bits))
    else:
        return None
    length = max(1, bits // 8)
    if length == 8:
        lo, hi = raw & 0xFFFFFFFF, raw >> 32
        return (lo, 4) if lo == hi else None
    return raw, length


def fuse_fills(order: list[Cluster], uses: dict[int, int], defs: dict[int, tir.Op]) -> None:
    """Turn each fill cluster into fills of the outputs it initializes; drop it when nothing
    else uses its result."""
    for f in list(order):
        value = _fill_value(f, defs)
        result = f.outputs[0].result
        if value is None or fill_pattern(result.tensor_type.element_type, value) is None:
            continue
        remaining = uses.get(result.id, 0)
        for x in order:
            if x is f:
                continue
            for o in x.outputs:
                if o.init is result:
                    o.init, o.fill = f.outputs[0].init, value
                    remaining -= 1
                    uses[result.id] -= 1
        if remaining == 0:
            order.remove(f)


def _fill_value(c: Cluster, defs: dict[int, tir.Op]) -> float | int | None:
    """The scalar a cluster fills its single output with, or None if it is no fill."""
    if len(c.outputs) != 1 or any(i.map is not None for i in c.inputs) \
            or not c.is_elementwise or c.inputs:
        return None
    y = c.outputs[0].yields
    if y is None:
        return None
    if y.name == "arith.constant":
        return y.float_value if SCALAR_TYPES[y.type].is_float else y.int_value
    if y.name == "kernel.param":
        d = _constant_of(y.param_value, defs)
        if d is not None:
            return d.attrs["value"]
    return None


def inline_constants(order: list[Cluster], defs: dict[int, tir.Op]) -> None:
    """Scalar constants and splat constant tensors that bodies read become body constants."""
    for c in order:
        for n in c.nodes():
            if n.name == "kernel.param":
                d = _constant_of(n.param_value, defs)
                if d is not None and not isinstance(d.attrs["value"], np.ndarray):
                    _make_constant(n, d.attrs["value"])
        for inp in list(c.inputs):
            d = _constant_of(inp.value, defs)
            if d is None or inp.map is None:
                continue
            arr = np.asarray(d.attrs["value"])
            if arr.size == 0 or not (arr == arr.flat[0]).all():
                continue
            scalar = arr.flat[0].item()
            const = Node("arith.constant", [], inp.value.tensor_type.element_type)
            _make_constant(const, scalar)
            c.replace_input(inp, const)
            c.inputs.remove(inp)


def _constant_of(value: tir.Value, defs: dict[int, tir.Op]) -> tir.Op | None:
    """The foldable constant op that defines `value`, if it is one."""
    d = defs.get(value.id)
    if d is not None and d.kind == "constant" and not d.attrs.get("unfoldable"):
        return d
    return None


def _make_constant(n: Node, value: float | int) -> None:
    n.name, n.args, n.ref = "arith.constant", [], None
    if SCALAR_TYPES[n.type].is_float:
        n.float_value = float(value)
    else:
        n.int_value = int(value)
