"""tensor ops, linalg.pack/unpack and flow.tensor.bitcast -> TIR.

Ops that only describe a tensor (empty, cast, dim, extract, expand/collapse_shape) map to their
TIR kinds. Ops that compute contents become `generic`s: static slices use affine maps
(`offset + stride * i`); dynamic slices, pad, pack and unpack read their source with gathers
(`tensor.extract` in the body at indices computed from `linalg.index` and `kernel.param`),
guarded by bounds checks where the result has padding.
"""
from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import tensor
from xdsl.dialects.builtin import DYNAMIC_INDEX
from xdsl.ir import Operation, SSAValue

from irtk.compiler import tir
from irtk.compiler.frontend.body import Body, Unsupported, bit_width
from irtk.compiler.frontend.body_translation import translate_block
from irtk.compiler.frontend.convert import convert_tensor_type, convert_type, int_array
from irtk.compiler.frontend.dialects import flow, tensor_ext
from irtk.compiler.frontend.dialects.linalg import PackOp, UnpackOp
from irtk.compiler.frontend.import_context import ImportContext
from irtk.compiler.kernel import AffineMap

Index = int | tir.Value


def _ident(rank: int) -> AffineMap:
    return AffineMap.identity(rank)


def _elt(v: tir.Value) -> str:
    return v.tensor_type.element_type


def _mixed(static: Sequence[int], dynamic: Sequence[SSAValue],
           imp: ImportContext) -> list[Index]:
    """xDSL's static list with DYNAMIC_INDEX holes, filled from the dynamic operands."""
    values = iter(dynamic)
    return [imp.value(next(values)) if s == DYNAMIC_INDEX else int(s) for s in static]


def _ints(values: list[Index]) -> list[int] | None:
    """`values` when every one is static; None when one is a host value."""
    ints = [v for v in values if isinstance(v, int)]
    return ints if len(ints) == len(values) else None


def _bval(imp: ImportContext, body: Body, captures: list[tir.Value], x: Index) -> int:
    """An index (static or host value) as a body value."""
    return body.const(x, "index") if isinstance(x, int) else imp.capture(body, captures, x)


def _all(body: Body, conds: list[int]) -> int | None:
    acc = None
    for c in conds:
        acc = c if acc is None else body.add("arith.andi", (acc, c), "i1")
    return acc


# ---- metadata ops ------------------------------------------------------------------------------
def _empty(imp: ImportContext, op: tensor.EmptyOp) -> list[tir.Value]:
    return imp.emit("empty", [imp.value(v) for v in op.dynamic_sizes],
                    [convert_type(op.tensor.type, op)], op).results


def _cast(imp: ImportContext, op: tensor.CastOp) -> list[tir.Value]:
    return imp.emit("cast", [imp.value(op.source)], [convert_type(op.dest.type, op)], op).results


def _dim(imp: ImportContext, op: tensor.DimOp) -> list[tir.Value]:
    source, index = imp.value(op.source), imp.value(op.index)
    i = imp.constants.get(index.id)
    shape = source.tensor_type.shape
    rank = len(shape)
    if i is not None and not 0 <= i < rank:
        raise Unsupported(f"tensor.dim: index {i} is out of range for a rank-{rank} tensor", op)
    size = shape[i] if i is not None else None
    if size is not None:
        return [imp.index_const(size, op)]
    return imp.emit("tensor.dim", [source, index], [tir.ScalarType("index")], op).results


def _extract(imp: ImportContext, op: tensor.ExtractOp) -> list[tir.Value]:
    return imp.emit("tensor.extract", [imp.value(op.tensor)] + [imp.value(i) for i in op.indices],
                    [convert_type(op.result.type, op)], op).results


def _expand(imp: ImportContext, op: tensor.ExpandShapeOp) -> list[tir.Value]:
    groups = [[int(i.value.data) for i in g] for g in op.reassociation]
    return imp.emit("reshape", [imp.value(op.src)] + [imp.value(v) for v in op.dynamic_output_shape],
                    [convert_type(op.result.type, op)], op, reassociation=groups).results


def _collapse(imp: ImportContext, op: tensor.CollapseShapeOp) -> list[tir.Value]:
    groups = [[int(i.value.data) for i in g] for g in op.reassociation]
    src = imp.value(op.src)
    result_type = convert_tensor_type(op.result.type, op)
    src_type = src.tensor_type
    dims: list[Index] = imp.dims(src, op) if not src_type.is_static \
        else list(src_type.static_shape)
    dynamic = []
    for g, d in zip(groups, result_type.shape):
        if d is None:
            acc = imp.index_value(dims[g[0]], op)
            for j in g[1:]:
                acc = imp.host_arith("arith.muli", acc, imp.index_value(dims[j], op), op)
            dynamic.append(acc)
    return imp.emit("reshape", [src] + dynamic, [result_type], op, reassociation=groups).results


