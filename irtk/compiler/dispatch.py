"""Dispatch formation: TIR generics -> `dispatch` ops, each holding one `kernel.Kernel`.

Every generic starts as a cluster (cluster.py: a loop nest with symbolic body nodes). Clusters
then fuse, within one region and never through a `barrier`:
- producer fusion (fusion.py): an elementwise generic whose only user is another generic is
  inlined into that generic's body (one of at most two ops read only by generics, into each
  of them), its maps composed with the consumer's (affine.py), also
  through static reshapes between them whose index map is linear (an expand, a collapse of
  unit dims: `affine.reshape_map`);
- consumer fusion (fusion.py): an elementwise generic reading a result of an earlier cluster (a
  reduction, a matmul, an elementwise op) becomes an extra output of that cluster; under the
  kernel contract the last write of a parallel point wins, so the fused value is computed from
  the final accumulator (a matmul with its bias and activation is one dispatch);
- fill fusion (constants.py): a generic that only yields a constant and feeds a dispatch's
  output init becomes a fill of that output's buffer recorded just before the dispatch;
- split reductions: a long reduction over few parallel points becomes a partial and a final
  dispatch through a transient (split_reduction.py).
Host constants a body reads as scalars (captures, splat tensors) are inlined (constants.py);
other constants stay buffers. Each cluster is then materialized (materialize.py): dynamic
extents become kernel params whose values the host reads with `tensor.dim` ops inserted
before the dispatch.

The result is TIR in which each cluster is a `dispatch` op:
  operands   inputs, then output inits, then param values (host scalars, in kernel.params order)
  attrs      kernel, num_inputs, num_outputs, fills (per output: a value the host fills the
             output buffer with before the dispatch, or None), reads_init (per output: whether
             the kernel reads the initial value)
  results    one per output
"""
from __future__ import annotations

from irtk.compiler import tir
from irtk.compiler.cluster import Cluster, from_generic, hoistable_reshape, movable
from irtk.compiler.constants import fuse_fills, inline_constants
from irtk.compiler.affine import compose, reshape_map
from irtk.compiler.fusion import producer_inverse, fuse_into_producer, fuse_producers
from irtk.compiler.materialize import KernelNames, materialize
from irtk.errors import CompileError


def form_dispatches(program: tir.Program) -> tir.Program:
    """Rewrite every function's generics into dispatch ops (in place; returns `program`).
    A function that fails here is moved to `program.unsupported` with its located message."""
    names = KernelNames()
    for f in list(program.functions):
        names.start(f.name)
        try:
            _FunctionFormer(f, names).region(f.body)
        except CompileError as e:
            program.unsupported[f.name] = str(e)
            program.failed[f.name] = f
            program.functions.remove(f)
    return program


