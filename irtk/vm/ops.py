"""Closures for the ops that only touch registers (arithmetic, casts, lists, buffers).

Each entry of `FACTORIES` takes an instruction's operands — register operands already turned
into absolute slots of the frame's register list — and returns `run(regs)`, which performs the
op and returns None. The interpreter builds these once per instruction at load, so running an
instruction is one Python call with no decoding. Control flow, calls and ops that need module
state (globals, rodata) are built in `interpreter.py`.
"""
from __future__ import annotations

import math
import struct
from typing import Any, Callable

from irtk.vm import numerics as n
from irtk.vm.isa import BANK_ZERO
from irtk.vm.ref_types import ref_type_name
from irtk.vm.refs import Trap, VMBuffer, VMList

Run = Callable[[list], None]
Factory = Callable[..., Run]
FACTORIES: dict[str, Factory] = {}


def _unary(fn: Callable[[Any], Any]) -> Factory:
    def make(d: int, a: int) -> Run:
        def run(r: list) -> None:
            r[d] = fn(r[a])
        return run
    return make


def _binary(fn: Callable[[Any, Any], Any]) -> Factory:
    def make(d: int, a: int, b: int) -> Run:
        def run(r: list) -> None:
            r[d] = fn(r[a], r[b])
        return run
    return make


def _ternary(fn: Callable[[Any, Any, Any], Any]) -> Factory:
    def make(d: int, a: int, b: int, c: int) -> Run:
        def run(r: list) -> None:
            r[d] = fn(r[a], r[b], r[c])
        return run
    return make


# -- constants, moves, select --------------------------------------------------------------------

def _const(d: int, value: Any) -> Run:
    def run(r: list) -> None:
        r[d] = value
    return run


def _mov(d: int, s: int) -> Run:
    def run(r: list) -> None:
        r[d] = r[s]
    return run


def _select(d: int, c: int, a: int, b: int) -> Run:
    def run(r: list) -> None:
        r[d] = r[a] if r[c] else r[b]
    return run


def _const_null(d: int) -> Run:
    return _const(d, None)


def _discard(slots: tuple[int, ...]) -> Run:
    def run(r: list) -> None:
        for s in slots:
            r[s] = None
    return run


for _bank in ("i32", "i64", "f32", "f64"):
    FACTORIES[f"const.{_bank}"] = _const
for _bank in ("i32", "i64", "f32", "f64", "ref"):
    FACTORIES[f"mov.{_bank}"] = _mov
    FACTORIES[f"select.{_bank}"] = _select
FACTORIES["const.ref.null"] = _const_null
FACTORIES["discard.refs"] = _discard


# -- integers ------------------------------------------------------------------------------------

def _add_i32(d: int, a: int, b: int) -> Run:
    def run(r: list) -> None:
        r[d] = ((r[a] + r[b] + 0x80000000) & 0xFFFFFFFF) - 0x80000000
    return run


def _sub_i32(d: int, a: int, b: int) -> Run:
    def run(r: list) -> None:
        r[d] = ((r[a] - r[b] + 0x80000000) & 0xFFFFFFFF) - 0x80000000
    return run


def _cmp(test: Callable[[Any, Any], bool]) -> Factory:
    return _binary(lambda a, b: 1 if test(a, b) else 0)


def _lt_s(d: int, a: int, b: int) -> Run:
    def run(r: list) -> None:
        r[d] = 1 if r[a] < r[b] else 0
    return run


