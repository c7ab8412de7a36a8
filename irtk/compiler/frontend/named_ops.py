"""linalg named ops -> `generic`s with MLIR's semantics.

Contractions (matmul family, quantized matmul) extend their operands to the output's element
type first (signed unless `cast = #linalg.type_fn<cast_unsigned>`), then multiply-accumulate.
Convolutions and poolings index their input with `out * stride + window * dilation`. softmax
becomes max-reduce, exp(x - max), sum-reduce, divide.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import (AffineMapAttr, ArrayAttr, DenseIntOrFPElementsAttr,
                                   IntegerAttr, StringAttr)
from xdsl.ir import SSAValue

from irtk.compiler import tir
from irtk.compiler.frontend.body import Body, Unsupported, is_float
from irtk.compiler.frontend.body_translation import translate_block
from irtk.compiler.frontend.convert import affine_map, int_array
from irtk.compiler.frontend.dialects.linalg import NamedOp, TypeFn, TypeFnAttr
from irtk.compiler.frontend.import_context import ImportContext
from irtk.body_ops import SCALAR_OPS
from irtk.compiler.kernel import AffineMap


def _map(n: int, rows: list[list[int]]) -> AffineMap:
    return AffineMap(n, tuple(tuple(r) for r in rows))


def _dims_map(n: int, dims: list[int]) -> AffineMap:
    """Each result is loop dim d."""
    return _map(n, [[1 if j == d else 0 for j in range(n)] + [0] for d in dims])


def _ints(op: NamedOp, key: str, default: Sequence[int] | None = None) -> list[int]:
    attr = op.attributes.get(key)
    if attr is None:
        if default is None:
            raise Unsupported(f"{op.name} needs '{key}'", op)
        return list(default)
    if isinstance(attr, DenseIntOrFPElementsAttr):
        values = attr.get_values()
        if all(isinstance(v, int) for v in values):
            return [int(v) for v in values]
    ints = int_array(attr)
    if ints is not None:
        return ints
    raise Unsupported(f"{op.name}: cannot read '{key}'", op)


def _indexing_maps(op: NamedOp) -> list[AffineMap]:
    """A contraction's `indexing_maps` attribute, converted (Unsupported unless it is a list
    of affine maps)."""
    attr = op.attributes.get("indexing_maps")
    maps = [m for m in attr.data if isinstance(m, AffineMapAttr)] \
        if isinstance(attr, ArrayAttr) else []
    if not isinstance(attr, ArrayAttr) or len(maps) != len(attr.data):
        raise Unsupported(f"{op.name}: indexing_maps must be a list of affine maps", op)
    return [affine_map(m.data, op) for m in maps]


def _unsigned(op: NamedOp) -> bool:
    cast = op.attributes.get("cast")
    return isinstance(cast, TypeFnAttr) and cast.data == TypeFn.CAST_UNSIGNED


def _elt(v: tir.Value) -> str:
    return v.type.element_type if isinstance(v.type, tir.TensorType) else v.type.name


# Contractions: loop dims, then (input maps' dims, output dims), reduction dims.
_CONTRACTIONS = {
    "matmul": ("m n k", "m k", "k n", "m n"),
    "matmul_transpose_a": ("m n k", "k m", "k n", "m n"),
    "matmul_transpose_b": ("m n k", "m k", "n k", "m n"),
    "batch_matmul": ("b m n k", "b m k", "b k n", "b m n"),
    "batch_matmul_transpose_a": ("b m n k", "b k m", "b k n", "b m n"),
    "batch_matmul_transpose_b": ("b m n k", "b m k", "b n k", "b m n"),
    "batch_reduce_matmul": ("m n b k", "b m k", "b k n", "m n"),
    "matvec": ("m k", "m k", "k", "m"),
    "vecmat": ("n k", "k", "k n", "n"),
    "batch_matvec": ("b m k", "b m k", "b k", "b m"),
    "batch_vecmat": ("b n k", "b k", "b k n", "b n"),
    "dot": ("k", "k", "k", ""),
    "quantized_matmul": ("m n k", "m k", "k n", "m n"),
    "quantized_batch_matmul": ("b m n k", "b m k", "b k n", "b m n"),
}


def _contraction(imp: ImportContext, op: NamedOp, short: str) -> list[tir.Value]:
    loops, a_dims, b_dims, c_dims = (s.split() for s in _CONTRACTIONS[short])
    n = len(loops)
    reduction = set(loops) - set(c_dims)
    iterators = ["reduction" if d in reduction else "parallel" for d in loops]
    if "indexing_maps" in op.attributes:
        maps = _indexing_maps(op)
        if len(maps) != 3 or any(m.num_dims != n for m in maps):
            raise Unsupported(f"{op.name}: indexing_maps do not fit", op)
        # The reduction dims are those the output map does not use.
        used = maps[2].used_dims()
        iterators = ["parallel" if d in used else "reduction" for d in range(n)]
    else:
        maps = [_dims_map(n, [loops.index(d) for d in dims]) for dims in (a_dims, b_dims, c_dims)]
    a, b = imp.value(op.inputs[0]), imp.value(op.inputs[1])
    c = imp.value(op.outputs[0])
    out_t = _elt(c)
    unsigned = _unsigned(op)
    body = Body(2, 1)
    captures: list[tir.Value] = []
    x = body.cast(body.arg(0), _elt(a), out_t, unsigned)
    y = body.cast(body.arg(1), _elt(b), out_t, unsigned)
    if short.startswith("quantized"):
        azp, bzp = imp.value(op.inputs[2]), imp.value(op.inputs[3])
        x = body.binary("sub", x, body.cast(imp.capture(body, captures, azp), _elt(azp), out_t), out_t)
        y = body.binary("sub", y, body.cast(imp.capture(body, captures, bzp), _elt(bzp), out_t), out_t)
    acc = body.binary("add", body.out(0), body.binary("mul", x, y, out_t), out_t)
    return imp.generic([(a, maps[0]), (b, maps[1])], [(c, maps[2])], iterators, body, [acc],
                       captures, op)


# Convolutions and poolings. Loop names; operand index expressions, where "oh+kh" is the spatial
# window expression oh * stride + kh * dilation for spatial dim (oh, kh).
_CONVS = {
    "conv_1d": ("ow kw", "ow+kw", "kw", "ow"),
    "conv_2d": ("oh ow kh kw", "oh+kh ow+kw", "kh kw", "oh ow"),
    "conv_3d": ("od oh ow kd kh kw", "od+kd oh+kh ow+kw", "kd kh kw", "od oh ow"),
    "conv_1d_nwc_wcf": ("n ow f kw c", "n ow+kw c", "kw c f", "n ow f"),
    "conv_1d_ncw_fcw": ("n f ow c kw", "n c ow+kw", "f c kw", "n f ow"),
    "conv_2d_nhwc_hwcf": ("n oh ow f kh kw c", "n oh+kh ow+kw c", "kh kw c f", "n oh ow f"),
    "conv_2d_nhwc_fhwc": ("n oh ow f kh kw c", "n oh+kh ow+kw c", "f kh kw c", "n oh ow f"),
    "conv_2d_nchw_fchw": ("n f oh ow c kh kw", "n c oh+kh ow+kw", "f c kh kw", "n f oh ow"),
    "conv_2d_ngchw_fgchw": ("n g f oh ow c kh kw", "n g c oh+kh ow+kw", "f g c kh kw",
                            "n g f oh ow"),
    # Grouped convolutions as torch-mlir writes them for `groups > 1` (NCHW reshaped to NGCHW).
    "conv_2d_ngchw_gfchw": ("n g f oh ow c kh kw", "n g c oh+kh ow+kw", "g f c kh kw",
                            "n g f oh ow"),
    "conv_2d_nhwgc_gfhwc": ("n oh ow g f kh kw c", "n oh+kh ow+kw g c", "g f kh kw c",
                            "n oh ow g f"),
    "conv_3d_ndhwc_dhwcf": ("n od oh ow f kd kh kw c", "n od+kd oh+kh ow+kw c",
                            "kd kh kw c f", "n od oh ow f"),
    "depthwise_conv_1d_nwc_wc": ("n ow c kw", "n ow+kw c", "kw c", "n ow c"),
    "depthwise_conv_1d_ncw_cw": ("n c ow kw", "n c ow+kw", "c kw", "n c ow"),
    "depthwise_conv_2d_nhwc_hwc": ("n oh ow c kh kw", "n oh+kh ow+kw c", "kh kw c", "n oh ow c"),
    "depthwise_conv_2d_nchw_chw": ("n c oh ow kh kw", "n c oh+kh ow+kw", "c kh kw", "n c oh ow"),
    "depthwise_conv_3d_ndhwc_dhwc": ("n od oh ow c kd kh kw", "n od+kd oh+kh ow+kw c",
                                     "kd kh kw c", "n od oh ow c"),
}
_POOL_LAYOUTS = {
    "nhwc": ("n oh ow c kh kw", "n oh+kh ow+kw c", "kh kw", "n oh ow c"),
    "nchw": ("n c oh ow kh kw", "n c oh+kh ow+kw", "kh kw", "n c oh ow"),
    "nwc": ("n ow c kw", "n ow+kw c", "kw", "n ow c"),
    "ncw": ("n c ow kw", "n c ow+kw", "kw", "n c ow"),
    "ndhwc": ("n od oh ow c kd kh kw", "n od+kd oh+kh ow+kw c", "kd kh kw", "n od oh ow c"),
}


def _window_maps(op: NamedOp, spec: tuple[str, str, str, str]
                 ) -> tuple[list[AffineMap], list[str]]:
    loops, in_spec, f_spec, out_spec = (s.split() for s in spec)
    n = len(loops)
    spatial = [e for e in in_spec if "+" in e]
    strides = _ints(op, "strides", [1] * len(spatial))
    dilations = _ints(op, "dilations", [1] * len(spatial))
    if len(strides) != len(spatial) or len(dilations) != len(spatial):
        raise Unsupported(f"{op.name}: strides/dilations need {len(spatial)} entries", op)
    rows = []
    for e in in_spec:
        r = [0] * (n + 1)
        if "+" in e:
            o, k = e.split("+")
            s = spatial.index(e)
            r[loops.index(o)] = strides[s]
            r[loops.index(k)] = dilations[s]
        else:
            r[loops.index(e)] = 1
        rows.append(r)
    maps = [_map(n, rows), _dims_map(n, [loops.index(d) for d in f_spec]),
            _dims_map(n, [loops.index(d) for d in out_spec])]
    iterators = ["parallel" if d in out_spec else "reduction" for d in loops]
    return maps, iterators


def _conv(imp: ImportContext, op: NamedOp, short: str) -> list[tir.Value]:
    """`out += ext(x) * ext(w)`; the `_q` variants subtract the input and filter zero points
    (their third and fourth inputs) first."""
    maps, iterators = _window_maps(op, _CONVS[short.removesuffix("_q")])
    x, w = imp.value(op.inputs[0]), imp.value(op.inputs[1])
    out = imp.value(op.outputs[0])
    t = _elt(out)
    body = Body(2, 1)
    captures: list[tir.Value] = []
    a = body.cast(body.arg(0), _elt(x), t)
    b = body.cast(body.arg(1), _elt(w), t)
    if short.endswith("_q"):
        xzp, wzp = imp.value(op.inputs[2]), imp.value(op.inputs[3])
        a = body.binary("sub", a, body.cast(imp.capture(body, captures, xzp), _elt(xzp), t), t)
        b = body.binary("sub", b, body.cast(imp.capture(body, captures, wzp), _elt(wzp), t), t)
    acc = body.binary("add", body.out(0), body.binary("mul", a, b, t), t)
    return imp.generic([(x, maps[0]), (w, maps[1])], [(out, maps[2])], iterators, body, [acc],
                       captures, op)


def _pooling(imp: ImportContext, op: NamedOp, short: str) -> list[tir.Value]:
    _, layout, kind = short.split("_", 2)
    maps, iterators = _window_maps(op, _POOL_LAYOUTS[layout])
    x, window = imp.value(op.inputs[0]), imp.value(op.inputs[1])
    out = imp.value(op.outputs[0])
    t = _elt(out)
    body = Body(2, 1)
    v = body.cast(body.arg(0), _elt(x), t, unsigned=kind.endswith("unsigned"))
    if kind == "sum":
        r = body.binary("add", body.out(0), v, t)
    elif is_float(t):
        r = body.add("arith.maximumf" if kind == "max" else "arith.minimumf", (body.out(0), v), t)
    else:
        name = {"max": "arith.maxsi", "min": "arith.minsi", "max_unsigned": "arith.maxui",
                "min_unsigned": "arith.minui"}[kind]
        r = body.add(name, (body.out(0), v), t)
    return imp.generic([(x, maps[0]), (window, maps[1])], [(out, maps[2])], iterators, body,
                       [r], [], op)


# Elementwise named ops: body from the (converted) arguments, of element type `t`.
ElementwiseBody = Callable[[Body, list[int], str], int]


def _unary(name_f: str, name_i: str | None = None) -> ElementwiseBody:
    def build(body: Body, args: list[int], t: str) -> int:
        if not is_float(t):
            if name_i is None:
                raise Unsupported(f"needs a float type, got {t}")
            return body.add(name_i, (args[0],), t)
        return body.add(name_f, (args[0],), t)
    return build


def _binary(kind: str) -> ElementwiseBody:
    return lambda body, args, t: body.binary(kind, args[0], args[1], t)


_ELEMENTWISE: dict[str, ElementwiseBody] = {
    "add": _binary("add"), "sub": _binary("sub"), "mul": _binary("mul"), "div": _binary("div"),
    "max": _binary("max"), "min": _binary("min"),
    "div_unsigned": lambda body, a, t: body.add("arith.divui", (a[0], a[1]), t),
    "powf": lambda body, a, t: body.add("math.powf", (a[0], a[1]), t),
    "exp": _unary("math.exp"), "log": _unary("math.log"), "abs": _unary("math.absf", "math.absi"),
    "ceil": _unary("math.ceil"), "floor": _unary("math.floor"), "negf": _unary("arith.negf"),
    "round": _unary("math.round"), "sqrt": _unary("math.sqrt"), "rsqrt": _unary("math.rsqrt"),
    "tanh": _unary("math.tanh"), "erf": _unary("math.erf"),
    "reciprocal": lambda body, a, t: body.add("arith.divf", (body.const(1.0, t), a[0]), t),
    "square": lambda body, a, t: body.binary("mul", a[0], a[0], t),
    "copy": lambda body, a, t: a[0],
}


def _elementwise(imp: ImportContext, op: NamedOp, short: str) -> list[tir.Value]:
    out = imp.value(op.outputs[0])
    t = _elt(out)
    rank = len(out.tensor_type.shape)
    ident = _dims_map(rank, list(range(rank)))
    ins = [imp.value(v) for v in op.inputs]
    body = Body(len(ins), 1)
    if short == "select":
        cond = body.arg(0)
        a = body.cast(body.arg(1), _elt(ins[1]), t)
        b = body.cast(body.arg(2), _elt(ins[2]), t)
        r = body.add("arith.select", (cond, a, b), t)
    else:
        args = [body.cast(body.arg(i), _elt(v), t, _unsigned(op)) for i, v in enumerate(ins)]
        try:
            r = _ELEMENTWISE[short](body, args, t)
        except Unsupported as e:
            raise Unsupported(f"{op.name}: {e}", op) from None
    return imp.generic([(v, ident) for v in ins], [(out, ident)], ["parallel"] * rank, body,
                       [r], [], op)


def _fill(imp: ImportContext, op: NamedOp, short: str) -> list[tir.Value]:
    out = imp.value(op.outputs[0])
    value = imp.value(op.inputs[0])
    rank = len(out.tensor_type.shape)
    body = Body(0, 1)
    captures: list[tir.Value] = []
    v = body.cast(imp.capture(body, captures, value), _elt(value), _elt(out))
    return imp.generic([], [(out, _dims_map(rank, list(range(rank))))], ["parallel"] * rank,
                       body, [v], captures, op)


def _transpose(imp: ImportContext, op: NamedOp, short: str) -> list[tir.Value]:
    x, out = imp.value(op.inputs[0]), imp.value(op.outputs[0])
    perm = _ints(op, "permutation")
    rank = len(perm)
    if sorted(perm) != list(range(rank)):
        raise Unsupported(f"{op.name}: permutation {perm} is not a permutation", op)
    # result dim i is input dim perm[i]: loop i reads input dim perm[i].
    in_dims = [perm.index(j) for j in range(rank)]
    body = Body(1, 1)
    return imp.generic([(x, _dims_map(rank, in_dims))], [(out, _dims_map(rank, list(range(rank))))],
                       ["parallel"] * rank, body, [body.arg(0)], [], op)


def _broadcast(imp: ImportContext, op: NamedOp, short: str) -> list[tir.Value]:
    x, out = imp.value(op.inputs[0]), imp.value(op.outputs[0])
    added = _ints(op, "dimensions")
    rank = len(out.tensor_type.shape)
    body = Body(1, 1)
    return imp.generic([(x, _dims_map(rank, [d for d in range(rank) if d not in added]))],
                       [(out, _dims_map(rank, list(range(rank))))], ["parallel"] * rank, body,
                       [body.arg(0)], [], op)


def _region_or_fn(imp: ImportContext, op: NamedOp, body: Body, env_args: list[int],
                  captures: list[tir.Value], result_type: str) -> list[int]:
    """The yielded values of a map/reduce body: its region, or the short form `{fn}`, which
    applies scalar op `fn` to the block arguments in order."""
    if op.body.blocks:
        block = op.body.blocks[0]
        env: dict[SSAValue, int] = {a: v for a, v in zip(block.args, env_args)}
        return translate_block(imp, body, block, env, captures, {})
    fn = op.attributes.get("fn")   # the parser makes it a StringAttr
    if fn is None:
        raise Unsupported(f"{op.name} has neither a body nor a function", op)
    name = fn.data if isinstance(fn, StringAttr) else str(fn)
    if name not in SCALAR_OPS or name in ("arith.cmpf", "arith.cmpi"):
        raise Unsupported(f"{op.name}: unsupported function {name}", op)
    return [body.add(name, env_args, result_type)]


def _reduce(imp: ImportContext, op: NamedOp, short: str) -> list[tir.Value]:
    ins = [imp.value(v) for v in op.inputs]
    outs = [imp.value(v) for v in op.outputs]
    reduced = _ints(op, "dimensions")
    rank = len(ins[0].tensor_type.shape)
    kept = [d for d in range(rank) if d not in reduced]
    body = Body(len(ins), len(outs))
    captures: list[tir.Value] = []
    yields = _region_or_fn(imp, op, body, [body.arg(i) for i in range(len(ins))]
                           + [body.out(k) for k in range(len(outs))], captures, _elt(outs[0]))
    ident = _dims_map(rank, list(range(rank)))
    return imp.generic([(v, ident) for v in ins], [(o, _dims_map(rank, kept)) for o in outs],
                       ["reduction" if d in reduced else "parallel" for d in range(rank)],
                       body, yields, captures, op)


def _linalg_map(imp: ImportContext, op: NamedOp, short: str) -> list[tir.Value]:
    ins = [imp.value(v) for v in op.inputs]
    out = imp.value(op.outputs[0])
    rank = len(out.tensor_type.shape)
    ident = _dims_map(rank, list(range(rank)))
    body = Body(len(ins), 1)
    captures: list[tir.Value] = []
    yields = _region_or_fn(imp, op, body, [body.arg(i) for i in range(len(ins))], captures,
                           _elt(out))
    return imp.generic([(v, ident) for v in ins], [(out, ident)], ["parallel"] * rank, body,
                       yields, captures, op)


def _softmax(imp: ImportContext, op: NamedOp, short: str) -> list[tir.Value]:
    """max-reduce, exp(x - max), sum-reduce, divide (MLIR's decomposition)."""
    x, out = imp.value(op.inputs[0]), imp.value(op.outputs[0])
    t = _elt(out)
    if not is_float(t):
        raise Unsupported(f"{op.name} needs a float type", op)
    dim_attr = op.attributes.get("dimension")   # verified: a dim of the output
    if not isinstance(dim_attr, IntegerAttr):
        raise Unsupported(f"{op.name} needs 'dimension'", op)
    dim = int(dim_attr.value.data)
    rank = len(x.tensor_type.shape)
    dims = imp.dims(x, op)
    kept = [d for d in range(rank) if d != dim]
    ident = _dims_map(rank, list(range(rank)))
    reduced = _dims_map(rank, kept)
    red_ident = _dims_map(len(kept), list(range(len(kept))))
    iterators = ["reduction" if d == dim else "parallel" for d in range(rank)]

    def filled(value: float) -> tir.Value:
        init = imp.empty([dims[d] for d in kept], t, op)
        body = Body(0, 1)
        return imp.generic([], [(init, red_ident)], ["parallel"] * len(kept), body,
                           [body.const(value, t)], [], op)[0]

    body = Body(1, 1)
    m = imp.generic([(x, ident)], [(filled(float("-inf")), reduced)], iterators, body,
                    [body.add("arith.maxnumf", (body.arg(0), body.out(0)), t)], [], op)[0]
    body = Body(2, 1)
    e = body.add("math.exp", (body.add("arith.subf", (body.arg(0), body.arg(1)), t),), t)
    exps = imp.generic([(x, ident), (m, reduced)], [(imp.empty(dims, t, op), ident)],
                       ["parallel"] * rank, body, [e], [], op)[0]
    body = Body(1, 1)
    s = imp.generic([(exps, ident)], [(filled(0.0), reduced)], iterators, body,
                    [body.add("arith.addf", (body.arg(0), body.out(0)), t)], [], op)[0]
    body = Body(2, 1)
    return imp.generic([(exps, ident), (s, reduced)], [(out, ident)], ["parallel"] * rank, body,
                       [body.add("arith.divf", (body.arg(0), body.arg(1)), t)], [], op)


def lower(imp: ImportContext, op: NamedOp) -> list[tir.Value]:
    short = op.name.removeprefix("linalg.")
    if any(not isinstance(imp.value(v).type, tir.TensorType) for v in op.outputs):
        raise Unsupported(f"{op.name} on buffers is not supported", op)
    if short in _CONTRACTIONS:
        return _contraction(imp, op, short)
    if short.removesuffix("_q") in _CONVS:
        return _conv(imp, op, short)
    if short.startswith("pooling_"):
        return _pooling(imp, op, short)
    if short in _ELEMENTWISE or short == "select":
        return _elementwise(imp, op, short)
    handler = {"fill": _fill, "transpose": _transpose, "broadcast": _broadcast,
               "reduce": _reduce, "map": _linalg_map, "softmax": _softmax}.get(short)
    if handler is None:
        raise Unsupported(f"unsupported op '{op.name}'", op)
    return handler(imp, op, short)



# ---- structure for verification (verifier.py) ------------------------------------------------
_UNARY = {"exp", "log", "abs", "ceil", "floor", "negf", "round", "sqrt", "rsqrt", "tanh", "erf",
          "reciprocal", "square", "copy"}
_BINARY_OPS = {"add", "sub", "mul", "div", "div_unsigned", "max", "min", "powf"}


def operand_counts(short: str, num_inputs: int) -> tuple[int, int] | None:
    """(inputs, outputs) that linalg.<short> takes; None where any count of inputs is fine."""
    if short in _CONTRACTIONS:
        return (4 if short.startswith("quantized") else 2), 1
    if short.removesuffix("_q") in _CONVS:
        return (4 if short.endswith("_q") else 2), 1
    if short.startswith("pooling_") or short in _BINARY_OPS:
        return 2, 1
    if short in _UNARY or short in ("fill", "transpose", "broadcast", "softmax"):
        return 1, 1
    if short == "select":
        return 3, 1
    if short == "reduce":
        return max(num_inputs, 1), max(num_inputs, 1)
    return None   # linalg.map: any number of inputs, one output


def structure(op: NamedOp, ranks: list[int]) -> tuple[Sequence[AffineMap | None], list[str]]:
    """The indexing maps (None for a scalar operand) and iterator types linalg gives `op`,
    whose operands have `ranks`; Unsupported for attributes that do not fit."""
    short = op.name.removeprefix("linalg.")
    n_in = len(op.inputs)
    out_rank = ranks[n_in] if len(ranks) > n_in else 0
    if short in _CONTRACTIONS:
        loops, a_dims, b_dims, c_dims = (s.split() for s in _CONTRACTIONS[short])
        n = len(loops)
        if "indexing_maps" in op.attributes:
            maps = _indexing_maps(op)
            if len(maps) != 3 or any(m.num_dims != maps[0].num_dims for m in maps):
                raise Unsupported(f"{op.name}: indexing_maps must be 3 maps over the same "
                                  "loops", op)
            used = maps[2].used_dims()
            iterators = ["parallel" if d in used else "reduction"
                         for d in range(maps[0].num_dims)]
        else:
            maps = [_dims_map(n, [loops.index(d) for d in dims])
                    for dims in (a_dims, b_dims, c_dims)]
            iterators = ["reduction" if d not in c_dims else "parallel" for d in loops]
        if short.startswith("quantized"):
            return [maps[0], maps[1], None, None, maps[2]], iterators
        return maps, iterators
    if short.removesuffix("_q") in _CONVS:
        maps, iterators = _window_maps(op, _CONVS[short.removesuffix("_q")])
        if short.endswith("_q"):
            return [maps[0], maps[1], None, None, maps[2]], iterators
        return maps, iterators
    if short.startswith("pooling_"):
        layout = short.split("_")[1]
        return _window_maps(op, _POOL_LAYOUTS[layout])
    ident = _dims_map(out_rank, list(range(out_rank)))
    parallel = ["parallel"] * out_rank
    if short in _ELEMENTWISE or short in ("select", "map"):
        return [ident] * (n_in + 1), parallel
    if short == "fill":
        return [None, ident], parallel
    if short == "softmax":
        dim = op.attributes.get("dimension")
        if not isinstance(dim, IntegerAttr) or not 0 <= dim.value.data < out_rank:
            raise Unsupported(f"{op.name}: dimension must be a dim of the rank-{out_rank} "
                              "output", op)
        return [ident, ident], parallel
    if short == "transpose":
        perm = _ints(op, "permutation")
        if sorted(perm) != list(range(len(perm))) or len(perm) != out_rank:
            raise Unsupported(f"{op.name}: permutation {perm} is not a permutation of the "
                              f"output's {out_rank} dims", op)
        return [_dims_map(out_rank, [perm.index(j) for j in range(out_rank)]), ident], parallel
    if short == "broadcast":
        added = _ints(op, "dimensions")
        if len(set(added)) != len(added) or any(not 0 <= d < out_rank for d in added):
            raise Unsupported(f"{op.name}: dimensions {added} must be distinct dims of the "
                              f"rank-{out_rank} output", op)
        return [_dims_map(out_rank, [d for d in range(out_rank) if d not in added]), ident], \
            parallel
    if short == "reduce":
        rank = ranks[0]
        reduced = _ints(op, "dimensions")
        if len(set(reduced)) != len(reduced) or any(not 0 <= d < rank for d in reduced):
            raise Unsupported(f"{op.name}: dimensions {reduced} must be distinct dims of the "
                              f"rank-{rank} input", op)
        kept = _dims_map(rank, [d for d in range(rank) if d not in reduced])
        return ([_dims_map(rank, list(range(rank)))] * n_in + [kept] * len(op.outputs),
                ["reduction" if d in reduced else "parallel" for d in range(rank)])
    raise Unsupported(f"unsupported op '{op.name}'", op)
