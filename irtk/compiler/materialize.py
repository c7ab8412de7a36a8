"""Materialization: a fused cluster -> the host ops that read its dynamic extents, and its
`dispatch` op holding one `kernel.Kernel` (or the two dispatches of a split reduction).

Loop ranges come from the operand dims that index a loop directly (static dims first); a
dynamic one becomes an index param, read on the host by a `tensor.dim` inserted before the
dispatch and shared by every operand dim that indexes that loop directly. Host scalars the
body reads are params too, in the order the body first reads them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from irtk.compiler import kernel as K
from irtk.compiler import split_reduction, tir
from irtk.compiler.cluster import Cluster
from irtk.compiler.kernel import AffineMap
from irtk.errors import CompileError


@dataclass
class KernelNames:
    """Kernel names, unique in the program: `<function>_dispatch_<n>_<kind>`, n counting the
    dispatches of the function."""

    taken: set[str] = field(default_factory=set)
    function: str = ""
    count: int = 0

    def start(self, function: str) -> None:
        self.function, self.count = function, 0

    def new(self, c: Cluster) -> str:
        kind = "elementwise" if c.is_elementwise else "reduction"
        if not c.is_elementwise and any(n.name in ("arith.mulf", "arith.muli")
                                        for n in c.nodes()) \
                and sum(1 for i in c.inputs if i.map is not None) >= 2:
            kind = "contraction"
        base = f"{self.function}_dispatch_{self.count}_{kind}"
        self.count += 1
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name


def materialize(c: Cluster, names: KernelNames, location: str) -> list[tir.Op]:
    """The ops that replace cluster `c`; CompileError at `location` when it forms no valid
    kernel."""
    builder = _KernelBuilder(c)
    ranges = builder.loop_ranges()
    if ranges is None:
        raise CompileError(f"{location}: error: cannot infer the loop ranges from the "
                           "indexing maps")
    kern = builder.kernel(names.new(c), ranges)
    try:
        kern.validate()
    except ValueError as e:
        raise CompileError(f"{location}: error: cannot form a dispatch: {e}") from None
    parts = split_reduction.split(kern)
    if parts is not None:
        names.taken.add(parts.partial.name)
        return builder.pre + _split_dispatches(c, parts)
    return builder.pre + [_dispatch(c, kern, builder.param_values)]


class _KernelBuilder:
    """Numbers one cluster into a kernel, collecting its params (with the values the host
    passes for them) and the host ops that read dynamic extents."""

    def __init__(self, c: Cluster) -> None:
        self.c = c
        self.pre: list[tir.Op] = []
        self.params: list[K.Param] = []
        self.param_values: list[tir.Value] = []
        self._param_names: dict[int, str] = {}           # value id -> param name
        self._dims: dict[tuple[int, int], str] = {}      # (value id, dim) -> param name

    def param(self, value: tir.Value, ty: str) -> str:
        """The param that passes host value `value` (one per value)."""
        if value.id not in self._param_names:
            self._param_names[value.id] = f"p{len(self.params)}"
            self.params.append(K.Param(self._param_names[value.id], ty))
            self.param_values.append(value)
        return self._param_names[value.id]

    def dim(self, value: tir.Value, d: int) -> K.Extent:
        """Dim `d` of `value`: its static size, or the param the host reads it into."""
        size = value.tensor_type.shape[d]
        if size is not None:
            return size
        if (value.id, d) not in self._dims:
            location = self.c.location
            idx = tir.Op("constant", [], [tir.Value(tir.ScalarType("index"))],
                         {"value": d}, location=location)
            op = tir.Op("tensor.dim", [value, idx.result],
                        [tir.Value(tir.ScalarType("index"))], location=location)
            self.pre.extend([idx, op])
            self._dims[(value.id, d)] = self.param(op.result, "index")
        return self._dims[(value.id, d)]

    def loop_ranges(self) -> list[K.Extent] | None:
        """Each loop's extent from an operand dim that indexes it directly, a static one
        first, else the extent the generic's own operands gave; None when a loop has none."""
        c = self.c
        operands = [(value, m) for value, m in c.operands() if m is not None]
        ranges: list[K.Extent | None] = [None] * c.num_loops
        for value, m in operands:
            shape = value.tensor_type.shape
            for r, j in enumerate(m.row_loops()):
                if j is not None and ranges[j] is None and shape[r] is not None:
                    ranges[j] = shape[r]
        for value, m in operands:
            for r, j in enumerate(m.row_loops()):
                if j is not None and ranges[j] is None:
                    ranges[j] = self.dim(value, r)
        found: list[K.Extent] = []
        for j, extent in enumerate(ranges):
            extent = extent if extent is not None else c.static_ranges[j]
            if extent is None:
                return None
            found.append(extent)
        return found

    def shape(self, value: tir.Value, m: AffineMap | None,
              ranges: list[K.Extent]) -> tuple[K.Extent, ...]:
        """Dims that index a loop directly share its extent (the host checks they match)."""
        out = []
        shape = value.tensor_type.shape
        for d in range(len(shape)):
            j = m.row_loop(d) if m is not None else None
            if j is not None and shape[d] is None:
                out.append(ranges[j])
            else:
                out.append(self.dim(value, d))
        return tuple(out)

    def kernel(self, name: str, ranges: list[K.Extent]) -> K.Kernel:
        c = self.c
        inputs = [K.Operand(k, i.value.tensor_type.element_type,
                            self.shape(i.value, i.map, ranges), i.map)
                  for k, i in enumerate(c.inputs)]
        n_in = len(inputs)
        outputs = [K.Operand(n_in + k, o.init.tensor_type.element_type,
                             self.shape(o.init, o.map, ranges), o.map)
                   for k, o in enumerate(c.outputs)]
        ops, yields = self.body()
        return K.Kernel(name, tuple(ranges), inputs, outputs, ops, yields, c.iterator_types,
                        tuple(self.params))

    def body(self) -> tuple[list[K.Op], list[int]]:
        """The body's ops in the kernel IR's value numbering, and the yielded values."""
        c = self.c
        n_in = len(c.inputs)
        number: dict[int, int] = {}
        for k, i in enumerate(c.inputs):
            number[id(i)] = k
        for k, o in enumerate(c.outputs):
            number[id(o)] = n_in + k
        ops: list[K.Op] = []
        base = n_in + len(c.outputs)
        ids: dict[int, int] = {}
        for n in c.nodes():
            if n.name in ("input", "output"):
                ids[id(n)] = number[id(n.ref)]
                continue
            int_value = n.int_value
            if n.name == "kernel.param":
                name = self.param(n.param_value, n.type)
                int_value = [p.name for p in self.params].index(name)
            elif n.name == "tensor.extract":
                int_value = number[id(n.ref)]
            ops.append(K.Op(n.name, tuple(ids[id(a)] for a in n.args), n.type, n.predicate,
                            int_value, n.float_value))
            ids[id(n)] = base + len(ops) - 1
        return ops, [ids[id(o.yields)] for o in c.outputs]