def _int_ops(bank: str, bits: int) -> None:
    wrap = n.w32 if bits == 32 else n.w64
    mask = (1 << bits) - 1
    shift_mask = bits - 1
    table: dict[str, Callable[..., Any]] = {
        "add": lambda a, b: wrap(a + b),
        "sub": lambda a, b: wrap(a - b),
        "mul": lambda a, b: wrap(a * b),
        "div.s": lambda a, b: n.div_s(a, b, wrap),
        "div.u": lambda a, b: n.div_u(a, b, wrap, mask),
        "rem.s": lambda a, b: n.rem_s(a, b, wrap),
        "rem.u": lambda a, b: n.rem_u(a, b, wrap, mask),
        "and": lambda a, b: a & b,
        "or": lambda a, b: a | b,
        "xor": lambda a, b: a ^ b,
        "shl": lambda a, b: wrap(a << (b & shift_mask)),
        "shr.s": lambda a, b: a >> (b & shift_mask),
        "shr.u": lambda a, b: wrap((a & mask) >> (b & shift_mask)),
        "min.s": lambda a, b: a if a < b else b,
        "max.s": lambda a, b: a if a > b else b,
        "min.u": lambda a, b: a if (a & mask) < (b & mask) else b,
        "max.u": lambda a, b: a if (a & mask) > (b & mask) else b,
    }
    for name, fn in table.items():
        FACTORIES[f"{name}.{bank}"] = _binary(fn)
    FACTORIES[f"not.{bank}"] = _unary(lambda a: ~a)
    FACTORIES[f"neg.{bank}"] = _unary(lambda a: wrap(-a))
    FACTORIES[f"abs.{bank}"] = _unary(lambda a: wrap(abs(a)))
    compares: dict[str, Callable[[int, int], bool]] = {
        "cmp.eq": lambda a, b: a == b,
        "cmp.ne": lambda a, b: a != b,
        "cmp.lt.s": lambda a, b: a < b,
        "cmp.lte.s": lambda a, b: a <= b,
        "cmp.lt.u": lambda a, b: (a & mask) < (b & mask),
        "cmp.lte.u": lambda a, b: (a & mask) <= (b & mask),
    }
    for name, test in compares.items():
        FACTORIES[f"{name}.{bank}"] = _cmp(test)
    FACTORIES[f"cmp.nz.{bank}"] = _unary(lambda a: 1 if a else 0)
    FACTORIES[f"cmp.lt.s.{bank}"] = _lt_s


_int_ops("i32", 32)
_int_ops("i64", 64)
FACTORIES["add.i32"] = _add_i32
FACTORIES["sub.i32"] = _sub_i32


# -- floats --------------------------------------------------------------------------------------

_FLOAT_BINARY: dict[str, Callable[[float, float], float]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": n.fdiv, "rem": n.frem, "min": n.fmin, "max": n.fmax, "pow": n.fpow,
}
_FLOAT_UNARY: dict[str, Callable[[float], float]] = {
    "neg": lambda a: -a, "abs": abs, "exp": n.exp, "exp2": n.exp2, "log": n.log,
    "log2": n.log2, "sqrt": n.sqrt, "rsqrt": n.rsqrt, "tanh": math.tanh, "sin": n.sin,
    "cos": n.cos, "floor": n.floor, "ceil": n.ceil, "round": n.round_away,
}
_EXACT_IN_F32 = {"neg", "abs", "min", "max", "floor", "ceil", "round"}


def _float_ops(bank: str) -> None:
    rounded = bank == "f32"
    for name, fn in _FLOAT_BINARY.items():
        if rounded and name not in _EXACT_IN_F32:
            fn = (lambda f: lambda a, b: n.f32(f(a, b)))(fn)
        FACTORIES[f"{name}.{bank}"] = _binary(fn)
    for name, unary in _FLOAT_UNARY.items():
        if rounded and name not in _EXACT_IN_F32:
            unary = (lambda f: lambda a: n.f32(f(a)))(unary)
        FACTORIES[f"{name}.{bank}"] = _unary(unary)
    FACTORIES[f"fma.{bank}"] = _ternary(
        (lambda a, b, c: n.f32(n.fma(a, b, c))) if rounded else n.fma)
    FACTORIES[f"cmp.eq.{bank}"] = _cmp(lambda a, b: a == b)
    FACTORIES[f"cmp.ne.{bank}"] = _cmp(lambda a, b: a != b)
    FACTORIES[f"cmp.lt.{bank}"] = _cmp(lambda a, b: a < b)
    FACTORIES[f"cmp.lte.{bank}"] = _cmp(lambda a, b: a <= b)
    FACTORIES[f"cmp.nan.{bank}"] = _unary(lambda a: 1 if a != a else 0)


_float_ops("f32")
_float_ops("f64")
FACTORIES["cmp.eq.ref"] = _cmp(lambda a, b: a is b)
FACTORIES["cmp.nz.ref"] = _unary(lambda a: 0 if a is None else 1)


# -- casts ---------------------------------------------------------------------------------------

