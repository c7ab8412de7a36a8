"""Elementwise fusion: producers inlined into their consumer, consumers into their root.

- Producer fusion: an all-parallel generic whose only user is another generic is inlined into
  that generic's body, its maps composed with the consumer's (a permutation output map is
  inverted; `linalg.index` of the producer becomes an expression of the consumer's loops).
  Into a reduction only a cheap producer fuses, since a reduction re-reads its inputs. A cheap
  producer that only generics read is recomputed in each of them (`cheap_to_recompute`).
- Consumer fusion: an all-parallel generic reading one result of an earlier cluster (a
  reduction, a matmul, an elementwise op) through a permutation becomes an extra output of that
  cluster. Under the kernel contract the last write of a parallel point wins, so the fused
  value is computed from the final accumulator (a matmul with its bias and activation is one
  dispatch).

`uses` counts the ops that use each value (by id) in the function, `defs` gives the op that
defines it.
"""
from __future__ import annotations

from irtk.compiler import tir
from irtk.compiler.affine import compose, permutation_inverse, scatter_inverse
from irtk.compiler.cluster import (Cluster, Input, Output, clone, direct_extents,
                                   hoistable_reshape, movable)
from irtk.compiler.kernel import AffineMap

# A reduction recomputes a fused producer at every step: at most this many body ops (a cast,
# a scale) are worth it.
MAX_OPS_INTO_REDUCTION = 2
# A dispatch's body grows by what fuses into it; past this many body ops fusion stops and the
# chain continues in a new dispatch. Fusing costs time in the size of the body, so an unbounded
# chain of N elementwise ops would cost N^2; shader compilers also slow down on huge bodies.
MAX_FUSED_OPS = 64


def body_ops(c: Cluster) -> int:
    """How many body ops (not input or output reads) cluster `c` computes."""
    return sum(1 for n in c.nodes() if n.name not in ("input", "output"))


# -- producer fusion ---------------------------------------------------------------------------

def cheap_to_recompute(p: Cluster) -> bool:
    """At most MAX_OPS_INTO_REDUCTION body ops, none of them a math function. Recomputing
    softmax's exp(x - max) in the sum and the division instead of storing it cost more than
    the pass it saved (SwiftShader, 256x1024: the exp pass 1.34 ms and the two consumers
    0.82, against 3.3 for the two consumers each computing the exponentials)."""
    ops = [n.name for n in p.nodes() if n.name not in ("input", "output")]
    return len(ops) <= MAX_OPS_INTO_REDUCTION and not any(o.startswith("math.") for o in ops)


def fuse_producers(c: Cluster, producer_of: dict[int, Cluster], order: list[Cluster],
                   uses: dict[int, int], generic_uses: dict[int, int] | None = None) -> None:
    """Inline into `c` every producer cluster it alone reads, until none is left; and a
    producer that other generics read too (all its users are generics: `generic_uses`) when
    it is `cheap_to_recompute`, recomputed in each of them: layer norm's x - mean feeds both
    the variance and the normalization, and recomputing it drops its pass (a write and two
    reads of the whole tensor). The producer's dispatch goes once no op reads its result any
    more (`uses` counts down as consumers inline it)."""
    size = body_ops(c)
    changed = True
    while changed:
        changed = False
        for inp in list(c.inputs):
            p = producer_of.get(inp.value.id)
            if p is None or p is c or inp.map is None or p not in order:
                continue
            reads = sum(1 for i in c.inputs if i.value is inp.value)
            users = uses.get(inp.value.id, 0)
            shared = users > reads
            if shared and (generic_uses is None or
                           generic_uses.get(inp.value.id, 0) != users or
                           not cheap_to_recompute(p)):
                continue
            if users < reads:
                continue
            # Every read of the value goes through a map (none is a gather).
            targets = [(i, i.map) for i in c.inputs
                       if i.value is inp.value and i.map is not None]
            if len(targets) != reads:
                continue
            inverse = producer_inverse(p)
            if inverse is None:
                continue
            p_size = body_ops(p)
            if not c.is_elementwise and p_size > MAX_OPS_INTO_REDUCTION:
                continue
            if size + p_size * len(targets) > MAX_FUSED_OPS:
                continue
            if not _keeps_dynamic_extents(c, inp.value, p, inverse, targets):
                continue
            for target, target_map in targets:
                _inline_producer(c, target, compose(inverse, target_map), p)
            size += p_size * len(targets)
            uses[inp.value.id] = users - reads
            if generic_uses is not None and inp.value.id in generic_uses:
                generic_uses[inp.value.id] -= reads
            if shared:   # c reads p's inputs now, as p itself does while it stays
                for pin in p.inputs:
                    uses[pin.value.id] = uses.get(pin.value.id, 0) + reads
            else:
                order.remove(p)
            changed = True
            break


