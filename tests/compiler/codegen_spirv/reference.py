"""A numpy reference for kernels: what the SPIR-V code must compute, for everything the kernel
IR contract allows (reductions, accumulators, gathers, params, dynamic extents, every type).

Values are numpy arrays over the parallel points: integers as int64 in their canonical
sign-extended form (wrapped to their width after every op), i1 as bool, floats as float64 —
f32 and f64 ops are evaluated in float64 without intermediate rounding, while f16, bf16 and the
f8/f4 types are rounded to their type after every op (round to nearest even, chosen among all
representable values by a table lookup, independently of the shader's bit arithmetic).
Reduction loops run sequentially in Python, in lexicographic order, over vectors of parallel
points. Storage helpers turn arrays into the bytes of each type's dense layout and back.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np

from irtk.compiler.codegen.spirv.float_formats import FORMATS
from irtk.compiler.kernel import Kernel, Op
from irtk.types import SCALAR_TYPES, FloatFormat

INT_WIDTH = {"i1": 1, "i4": 4, "i8": 8, "i16": 16, "i32": 32, "index": 32, "i64": 64}
FLOATS = ("f32", "f64", *FORMATS)


# --- narrow float rounding ---------------------------------------------------------------------

_TABLES: dict[str, tuple[np.ndarray, np.ndarray]] = {}


def _table(fmt: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
    """Finite non-negative values of the format, sorted, with their bit patterns."""
    if fmt.name not in _TABLES:
        values, bits = {}, {}
        for b in range(1 << fmt.bits):
            v = fmt.value(b)
            if math.isfinite(v) and (v > 0 or (v == 0 and math.copysign(1, v) > 0)):
                if v not in values or b < bits[v]:
                    values[v], bits[v] = v, b
        order = sorted(values)
        _TABLES[fmt.name] = (np.array(order), np.array([bits[v] for v in order]))
    return _TABLES[fmt.name]


def encode(kind: str, x: np.ndarray) -> np.ndarray:
    """Bits of `x` rounded to the narrow float `kind` (int64 array)."""
    fmt = FORMATS[kind]
    x = np.asarray(x, dtype=np.float64)
    if kind == "f16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).view(np.uint16).astype(np.int64)
    values, bits = _table(fmt)
    mag = np.abs(x)
    hi = np.clip(np.searchsorted(values, mag), 0, len(values) - 1)
    lo = np.clip(hi - 1, 0, len(values) - 1)
    d_lo, d_hi = np.abs(mag - values[lo]), np.abs(values[hi] - mag)
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (bits[hi] % 2 == 0) & (bits[lo] % 2 == 1))
    out = np.where(pick_hi, bits[hi], bits[lo])
    top, top_bits = values[-1], bits[-1]
    # The spacing just above the largest value: its binade's (e8m0: the next power of two).
    ulp = top if fmt.kind == "e8m0" else top - values[-2]
    over = (mag > top + ulp / 2) | ((mag == top + ulp / 2) & (top_bits % 2 == 1)) | np.isinf(x)
    sign_bit = 1 << (fmt.exponent_bits + fmt.mantissa_bits)
    negative = np.signbit(x)
    nan = np.isnan(x)
    if fmt.kind == "e8m0":
        bad = nan | over | (x <= 0)
        return np.where(bad, 0xFF, np.where(mag < values[0], bits[0], out)).astype(np.int64)
    over_bits = {"ieee": ((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits,
                 "fn": fmt.nan_bits & ~sign_bit, "fnuz": 0, "finite": top_bits}[fmt.kind]
    out = np.where(over, over_bits, out)
    if fmt.kind == "fnuz":
        out = np.where(over, fmt.nan_bits, np.where(negative & (out != 0), out | sign_bit, out))
    else:
        out = np.where(negative, out | sign_bit, out)
    if fmt.kind == "finite":
        return np.where(nan, 0, out).astype(np.int64)
    return np.where(nan, fmt.nan_bits, out).astype(np.int64)


def decode(kind: str, bits: np.ndarray) -> np.ndarray:
    fmt = FORMATS[kind]
    lookup = np.array([fmt.value(b) for b in range(1 << fmt.bits)])
    return lookup[np.asarray(bits, dtype=np.int64) & ((1 << fmt.bits) - 1)]


def round_float(kind: str, x: np.ndarray) -> np.ndarray:
    if kind in FORMATS:
        return decode(kind, encode(kind, x))
    return np.asarray(x, dtype=np.float64)


def wrap(x: np.ndarray, kind: str) -> np.ndarray:
    """Canonical value of integer type `kind`: sign-extended from its width (i1: bool)."""
    if kind == "i1":
        return (np.asarray(x).astype(np.int64) & 1) != 0
    width = INT_WIDTH[kind]
    if width == 64:
        x = np.asarray(x)
        return np.array([((int(v) + (1 << 63)) % (1 << 64)) - (1 << 63) for v in x.reshape(-1)],
                        dtype=np.int64).reshape(x.shape)
    x = np.asarray(x).astype(np.int64)
    mask = (1 << width) - 1
    x = x & mask
    return np.where(x >> (width - 1) != 0, x - (1 << width), x).astype(np.int64)


def unsigned(x: np.ndarray, kind: str) -> np.ndarray:
    """The unsigned reading (as Python ints for i64, int64 otherwise)."""
    if kind == "i1":
        return np.asarray(x).astype(np.int64)
    width = INT_WIDTH[kind]
    if width == 64:
        return np.array([int(v) % (1 << 64) for v in np.asarray(x).reshape(-1)],
                        dtype=object).reshape(np.shape(x))
    return np.asarray(x, dtype=np.int64) & ((1 << width) - 1)


# --- ops ---------------------------------------------------------------------------------------

def _int_binary(name: str, a, b, kind: str):
    w = INT_WIDTH[kind]
    big = np.asarray(a).astype(object), np.asarray(b).astype(object)
    A, B = big
    if kind == "i1":
        A, B = A.astype(np.int64) * -1, B.astype(np.int64) * -1  # signed i1: true is -1
        A, B = A.astype(object), B.astype(object)
    UA = np.array([int(v) % (1 << w) for v in A.reshape(-1)], dtype=object).reshape(A.shape)
    UB = np.array([int(v) % (1 << w) for v in B.reshape(-1)], dtype=object).reshape(B.shape)
    smin = -(1 << (w - 1))

    def each(fn, X, Y):
        return np.array([fn(int(x), int(y)) for x, y in zip(X.reshape(-1), Y.reshape(-1))],
                        dtype=object).reshape(X.shape)

    def sdiv(x, y):
        if y == 0:
            return 0
        if x == smin and y == -1:
            return smin
        q = abs(x) // abs(y)
        return q if (x < 0) == (y < 0) else -q

    def srem(x, y):
        return 0 if y == 0 or (x == smin and y == -1) else x - y * sdiv(x, y)
    table: dict[str, Callable] = {
        "arith.addi": lambda: A + B, "arith.subi": lambda: A - B, "arith.muli": lambda: A * B,
        "arith.andi": lambda: UA & UB, "arith.ori": lambda: UA | UB,
        "arith.xori": lambda: UA ^ UB,
        "arith.divsi": lambda: each(sdiv, A, B), "arith.remsi": lambda: each(srem, A, B),
        "arith.divui": lambda: each(lambda x, y: 0 if y == 0 else x // y, UA, UB),
        "arith.remui": lambda: each(lambda x, y: 0 if y == 0 else x % y, UA, UB),
        "arith.ceildivsi": lambda: each(lambda x, y: 0 if y == 0 else
                                        sdiv(x, y) + (1 if srem(x, y) and (x < 0) == (y < 0)
                                                      else 0), A, B),
        "arith.floordivsi": lambda: each(lambda x, y: 0 if y == 0 else
                                         sdiv(x, y) - (1 if srem(x, y) and (x < 0) != (y < 0)
                                                       else 0), A, B),
        "arith.ceildivui": lambda: each(lambda x, y: 0 if y == 0 else -(-x // y), UA, UB),
        "arith.maxsi": lambda: np.where(A > B, A, B), "arith.minsi": lambda: np.where(A < B, A, B),
        "arith.maxui": lambda: np.where(UA > UB, UA, UB),
        "arith.minui": lambda: np.where(UA < UB, UA, UB),
        "arith.shli": lambda: each(lambda x, s: 0 if s >= w else x << s, A, UB),
        "arith.shrui": lambda: each(lambda x, s: 0 if s >= w else x >> s, UA, UB),
        "arith.shrsi": lambda: each(lambda x, s: x >> min(s, w - 1), A, UB),
        "math.ipowi": lambda: each(_ipow, A, B),
    }
    out = table[name]()
    if kind == "i1":
        return (np.array([int(v) for v in out.reshape(-1)]).reshape(out.shape) & 1) != 0
    vals = [int(v) % (1 << w) for v in out.reshape(-1)]
    if w == 64:
        return np.array([v - (1 << 64) if v >> 63 else v for v in vals],
                        dtype=np.int64).reshape(out.shape)
    return wrap(np.array(vals, dtype=np.int64).reshape(out.shape), kind)


def _ipow(x: int, n: int) -> int:
    if n < 0:
        return 1 if x == 1 else ((-1 if n % 2 else 1) if x == -1 else 0)
    return x ** n if abs(x) < 2 or n < 64 else 0


def _cmpi(pred: str, a, b, kind: str):
    if pred.startswith("u"):
        x, y = unsigned(a, kind), unsigned(b, kind)
    elif kind == "i1":
        x, y = -np.asarray(a, dtype=np.int64), -np.asarray(b, dtype=np.int64)
    else:
        x, y = np.asarray(a), np.asarray(b)
    rel = pred if pred in ("eq", "ne") else pred[1:]
    return np.asarray({"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y,
                       "ge": x >= y}[rel], dtype=bool)


def _cmpf(pred: str, a, b):
    nan = np.isnan(a) | np.isnan(b)
    if pred in ("true", "false"):
        return np.full(np.broadcast(a, b).shape, pred == "true")
    if pred == "ord":
        return ~nan
    if pred == "uno":
        return nan
    rel = {"eq": a == b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b,
           "ne": (a != b) & ~nan}[pred[1:]]
    return rel | nan if pred[0] == "u" else rel & ~nan


def _fp_to_int(x, kind: str, signed: bool):
    w = INT_WIDTH[kind]
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
    if kind == "i1":
        lo, hi = (-1, 0) if signed else (0, 1)
    t = np.trunc(np.where(np.isnan(x), 0, x))
    t = np.clip(t, float(lo), float(hi))
    if w == 64:
        vals = [max(lo, min(hi, int(v))) for v in t.reshape(-1)]
        return wrap(np.array(vals, dtype=object).reshape(t.shape), kind)
    return wrap(t.astype(np.int64), kind)


def _bits_of(x, kind: str):
    if kind == "f32":
        return np.asarray(x, dtype=np.float64).astype(np.float32).view(np.uint32).astype(np.int64)
    if kind == "f64":
        return np.asarray(x, dtype=np.float64).view(np.int64)
    return encode(kind, x)


def _from_bits(bits, kind: str):
    bits = np.asarray(bits)
    if kind == "f32":
        return (bits.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.float32) \
            .astype(np.float64)
    if kind == "f64":
        return bits.astype(np.int64).view(np.float64)
    return decode(kind, bits)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _round_half_away(x):
    return np.where(np.isfinite(x), np.sign(x) * np.floor(np.abs(x) + 0.5), x)


_FLOAT_UNARY = {
    "arith.negf": np.negative, "math.exp": np.exp, "math.exp2": np.exp2,
    "math.expm1": np.expm1, "math.log": np.log, "math.log2": np.log2, "math.log10": np.log10,
    "math.log1p": np.log1p, "math.tanh": np.tanh, "math.sqrt": np.sqrt,
    "math.rsqrt": lambda x: 1.0 / np.sqrt(x), "math.absf": np.abs, "math.floor": np.floor,
    "math.ceil": np.ceil, "math.trunc": np.trunc, "math.roundeven": np.rint,
    "math.round": _round_half_away, "math.sin": np.sin, "math.cos": np.cos, "math.tan": np.tan,
    "math.atan": np.arctan, "math.erf": _erf,
}
_FLOAT_BINARY = {
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
    "arith.divf": np.divide, "arith.remf": np.fmod, "arith.maximumf": np.maximum,
    "arith.minimumf": np.minimum, "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin,
    "math.powf": np.power, "math.copysign": np.copysign, "math.atan2": np.arctan2,
}


def evaluate_op(op: Op, args: list, types: list[str], loops: list[np.ndarray],
                size: int) -> np.ndarray:
    name, rt = op.name, op.result_type
    with np.errstate(all="ignore"):
        if name == "arith.constant":
            if rt in FLOATS:
                return round_float(rt, np.full(size, op.float_value))
            return wrap(np.full(size, op.int_value, dtype=object if rt == "i64" else np.int64)
                        if rt != "i1" else np.full(size, op.int_value & 1), rt)
        if name == "linalg.index":
            return np.asarray(loops[op.int_value], dtype=np.int64)
        if name == "arith.select":
            return np.where(*args)
        if name == "arith.cmpf":
            return _cmpf(op.predicate, *args)
        if name == "arith.cmpi":
            return _cmpi(op.predicate, args[0], args[1], types[0])
        src = types[0] if types else rt
        if name in ("arith.extsi", "arith.trunci", "arith.index_cast"):
            x = args[0]
            if src == "i1":
                x = np.where(x, -1, 0)
            return wrap(x, rt)
        if name in ("arith.extui", "arith.index_castui"):
            x = args[0]
            x = np.where(x, 1, 0) if src == "i1" else unsigned(x, src)
            return wrap(x, rt) if INT_WIDTH[rt] >= INT_WIDTH[src] else wrap(args[0], rt)
        if name in ("arith.extf", "arith.truncf"):
            return round_float(rt, args[0])
        if name in ("arith.sitofp", "arith.uitofp"):
            x = args[0]
            if src == "i1":
                x = np.where(x, -1.0 if name == "arith.sitofp" else 1.0, 0.0)
            elif name == "arith.uitofp":
                x = unsigned(x, src)
            return round_float(rt, np.asarray(x, dtype=np.float64))
        if name in ("arith.fptosi", "arith.fptoui"):
            return _fp_to_int(args[0], rt, name == "arith.fptosi")
        if name == "arith.bitcast":
            x, s = args[0], src
            bits = _bits_of(x, s) if s in FLOATS else unsigned(x, s)
            return _from_bits(bits, rt) if rt in FLOATS else wrap(bits, rt)
        if name in ("math.ctlz", "math.cttz", "math.ctpop"):
            w = INT_WIDTH[src]
            u = [int(v) for v in unsigned(args[0], src).reshape(-1)]
            if name == "math.ctpop":
                r = [bin(v).count("1") for v in u]
            elif name == "math.ctlz":
                r = [w - v.bit_length() for v in u]
            else:
                r = [w if v == 0 else (v & -v).bit_length() - 1 for v in u]
            return wrap(np.array(r, dtype=np.int64), rt)
        if name == "math.absi":
            return wrap(np.abs(np.asarray(args[0]).astype(object)).astype(np.int64)
                        if rt != "i64" else np.abs(args[0]), rt)
        if name == "math.fma":
            return round_float(rt, args[0] * args[1] + args[2])
        if name == "math.fpowi":
            return round_float(rt, np.power(args[0], np.asarray(args[1], dtype=np.float64)))
        if name in _FLOAT_UNARY:
            return round_float(rt, _FLOAT_UNARY[name](args[0]))
        if name in _FLOAT_BINARY:
            return round_float(rt, _FLOAT_BINARY[name](args[0], args[1]))
        return _int_binary(name, args[0], args[1], rt)


# --- kernels -----------------------------------------------------------------------------------

def _extent(value, params: dict[str, int]) -> int:
    return value if isinstance(value, int) else int(params[value])


def _read(array: np.ndarray, kind: str) -> np.ndarray:
    if kind in FLOATS:
        return np.asarray(array, dtype=np.float64)
    if kind == "i1":
        return np.asarray(array).astype(bool)
    return np.asarray(array).astype(np.int64)


def run_reference(kernel: Kernel, inputs: list[np.ndarray],
                  outputs: list[np.ndarray] | None = None,
                  params: list[int | float] | None = None) -> list[np.ndarray]:
    """The outputs after the kernel runs on `inputs`, with `outputs` as their initial contents
    (zeros if not given) and `params` as the push constants (values, in order)."""
    params = list(params or [])
    named = {p.name: params[k] for k, p in enumerate(kernel.params)}
    ranges = [_extent(r, named) for r in kernel.loop_ranges]
    par, red = kernel.parallel_dims, kernel.reduction_dims
    par_ranges = [ranges[d] for d in par]
    size = math.prod(par_ranges)
    grids = np.indices(par_ranges).reshape(len(par), -1) if par else np.zeros((0, 1), np.int64)
    operands = kernel.inputs + kernel.outputs
    shapes = [tuple(_extent(d, named) for d in o.shape) for o in operands]
    arrays = [_read(a, o.element_type) for a, o in zip(inputs, kernel.inputs)]
    outs = [(_read(outputs[k], o.element_type) if outputs is not None
             else np.zeros(shapes[len(kernel.inputs) + k],
                           bool if o.element_type == "i1" else
                           np.float64 if o.element_type in FLOATS else np.int64)).copy()
            for k, o in enumerate(kernel.outputs)]
    symbols = [int(v) if kernel.params[k].type not in FLOATS else 0
               for k, v in enumerate(params)]

    def index(operand, loops: list) -> tuple:
        rows = operand.map.rows
        n = len(loops)
        return tuple(sum((row[j] * loops[j] for j in range(n)), np.zeros(size, np.int64))
                     + sum(row[n + s] * symbols[s] for s in range(operand.map.num_symbols))
                     + row[-1] for row in rows)

    base_loops: list = [None] * len(ranges)
    for i, d in enumerate(par):
        base_loops[d] = grids[i]
    out_index = [index(o, [x if x is not None else 0 for x in base_loops])
                 for o in kernel.outputs]
    current = [o[ix] if o.ndim else np.full(size, o[()]) for o, ix in zip(outs, out_index)]
    for point in itertools.product(*[range(ranges[d]) for d in red]):
        loops = list(base_loops)
        for d, v in zip(red, point):
            loops[d] = np.full(size, v, np.int64)
        values: list = []
        types: list[str] = []
        for i, o in enumerate(kernel.inputs):
            values.append(None if o.map is None else
                          (arrays[i][index(o, loops)] if arrays[i].ndim
                           else np.full(size, arrays[i][()])))
            types.append(o.element_type)
        values += current
        types += [o.element_type for o in kernel.outputs]
        for op in kernel.ops:
            if op.name == "kernel.param":
                p = kernel.params[op.int_value]
                v = params[op.int_value]
                value = np.full(size, v, dtype=np.float64 if p.type in FLOATS else np.int64)
            elif op.name == "tensor.extract":
                src = arrays[op.int_value]
                dims = shapes[op.int_value]
                idx = tuple(np.clip(np.asarray(values[v], dtype=np.int64), 0, n - 1)
                            for v, n in zip(op.operands, dims))
                value = src[idx] if src.ndim else np.full(size, src[()])
            else:
                value = evaluate_op(op, [values[v] for v in op.operands],
                                    [types[v] for v in op.operands], loops, size)
            values.append(np.broadcast_to(value, (size,)).copy())
            types.append(op.result_type)
        current = [values[v] for v in kernel.yields]
    for o, ix, cur in zip(outs, out_index, current):
        if o.ndim:
            o[ix] = cur
        elif size:
            o[()] = cur[-1]
    return outs


# --- storage -----------------------------------------------------------------------------------

_NP_INT = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "index": np.int32, "i64": np.int64}


def to_storage(array: np.ndarray, kind: str) -> bytes:
    """The dense bytes of `array` as a tensor of `kind`, padded to whole 32-bit words."""
    flat = np.asarray(array).reshape(-1)
    if kind in _NP_INT:
        data = flat.astype(np.int64).astype(_NP_INT[kind]).tobytes()
    elif kind == "i1":
        data = (flat.astype(bool)).astype(np.uint8).tobytes()
    elif kind == "i4":
        nibbles = (flat.astype(np.int64) & 0xF).astype(np.uint8)
        data = _pack_nibbles(nibbles)
    elif kind == "f32":
        data = flat.astype(np.float32).tobytes()
    elif kind == "f64":
        data = flat.astype(np.float64).tobytes()
    else:
        bits = encode(kind, flat.astype(np.float64))
        width = SCALAR_TYPES[kind].storage_bits
        if width == 4:
            data = _pack_nibbles(bits.astype(np.uint8))
        else:
            data = bits.astype(np.uint16 if width == 16 else np.uint8).tobytes()
    return data + bytes(-len(data) % 4)


def _pack_nibbles(nibbles: np.ndarray) -> bytes:
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8).tobytes()


def from_storage(data: bytes, kind: str, shape: tuple[int, ...]) -> np.ndarray:
    """The inverse of `to_storage`: int64 / bool / float64 values in the reference's form."""
    count = math.prod(shape)
    width = SCALAR_TYPES[kind].storage_bits
    raw = np.frombuffer(data, dtype=np.uint8)
    if kind in _NP_INT:
        out = np.frombuffer(data[:count * width // 8], _NP_INT[kind]).astype(np.int64)
    elif kind == "i1":
        out = raw[:count] != 0
    elif kind == "f32":
        out = np.frombuffer(data[:4 * count], np.float32).astype(np.float64)
    elif kind == "f64":
        out = np.frombuffer(data[:8 * count], np.float64).copy()
    else:
        if width == 4:
            bits = np.stack([raw & 0xF, raw >> 4], axis=1).reshape(-1)[:count].astype(np.int64)
        elif width == 8:
            bits = raw[:count].astype(np.int64)
        else:
            bits = np.frombuffer(data[:2 * count], np.uint16).astype(np.int64)
        out = bits if kind == "i4" else decode(kind, bits)
        if kind == "i4":
            out = wrap(bits, "i4")
    return out.reshape(shape)
