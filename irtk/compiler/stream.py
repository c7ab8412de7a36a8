"""Buffer planning: where each dispatch output lives and how it gets its initial value.

The kernel contract makes outputs read-write: the buffer must hold the `outs` value before the
dispatch. Per output this phase picks one mode:
  alloc    a new (or reused) buffer; the kernel overwrites every element and never reads it
  zero     a new buffer filled with zeros (the init is `tensor.empty` but the kernel reads it)
  fill     a new buffer filled with the fused fill's value
  inplace  the init's own buffer: the init is a dispatch result of the same region that nothing
           else uses (it is dead afterwards)
  copy     a new buffer holding a copy of the init (arguments, constants, globals and values
           still used later are never written: modules are read-only and calls repeatable)
New buffers reuse the buffer of a transient whose lifetime has ended (same byte size, same
region). Values share a storage id when they share a buffer (aliases, in-place updates), so
the host code generator can place barriers between dispatches that touch the same storage.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from irtk.compiler import kernel as K
from irtk.compiler import tir
from irtk.types import storage_bytes

ALIAS_OPS = ("reshape", "barrier", "tie_shape", "cast")
# Uses that read a value without keeping it: after the last one its buffer may be reused.
TRANSIENT_USES = ("dispatch", "tensor.extract", "tensor.dim", "check.expect_true",
                  "check.expect_false", "check.expect_all_true", "check.expect_eq",
                  "check.expect_almost_eq")


@dataclass
class OutputPlan:
    mode: str                      # alloc | zero | fill | inplace | copy
    reuse: int | None = None       # storage id whose (dead) buffer this output takes over


@dataclass
class StreamPlan:
    outputs: dict[tuple[int, int], OutputPlan] = field(default_factory=dict)
    storage: dict[int, int] = field(default_factory=dict)   # value id -> storage id

    def output(self, op: tir.Op, k: int) -> OutputPlan:
        return self.outputs[(id(op), k)]


def plan_program(program: tir.Program) -> dict[str, StreamPlan]:
    return {f.name: plan_function(f) for f in program.functions}


def covers_output(kernel: K.Kernel, k: int) -> bool:
    """Whether the kernel writes every element of output k."""
    o = kernel.outputs[k]
    used = o.point_map.loop_per_row()
    if used is None or any(kernel.loop_ranges[j] != o.shape[r] for r, j in enumerate(used)):
        return False
    return sorted(used) == sorted(kernel.parallel_dims)


def plan_function(function: tir.Function) -> StreamPlan:
    plan = StreamPlan()
    ids = itertools.count()
    uses: dict[int, int] = {}
    defs: dict[int, tir.Op] = {}
    for op in tir.walk(function.body):
        for v in op.operands:
            uses[v.id] = uses.get(v.id, 0) + 1
        for v in op.results:
            defs[v.id] = op
    _plan_region(function.body, plan, ids, uses, defs, function.args)
    return plan


def _plan_region(region: tir.Region, plan: StreamPlan, ids: Iterator[int], uses: dict[int, int],
                 defs: dict[int, tir.Op], args: list[tir.Value]) -> None:
    for v in args:
        plan.storage.setdefault(v.id, next(ids))
    # Last top-level position using each value, and values some use keeps (returns, stores,
    # nested regions, calls): those buffers are never handed to another value here.
    last_use: dict[int, int] = {}
    kept: set[int] = set()
    for i, op in enumerate(region.ops):
        inner = [v for sub in op.regions for o in tir.walk(sub) for v in o.operands]
        for v in list(op.operands) + inner:
            last_use[v.id] = i
            # An alias keeps the buffer through its own result, which joins the holders.
            if op.kind not in TRANSIENT_USES + ALIAS_OPS or op.regions:
                kept.add(v.id)
    owned: dict[int, int] = {}        # storage id -> byte size, for buffers this region made
    holders: dict[int, list[int]] = {}
    free: list[tuple[int, int]] = []  # (storage, byte size)
    for i, op in enumerate(region.ops):
        for r in op.regions:
            _plan_region(r, plan, ids, uses, defs, r.args)
        # Storages whose every holder is dead and unkept are free from here on.
        for s in list(holders):
            hs = holders[s]
            if s in owned and all(last_use.get(h, -1) < i and h not in kept for h in hs):
                free.append((s, owned[s]))
                del holders[s]
        if op.kind in ALIAS_OPS:
            src = plan.storage.get(op.operands[0].id)
            s = src if src is not None else next(ids)
            plan.storage[op.result.id] = s
            if s in holders:
                holders[s].append(op.result.id)
            continue
        if op.kind != "dispatch":
            for v in op.results:
                plan.storage[v.id] = next(ids)
            continue
        kern: K.Kernel = op.attrs["kernel"]
        n_in = op.attrs["num_inputs"]
        for k, result in enumerate(op.results):
            init = op.operands[n_in + k]
            init_def = defs.get(init.id)
            size = _static_bytes(result.type)
            if op.attrs["fills"][k] is not None:
                mode = "fill"
            elif init_def is not None and init_def.kind == "empty":
                mode = "zero" if op.attrs["reads_init"][k] else "alloc"
            elif not op.attrs["reads_init"][k] and covers_output(kern, k):
                mode = "alloc"
            elif (init_def is not None and init_def.kind == "dispatch"
                  and init_def in region.ops and uses.get(init.id, 0) == 1
                  and plan.storage.get(init.id) in holders):
                mode = "inplace"
            else:
                mode = "copy"
            out = OutputPlan(mode)
            if mode == "inplace":
                s = plan.storage[init.id]
                holders[s].append(result.id)
            else:
                if size is not None:
                    for j, (fs, fsize) in enumerate(free):
                        if fsize == size:
                            del free[j]
                            out.reuse = fs
                            break
                if out.reuse is not None:
                    s = out.reuse
                else:
                    s = next(ids)
                    if size is not None:
                        owned[s] = size
                holders[s] = [result.id]
            plan.storage[result.id] = s
            plan.outputs[(id(op), k)] = out


def _static_bytes(t: tir.Type) -> int | None:
    if isinstance(t, tir.TensorType) and t.is_static:
        return storage_bytes(t.element_type, math.prod(t.static_shape))
    return None