_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_CASTS: dict[str, Callable[[Any], Any]] = {
    "ext.i8.i32.s": lambda a: ((a & 0xFF) ^ 0x80) - 0x80,
    "ext.i8.i32.u": lambda a: a & 0xFF,
    "ext.i16.i32.s": lambda a: ((a & 0xFFFF) ^ 0x8000) - 0x8000,
    "ext.i16.i32.u": lambda a: a & 0xFFFF,
    "trunc.i32.i8": lambda a: a & 0xFF,
    "trunc.i32.i16": lambda a: a & 0xFFFF,
    "ext.i32.i64.s": lambda a: a,
    "ext.i32.i64.u": lambda a: a & n.M32,
    "trunc.i64.i32": n.w32,
    "cast.si32.f32": n.int_to_f32,
    "cast.ui32.f32": lambda a: n.int_to_f32(a & n.M32),
    "cast.si64.f32": n.int_to_f32,
    "cast.ui64.f32": lambda a: n.int_to_f32(a & n.M64),
    "cast.si32.f64": float,
    "cast.ui32.f64": lambda a: float(a & n.M32),
    "cast.si64.f64": float,
    "cast.ui64.f64": lambda a: float(a & n.M64),
    "cast.f32.f64": lambda a: a,
    "cast.f64.f32": n.f32,
    "bitcast.i32.f32": n.bits_i32_to_f32,
    "bitcast.f32.i32": n.bits_f32_to_i32,
    "bitcast.i64.f64": n.bits_i64_to_f64,
    "bitcast.f64.i64": n.bits_f64_to_i64,
}
for _src in ("f32", "f64"):
    _CASTS[f"cast.{_src}.si32"] = lambda a: n.float_to_int(a, _I32_MIN, _I32_MAX)
    _CASTS[f"cast.{_src}.ui32"] = lambda a: n.w32(n.float_to_int(a, 0, n.M32))
    _CASTS[f"cast.{_src}.si64"] = lambda a: n.float_to_int(a, _I64_MIN, _I64_MAX)
    _CASTS[f"cast.{_src}.ui64"] = lambda a: n.w64(n.float_to_int(a, 0, n.M64))
for _name, _fn in _CASTS.items():
    FACTORIES[_name] = _unary(_fn)


# -- lists ---------------------------------------------------------------------------------------

def _as_list(value: Any) -> VMList:
    if not isinstance(value, VMList):
        raise Trap(f"expected a !vm.list, got {ref_type_name(value)}")
    return value


def _list_get(bank: str) -> Factory:
    zero = BANK_ZERO[bank]
    want = int if bank in ("i32", "i64") else float if bank in ("f32", "f64") else None
    wrap_i32, round_f32 = bank == "i32", bank == "f32"

    def make(d: int, lst: int, index: int) -> Run:
        def run(r: list) -> None:
            items = _as_list(r[lst])
            items.check_index(r[index])
            value = items.items[r[index]]
            if value is None:
                value = zero
            elif want is not None:
                if type(value) is not want:
                    raise Trap(f"list element {r[index]} is not {bank}")
                if isinstance(value, int):
                    if wrap_i32:
                        value = n.w32(value)
                elif round_f32:
                    value = n.f32(value)
            elif isinstance(value, (int, float)):
                raise Trap(f"list element {r[index]} is not a ref")
            r[d] = value
        return run
    return make


def _list_set(lst: int, index: int, src: int) -> Run:
    def run(r: list) -> None:
        items = _as_list(r[lst])
        items.check_index(r[index])
        items.items[r[index]] = r[src]
    return run


def _list_alloc(d: int, capacity: int) -> Run:
    def run(r: list) -> None:
        if r[capacity] < 0:
            raise Trap(f"list.alloc with negative capacity {r[capacity]}")
        r[d] = VMList()
    return run


FACTORIES["list.alloc"] = _list_alloc
FACTORIES["list.size"] = _unary(lambda a: len(_as_list(a).items))
FACTORIES["list.resize"] = lambda lst, size: (lambda r: _as_list(r[lst]).resize(r[size]))
for _bank in ("i32", "i64", "f32", "f64", "ref"):
    FACTORIES[f"list.get.{_bank}"] = _list_get(_bank)
    FACTORIES[f"list.set.{_bank}"] = _list_set


# -- buffers -------------------------------------------------------------------------------------

def _as_buffer(value: Any) -> VMBuffer:
    if not isinstance(value, VMBuffer):
        raise Trap(f"expected a !vm.buffer, got {ref_type_name(value)}")
    return value


def _writable(value: Any) -> VMBuffer:
    buf = _as_buffer(value)
    if buf.readonly:
        raise Trap("buffer is read-only")
    return buf


_PACK = {"i32": struct.Struct("<i"), "i64": struct.Struct("<q"),
         "f32": struct.Struct("<f"), "f64": struct.Struct("<d"),
         "i8.s": struct.Struct("<b"), "i8.u": struct.Struct("<B"),
         "i16.s": struct.Struct("<h"), "i16.u": struct.Struct("<H")}