class _FunctionFormer:
    """Dispatch formation in one function, region by region (inner regions first)."""

    def __init__(self, function: tir.Function, names: KernelNames) -> None:
        self.function = function
        self.names = names
        self.uses: dict[int, int] = {}       # value id -> how many ops use it
        self.defs: dict[int, tir.Op] = {}    # value id -> the op that defines it
        self.dead: set[int] = set()          # ids of reshapes fusion read through
        # value id -> how many generics read it as an input (recomputing a producer in each
        # of its users pays only when every use is such a read: fusion.fuse_producers)
        self.generic_uses: dict[int, int] = {}
        for op in tir.walk(function.body):
            for v in op.operands:
                self.uses[v.id] = self.uses.get(v.id, 0) + 1
            if op.kind == "generic":
                for v in op.operands[:op.attrs["num_inputs"]]:
                    self.generic_uses[v.id] = self.generic_uses.get(v.id, 0) + 1
            for v in op.results:
                self.defs[v.id] = op

    def region(self, region: tir.Region) -> None:
        for op in region.ops:
            for r in op.regions:
                self.region(r)
        order = self.fuse(region)
        region.ops[:] = self.place(region, order)

    def fuse(self, region: tir.Region) -> list[Cluster]:
        """The region's generics as clusters, fused; in program order."""
        producer_of: dict[int, Cluster] = {}    # result value id -> cluster
        order: list[Cluster] = []
        local = {id(op) for op in region.ops}
        for op in region.ops:
            if op.kind != "generic":
                continue
            c = from_generic(op)
            order.append(c)
            self.look_through_reshapes(c, producer_of, local)
            fuse_producers(c, producer_of, order, self.uses, self.generic_uses)
            for o in c.outputs:
                producer_of[o.result.id] = c
        position = {id(op): i for i, op in enumerate(region.ops)}
        for c in list(order):
            fuse_into_producer(c, producer_of, order, position, self.defs)
        fuse_fills(order, self.uses, self.defs)
        inline_constants(order, self.defs)
        return order

    def look_through_reshapes(self, c: Cluster, producer_of: dict[int, Cluster],
                              local: set[int]) -> None:
        """Read through static reshapes of an elementwise producer's result: `c` reads the
        source itself through its map composed with the reshape's (linear: an expand, or a
        collapse of unit dims), so the producer can fuse into it. Only where `c` is the chain's
        only user; the reshapes (of this region: `local`, its op ids), then unused, leave the
        region (`dead`, dropped by `place`)."""
        for inp in c.inputs:
            if inp.map is None:
                continue
            reads = [i for i in c.inputs if i.value is inp.value]
            if any(i.map is None for i in reads) or self.uses.get(inp.value.id, 0) != len(reads):
                continue
            value, index_map = inp.value, None
            chain: list[tir.Op] = []
            while value.id not in producer_of:
                op = self.defs.get(value.id)
                if op is None or op.kind != "reshape" or id(op) in self.dead or \
                        id(op) not in local or (chain and self.uses.get(value.id, 0) != 1):
                    break
                step = reshape_map(op)
                if step is None:
                    break
                index_map = step if index_map is None else compose(step, index_map)
                chain.append(op)
                value = op.operands[0]
            if not chain or value.id not in producer_of or \
                    producer_inverse(producer_of[value.id]) is None:
                continue
            assert index_map is not None, "a chain of reshapes has a map"
            for i in reads:
                assert i.map is not None
                i.map = compose(index_map, i.map)
                i.value = value
            for op in chain:
                self.dead.add(id(op))
                self.uses[op.result.id] = 0
            self.uses[value.id] = self.uses.get(value.id, 0) - 1 + len(reads)

    @staticmethod
    def hoist(d: tir.Op | None, local: dict[int, tir.Op], new_ops: list[tir.Op],
              placed: set[int]) -> None:
        """Place `d` (a value's defining op in the region, if any) now, unless it is placed
        already or may not move: fusion only reads values defined before the root dispatch
        or made by ops that may move up (`movable`, `hoistable_reshape`)."""
        if d is None or id(d) in placed or d in new_ops:
            return
        if hoistable_reshape(d):
            source = local.get(d.operands[0].id)
            _FunctionFormer.hoist(source, local, new_ops, placed)
            if source is not None and id(source) not in placed and source not in new_ops:
                return   # its source stays below: so does it
        elif not movable(d):
            return
        new_ops.append(d)
        placed.add(id(d))

    def place(self, region: tir.Region, order: list[Cluster]) -> list[tir.Op]:
        """The region's ops with each cluster's generic replaced by its dispatch and the
        generics fused away dropped."""
        kept = {id(c.op): c for c in order}
        new_ops: list[tir.Op] = []
        placed: set[int] = set()
        local = {v.id: op for op in region.ops for v in op.results}
        for op in region.ops:
            if id(op) in placed or id(op) in self.dead:
                continue
            if op.kind != "generic":
                new_ops.append(op)
            elif id(op) in kept:
                c = kept[id(op)]
                ops = materialize(c, self.names, c.op.location or self.function.location)
                # A fused consumer's init and constants (and static reshapes of them) may be
                # defined after the root: hoist them, a reshape after its source.
                for v in ops[-1].operands:
                    self.hoist(local.get(v.id), local, new_ops, placed)
                new_ops.extend(ops)
        return new_ops
