"""Dispatch formation: TIR generics -> `dispatch` ops, each holding one `kernel.Kernel`.

Every generic starts as a cluster (a loop nest with symbolic body nodes). Clusters then fuse,
within one region and never through a `barrier`:
- producer fusion: an elementwise generic whose only user is another generic is inlined into
  that generic's body, its maps composed with the consumer's;
- consumer fusion: an elementwise generic reading a result of an earlier cluster (a reduction,
  a matmul, an elementwise op) becomes an extra output of that cluster; under the kernel
  contract the last write of a parallel point wins, so the fused value is computed from the
  final accumulator (a matmul with its bias and activation is one dispatch);
- fill fusion: a generic that only yields a constant and feeds a dispatch's output init becomes
  a fill of that output's buffer recorded just before the dispatch;
- split reductions: a long reduction over few parallel points becomes a partial and a final
  dispatch through a transient (split_reduction.py).
Host constants a body reads as scalars (captures, splat tensors) are inlined; other constants
stay buffers. Dynamic extents become kernel params whose values the host reads with
`tensor.dim` ops inserted before the dispatch.

The result is TIR in which each cluster is a `dispatch` op:
  operands   inputs, then output inits, then param values (host scalars, in kernel.params order)
  attrs      kernel, num_inputs, num_outputs, fills (per output: a value the host fills the
             output buffer with before the dispatch, or None), reads_init (per output: whether
             the kernel reads the initial value)
  results    one per output
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from irtk.compiler import kernel as K
from irtk.compiler import split_reduction, tir
from irtk.compiler.kernel import AffineMap
from irtk.errors import CompileError
from irtk.types import SCALAR_TYPES

FILLABLE_BYTES = 4   # hal fill patterns are 1, 2 or 4 bytes


# -- symbolic kernel bodies -------------------------------------------------------------------

@dataclass(eq=False)
class Node:
    """A body value: an input's element ("input"), an output's current value ("output"), or a
    scalar op (named as in kernel.BODY_OPS). `ref` is the Input/Output for the first two, the
    host Value for kernel.param, the gather Input for tensor.extract."""

    name: str
    args: list["Node"]
    type: str
    ref: object = None
    predicate: str = ""
    int_value: int = 0
    float_value: float = 0.0


@dataclass(eq=False)
class Input:
    value: tir.Value
    map: AffineMap | None


@dataclass(eq=False)
class Output:
    init: tir.Value
    map: AffineMap
    result: tir.Value
    yields: Node | None = None
    fill: object = None


@dataclass(eq=False)
class Cluster:
    op: tir.Op                      # the generic this cluster started from (its place)
    iterator_types: tuple[str, ...]
    inputs: list[Input]
    outputs: list[Output]
    location: str
    consumers_fused: int = 0
    # Static loop extents as the generic's own operands give them: producer fusion may remove
    # the operand that fixed an extent.
    static_ranges: list[int | None] = field(default_factory=list)

    @property
    def num_loops(self) -> int:
        return len(self.iterator_types)

    @property
    def is_elementwise(self) -> bool:
        return all(t == "parallel" for t in self.iterator_types)

    def reads_init(self, k: int) -> bool:
        node = self.outputs[k]
        return any(n.name == "output" and n.ref is node for n in self.nodes())

    def nodes(self) -> list[Node]:
        """Every node reachable from the yields, operands before users."""
        order: list[Node] = []
        seen: set[int] = set()
        stack = [(o.yields, False) for o in reversed(self.outputs) if o.yields is not None]
        while stack:
            n, done = stack.pop()
            if done:
                order.append(n)
                continue
            if id(n) in seen:
                continue
            seen.add(id(n))
            stack.append((n, True))
            for a in reversed(n.args):
                if id(a) not in seen:
                    stack.append((a, False))
        return order


def compose(outer: AffineMap, inner: AffineMap) -> AffineMap:
    """outer ∘ inner: `inner` maps points to outer's loop indices."""
    n = inner.num_dims
    rows = []
    for row in outer.rows:
        acc = [0] * (n + 1)
        for j, c in enumerate(row[:outer.num_dims]):
            if c:
                for t, v in enumerate(inner.rows[j]):
                    acc[t] += c * v
        acc[n] += row[-1]
        rows.append(tuple(acc))
    return AffineMap(n, tuple(rows))