def _buffer_load(bank: str) -> Factory:
    packer = _PACK[bank]

    def make(d: int, buf: int, offset: int) -> Run:
        def run(r: list) -> None:
            b = _as_buffer(r[buf])
            b.check_range(r[offset], packer.size)
            r[d] = packer.unpack_from(b.data, r[offset])[0]
        return run
    return make


def _buffer_store(bank: str) -> Factory:
    packer = _PACK[bank]

    def make(buf: int, offset: int, src: int) -> Run:
        def run(r: list) -> None:
            b = _writable(r[buf])
            b.check_range(r[offset], packer.size)
            packer.pack_into(b.data, r[offset], r[src])
        return run
    return make


def _buffer_copy(src: int, src_offset: int, dst: int, dst_offset: int, length: int) -> Run:
    def run(r: list) -> None:
        s, t = _as_buffer(r[src]), _writable(r[dst])
        count = r[length]
        s.check_range(r[src_offset], count)
        t.check_range(r[dst_offset], count)
        t.data[r[dst_offset]:r[dst_offset] + count] = s.data[r[src_offset]:r[src_offset] + count]
    return run


def _narrow_store(bits: int) -> Factory:
    packer = struct.Struct("<B" if bits == 8 else "<H")
    mask = (1 << bits) - 1

    def make(buf: int, offset: int, src: int) -> Run:
        def run(r: list) -> None:
            b = _writable(r[buf])
            b.check_range(r[offset], packer.size)
            packer.pack_into(b.data, r[offset], r[src] & mask)
        return run
    return make


def _buffer_clone(d: int, src: int, offset: int, length: int) -> Run:
    def run(r: list) -> None:
        s = _as_buffer(r[src])
        start, count = r[offset], r[length]
        s.check_range(start, count)
        r[d] = VMBuffer.copy_of(s.data[start:start + count],
                                f"buffer.clone of {count} bytes")
    return run


def _buffer_fill(pattern_of: Callable[[Any], bytes], size: int) -> Factory:
    def make(buf: int, offset: int, length: int, value: int) -> Run:
        def run(r: list) -> None:
            b = _writable(r[buf])
            start, count = r[offset], r[length]
            b.check_range(start, count)
            if start % size or count % size:
                raise Trap(f"fill of {size}-byte values needs offset {start} and length {count} "
                           f"to be multiples of {size}")
            b.data[start:start + count] = pattern_of(r[value]) * (count // size)
        return run
    return make


def _buffer_compare(d: int, a: int, a_offset: int, b: int, b_offset: int, length: int) -> Run:
    def run(r: list) -> None:
        x, y = _as_buffer(r[a]), _as_buffer(r[b])
        count = r[length]
        x.check_range(r[a_offset], count)
        y.check_range(r[b_offset], count)
        r[d] = 1 if (x.data[r[a_offset]:r[a_offset] + count]
                     == y.data[r[b_offset]:r[b_offset] + count]) else 0
    return run


FACTORIES["buffer.alloc"] = _unary(VMBuffer.allocate)
FACTORIES["buffer.clone"] = _buffer_clone
FACTORIES["buffer.compare"] = _buffer_compare
FACTORIES["buffer.fill.i8"] = _buffer_fill(lambda v: bytes([v & 0xFF]), 1)
FACTORIES["buffer.fill.i16"] = _buffer_fill(lambda v: (v & 0xFFFF).to_bytes(2, "little"), 2)
FACTORIES["buffer.fill.i32"] = _buffer_fill(_PACK["i32"].pack, 4)
FACTORIES["buffer.fill.i64"] = _buffer_fill(_PACK["i64"].pack, 8)
FACTORIES["buffer.fill.f32"] = _buffer_fill(_PACK["f32"].pack, 4)
FACTORIES["buffer.fill.f64"] = _buffer_fill(_PACK["f64"].pack, 8)
for _narrow in ("i8.s", "i8.u", "i16.s", "i16.u"):
    FACTORIES[f"buffer.load.{_narrow}"] = _buffer_load(_narrow)
FACTORIES["buffer.store.i8"] = _narrow_store(8)
FACTORIES["buffer.store.i16"] = _narrow_store(16)
FACTORIES["buffer.length"] = _unary(lambda a: len(_as_buffer(a)))
FACTORIES["buffer.copy"] = _buffer_copy
for _bank in ("i32", "i64", "f32", "f64"):
    FACTORIES[f"buffer.load.{_bank}"] = _buffer_load(_bank)
    FACTORIES[f"buffer.store.{_bank}"] = _buffer_store(_bank)