# ---- content ops -------------------------------------------------------------------------------
def _result_dims(imp: ImportContext, result_type: tir.TensorType, sizes: list[Index],
                 op: Operation) -> list[Index]:
    """A result's dims: static where its type says so, else the op's size values."""
    it = iter(s for s in sizes)
    out: list[Index] = []
    for d in result_type.shape:
        s = next(it)
        out.append(d if d is not None else s)
    return out


def _kept_dims(source_rank: int, sizes: list[Index],
               result_shape: Sequence[int | None]) -> list[bool]:
    """Which source dims a (possibly rank-reducing) slice keeps: unit dims are dropped from the
    left until the ranks match, as MLIR infers them."""
    kept: list[bool] = []
    j = 0
    drop = source_rank - len(result_shape)
    for s in sizes:
        fits = j < len(result_shape) and (result_shape[j] is None or not isinstance(s, int)
                                          or result_shape[j] == s)
        if drop and s == 1 and (not fits or len(sizes) - len(kept) > len(result_shape) - j):
            kept.append(False)
            drop -= 1
        elif fits:
            kept.append(True)
            j += 1
        else:
            raise Unsupported("the slice sizes do not match the result type")
    if drop or j != len(result_shape):
        raise Unsupported("cannot tell which unit dims a rank-reducing slice drops")
    return kept


def _extract_slice(imp: ImportContext, op: tensor.ExtractSliceOp) -> list[tir.Value]:
    src = imp.value(op.source)
    rt = convert_tensor_type(op.result.type, op)
    offsets = _mixed(op.static_offsets.get_values(), op.offsets, imp)
    sizes = _mixed(op.static_sizes.get_values(), op.sizes, imp)
    strides = _mixed(op.static_strides.get_values(), op.strides, imp)
    try:
        kept = _kept_dims(len(offsets), sizes, rt.shape)
    except Unsupported as e:
        raise Unsupported(str(e), op) from None
    n = len(rt.shape)
    out = imp.empty(_result_dims(imp, rt, [s for s, k in zip(sizes, kept) if k], op),
                    rt.element_type, op)
    loop_of: dict[int, int] = {}
    j = 0
    for i, k in enumerate(kept):
        if k:
            loop_of[i] = j
            j += 1
    src_shape = src.tensor_type.shape
    # A map row `d` (offset 0, stride 1) would claim that the source dim is the loop's extent;
    # where it is not, read with a gather instead so that maps never mislead loop inference.
    misleading = any(offsets[i] == 0 and strides[i] == 1
                     and (src_shape[i] is None or src_shape[i] != rt.shape[loop_of[i]])
                     for i in loop_of)
    static_offsets, static_strides = _ints(offsets), _ints(strides)
    if static_offsets is not None and static_strides is not None and not misleading:
        body = Body(1, 1)
        return imp.generic([(src, _slice_map(n, loop_of, static_offsets, static_strides))],
                           [(out, _ident(n))],
                           ["parallel"] * n, body, [body.arg(0)], [], op)
    body = Body(1, 1)
    captures: list[tir.Value] = []
    indices = []
    for i in range(len(offsets)):
        off = _bval(imp, body, captures, offsets[i])
        if i in loop_of:
            step = body.add("arith.muli", (body.index(loop_of[i]),
                                           _bval(imp, body, captures, strides[i])), "index")
            indices.append(body.add("arith.addi", (off, step), "index"))
        else:
            indices.append(off)
    v = body.extract(0, indices, rt.element_type)
    return imp.generic([(src, None)], [(out, _ident(n))], ["parallel"] * n, body, [v], captures, op)


def _slice_map(n: int, loop_of: dict[int, int], offsets: list[int],
               strides: list[int]) -> AffineMap:
    """The map of a static slice over `n` loops: dim i is `offset + stride * loop` where loop
    `loop_of[i]` walks it, and the constant offset where no loop does (a dropped unit dim)."""
    rows = []
    for i in range(len(offsets)):
        row = [0] * (n + 1)
        if i in loop_of:
            row[loop_of[i]] = strides[i]
        row[n] = offsets[i]
        rows.append(tuple(row))
    return AffineMap(n, tuple(rows))


