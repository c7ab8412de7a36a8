"""Clusters: the dispatch regions of dispatch formation, before they become kernels.

A cluster is a loop nest whose body is a graph of symbolic `Node`s: reading an input's element,
an output's current value, or a scalar op. Fusion (fusion.py, constants.py) rewrites clusters by
moving bodies from one loop nest into another; materialize.py numbers the result into a
`kernel.Kernel`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from irtk.compiler import tir
from irtk.compiler.kernel import AffineMap


@dataclass(eq=False)
class Node:
    """A body value: an input's element ("input"), an output's current value ("output"), or a
    scalar op (named as in irtk.body_ops). `ref` is the Input/Output for the first two, the
    host Value for kernel.param, the gather Input for tensor.extract."""

    name: str
    args: list["Node"]
    type: str
    ref: Input | Output | tir.Value | None = None
    predicate: str = ""
    int_value: int = 0
    float_value: float = 0.0

    @property
    def param_value(self) -> tir.Value:
        """The host value a kernel.param node reads."""
        if not isinstance(self.ref, tir.Value):
            raise ValueError(f"a {self.name} node reads no host value")
        return self.ref


@dataclass(eq=False)
class Input:
    value: tir.Value
    map: AffineMap | None


@dataclass(eq=False)
class Output:
    init: tir.Value
    map: AffineMap
    result: tir.Value
    # None only while from_generic builds the body, whose "output" nodes refer to this.
    yields: Node | None = None
    fill: float | int | None = None   # a value the host fills the output buffer with first

    @property
    def yielded(self) -> Node:
        """The node this output yields."""
        if self.yields is None:
            raise ValueError("an output whose body is not built yet")
        return self.yields


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

    def operands(self) -> list[tuple[tir.Value, AffineMap | None]]:
        """(value, map) of every input, then of every output's init."""
        return [(i.value, i.map) for i in self.inputs] + [(o.init, o.map) for o in self.outputs]

    def add_input(self, value: tir.Value, m: AffineMap | None) -> Input:
        """An input reading `value` through `m`: an existing one, else a new one."""
        for i in self.inputs:
            if i.value is value and i.map == m and m is not None:
                return i
        i = Input(value, m)
        self.inputs.append(i)
        return i

    def replace_input(self, old: Input, value: Node) -> None:
        """Every read of input `old` becomes `value`."""
        for n in self.nodes():
            n.args = [value if (a.name == "input" and a.ref is old) else a for a in n.args]
        for o in self.outputs:
            if o.yields is not None and o.yields.name == "input" and o.yields.ref is old:
                o.yields = value


def from_generic(op: tir.Op) -> Cluster:
    """The cluster of one TIR generic: its operands, and its body as nodes."""
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
    for value, m in c.operands():
        for j, size in direct_extents(value, m):
            if size is not None:
                c.static_ranges[j] = size
    values = [Node("input", [], v.value.tensor_type.element_type, ref=v) for v in ins]
    values += [Node("output", [], o.init.tensor_type.element_type, ref=o) for o in outs]
    for kop in op.attrs["ops"]:
        args = [values[a] for a in kop.operands]
        ref: tir.Value | Input | None = None
        if kop.name == "kernel.param":
            ref = captures[kop.int_value]
        elif kop.name == "tensor.extract":
            ref = ins[kop.int_value]
        values.append(Node(kop.name, args, kop.result_type, ref, kop.predicate,
                           kop.int_value, kop.float_value))
    for o, y in zip(outs, op.attrs["yields"]):
        o.yields = values[y]
    return c


def direct_extents(value: tir.Value, m: AffineMap | None) -> list[tuple[int, int | None]]:
    """(loop, static size or None) for each dim of `value` that a loop index addresses
    directly (map row exactly d_j)."""
    if m is None:
        return []
    shape = value.tensor_type.shape
    return [(j, shape[r]) for r, j in enumerate(m.row_loops()) if j is not None]


def clone(node: Node, memo: dict[int, Node], inputs: dict[int, Input], to_new: AffineMap,
          replaced: tuple[Input, Node] | None = None) -> Node:
    """`node` rebuilt in another loop nest: inputs remapped, linalg.index through `to_new`
    (old loop index j = row j of `to_new` over the new loop indices), and the reads of input
    `replaced[0]`, if given, replaced by node `replaced[1]`. A fused body never reads an
    output's current value. Iterative: a body may be a chain thousands of ops deep."""
    def leaf(n: Node) -> Node | None:
        """The clone of `n` when it needs no clones of its args."""
        if replaced is not None and n.name == "input" and n.ref is replaced[0]:
            return replaced[1]
        if id(n) in memo:
            return memo[id(n)]
        assert n.name != "output", "a fused body reads an output"
        if n.name == "input":
            new = Node("input", [], n.type, ref=inputs[id(n.ref)])
        elif n.name == "linalg.index":
            new = index_expr(to_new.rows[n.int_value], n.type)
        else:
            return None
        memo[id(n)] = new
        return new

    stack: list[tuple[Node, bool]] = [(node, False)]
    done: dict[int, Node] = {}   # clones of replaced inputs and leaves, by original id
    while stack:
        n, args_ready = stack.pop()
        if not args_ready:
            new = leaf(n)
            if new is not None:
                done[id(n)] = new
                continue
            stack.append((n, True))
            stack.extend((a, False) for a in reversed(n.args)
                         if id(a) not in memo and id(a) not in done)
            continue
        if id(n) in memo:
            continue
        args = [done[id(a)] if id(a) in done else memo[id(a)] for a in n.args]
        ref = inputs[id(n.ref)] if n.name == "tensor.extract" else n.ref
        memo[id(n)] = done[id(n)] = Node(n.name, args, n.type, ref, n.predicate, n.int_value,
                                         n.float_value)
    return done[id(node)] if id(node) in done else memo[id(node)]


def index_expr(row: tuple[int, ...], ty: str) -> Node:
    """The body ops that compute one affine map row over the loop indices."""
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


def movable(op: tir.Op) -> bool:
    """Ops without operands or effects that may move up to a dispatch that needs them."""
    return op.kind in ("empty", "constant") and not op.operands


def hoistable_reshape(op: tir.Op) -> bool:
    """A static reshape: metadata only, so it may move up to a dispatch that needs it once its
    source is there (a batch norm's per-channel constants, expanded to 6x1x1, are reshaped
    after the convolution they scale)."""
    return op.kind == "reshape" and len(op.operands) == 1