def permutation_inverse(m: AffineMap) -> AffineMap | None:
    """The inverse of a permutation map (square, one coefficient 1 per row and column)."""
    n = m.num_dims
    perm = m.row_loops()
    if len(perm) != n or None in perm or sorted(perm) != list(range(n)):  # type: ignore[type-var]
        return None
    rows = [None] * n
    for r, j in enumerate(perm):
        rows[j] = tuple(1 if t == r else 0 for t in range(n + 1))
    return AffineMap(n, tuple(rows))  # type: ignore[arg-type]


def scatter_inverse(out_map: AffineMap, parallel: tuple[int, ...]) -> AffineMap | None:
    """For an output map that is a permutation of the parallel loops: the map from the loop
    nest's points to the output's index space (the map itself, when it is such a bijection)."""
    used = out_map.row_loops()
    if None in used or sorted(used) != sorted(parallel):  # type: ignore[type-var]
        return None
    return out_map


# -- formation ----------------------------------------------------------------------------------

def form_dispatches(program: tir.Program) -> tir.Program:
    """Rewrite every function's generics into dispatch ops (in place; returns `program`).
    A function that fails here is moved to `program.unsupported` with its located message."""
    names: set[str] = set()
    for f in list(program.functions):
        try:
            _FunctionFormer(f, names).run()
        except CompileError as e:
            program.unsupported[f.name] = str(e)
            program.functions.remove(f)
    return program