def insert(imp: ImportContext, source: tir.Value, dest: tir.Value, offsets: list[Index],
           sizes: list[Index], strides: list[Index], op: Operation) -> tir.Value:
    """dest with `source` written at offsets/strides. dest is the generic's read-write output,
    so that elements outside the slice keep their values. Static: a generic over the source
    with `offset + stride * i` output rows. Dynamic: a generic over dest whose points inside
    the slice gather their source element and the others keep dest's."""
    src_shape = source.tensor_type.shape
    dest_shape = dest.tensor_type.shape
    try:
        kept = _kept_dims(len(offsets), sizes, src_shape)
    except Unsupported as e:
        raise Unsupported(str(e), op) from None
    loop_of: dict[int, int] = {}
    j = 0
    for i, k in enumerate(kept):
        if k:
            loop_of[i] = j
            j += 1
    # Static: loops over the source, written through `offset + stride * i` output rows. A bare
    # row (offset 0, stride 1) over a larger dest dim would mislead loop inference: then gather.
    misleading = any(offsets[i] == 0 and strides[i] == 1
                     and (dest_shape[i] is None or dest_shape[i] != src_shape[loop_of[i]])
                     for i in loop_of)
    static_offsets, static_strides = _ints(offsets), _ints(strides)
    if static_offsets is not None and static_strides is not None and not misleading:
        n = len(src_shape)
        body = Body(1, 1)
        return imp.generic([(source, _ident(n))],
                           [(dest, _slice_map(n, loop_of, static_offsets, static_strides))],
                           ["parallel"] * n, body, [body.arg(0)], [], op)[0]
    n = len(offsets)
    body = Body(1, 1)
    captures: list[tir.Value] = []
    zero = body.const(0, "index")
    conds: list[int] = []
    src_indices: list[int] = []
    for i in range(n):
        rel = body.add("arith.subi", (body.index(i), _bval(imp, body, captures, offsets[i])),
                       "index")
        stride = _bval(imp, body, captures, strides[i])
        size = _bval(imp, body, captures, sizes[i])
        q = body.add("arith.divsi", (rel, stride), "index")
        conds.append(body.add("arith.cmpi", (rel, zero), "i1", predicate="sge"))
        conds.append(body.add("arith.cmpi", (q, size), "i1", predicate="slt"))
        conds.append(body.add("arith.cmpi", (body.add("arith.remsi", (rel, stride), "index"),
                                             zero), "i1", predicate="eq"))
        if kept[i]:
            src_indices.append(q)
    inside = _all(body, conds)
    assert inside is not None, "a slice that is not static has a dim, so conditions"
    safe = [body.add("arith.select", (inside, q, zero), "index") for q in src_indices]
    v = body.extract(0, safe, _elt(dest))
    r = body.add("arith.select", (inside, v, body.out(0)), _elt(dest))
    return imp.generic([(source, None)], [(dest, _ident(n))], ["parallel"] * n, body, [r],
                       captures, op)[0]


def _insert_slice(imp: ImportContext, op: tensor.InsertSliceOp) -> list[tir.Value]:
    offsets = _mixed(op.static_offsets.get_values(), op.offsets, imp)
    sizes = _mixed(op.static_sizes.get_values(), op.sizes, imp)
    strides = _mixed(op.static_strides.get_values(), op.strides, imp)
    return [insert(imp, imp.value(op.source), imp.value(op.dest), offsets, sizes, strides, op)]


def _concat(imp: ImportContext, op: tensor.ConcatOp) -> list[tir.Value]:
    rt = convert_tensor_type(op.result.type, op)
    d = int(op.dim.value.data)
    inputs = [imp.value(v) for v in op.inputs]
    in_dims = [imp.dims(v, op) for v in inputs]
    dims: list[Index] = list(in_dims[0])
    total: Index = 0
    for ds in in_dims:
        size = ds[d]
        total = total + size if isinstance(total, int) and isinstance(size, int) else \
            imp.host_arith("arith.addi", imp.index_value(total, op), imp.index_value(size, op), op)
    dims[d] = total
    result = imp.empty([s if s is not None else dim for s, dim in zip(rt.shape, dims)],
                       rt.element_type, op)
    offset: Index = 0
    for v, ds in zip(inputs, in_dims):
        offsets: list[Index] = [0] * len(dims)
        offsets[d] = offset
        result = insert(imp, v, result, offsets, ds, [1] * len(dims), op)
        size = ds[d]
        offset = offset + size if isinstance(offset, int) and isinstance(size, int) else \
            imp.host_arith("arith.addi", imp.index_value(offset, op), imp.index_value(size, op), op)
    return [result]


