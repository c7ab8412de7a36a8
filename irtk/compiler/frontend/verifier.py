"""The checks of MLIR's verifier that xDSL leaves out, run on every parsed module.

xDSL accepts a value used before its definition (it resolves forward references without a
dominance check) and knows nothing of linalg's structured-op rules for the named ops this front
end adds. MLIR rejects both; so does irtk, at the op, before the importer sees the module:
- SSA dominance: an operand must be defined earlier in its block or in an enclosing region
  (blocks of one multi-block region see each other's values in text order: an approximation,
  as branches are unsupported later anyway).
- tensor ops: index counts, reassociations, slices and padding that fit their shapes, dynamic
  sizes for every `?`; linalg.pack/unpack dims in range; util.global.load/store of a global
  that exists.
- linalg ops: operand counts, operand ranks against their indexing maps, loop extents that
  agree across operands (a matmul's contraction dims), windows that fit their input, region
  arguments and `linalg.yield` values that match the operands' element types.
"""
from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import tensor
from xdsl.dialects.builtin import (DYNAMIC_INDEX, ContainerType, DenseArrayBase, IntegerType,
                                   ModuleOp, ShapedType)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from irtk.compiler.frontend import named_ops
from irtk.compiler.frontend.body import Unsupported
from irtk.compiler.frontend.convert import affine_map, int_array
from irtk.compiler.frontend.dialects import util
from irtk.compiler.frontend.dialects.linalg import (GenericOp, NamedOp, PackOp, UnpackOp,
                                                    YieldOp)
from irtk.compiler.kernel import AffineMap


class Invalid(Exception):
    """A rule the module breaks; `op` locates it."""

    def __init__(self, op: Operation, message: str) -> None:
        super().__init__(message)
        self.op = op


def verify_module(module: ModuleOp) -> None:
    """Raises Invalid for the first op that breaks a rule."""
    _dominance(module.body, set())
    globals_ = {op.sym_name.data for op in module.ops if isinstance(op, util.GlobalOp)}
    for op in module.walk():
        if isinstance(op, GenericOp):
            _generic(op)
        elif isinstance(op, NamedOp):
            _named(op)
        elif isinstance(op, (PackOp, UnpackOp)):
            _pack(op)
        elif isinstance(op, (util.GlobalLoadOp, util.GlobalStoreOp)):
            name = op.global_.root_reference.data
            if name not in globals_:
                raise Invalid(op, f"'{op.name}' names @{name}, which is not a util.global of "
                                  "this module")
        else:
            _tensor_op(op)


# ---- SSA dominance ---------------------------------------------------------------------------
def _dominance(region: Region, visible: set[SSAValue]) -> None:
    defined = set(visible)
    for block in region.blocks:
        defined.update(block.args)
        for op in block.ops:
            for i, v in enumerate(op.operands):
                if v not in defined:
                    raise Invalid(op, f"'{op.name}' operand #{i}{_name(v)} is used before it is "
                                      "defined (its definition does not dominate this use)")
            for r in op.regions:
                _dominance(r, set() if op.name == "func.func" else defined)
            defined.update(op.results)


def _name(v: SSAValue) -> str:
    return f" (%{v.name_hint})" if v.name_hint else ""


# ---- linalg ----------------------------------------------------------------------------------
def _shape(t: Attribute) -> tuple[int, ...]:
    """A shaped type's dims (-1 dynamic); () for a scalar."""
    return tuple(t.get_shape()) if isinstance(t, ShapedType) else ()


def _element(t: Attribute) -> Attribute:
    if isinstance(t, ShapedType) and isinstance(t, ContainerType):
        return t.get_element_type()
    return t


def _generic(op: GenericOp) -> None:
    operands = list(op.inputs) + list(op.outputs)
    maps: list[AffineMap | None] = []
    for k, (v, m) in enumerate(zip(operands, op.indexing_maps)):
        rank, results = len(_shape(v.type)), len(m.data.results)
        if rank != results:
            raise Invalid(op, f"linalg.generic: operand #{k} has rank {rank} but its indexing "
                              f"map has {results} results")
        try:
            maps.append(affine_map(m.data, op))
        except Unsupported:   # floordiv, mod, symbols: the importer reports them
            maps.append(None)
    _extents(op, operands, maps)
    _region(op, op.body, operands, len(op.outputs))


