"""TIR: the tensor-level program the front end hands to dispatch formation.

The importer (irtk/compiler/frontend/importer.py) turns the parsed MLIR into this small IR and
normalizes on the way, so that later phases see few op kinds:
- every linalg named op, linalg.fill/map/reduce/transpose/broadcast/softmax/pack/unpack/conv and
  every tensor op that computes contents (extract_slice, insert_slice, pad, concat, tensor.insert
  of a whole tensor, from_elements, splat) becomes a `generic` (or a few), whose body uses the
  kernel IR's scalar ops (irtk/body_ops.py);
- `*_const` check ops become a `constant` and the plain check op;
- `util.optimization_barrier`, `flow.tensor.tie_shape` and `tensor.cast` become `barrier`,
  `tie_shape` and `cast` (identities for the data; `cast` checks shapes at run time);
- expand_shape/collapse_shape become `reshape` (metadata only: buffers are dense row-major).

Op kinds (`Op.kind`) and what they carry. Every op has `location` ("file:line:col").
  constant        attrs value (numpy array for tensors, Python int/float for scalars),
                  unfoldable (bool: util.unfoldable_constant / flow.tensor.dynamic_constant)
  empty           operands: one index value per dynamic dim of the result type
  generic         operands: inputs then outputs (attrs num_inputs) then captures (attrs
                  num_captures: host scalars the body reads with kernel.param, in order);
                  results: one per output; attrs maps (list[AffineMap], inputs then outputs;
                  None for a gather input), iterator_types, ops (list[kernel.Op]), yields
                  (list[int]), with the kernel IR's value numbering. Operand shapes may be
                  dynamic; maps have num_symbols = 0 (dynamic offsets are done with
                  kernel.param + linalg.index + tensor.extract in the body).
  reshape         operands: source, then one index value per dynamic dim of the result;
                  attrs reassociation (list[list[int]])
  barrier         operands -> results, identity (the compiler must not look through it)
  tie_shape       operands: tensor, dynamic dims -> the tensor
  cast            operand -> result of a compatible type (static dims checked at run time)
  tensor.extract  operands: tensor, indices (index) -> scalar (a host read)
  tensor.dim      operands: tensor, index -> index
  call            attrs callee; operands -> results
  return          operands
  scf.for         operands lb, ub, step, iter inits; regions[0] args (iv, iters), ends with
                  scf.yield; results = final iters
  scf.if          operands cond (i1); regions then, else (each ends with scf.yield); results
  scf.while       operands inits; regions[0] "before" (ends with scf.condition(cond, values)),
                  regions[1] "after" (ends with scf.yield); results
  scf.yield / scf.condition   region terminators
  global.load     attrs name -> result;  global.store  attrs name, operand value
  check.expect_true / expect_false / expect_all_true   operand
  cf.assert       operand cond (i1); attrs message: the call fails unless cond holds
  check.expect_eq / expect_almost_eq   operands lhs, rhs; attrs atol, rtol (almost_eq)
  arith.* / math.*  host scalar ops with the kernel Op attributes (attrs predicate, value)
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

_ids = itertools.count(1)


@dataclass(frozen=True)
class TensorType:
    """shape entries are ints, or None for a dynamic dim."""

    shape: tuple[int | None, ...]
    element_type: str

    @property
    def is_static(self) -> bool:
        return None not in self.shape

    @property
    def dynamic_dims(self) -> tuple[int, ...]:
        return tuple(i for i, d in enumerate(self.shape) if d is None)

    @property
    def static_shape(self) -> tuple[int, ...]:
        """The shape of a static type (`is_static`); ValueError for a dynamic one."""
        dims = tuple(d for d in self.shape if d is not None)
        if len(dims) != len(self.shape):
            raise ValueError(f"{self.spelling()} is not static")
        return dims

    def shape_for(self, value_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of a constant of this type whose value has `value_shape`: a dynamic dim
        takes the value's size (flow.tensor.dynamic_constant); a value of another rank is
        broadcast to the type's (static) shape."""
        if len(value_shape) == len(self.shape):
            return tuple(v if d is None else d for d, v in zip(self.shape, value_shape))
        return self.static_shape

    def spelling(self) -> str:
        dims = ["?" if d is None else str(d) for d in self.shape]
        return "tensor<" + "x".join(dims + [self.element_type]) + ">"


@dataclass(frozen=True)
class ScalarType:
    name: str  # i1 i8 i16 i32 i64 index f16 bf16 f32 f64

    def spelling(self) -> str:
        return self.name


Type = TensorType | ScalarType


@dataclass(eq=False)
class Value:
    type: Type
    id: int = field(default_factory=lambda: next(_ids))

    def __repr__(self) -> str:
        return f"%{self.id}:{self.type.spelling()}"

    @property
    def tensor_type(self) -> TensorType:
        """The type of a value known to be a tensor (a generic's operand, say)."""
        if not isinstance(self.type, TensorType):
            raise ValueError(f"{self!r} is not a tensor")
        return self.type


@dataclass(eq=False)
class Region:
    args: list[Value] = field(default_factory=list)
    ops: list["Op"] = field(default_factory=list)


@dataclass(eq=False)
class Op:
    kind: str
    operands: list[Value] = field(default_factory=list)
    results: list[Value] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    regions: list[Region] = field(default_factory=list)
    location: str = ""

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, self.kind
        return self.results[0]


@dataclass(eq=False)
class Function:
    name: str
    args: list[Value]
    result_types: list[Type]
    body: Region
    public: bool = True
    location: str = ""


@dataclass(eq=False)
class Global:
    name: str
    type: Type
    initial: Any = None          # numpy array / scalar, or None (zero)
    mutable: bool = False
    location: str = ""

    @property
    def tensor_type(self) -> TensorType:
        """The type of a global known to hold a tensor."""
        if not isinstance(self.type, TensorType):
            raise ValueError(f"global '@{self.name}' does not hold a tensor")
        return self.type


@dataclass(eq=False)
class Program:
    functions: list[Function]
    globals: list[Global] = field(default_factory=list)
    filename: str = "<string>"
    # Functions the importer could not lower, by name: "file:line:col: error: ..." messages.
    # One unsupported function never takes the rest of the file down with it.
    unsupported: dict[str, str] = field(default_factory=dict)
    # The signatures of functions in `unsupported`, where known (their bodies may be empty):
    # a partial module's stub keeps the real signature, so a call says what went wrong.
    failed: dict[str, Function] = field(default_factory=dict)

    def function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(name)


def walk(region: Region) -> Iterator[Op]:
    """Every op in `region` and its nested regions, outer before inner."""
    for op in region.ops:
        yield op
        for r in op.regions:
            yield from walk(r)