def _pad(imp: ImportContext, op: tensor.PadOp) -> list[tir.Value]:
    src = imp.value(op.source)
    rt = convert_tensor_type(op.result.type, op)
    low = _mixed(op.static_low.get_values(), op.low, imp)
    high = _mixed(op.static_high.get_values(), op.high, imp)
    src_dims = imp.dims(src, op)
    n = len(low)
    dims: list[Index] = []
    for i in range(n):
        size = rt.shape[i]
        if size is not None:
            dims.append(size)
        else:
            s = imp.host_arith("arith.addi", imp.index_value(src_dims[i], op),
                               imp.index_value(low[i], op), op)
            dims.append(imp.host_arith("arith.addi", s, imp.index_value(high[i], op), op))
    out = imp.empty(dims, rt.element_type, op)
    body = Body(1, 1)
    captures: list[tir.Value] = []
    block = op.region.blocks[0]
    env: dict[SSAValue, int] = {a: body.index(i) for i, a in enumerate(block.args)}
    pad_value = translate_block(imp, body, block, env, captures, {})[0]
    zero = body.const(0, "index")
    conds: list[int] = []
    indices: list[int] = []
    for i in range(n):
        rel = body.add("arith.subi", (body.index(i), _bval(imp, body, captures, low[i])), "index")
        conds.append(body.add("arith.cmpi", (rel, zero), "i1", predicate="sge"))
        conds.append(body.add("arith.cmpi", (rel, _bval(imp, body, captures, src_dims[i])), "i1",
                              predicate="slt"))
        indices.append(rel)
    inside = _all(body, conds)
    if inside is None:
        v = body.extract(0, indices, rt.element_type)
        r = v
    else:
        safe = [body.add("arith.select", (inside, x, zero), "index") for x in indices]
        v = body.extract(0, safe, rt.element_type)
        r = body.add("arith.select", (inside, v, pad_value), rt.element_type)
    return imp.generic([(src, None)], [(out, _ident(n))], ["parallel"] * n, body, [r], captures, op)


def _insert_scalar(imp: ImportContext, op: tensor.InsertOp) -> list[tir.Value]:
    dest = imp.value(op.dest)
    n = len(dest.tensor_type.shape)
    body = Body(0, 1)
    captures: list[tir.Value] = []
    conds = [body.add("arith.cmpi", (body.index(i), imp.capture(body, captures, imp.value(x))),
                      "i1", predicate="eq") for i, x in enumerate(op.indices)]
    scalar = imp.capture(body, captures, imp.value(op.scalar))
    hit = _all(body, conds)
    r = scalar if hit is None else body.add("arith.select", (hit, scalar, body.out(0)), _elt(dest))
    return imp.generic([], [(dest, _ident(n))], ["parallel"] * n, body, [r], captures, op)


def _from_elements(imp: ImportContext, op: tensor.FromElementsOp) -> list[tir.Value]:
    rt = convert_tensor_type(op.result.type, op)
    shape = rt.static_shape   # its elements are listed
    n = len(shape)
    out = imp.empty(list(shape), rt.element_type, op)
    body = Body(0, 1)
    captures: list[tir.Value] = []
    linear = body.const(0, "index")
    for i, d in enumerate(shape):
        linear = body.add("arith.addi", (body.add("arith.muli", (linear, body.const(d, "index")),
                                                  "index"), body.index(i)), "index")
    r = None
    for k, e in enumerate(op.elements):
        v = imp.capture(body, captures, imp.value(e))
        if r is None:
            r = v
        else:
            hit = body.add("arith.cmpi", (linear, body.const(k, "index")), "i1", predicate="eq")
            r = body.add("arith.select", (hit, v, r), rt.element_type)
    if r is None:
        raise Unsupported("tensor.from_elements of no elements is not supported", op)
    return imp.generic([], [(out, _ident(n))], ["parallel"] * n, body, [r], captures, op)


def _splat(imp: ImportContext, op: tensor.SplatOp) -> list[tir.Value]:
    rt = convert_tensor_type(op.result.type, op)
    out = imp.emit("empty", [imp.value(v) for v in op.dynamicSizes], [rt], op).result
    n = len(rt.shape)
    body = Body(0, 1)
    captures: list[tir.Value] = []
    v = imp.capture(body, captures, imp.value(op.input))
    return imp.generic([], [(out, _ident(n))], ["parallel"] * n, body, [v], captures, op)