def _named(op: NamedOp) -> None:
    short = op.name.removeprefix("linalg.")
    counts = named_ops.operand_counts(short, len(op.inputs))
    if counts is not None and (len(op.inputs), len(op.outputs)) != counts:
        raise Invalid(op, f"{op.name} takes {counts[0]} input(s) and {counts[1]} output(s), "
                          f"not {len(op.inputs)} and {len(op.outputs)}")
    if len(op.outputs) != 1 and short != "reduce":
        raise Invalid(op, f"{op.name} takes one output, not {len(op.outputs)}")
    operands = list(op.inputs) + list(op.outputs)
    try:
        maps, _ = named_ops.structure(op, [len(_shape(v.type)) for v in operands])
    except Unsupported as e:
        raise Invalid(op, str(e)) from None
    for k, (v, m) in enumerate(zip(operands, maps)):
        shaped = isinstance(v.type, ShapedType)
        if m is None and shaped:
            raise Invalid(op, f"{op.name}: operand #{k} must be a scalar, not {v.type}")
        if m is not None and not shaped:
            raise Invalid(op, f"{op.name}: operand #{k} must be a tensor, not {v.type}")
        if m is not None and len(m.rows) != len(_shape(v.type)):
            raise Invalid(op, f"{op.name}: operand #{k} has rank {len(_shape(v.type))} but "
                              f"{len(m.rows)} was expected")
    _extents(op, operands, maps)
    if short in ("reduce", "map") and op.body.blocks:
        n_args = len(op.inputs) + (len(op.outputs) if short == "reduce" else 0)
        _region(op, op.body, operands[:n_args], len(op.outputs), yield_types=[
            _element(v.type) for v in op.outputs])


def _extents(op: Operation, operands: list[SSAValue],
             maps: Sequence[AffineMap | None]) -> None:
    """Loop extents that bare rows (`d`) give must agree; other rows must stay in bounds."""
    extent: dict[int, tuple[int, int, int]] = {}   # loop -> (size, operand, dim)
    shapes = [_shape(v.type) for v in operands]
    for k, (shape, m) in enumerate(zip(shapes, maps)):
        for r, d in enumerate(m.row_loops() if m is not None else ()):
            if d is None or shape[r] < 0:
                continue
            if d in extent and extent[d][0] != shape[r]:
                size, k0, r0 = extent[d]
                raise Invalid(op, f"{op.name}: loop d{d} has extent {size} (operand #{k0} dim "
                                  f"{r0}) but operand #{k} dim {r} is {shape[r]}")
            extent.setdefault(d, (shape[r], k, r))
    for k, (shape, m) in enumerate(zip(shapes, maps)):
        if m is None:
            continue
        n = m.num_dims
        for r, row in enumerate(m.rows):
            used = [j for j in range(n) if row[j]]
            if m.row_loop(r) is not None or shape[r] < 0 or not used \
                    or any(j not in extent or extent[j][0] == 0 or row[j] < 0 for j in used):
                continue
            need = sum(row[j] * (extent[j][0] - 1) for j in used) + row[n] + 1
            if need > shape[r]:
                raise Invalid(op, f"{op.name}: operand #{k} dim {r} is {shape[r]} but its "
                                  f"indexing map reaches index {need - 1}")