def _dispatch(c: Cluster, kern: K.Kernel, param_values: list[tir.Value]) -> tir.Op:
    """The dispatch op of `kern` (dispatch.py's docstring gives its operands and attrs)."""
    return tir.Op("dispatch",
                  [i.value for i in c.inputs] + [o.init for o in c.outputs] + param_values,
                  [o.result for o in c.outputs],
                  {"kernel": kern, "num_inputs": len(c.inputs), "num_outputs": len(c.outputs),
                   "fills": [o.fill for o in c.outputs],
                   "reads_init": [c.reads_init(k) for k in range(len(c.outputs))]},
                  location=c.location)


def _split_dispatches(c: Cluster, parts: split_reduction.Split) -> list[tir.Op]:
    """A long reduction over few points as two dispatches (split_reduction.py): partial
    results into transient tensors filled with the combiner's identity, then the fold of
    the partials into the outputs."""
    n_in, n_out = len(c.inputs), len(c.outputs)
    empties = [tir.Op("empty", [], [tir.Value(tir.TensorType(
        parts.partial_shape(k), o.init.tensor_type.element_type))],
        location=c.location) for k, o in enumerate(c.outputs)]
    partials = [tir.Value(e.result.type) for e in empties]
    first = tir.Op("dispatch", [i.value for i in c.inputs] + [e.result for e in empties],
                   partials, {"kernel": parts.partial, "num_inputs": n_in,
                              "num_outputs": n_out, "fills": list(parts.identities),
                              "reads_init": [True] * n_out}, location=c.location)
    second = tir.Op("dispatch", partials + [o.init for o in c.outputs],
                    [o.result for o in c.outputs],
                    {"kernel": parts.final, "num_inputs": n_out, "num_outputs": n_out,
                     "fills": [o.fill for o in c.outputs], "reads_init": [True] * n_out},
                    location=c.location)
    return empties + [first, second]