class _FunctionFormer:
    def __init__(self, function: tir.Function, names: set[str]) -> None:
        self.function = function
        self.names = names
        self.count = 0
        self.uses: dict[int, int] = {}
        self.defs: dict[int, tir.Op] = {}
        for op in tir.walk(function.body):
            for v in op.operands:
                self.uses[v.id] = self.uses.get(v.id, 0) + 1
            for v in op.results:
                self.defs[v.id] = op

    def run(self) -> None:
        self.region(self.function.body)

    def error(self, op: tir.Op, message: str) -> CompileError:
        return CompileError(f"{op.location or self.function.location}: error: {message}")

    # -- one region --------------------------------------------------------------------
    def region(self, region: tir.Region) -> None:
        for op in region.ops:
            for r in op.regions:
                self.region(r)
        clusters: dict[int, Cluster] = {}       # by the generic op's id
        producer_of: dict[int, Cluster] = {}    # result value id -> cluster
        order: list[Cluster] = []
        for op in region.ops:
            if op.kind != "generic":
                continue
            c = self.cluster(op)
            clusters[id(op)] = c
            order.append(c)
            self.fuse_producers(c, producer_of, order)
            for o in c.outputs:
                producer_of[o.result.id] = c
        position = {id(op): i for i, op in enumerate(region.ops)}
        for c in list(order):
            self.fuse_into_producer(c, producer_of, order, position)
        self.fuse_fills(order, producer_of)
        self.inline_constants(order)
        # Replace each cluster's generic by its dispatch; drop the generics fused away.
        kept = {id(c.op): c for c in order}
        new_ops: list[tir.Op] = []
        placed: set[int] = set()
        local = {v.id: op for op in region.ops for v in op.results}
        for op in region.ops:
            if id(op) in placed:
                continue
            if op.kind != "generic":
                new_ops.append(op)
            elif id(op) in kept:
                ops = self.dispatch(kept[id(op)])
                # A fused consumer's init and constants may be defined after the root: hoist.
                for v in ops[-1].operands:
                    d = local.get(v.id)
                    if d is not None and _movable(d) and id(d) not in placed \
                            and d not in new_ops:
                        new_ops.append(d)
                        placed.add(id(d))
                new_ops.extend(ops)
        region.ops[:] = new_ops

    def cluster(self, op: tir.Op) -> Cluster:
        n_in = op.attrs["num_inputs"]
        n_cap = op.attrs.get("num_captures", 0)
        n_out = len(op.operands) - n_in - n_cap
        maps = op.attrs["maps"]
        ins = [Input(v, m) for v, m in zip(op.operands[:n_in], maps[:n_in])]
        outs = [Output(v, m, r) for v, m, r in
                zip(op.operands[n_in:n_in + n_out], maps[n_in:n_in + n_out], op.results)]
        captures = op.operands[n_in + n_out:]
        c = Cluster(op, tuple(op.attrs["iterator_types"]), ins, outs, op.location)
        c.static_ranges = [None] * c.num_loops
        for value, m in [(i.value, i.map) for i in ins] + [(o.init, o.map) for o in outs]:
            for j, size in _direct_extents(value, m):
                if size is not None:
                    c.static_ranges[j] = size
        values: list[Node] = [Node("input", [], v.value.type.element_type, ref=v) for v in ins]
        values += [Node("output", [], o.init.type.element_type, ref=o) for o in outs]
        for kop in op.attrs["ops"]:
            args = [values[a] for a in kop.operands]
            ref: object = None
            if kop.name == "kernel.param":
                ref = captures[kop.int_value]
            elif kop.name == "tensor.extract":
                ref = ins[kop.int_value]
            values.append(Node(kop.name, args, kop.result_type, ref, kop.predicate,
                               kop.int_value, kop.float_value))
        for o, y in zip(outs, op.attrs["yields"]):
            o.yields = values[y]
        return c

    # -- producer fusion -----------------------------------------------------------------
    def fusable_producer(self, p: Cluster) -> bool:
        return (p.is_elementwise and len(p.outputs) == 1 and not p.reads_init(0)
                and not p.consumers_fused
                and permutation_inverse(p.outputs[0].map) is not None)

    def fuse_producers(self, c: Cluster, producer_of: dict[int, Cluster],
                       order: list[Cluster]) -> None:
        changed = True
        while changed:
            changed = False
            for inp in list(c.inputs):
                p = producer_of.get(inp.value.id)
                if p is None or p is c or inp.map is None or not self.fusable_producer(p):
                    continue
                # A reduction re-reads its inputs: only cheap producers (casts, a scale) are
                # worth recomputing at every reduction step.
                if not c.is_elementwise and sum(
                        1 for n in p.nodes() if n.name not in ("input", "output")) > 2:
                    continue
                uses = sum(1 for i in c.inputs if i.value is inp.value)
                if self.uses.get(inp.value.id, 0) != uses:
                    continue
                if not self.keeps_dynamic_extents(c, inp.value, p):
                    continue
                if any(i.value is inp.value and i.map is None for i in c.inputs):
                    continue
                for target in [i for i in c.inputs if i.value is inp.value]:
                    self.inline_producer(c, target, p)
                order.remove(p)
                changed = True
                break

    def keeps_dynamic_extents(self, c: Cluster, value: tir.Value, p: Cluster) -> bool:
        """Whether every dynamic loop of `c` keeps an operand dim that gives its extent once
        the reads of `value` are replaced by `p`'s inputs."""
        dynamic = {j for j, r in enumerate(c.static_ranges) if r is None}
        if not dynamic:
            return True
        operands = [(i.value, i.map) for i in c.inputs if i.value is not value]
        operands += [(o.init, o.map) for o in c.outputs]
        inverse = permutation_inverse(p.outputs[0].map)
        for target in [i for i in c.inputs if i.value is value]:
            to_p = compose(inverse, target.map)  # type: ignore[arg-type]
            operands += [(pin.value, compose(pin.map, to_p)) for pin in p.inputs
                         if pin.map is not None]
        covered = {j for v, m in operands for j, _ in _direct_extents(v, m)}
        return dynamic <= covered

    def inline_producer(self, c: Cluster, target: Input, p: Cluster) -> None:
        to_p = compose(permutation_inverse(p.outputs[0].map), target.map)  # type: ignore[arg-type]
        replaced: dict[int, Node] = {}
        new_inputs: dict[int, Input] = {}
        for pin in p.inputs:
            new_inputs[id(pin)] = self.add_input(
                c, pin.value, None if pin.map is None else compose(pin.map, to_p))
        value = self.clone(p.outputs[0].yields, replaced, new_inputs, to_p)
        c.inputs.remove(target)
        self.replace_input(c, target, value)

    def add_input(self, c: Cluster, value: tir.Value, m: AffineMap | None) -> Input:
        for i in c.inputs:
            if i.value is value and i.map == m and m is not None:
                return i
        i = Input(value, m)
        c.inputs.append(i)
        return i

    def clone(self, node: Node, memo: dict[int, Node], inputs: dict[int, Input],
              to_new: AffineMap, outputs: dict[int, Node] | None = None) -> Node:
        """`node` rebuilt in another loop nest: inputs remapped, linalg.index through `to_new`
        (old loop index j = row j of `to_new` over the new loop indices)."""
        if id(node) in memo:
            return memo[id(node)]
        if node.name == "input":
            new = Node("input", [], node.type, ref=inputs[id(node.ref)])
        elif node.name == "output":
            assert outputs is not None and id(node.ref) in outputs
            new = outputs[id(node.ref)]
        elif node.name == "linalg.index":
            new = self.index_expr(to_new.rows[node.int_value], node.type)
        else:
            args = [self.clone(a, memo, inputs, to_new, outputs) for a in node.args]
            ref = inputs[id(node.ref)] if node.name == "tensor.extract" else node.ref
            new = Node(node.name, args, node.type, ref, node.predicate, node.int_value,
                       node.float_value)
        memo[id(node)] = new
        return new

    @staticmethod
    def index_expr(row: tuple[int, ...], ty: str) -> Node:
        terms: list[Node] = []
        for j, coeff in enumerate(row[:-1]):
            if not coeff:
                continue
            t = Node("linalg.index", [], ty, int_value=j)
            if coeff != 1:
                t = Node("arith.muli", [t, Node("arith.constant", [], ty, int_value=coeff)], ty)
            terms.append(t)
        if row[-1] or not terms:
            terms.append(Node("arith.constant", [], ty, int_value=row[-1]))
        acc = terms[0]
        for t in terms[1:]:
            acc = Node("arith.addi", [acc, t], ty)
        return acc

    @staticmethod
    def replace_input(c: Cluster, old: Input, value: Node) -> None:
        for n in c.nodes():
            n.args = [value if (a.name == "input" and a.ref is old) else a for a in n.args]
        for o in c.outputs:
            if o.yields is not None and o.yields.name == "input" and o.yields.ref is old:
                o.yields = value

    # -- consumer fusion -----------------------------------------------------------------
    def fuse_into_producer(self, c: Cluster, producer_of: dict[int, Cluster],
                           order: list[Cluster], position: dict[int, int]) -> None:
        if c not in order or not c.is_elementwise or len(c.outputs) != 1 or c.reads_init(0):
            return
        sources = [(i, producer_of.get(i.value.id)) for i in c.inputs]
        roots = {id(r): r for _, r in sources if r is not None and r is not c and r in order}
        if len(roots) != 1:
            return
        (r,) = roots.values()
        target = [i for i, p in sources if p is r]
        if len(target) != 1 or target[0].map is None:
            return
        target_in = target[0]
        (out,) = [o for o in r.outputs if o.result is target_in.value]
        parallel = tuple(j for j, t in enumerate(r.iterator_types) if t == "parallel")
        if scatter_inverse(out.map, parallel) is None:
            return
        inv = permutation_inverse(target_in.map)
        if inv is None or inv.num_dims != len(out.map.rows):
            return
        # Everything else the consumer reads must exist before the root dispatch runs.
        r_pos = position[id(r.op)]
        for v in [i.value for i in c.inputs if i is not target_in] + [c.outputs[0].init] + \
                [n.ref for n in c.nodes() if n.name == "kernel.param"]:
            d = self.defs.get(v.id)  # type: ignore[union-attr]
            if d is not None and id(d) in position and position[id(d)] >= r_pos \
                    and not _movable(d):
                return
        to_c = compose(inv, out.map)       # root loop point -> consumer loop point
        to_c = AffineMap(r.num_loops, to_c.rows)
        new_inputs: dict[int, Input] = {}
        for cin in c.inputs:
            if cin is not target_in:
                new_inputs[id(cin)] = self.add_input(
                    r, cin.value, None if cin.map is None else compose(cin.map, to_c))
        memo: dict[int, Node] = {}
        # The consumer's read of the root's result is the value the root yields at this point.
        value = self.clone_consumer(c.outputs[0].yields, memo, new_inputs, to_c, target_in,
                                    out.yields)  # type: ignore[arg-type]
        cout = c.outputs[0]
        r.outputs.append(Output(cout.init, compose(cout.map, to_c), cout.result, value))
        r.consumers_fused += 1
        producer_of[cout.result.id] = r
        order.remove(c)

    def clone_consumer(self, node: Node, memo: dict[int, Node], inputs: dict[int, Input],
                       to_new: AffineMap, target: Input, root_value: Node) -> Node:
        if node.name == "input" and node.ref is target:
            return root_value
        if id(node) in memo:
            return memo[id(node)]
        if node.name in ("input", "linalg.index"):
            new = self.clone(node, memo, inputs, to_new)
        else:
            args = [self.clone_consumer(a, memo, inputs, to_new, target, root_value)
                    for a in node.args]
            ref = inputs[id(node.ref)] if node.name == "tensor.extract" else node.ref
            new = Node(node.name, args, node.type, ref, node.predicate, node.int_value,
                       node.float_value)
        memo[id(node)] = new
        return new

    # -- fills and constants -------------------------------------------------------------
    def constant_of(self, value: tir.Value) -> tir.Op | None:
        d = self.defs.get(value.id)
        if d is not None and d.kind == "constant" and not d.attrs.get("unfoldable"):
            return d
        return None

    def fill_value(self, c: Cluster) -> object:
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
            d = self.constant_of(y.ref)  # type: ignore[arg-type]
            if d is not None:
                return d.attrs["value"]
        return None

    def fuse_fills(self, order: list[Cluster], producer_of: dict[int, Cluster]) -> None:
        for f in list(order):
            value = self.fill_value(f)
            if value is None or fill_pattern(f.outputs[0].result.type.element_type, value) \
                    is None:
                continue
            result = f.outputs[0].result
            remaining = self.uses.get(result.id, 0)
            for x in order:
                if x is f:
                    continue
                for o in x.outputs:
                    if o.init is result:
                        o.init, o.fill = f.outputs[0].init, value
                        remaining -= 1
                        self.uses[result.id] -= 1
            if remaining == 0:
                order.remove(f)

    def inline_constants(self, order: list[Cluster]) -> None:
        for c in order:
            for n in c.nodes():
                if n.name == "kernel.param":
                    d = self.constant_of(n.ref)  # type: ignore[arg-type]
                    if d is not None and not isinstance(d.attrs["value"], np.ndarray):
                        self.make_constant(n, d.attrs["value"])
            for inp in list(c.inputs):
                d = self.constant_of(inp.value)
                if d is None or inp.map is None:
                    continue
                arr = np.asarray(d.attrs["value"])
                if arr.size == 0 or not (arr == arr.flat[0]).all():
                    continue
                scalar = arr.flat[0].item()
                const = Node("arith.constant", [], inp.value.type.element_type)
                self.make_constant(const, scalar)
                self.replace_input(c, inp, const)
                c.inputs.remove(inp)

    @staticmethod
    def make_constant(n: Node, value: object) -> None:
        n.name, n.args, n.ref = "arith.constant", [], None
        if SCALAR_TYPES[n.type].is_float:
            n.float_value = float(value)  # type: ignore[arg-type]
        else:
            n.int_value = int(value)  # type: ignore[call-overload]

    # -- kernels -------------------------------------------------------------------------
    def dispatch(self, c: Cluster) -> list[tir.Op]:
        """The ops that replace cluster `c`: tensor.dim reads of dynamic extents, the dispatch."""
        pre: list[tir.Op] = []
        params: list[K.Param] = []
        param_values: list[tir.Value] = []
        by_value: dict[int, str] = {}

        def param(value: tir.Value, ty: str) -> str:
            if value.id not in by_value:
                by_value[value.id] = f"p{len(params)}"
                params.append(K.Param(by_value[value.id], ty))
                param_values.append(value)
            return by_value[value.id]

        dims: dict[tuple[int, int], str] = {}

        def dim(value: tir.Value, d: int) -> K.Extent:
            size = value.type.shape[d]  # type: ignore[union-attr]
            if size is not None:
                return size
            if (value.id, d) not in dims:
                idx = tir.Op("constant", [], [tir.Value(tir.ScalarType("index"))],
                             {"value": d}, location=c.location)
                op = tir.Op("tensor.dim", [value, idx.result],
                            [tir.Value(tir.ScalarType("index"))], location=c.location)
                pre.extend([idx, op])
                dims[(value.id, d)] = param(op.result, "index")
            return dims[(value.id, d)]

        operands = [(i.value, i.map) for i in c.inputs] + [(o.init, o.map) for o in c.outputs]
        ranges: list[K.Extent | None] = [None] * c.num_loops
        for value, m in operands:
            if m is None:
                continue
            for r, j in enumerate(m.row_loops()):
                if j is not None and ranges[j] is None \
                        and value.type.shape[r] is not None:  # type: ignore[union-attr]
                    ranges[j] = value.type.shape[r]  # type: ignore[union-attr]
        for value, m in operands:
            if m is None:
                continue
            for r, j in enumerate(m.row_loops()):
                if j is not None and ranges[j] is None:
                    ranges[j] = dim(value, r)
        ranges = [r if r is not None else c.static_ranges[j] for j, r in enumerate(ranges)]
        if any(r is None for r in ranges):
            raise self.error(c.op, "cannot infer the loop ranges from the indexing maps")

        def shape(value: tir.Value, m: AffineMap | None) -> tuple[K.Extent, ...]:
            """Dims that index a loop directly share its extent (the host checks they match)."""
            out = []
            for d in range(len(value.type.shape)):  # type: ignore[union-attr]
                j = m.row_loop(d) if m is not None else None
                if j is not None and value.type.shape[d] is None:  # type: ignore[union-attr]
                    out.append(ranges[j])
                else:
                    out.append(dim(value, d))
            return tuple(out)  # type: ignore[arg-type]

        inputs = [K.Operand(k, i.value.type.element_type, shape(i.value, i.map), i.map)
                  for k, i in enumerate(c.inputs)]  # type: ignore[union-attr]
        n_in = len(inputs)
        outputs = [K.Operand(n_in + k, o.init.type.element_type, shape(o.init, o.map), o.map)
                   for k, o in enumerate(c.outputs)]  # type: ignore[union-attr]
        nodes = c.nodes()
        number: dict[int, int] = {}
        for k, i in enumerate(c.inputs):
            number[id(i)] = k
        for k, o in enumerate(c.outputs):
            number[id(o)] = n_in + k
        ops: list[K.Op] = []
        base = n_in + len(c.outputs)
        ids: dict[int, int] = {}
        for n in nodes:
            if n.name in ("input", "output"):
                ids[id(n)] = number[id(n.ref)]
                continue
            int_value = n.int_value
            if n.name == "kernel.param":
                name = param(n.ref, n.type)  # type: ignore[arg-type]
                int_value = [p.name for p in params].index(name)
            elif n.name == "tensor.extract":
                int_value = number[id(n.ref)]
            ops.append(K.Op(n.name, tuple(ids[id(a)] for a in n.args), n.type, n.predicate,
                            int_value, n.float_value))
            ids[id(n)] = base + len(ops) - 1
        name = self.kernel_name(c)
        kern = K.Kernel(name, tuple(ranges), inputs, outputs, ops,  # type: ignore[arg-type]
                        [ids[id(o.yields)] for o in c.outputs], c.iterator_types,
                        tuple(params))
        try:
            kern.validate()
        except ValueError as e:
            raise self.error(c.op, f"cannot form a dispatch: {e}") from None
        reads = [any(n.name == "output" and n.ref is o for n in nodes) for o in c.outputs]
        parts = split_reduction.split(kern)
        if parts is not None:
            return pre + self.split_dispatch(c, parts)
        op = tir.Op("dispatch",
                    [i.value for i in c.inputs] + [o.init for o in c.outputs] + param_values,
                    [o.result for o in c.outputs],
                    {"kernel": kern, "num_inputs": n_in, "num_outputs": len(c.outputs),
                     "fills": [o.fill for o in c.outputs], "reads_init": reads},
                    location=c.location)
        return pre + [op]

    def split_dispatch(self, c: Cluster, parts: split_reduction.Split) -> list[tir.Op]:
        """A long reduction over few points as two dispatches (split_reduction.py): partial
        results into transient tensors filled with the combiner's identity, then the fold of
        the partials into the outputs."""
        n_in, n_out = len(c.inputs), len(c.outputs)
        self.names.add(parts.partial.name)
        empties = [tir.Op("empty", [], [tir.Value(tir.TensorType(
            parts.partial_shape(k), o.init.type.element_type))],  # type: ignore[union-attr]
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

    def kernel_name(self, c: Cluster) -> str:
        kind = "elementwise" if c.is_elementwise else "reduction"
        if not c.is_elementwise and any(n.name in ("arith.mulf", "arith.muli")
                                        for n in c.nodes()) \
                and sum(1 for i in c.inputs if i.map is not None) >= 2:
            kind = "contraction"
        base = f"{self.function.name}_dispatch_{self.count}_{kind}"
        self.count += 1
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        return name


def _direct_extents(value: tir.Value, m: AffineMap | None) -> list[tuple[int, int | None]]:
    """(loop, static size or None) for each dim of `value` that a loop index addresses
    directly (map row exactly d_j)."""
    if m is None:
        return []
    return [(j, value.type.shape[r])  # type: ignore[union-attr]
            for r, j in enumerate(m.row_loops()) if j is not None]


def _movable(op: tir.Op) -> bool:
    """Ops without operands or effects that may move up to a dispatch that needs them."""
    return op.kind in ("empty", "constant") and not op.operands


def fill_pattern(element_type: str, value: object) -> tuple[int, int] | None:
    """(pattern, pattern length in bytes) that fills a buffer of `element_type` with `value`;
    None when no pattern of at most 4 bytes does (wide values with unequal halves)."""
    bits = SCALAR_TYPES[element_type].storage_bits
    if element_type in ("f32",):
        raw = struct.unpack("<I", struct.pack("<f", float(value)))[0]  # type: ignore[arg-type]
    elif element_type == "f16":
        raw = int(np.array(value, np.float16).view(np.uint16))
    elif element_type == "bf16":
        raw = int(np.array(value, np.float32).view(np.uint32)) >> 16
    elif element_type == "f64":
        raw = struct.unpack("<Q", struct.pack("<d", float(value)))[0]  # type: ignore[arg-type]
    elif SCALAR_TYPES[element_type].is_int:
        raw = int(value) & ((1 << max(bits, 8)) - 1)  # type: ignore[call-overload]
        if element_type == "i1":
            raw = 1 if int(value) else 0  # type: ignore[call-overload]
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