def _region(op: Operation, region: Region, operands: list[SSAValue], num_outputs: int,
            yield_types: list[Attribute] | None = None) -> None:
    """One block whose arguments are the operands' element types, ending in a linalg.yield
    of one value per output, of the outputs' element types."""
    if len(region.blocks) != 1:
        raise Invalid(op, f"{op.name} needs a body of one block")
    block: Block = region.blocks[0]
    want = [_element(v.type) for v in operands]
    got = [a.type for a in block.args]
    if len(got) != len(want):
        raise Invalid(op, f"{op.name}: the body has {len(got)} arguments but the op has "
                          f"{len(want)} operands")
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            raise Invalid(op, f"{op.name}: body argument #{i} is {g} but operand #{i} has "
                              f"element type {w}")
    last = block.last_op
    if not isinstance(last, YieldOp):
        raise Invalid(last or op, f"{op.name}: the body must end in linalg.yield")
    if yield_types is None:
        yield_types = [_element(v.type) for v in operands[len(operands) - num_outputs:]]
    values = list(last.operands)
    if len(values) != len(yield_types):
        raise Invalid(last, f"linalg.yield yields {len(values)} value(s) but {op.name} has "
                            f"{len(yield_types)} output(s)")
    for i, (v, t) in enumerate(zip(values, yield_types)):
        if v.type != t:
            raise Invalid(last, f"linalg.yield value #{i} is {v.type} but output #{i} of "
                                f"{op.name} has element type {t}")


# ---- tensor ops and pack/unpack -------------------------------------------------------------
def _tensor_op(op: Operation) -> None:
    """The checks of a tensor op, if `op` is one that has any."""
    if isinstance(op, tensor.EmptyOp):
        _empty(op)
    elif isinstance(op, (tensor.ExtractOp, tensor.InsertOp)):
        _indexed(op)
    elif isinstance(op, tensor.FromElementsOp):
        _from_elements(op)
    elif isinstance(op, (tensor.CollapseShapeOp, tensor.ExpandShapeOp)):
        _reshape(op)
    elif isinstance(op, (tensor.ExtractSliceOp, tensor.InsertSliceOp)):
        _slice(op)
    elif isinstance(op, tensor.PadOp):
        _pad(op)


def _static(values: DenseArrayBase[IntegerType]) -> list[int]:
    return [int(v) for v in values.get_values()]


def _empty(op: tensor.EmptyOp) -> None:
    shape = _shape(op.results[0].type)
    wanted = sum(1 for d in shape if d < 0)
    if len(op.operands) != wanted:
        raise Invalid(op, f"tensor.empty: {len(op.operands)} dynamic size(s) for the {wanted} "
                          f"dynamic dim(s) of {op.results[0].type}")


def _indexed(op: tensor.ExtractOp | tensor.InsertOp) -> None:
    """tensor.extract / tensor.insert: one index per dim."""
    target = op.tensor if isinstance(op, tensor.ExtractOp) else op.dest
    rank = len(_shape(target.type))
    if len(op.indices) != rank:
        raise Invalid(op, f"{op.name}: {len(op.indices)} indices for a rank-{rank} tensor")


def _from_elements(op: tensor.FromElementsOp) -> None:
    shape = _shape(op.results[0].type)
    count = 1
    for d in shape:
        count *= d
    if all(d >= 0 for d in shape) and len(op.operands) != count:
        raise Invalid(op, f"tensor.from_elements: {len(op.operands)} elements for "
                          f"{op.results[0].type}, which holds {count}")


def _reshape(op: tensor.CollapseShapeOp | tensor.ExpandShapeOp) -> None:
    """collapse_shape / expand_shape: groups that partition the larger shape's dims in order,
    one per dim of the smaller one, with matching static sizes."""
    src, res = _shape(op.src.type), _shape(op.result.type)
    big, small = (src, res) if isinstance(op, tensor.CollapseShapeOp) else (res, src)
    groups = [[int(i.value.data) for i in g] for g in op.reassociation]
    if [i for g in groups for i in g] != list(range(len(big))) or len(groups) != len(small) \
            or any(not g for g in groups):
        raise Invalid(op, f"{op.name}: reassociation {groups} does not group the "
                          f"{len(big)} dims of the expanded type into the {len(small)} dims of "
                          "the collapsed one")
    for j, g in enumerate(groups):
        sizes = [big[i] for i in g]
        if small[j] >= 0 and all(d >= 0 for d in sizes):
            product = 1
            for d in sizes:
                product *= d
            if product != small[j]:
                raise Invalid(op, f"{op.name}: dims {g} of the expanded type multiply to "
                                  f"{product}, not {small[j]}")