def _bitcast(imp: ImportContext, op: tensor_ext.BitcastOp) -> list[tir.Value]:
    src = imp.value(op.source)
    rt = convert_tensor_type(op.result.type, op)
    n = len(rt.shape)
    out = imp.empty(imp.dims(src, op), rt.element_type, op)
    body = Body(1, 1)
    return imp.generic([(src, _ident(n))], [(out, _ident(n))], ["parallel"] * n, body,
                       [body.add("arith.bitcast", (body.arg(0),), rt.element_type)], [], op)


def flow_bitcast(imp: ImportContext, op: flow.TensorBitCastOp) -> tir.Value:
    """flow.tensor.bitcast: the same bytes as another element type; the innermost dim scales
    (e.g. tensor<2xi8> -> tensor<4xf4E2M1FN>: element 2k is the low nibble of byte k)."""
    src = imp.value(op.source)
    rt = convert_tensor_type(op.result.type, op)
    st = src.tensor_type
    if not (st.is_static and rt.is_static) or len(st.shape) != len(rt.shape) or not rt.shape:
        raise Unsupported("flow.tensor.bitcast needs static shapes of one rank", op)
    src_shape, shape = st.static_shape, rt.static_shape
    a, b = bit_width(st.element_type), bit_width(rt.element_type)
    if src_shape[:-1] != shape[:-1] or src_shape[-1] * a != shape[-1] * b:
        raise Unsupported("flow.tensor.bitcast must keep the bytes of each row", op)
    n = len(shape)
    out = imp.empty(list(shape), rt.element_type, op)
    body = Body(1, 1)
    ia, ib = f"i{a}", f"i{b}"
    outer = [body.index(i) for i in range(n - 1)]
    last = body.index(n - 1)

    def as_int(v: int, t: str, it: str) -> int:
        return v if t == it else body.add("arith.bitcast", (v,), it)

    if a == b:
        v = body.extract(0, outer + [last], st.element_type)
        r = body.add("arith.bitcast", (v,), rt.element_type) if st.element_type != rt.element_type else v
    elif a > b:     # split each source element into a // b results
        m = a // b
        q = body.add("arith.divui", (last, body.const(m, "index")), "index")
        part = body.add("arith.remui", (last, body.const(m, "index")), "index")
        v = as_int(body.extract(0, outer + [q], st.element_type), st.element_type, ia)
        shift = body.add("arith.muli", (body.add("arith.index_cast", (part,), ia),
                                        body.const(b, ia)), ia)
        piece = body.add("arith.trunci", (body.add("arith.shrui", (v, shift), ia),), ib)
        r = piece if rt.element_type == ib else body.add("arith.bitcast", (piece,), rt.element_type)
    else:           # join b // a source elements into one result
        m = b // a
        acc = body.const(0, ib)
        for p in range(m):
            k = body.add("arith.addi", (body.add("arith.muli", (last, body.const(m, "index")),
                                                 "index"), body.const(p, "index")), "index")
            v = as_int(body.extract(0, outer + [k], st.element_type), st.element_type, ia)
            wide = body.add("arith.extui", (v,), ib)
            if p:
                wide = body.add("arith.shli", (wide, body.const(p * a, ib)), ib)
            acc = body.add("arith.ori", (acc, wide), ib)
        r = acc if rt.element_type == ib else body.add("arith.bitcast", (acc,), rt.element_type)
    return imp.generic([(src, None)], [(out, _ident(n))], ["parallel"] * n, body, [r], [], op)[0]


# ---- pack / unpack -----------------------------------------------------------------------------
def _pack_ints(op: PackOp | UnpackOp, key: str) -> list[int]:
    """An integer list attribute of linalg.pack/unpack (`_int_list` parsed it)."""
    values = int_array(op.attributes.get(key))
    if values is None:
        raise Unsupported(f"{op.name}: cannot read '{key}'", op)
    return values


def _pack_attrs(imp: ImportContext, op: PackOp | UnpackOp, rank: int
                ) -> tuple[list[int], list[Index], list[int]]:
    """inner_dims_pos, each inner tile as an int or a host index value, and outer_dims_perm
    (the identity when absent) over the `rank` dims of the unpacked tensor."""
    pos = _pack_ints(op, "inner_dims_pos")
    dynamic = iter(op.inner_tiles)
    tiles: list[Index] = []
    for t in _pack_ints(op, "static_inner_tiles"):
        tiles.append(imp.value(next(dynamic)) if t < 0 else t)
    perm = _pack_ints(op, "outer_dims_perm") if "outer_dims_perm" in op.attributes \
        else list(range(rank))
    return pos, tiles, perm