def producer_inverse(p: Cluster) -> AffineMap | None:
    """For a producer that may fuse into its consumer: the map from its output's index space
    to its loop points (its output map is a permutation); None for any other cluster."""
    if not p.is_elementwise or len(p.outputs) != 1 or p.reads_init(0) or p.consumers_fused:
        return None
    return permutation_inverse(p.outputs[0].map)


def _keeps_dynamic_extents(c: Cluster, value: tir.Value, p: Cluster, inverse: AffineMap,
                           targets: list[tuple[Input, AffineMap]]) -> bool:
    """Whether every dynamic loop of `c` keeps an operand dim that gives its extent once
    the reads of `value` (`targets`) are replaced by `p`'s inputs (`inverse`: p's
    `producer_inverse`)."""
    dynamic = {j for j, r in enumerate(c.static_ranges) if r is None}
    if not dynamic:
        return True
    operands = [(i.value, i.map) for i in c.inputs if i.value is not value]
    operands += [(o.init, o.map) for o in c.outputs]
    for _, target_map in targets:
        to_p = compose(inverse, target_map)
        operands += [(pin.value, compose(pin.map, to_p)) for pin in p.inputs
                     if pin.map is not None]
    covered = {j for v, m in operands for j, _ in direct_extents(v, m)}
    return dynamic <= covered


def _inline_producer(c: Cluster, target: Input, to_p: AffineMap, p: Cluster) -> None:
    """Replace `c`'s reads of input `target` by `p`'s body, moved into `c`'s loop nest
    (`to_p`: from `c`'s loop points to `p`'s)."""
    new_inputs: dict[int, Input] = {}
    for pin in p.inputs:
        new_inputs[id(pin)] = c.add_input(
            pin.value, None if pin.map is None else compose(pin.map, to_p))
    value = clone(p.outputs[0].yielded, {}, new_inputs, to_p)
    c.inputs.remove(target)
    c.replace_input(target, value)


# -- consumer fusion ---------------------------------------------------------------------------

def fuse_into_producer(c: Cluster, producer_of: dict[int, Cluster], order: list[Cluster],
                       position: dict[int, int], defs: dict[int, tir.Op]) -> None:
    """Make elementwise `c` an extra output of the one earlier cluster whose result it reads,
    when that cluster can compute it at each of its parallel points. `position`: each op's
    index in the region."""
    if c not in order or not c.is_elementwise or len(c.outputs) != 1 or c.reads_init(0):
        return
    sources = [(i, producer_of.get(i.value.id)) for i in c.inputs]
    roots = {id(r): r for _, r in sources if r is not None and r is not c and r in order}
    if len(roots) != 1:
        return
    (r,) = roots.values()
    if body_ops(r) + body_ops(c) > MAX_FUSED_OPS:
        return
    target = [i for i, p in sources if p is r]
    if len(target) != 1:
        return
    target_in = target[0]
    if target_in.map is None:
        return
    (out,) = [o for o in r.outputs if o.result is target_in.value]
    parallel = tuple(j for j, t in enumerate(r.iterator_types) if t == "parallel")
    if scatter_inverse(out.map, parallel) is None:
        return
    inv = permutation_inverse(target_in.map)
    if inv is None or inv.num_dims != len(out.map.rows):
        return
    if not _ready_before(c, target_in, position[id(r.op)], position, defs):
        return
    to_c = compose(inv, out.map)       # root loop point -> consumer loop point
    to_c = AffineMap(r.num_loops, to_c.rows)
    new_inputs: dict[int, Input] = {}
    for cin in c.inputs:
        if cin is not target_in:
            new_inputs[id(cin)] = r.add_input(
                cin.value, None if cin.map is None else compose(cin.map, to_c))
    # The consumer's read of the root's result is the value the root yields at this point.
    value = clone(c.outputs[0].yielded, {}, new_inputs, to_c, (target_in, out.yielded))
    cout = c.outputs[0]
    r.outputs.append(Output(cout.init, compose(cout.map, to_c), cout.result, value))
    r.consumers_fused += 1
    producer_of[cout.result.id] = r
    order.remove(c)


def _ready_before(c: Cluster, target_in: Input, root_position: int, position: dict[int, int],
                  defs: dict[int, tir.Op]) -> bool:
    """Whether everything else consumer `c` reads exists before the root dispatch runs (or
    may move up to it)."""
    def ready(v: tir.Value) -> bool:
        d = defs.get(v.id)
        if d is None or id(d) not in position or position[id(d)] < root_position:
            return True
        if hoistable_reshape(d):   # metadata only: it moves up with its source
            return ready(d.operands[0])
        return movable(d)
    return all(ready(v) for v in [i.value for i in c.inputs if i is not target_in] +
               [c.outputs[0].init] +
               [n.param_value for n in c.nodes() if n.name == "kernel.param"])