def _slice(op: tensor.ExtractSliceOp | tensor.InsertSliceOp) -> None:
    """extract_slice / insert_slice: one offset, size and stride per dim of the full tensor;
    static slices inside it; the slice type's dims are the sizes (unit dims may be dropped)."""
    if isinstance(op, tensor.ExtractSliceOp):
        full, part = _shape(op.source.type), _shape(op.result.type)
    else:
        full, part = _shape(op.dest.type), _shape(op.source.type)
    offsets = _static(op.static_offsets)
    sizes = _static(op.static_sizes)
    strides = _static(op.static_strides)
    if not len(offsets) == len(sizes) == len(strides) == len(full):
        raise Invalid(op, f"{op.name}: {len(offsets)} offsets, {len(sizes)} sizes and "
                          f"{len(strides)} strides for a rank-{len(full)} tensor")
    dynamic = DYNAMIC_INDEX
    for i, (o, n, s, d) in enumerate(zip(offsets, sizes, strides, full)):
        if dynamic in (o, n, s) or d < 0 or n == 0:
            continue
        if o < 0 or s < 1 or o + (n - 1) * s >= d:
            raise Invalid(op, f"{op.name}: dim {i} of the slice (offset {o}, size {n}, stride "
                              f"{s}) is outside the tensor's {d}")
    kept = [n for n in sizes]
    if len(part) == len(kept):
        pairs = list(zip(kept, part))
    else:   # rank-reducing: drop unit sizes until the ranks match
        nonunit = [n for n in kept if n != 1]
        if len(part) < len(nonunit) or len(part) > len(kept):
            raise Invalid(op, f"{op.name}: the slice type has rank {len(part)}, which the "
                              f"sizes {_show(sizes)} cannot give")
        return
    for i, (n, d) in enumerate(pairs):
        if n != dynamic and d >= 0 and n != d:
            raise Invalid(op, f"{op.name}: dim {i} of the slice type is {d} but its size is {n}")


def _show(values: list[int]) -> str:
    return "[" + ", ".join("?" if v == DYNAMIC_INDEX else str(v) for v in values) + "]"


def _pad(op: tensor.PadOp) -> None:
    src, res = _shape(op.source.type), _shape(op.result.type)
    low, high = _static(op.static_low), _static(op.static_high)
    if not len(low) == len(high) == len(src) == len(res):
        raise Invalid(op, f"tensor.pad: {len(low)} low and {len(high)} high pads for "
                          f"rank-{len(src)} source and rank-{len(res)} result")
    for i, (s, lo, hi, r) in enumerate(zip(src, low, high, res)):
        if DYNAMIC_INDEX in (lo, hi) or s < 0 or r < 0:
            continue
        if s + lo + hi != r:
            raise Invalid(op, f"tensor.pad: dim {i} is {s} + {lo} + {hi} = {s + lo + hi}, but "
                              f"the result has {r}")


def _pack(op: PackOp | UnpackOp) -> None:
    """inner_dims_pos and outer_dims_perm name dims of the unpacked tensor, once each."""
    unpacked = op.source.type if isinstance(op, PackOp) else op.dest.type
    rank = len(_shape(unpacked))
    for key in ("inner_dims_pos", "outer_dims_perm"):
        attr = op.attributes.get(key)
        if attr is None:
            continue
        values = int_array(attr)
        if values is None:
            raise Invalid(op, f"{op.name}: {key} must be a list of integers")
        if len(set(values)) != len(values) or any(not 0 <= v < rank for v in values) \
                or (key == "outer_dims_perm" and len(values) != rank):
            raise Invalid(op, f"{op.name}: {key} {values} must name distinct dims of the "
                              f"rank-{rank} unpacked tensor"
                              + (", each once" if key == "outer_dims_perm" else ""))