def pack(imp: ImportContext, op: PackOp) -> tir.Value:
    """linalg.pack: dest[outer (permuted), inner] = source[outer * tile + inner], or the padding
    value where that is past the source's end."""
    src, dest = imp.value(op.source), imp.value(op.dest)
    r = len(src.tensor_type.shape)
    pos, tiles, perm = _pack_attrs(imp, op, r)
    n = r + len(pos)
    body = Body(1, 1)
    captures: list[tir.Value] = []
    src_dims = imp.dims(src, op)
    zero = body.const(0, "index")
    padding = op.padding_value
    indices: list[int] = []
    conds: list[int] = []
    for j in range(r):
        outer = body.index(perm.index(j))
        if j in pos:
            i = pos.index(j)
            x = body.add("arith.addi", (body.add("arith.muli", (outer, _bval(imp, body, captures,
                                                                              tiles[i])), "index"),
                                        body.index(r + i)), "index")
            if padding is not None:
                conds.append(body.add("arith.cmpi", (x, _bval(imp, body, captures, src_dims[j])),
                                      "i1", predicate="slt"))
            indices.append(x)
        else:
            indices.append(outer)
    inside = _all(body, conds)   # None unless there is padding
    elt = _elt(dest)
    if inside is None or padding is None:
        v = body.extract(0, indices, elt)
    else:
        safe = [body.add("arith.select", (inside, x, zero), "index") for x in indices]
        pad = imp.capture(body, captures, imp.value(padding))
        v = body.add("arith.select", (inside, body.extract(0, safe, elt), pad), elt)
    return imp.generic([(src, None)], [(dest, _ident(n))], ["parallel"] * n, body, [v],
                       captures, op)[0]


def unpack(imp: ImportContext, op: UnpackOp) -> tir.Value:
    """linalg.unpack: dest[i] = source[outer (permuted) = i / tile, inner = i % tile]."""
    src, dest = imp.value(op.source), imp.value(op.dest)
    r = len(dest.tensor_type.shape)
    pos, tiles, perm = _pack_attrs(imp, op, r)
    body = Body(1, 1)
    captures: list[tir.Value] = []
    indices: list[int] = [0] * (r + len(pos))
    for p in range(r):
        j = perm[p]
        if j in pos:
            i = pos.index(j)
            tile = _bval(imp, body, captures, tiles[i])
            indices[p] = body.add("arith.divui", (body.index(j), tile), "index")
            indices[r + i] = body.add("arith.remui", (body.index(j), tile), "index")
        else:
            indices[p] = body.index(j)
    v = body.extract(0, indices, _elt(dest))
    return imp.generic([(src, None)], [(dest, _ident(r))], ["parallel"] * r, body, [v],
                       captures, op)[0]


def lower(imp: ImportContext, op: Operation) -> list[tir.Value] | None:
    """The TIR of a `tensor` op; None for an op of another kind."""
    if isinstance(op, tensor.EmptyOp):
        return _empty(imp, op)
    if isinstance(op, tensor.CastOp):
        return _cast(imp, op)
    if isinstance(op, tensor.DimOp):
        return _dim(imp, op)
    if isinstance(op, tensor.ExtractOp):
        return _extract(imp, op)
    if isinstance(op, tensor.ExpandShapeOp):
        return _expand(imp, op)
    if isinstance(op, tensor.CollapseShapeOp):
        return _collapse(imp, op)
    if isinstance(op, tensor.ExtractSliceOp):
        return _extract_slice(imp, op)
    if isinstance(op, tensor.InsertSliceOp):
        return _insert_slice(imp, op)
    if isinstance(op, tensor.ConcatOp):
        return _concat(imp, op)
    if isinstance(op, tensor.PadOp):
        return _pad(imp, op)
    if isinstance(op, tensor.InsertOp):
        return _insert_scalar(imp, op)
    if isinstance(op, tensor.FromElementsOp):
        return _from_elements(imp, op)
    if isinstance(op, tensor.SplatOp):
        return _splat(imp, op)
    if isinstance(op, tensor_ext.BitcastOp):
        return _bitcast(imp, op)
    return None


__all__ = ["flow_bitcast", "insert", "lower", "pack", "unpack"]
