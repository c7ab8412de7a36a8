"""Kernel IR -> LLVM IR: the loop nest of one kernel, built with `llvmlite.ir` objects.

A kernel's parallel points are the row-major linearization of its parallel loops; the native
function runs points [start, end), every reduction of each point, with the reference's result:

    void kernel(i8** operands, i64* args, i64 start, i64 end)

`operands` holds each operand's address (inputs, then outputs); `args` holds what is only known
at a dispatch (loop extents, each operand's layout, gather shapes, param bits; `ArgLayout`); a
static kernel without params has all of them built in, so LLVM sees constant strides.

Loop order. The points are cut into rows of the innermost parallel loop. Two orders keep the
reference's results:
- *points innermost* (the default): for each row, the reduction loops in lexicographic order,
  and inside them the row's points. Every point still folds its reduction points in loop order
  (its partial result lives in the output, which no other point touches), so a float sum keeps
  its sequential rounding bit for bit while LLVM vectorizes across points: a matmul becomes
  `C[i, :] += A[i, k] * B[k, :]` over k, vectorized along j.
- *reduction innermost*: for each point, its reduction loops inside, with the accumulators in
  registers. Chosen when every output folds a combiner whose order does not matter by the
  kernel IR's rules (integer and max/min combiners are exact in any order; a float sum or
  product of input elements as loaded is reassociated, marked `reassoc` so LLVM vectorizes
  it) and the innermost reduction loop walks memory contiguously where the points do not: a
  row sum.

Kernels this module cannot compile (packed or f8 element types, an op the native backend does
not claim, an output written by several points) raise `Unsupported`; the loader keeps them on
the numpy executor.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llvmlite import ir

from hal_cpu import kernel as kx
from hal_cpu.kernel import Kernel
from hal_cpu.native_ops import (F16, F32, F64, I1, I8, I16, I32, I64, NATIVE, NATIVE_TYPES,
                                Emitter, register_type)
from hal_cpu.ops import OpAttrs

PTR = ir.PointerType()
# Combiners whose fold order does not change the result (or may be reassociated by the rules).
_EXACT_COMBINERS = ("arith.addi", "arith.muli", "arith.andi", "arith.ori", "arith.xori",
                    "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui",
                    "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf")
_REASSOCIATED = ("arith.addf", "arith.mulf")
# A reassociated float sum folds chunks of this many reduction points, each summed in vector
# lanes from the identity, into the output in order: about as accurate as a pairwise sum.
CHUNK = 256


class Unsupported(Exception):
    """The kernel stays on the numpy executor; the message says why."""


@dataclass(frozen=True)
class ArgLayout:
    """Where each dispatch fact sits in the i64 `args` array of a kernel that needs one."""

    loops: int                          # loop extents at [0, loops)
    operands: int                       # per operand: const, one coefficient per loop
    gather_offsets: tuple[int, ...]     # per input: the index of its first dimension (or -1)
    params: int                         # param p's bits at params + p
    size: int


def arg_layout(k: Kernel) -> ArgLayout:
    n = len(k.static_loop_ranges)
    base = n + len(k.operands) * (n + 1)
    offsets, at = [], base
    for op in k.inputs:
        if op.is_gather:
            offsets.append(at)
            at += len(op.shape)
        else:
            offsets.append(-1)
    return ArgLayout(n, n, tuple(offsets), at, at + len(k.params))


def uses_args(k: Kernel) -> bool:
    """Whether the kernel reads dispatch facts at run time (else they are compiled in)."""
    return not (k.is_static and not k.params)


def check_supported(k: Kernel, attrs: Sequence[OpAttrs | None]) -> None:
    for op in k.operands:
        if op.element_type not in NATIVE_TYPES:
            raise Unsupported(f"{op.label} is {op.element_type}")
    for t in k.value_types:
        if t not in NATIVE_TYPES:
            raise Unsupported(f"a body value is {t}")
    for p in k.params:
        if p[1] not in ("index", "i32", "i64", "f32", "f64"):
            raise Unsupported(f"param {p[0]} is {p[1]}")
    n_ops = len(k.operands)
    for s, (step, a) in enumerate(zip(k.steps, attrs)):
        if step[0] != kx.STEP_OP:
            continue
        assert a is not None
        types = [k.value_types[v] for v in step[2]]
        if NATIVE.lookup(a.name, types, k.value_types[n_ops + s]) is None:
            raise Unsupported(f"{a.name} on {', '.join(types) or 'no operands'}")
    parallel = set(k.parallel_dims)
    for op in k.outputs:
        assert op.rows is not None
        used = {j for row in op.rows for j, c in enumerate(row[:len(k.iterator_types)]) if c}
        if not parallel <= used:
            raise Unsupported(f"{op.label} is written by several points")


def _loop(fn: ir.Function, b: ir.IRBuilder, lo: ir.Value, hi: ir.Value,
          body: Callable[[ir.Value], None], name: str) -> None:
    """for (i = lo; i < hi; ++i) body(i), leaving the builder after the loop."""
    pre = b.block
    header = fn.append_basic_block(f"{name}.head")
    inner = fn.append_basic_block(f"{name}.body")
    done = fn.append_basic_block(f"{name}.done")
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name=name)
    i.add_incoming(lo, pre)
    b.cbranch(b.icmp_signed("<", i, hi), inner, done)
    b.position_at_end(inner)
    body(i)
    step = b.add(i, ir.Constant(I64, 1))
    step.flags.extend(["nuw", "nsw"])
    i.add_incoming(step, b.block)
    b.branch(header)
    b.position_at_end(done)


class _Facts:
    """Dispatch facts as IR values: constants for a static kernel, loads from `args` else."""

    def __init__(self, k: Kernel, b: ir.IRBuilder, args: ir.Value) -> None:
        self.k, self.b, self.args = k, b, args
        self.layout = arg_layout(k)
        self.static = not uses_args(k)
        self._cache: dict[int, ir.Value] = {}
        if self.static:
            self.layouts = [kx.layout(op, k.static_loop_ranges, ()) for op in k.operands]

    def _arg(self, index: int) -> ir.Value:
        if index not in self._cache:
            self._cache[index] = self.b.load(self.b.gep(self.args, [ir.Constant(I64, index)],
                                                        source_etype=I64), typ=I64)
        return self._cache[index]

    def loop_range(self, j: int) -> ir.Value:
        if self.static:
            return ir.Constant(I64, self.k.static_loop_ranges[j])
        return self._arg(j)

    def const(self, i: int) -> ir.Value:
        if self.static:
            return ir.Constant(I64, self.layouts[i].const)
        return self._arg(self.layout.operands + i * (self.layout.loops + 1))

    def coeff(self, i: int, j: int) -> ir.Value:
        if self.static:
            return ir.Constant(I64, self.layouts[i].coeffs[j])
        return self._arg(self.layout.operands + i * (self.layout.loops + 1) + 1 + j)

    def static_coeff(self, i: int, j: int) -> int | None:
        return self.layouts[i].coeffs[j] if self.static else None

    def gather_dim(self, i: int, d: int) -> ir.Value:
        if self.static:
            return ir.Constant(I64, self.layouts[i].shape[d])
        return self._arg(self.layout.gather_offsets[i] + d)

    def param(self, p: int) -> ir.Value:
        return self._arg(self.layout.params + p)


def _storage_type(t: str) -> ir.Type:
    return {"i1": I8, "bf16": I16, "f16": F16, "f32": F32, "f64": F64}.get(t) or register_type(t)


def _load(b: ir.IRBuilder, ptr: ir.Value, t: str) -> ir.Value:
    v = b.load(ptr, typ=_storage_type(t))
    if t == "i1":
        return b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
    if t == "bf16":
        return b.bitcast(b.shl(b.zext(v, I32), ir.Constant(I32, 16)), F32)
    return v


def _store(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, t: str) -> None:
    if t == "i1":
        value = b.zext(value, I8)
    elif t == "bf16":
        value = b.trunc(b.lshr(b.bitcast(value, I32), ir.Constant(I32, 16)), I16)
    b.store(value, ptr)


def reduction_innermost(k: Kernel, attrs: Sequence[OpAttrs | None]) -> bool:
    """Whether the reduction-innermost order pays and keeps the rules (see the module doc)."""
    if not k.reduction_dims:
        return False
    n_in = len(k.inputs)
    base = len(k.operands)
    outs = {n_in + i for i in range(len(k.outputs))}
    combiners = set()
    for i, y in enumerate(k.yields):
        s = y - base
        if s < 0 or k.steps[s][0] != kx.STEP_OP:
            return False
        a = attrs[s]
        args = k.steps[s][2]
        if a is None or len(args) != 2 or (n_in + i) not in args:
            return False
        other = args[1] if args[0] == n_in + i else args[0]
        if a.name in _REASSOCIATED:
            if not (other < n_in and not k.inputs[other].is_gather):
                return False
        elif a.name not in _EXACT_COMBINERS:
            return False
        combiners.add(s)
    for s, (_, _, args) in enumerate(k.steps):
        if s not in combiners and any(v in outs or (v >= base and v - base in combiners)
                                      for v in args):
            return False
    if not k.is_static:
        return False
    lays = [kx.layout(op, k.static_loop_ranges, ()) for op in k.inputs]
    r_last = k.reduction_dims[-1]
    p_last = k.parallel_dims[-1] if k.parallel_dims else None
    contiguous_r = any(lay.coeffs[r_last] == 1 for op, lay in zip(k.inputs, lays)
                       if not op.is_gather)
    contiguous_p = p_last is not None and any(
        lay.coeffs[p_last] == 1 for op, lay in zip(k.inputs, lays) if not op.is_gather)
    return contiguous_r and not contiguous_p


def _attr(attrs: Sequence[OpAttrs | None], step: int) -> OpAttrs:
    a = attrs[step]
    assert a is not None
    return a


def _identity(a: OpAttrs, rtype: ir.Type) -> ir.Constant:
    """The identity of a reassociated float combiner (-0 keeps a sum of -0s at -0)."""
    return ir.Constant(rtype, -0.0 if a.name == "arith.addf" else 1.0)


def build(module: ir.Module, k: Kernel, attrs: Sequence[OpAttrs | None], name: str) -> None:
    """Add the kernel's native function `name` to `module`; raises Unsupported (and adds
    nothing) when the kernel stays on the numpy executor."""
    check_supported(k, attrs)
    fnty = ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I64])
    fn = ir.Function(module, fnty, name)
    fn.attributes.add("nounwind")
    operands_arg, args_arg, start, end = fn.args
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    facts = _Facts(k, b, args_arg)
    emitter = Emitter(b, module)
    n_ops = len(k.operands)
    n_in = len(k.inputs)
    ptrs = [b.load(b.gep(operands_arg, [ir.Constant(I64, i)], source_etype=PTR), typ=PTR)
            for i in range(n_ops)]
    nloops = len(k.static_loop_ranges)
    pdims = list(k.parallel_dims)
    rdims = list(k.reduction_dims)
    inner = facts.loop_range(pdims[-1]) if pdims else ir.Constant(I64, 1)
    lead = pdims[:-1]
    reassoc = reduction_innermost(k, attrs)
    # Accumulators of the reduction-innermost order (promoted to registers by LLVM).
    slots = [b.alloca(register_type(op.element_type)) for op in k.outputs] if reassoc else []
    combiner_steps = {y - n_ops for y in k.yields} if reassoc else set()
    chunked = reassoc and all(_attr(attrs, s).name in _REASSOCIATED for s in combiner_steps)
    chunk_slots = [b.alloca(register_type(op.element_type)) for op in k.outputs] \
        if chunked else []

    def address(i: int, index: dict[int, ir.Value]) -> ir.Value:
        flat: ir.Value = facts.const(i)
        for j in range(nloops):
            c = facts.static_coeff(i, j)
            if c == 0:
                continue
            if c == 1:
                flat = b.add(flat, index[j])
            else:
                flat = b.add(flat, b.mul(facts.coeff(i, j), index[j]))
        return b.gep(ptrs[i], [flat], source_etype=_storage_type(k.operands[i].element_type))

    def gather(i: int, indices: list[ir.Value]) -> ir.Value:
        op = k.inputs[i]
        flat: ir.Value = ir.Constant(I64, 0)
        count: ir.Value = ir.Constant(I64, 1)
        for d, idx in enumerate(indices):
            extent = facts.gather_dim(i, d)
            wide = b.sext(idx, I64)
            top = b.sub(extent, ir.Constant(I64, 1))
            clamped = emitter.call_intrinsic("llvm.smax", I64, [
                emitter.call_intrinsic("llvm.smin", I64, [wide, top]), ir.Constant(I64, 0)])
            flat = b.add(b.mul(flat, extent), clamped)
            count = b.mul(count, extent)
        rtype = register_type(op.element_type)
        if facts.static and math.prod(facts.layouts[i].shape) > 0:
            return _load(b, b.gep(ptrs[i], [flat], source_etype=_storage_type(op.element_type)),
                         op.element_type)
        # Possibly empty: an empty gather input reads 0, and nothing is loaded.
        empty = b.icmp_signed("<=", count, ir.Constant(I64, 0))
        with b.if_else(empty) as (then, otherwise):
            with then:
                zero_block = b.block
            with otherwise:
                value = _load(b, b.gep(ptrs[i], [flat],
                                       source_etype=_storage_type(op.element_type)),
                              op.element_type)
                load_block = b.block
        phi = b.phi(rtype)
        phi.add_incoming(ir.Constant(rtype, None), zero_block)
        phi.add_incoming(value, load_block)
        return phi

    def param(p: int) -> ir.Value:
        bits = facts.param(p)
        t = k.params[p][1]
        if t in ("index", "i32"):
            return b.trunc(bits, I32)
        if t == "f32":
            return b.bitcast(b.trunc(bits, I32), F32)
        if t == "f64":
            return b.bitcast(bits, F64)
        return bits

    def body(index: dict[int, ir.Value], locations: list[ir.Value]) -> None:
        values: list[ir.Value | None] = []
        for i, op in enumerate(k.inputs):
            values.append(None if op.is_gather else _load(b, address(i, index), op.element_type))
        for o, op in enumerate(k.outputs):
            if k.read_outputs[o]:
                if reassoc:
                    values.append(b.load(locations[o], typ=register_type(op.element_type)))
                else:
                    values.append(_load(b, locations[o], op.element_type))
            else:
                values.append(None)
        for s, step in enumerate(k.steps):
            kind = step[0]
            payload = step[1]
            if kind == kx.STEP_INDEX:
                assert isinstance(payload, int)
                values.append(b.trunc(index[payload], I32))
            elif kind == kx.STEP_PARAM:
                assert isinstance(payload, int)
                values.append(param(payload))
            elif kind == kx.STEP_EXTRACT:
                assert isinstance(payload, int)
                values.append(gather(payload, [values[v] for v in step[2]]))
            else:
                a = attrs[s]
                assert a is not None
                types = [k.value_types[v] for v in step[2]]
                impl = NATIVE.lookup(a.name, types, k.value_types[n_ops + s])
                assert impl is not None
                v = impl(emitter, [values[x] for x in step[2]], a, types,
                         k.value_types[n_ops + s])
                if s in combiner_steps and a.name in _REASSOCIATED and \
                        isinstance(v, ir.Instruction):
                    v.flags.append("reassoc")
                values.append(v)
        for o, (op, y) in enumerate(zip(k.outputs, k.yields)):
            value = values[y]
            assert value is not None
            if reassoc:
                b.store(value, locations[o])
            else:
                _store(b, value, locations[o], op.element_type)

    def lead_index(r: ir.Value) -> dict[int, ir.Value]:
        index: dict[int, ir.Value] = {}
        rest = r
        for j in reversed(lead):
            extent = facts.loop_range(j)
            index[j] = b.urem(rest, extent)
            rest = b.udiv(rest, extent)
        return index

    def row(r: ir.Value, lo: ir.Value | None = None) -> None:
        index = lead_index(r)
        first = b.mul(r, inner)
        hi = emitter.call_intrinsic("llvm.smin", I64, [b.sub(end, first), inner])
        if lo is None:
            lo = emitter.call_intrinsic("llvm.smax", I64, [b.sub(start, first),
                                                           ir.Constant(I64, 0)])

        def out_locations(ix: dict[int, ir.Value]) -> list[ir.Value]:
            return [address(n_in + o, ix) for o in range(len(k.outputs))]

        def reductions(level: int, ix: dict[int, ir.Value], leaf: Callable[[dict], None],
                       chunk: bool = False) -> None:
            if level == len(rdims):
                leaf(ix)
                return
            j = rdims[level]
            if chunk and level == len(rdims) - 1:
                extent = facts.loop_range(j)
                count = b.udiv(b.add(extent, ir.Constant(I64, CHUNK - 1)), ir.Constant(I64, CHUNK))

                def one_chunk(c: ir.Value) -> None:
                    for o, y in enumerate(k.yields):
                        b.store(_identity(_attr(attrs, y - n_ops), register_type(
                            k.outputs[o].element_type)), chunk_slots[o])
                    first = b.mul(c, ir.Constant(I64, CHUNK))
                    last = emitter.call_intrinsic("llvm.smin", I64, [
                        b.add(first, ir.Constant(I64, CHUNK)), extent])
                    _loop(fn, b, first, last, lambda v: leaf({**ix, j: v}), f"r{j}")
                    for o, y in enumerate(k.yields):
                        a = _attr(attrs, y - n_ops)
                        t = k.outputs[o].element_type
                        rt = register_type(t)
                        impl = NATIVE.lookup(a.name, [t, t], t)
                        assert impl is not None
                        total = impl(emitter, [b.load(slots[o], typ=rt),
                                               b.load(chunk_slots[o], typ=rt)], a, [t, t], t)
                        b.store(total, slots[o])
                _loop(fn, b, ir.Constant(I64, 0), count, one_chunk, f"c{j}")
                return

            def step(v: ir.Value) -> None:
                reductions(level + 1, {**ix, j: v}, leaf, chunk)
            _loop(fn, b, ir.Constant(I64, 0), facts.loop_range(j), step, f"r{j}")

        if not reassoc:
            def points(ix: dict[int, ir.Value]) -> None:
                def point(p: ir.Value) -> None:
                    full = dict(ix)
                    if pdims:
                        full[pdims[-1]] = p
                    body(full, out_locations(full))
                _loop(fn, b, lo, hi, point, "p")
            reductions(0, dict(index), points)
        else:
            def point(p: ir.Value) -> None:
                full = dict(index)
                if pdims:
                    full[pdims[-1]] = p
                locs = out_locations(full)
                for o, op in enumerate(k.outputs):
                    b.store(_load(b, locs[o], op.element_type), slots[o])
                if chunked:
                    reductions(0, full, lambda ix: body(ix, chunk_slots), chunk=True)
                else:
                    reductions(0, full, lambda ix: body(ix, slots))
                for o, op in enumerate(k.outputs):
                    _store(b, b.load(slots[o], typ=register_type(op.element_type)), locs[o],
                           op.element_type)
            _loop(fn, b, lo, hi, point, "p")

    def epilogue_at(ix: dict[int, ir.Value]) -> None:
        """The other outputs of a GEMM kernel at one point, from its final sum."""
        assert gemm is not None
        t = k.outputs[0].element_type
        values: dict[int, ir.Value] = {n_ops + gemm.add_step: _load(b, address(n_in, ix), t)}
        for s in gemm.epilogue:
            a = _attr(attrs, s)
            args = k.steps[s][2]
            types = [k.value_types[v] for v in args]
            impl = NATIVE.lookup(a.name, types, k.value_types[n_ops + s])
            assert impl is not None
            values[n_ops + s] = impl(emitter, [values[v] for v in args], a, types,
                                     k.value_types[n_ops + s])
        for o in range(1, len(k.outputs)):
            _store(b, values[k.yields[o]], address(n_in + o, ix), k.outputs[o].element_type)

    row_lo = b.udiv(start, inner)
    row_hi = b.add(b.udiv(b.sub(end, ir.Constant(I64, 1)), inner), ir.Constant(I64, 1))
    nonempty = b.icmp_signed("<", start, end)
    gemm = gemm_operands(k, attrs)
    with b.if_then(nonempty):
        if gemm is None:
            _loop(fn, b, row_lo, row_hi, row, "row")
        else:
            _gemm_rows(fn, b, emitter, k, facts, ptrs, gemm, inner, start, end, row_lo, row_hi,
                       lead_index, row, epilogue_at)
    b.ret_void()


# --- the contraction micro-kernel ------------------------------------------------------------

@dataclass(frozen=True)
class Gemm:
    """out += a * b where b and out walk the innermost parallel loop contiguously and a does not
    move with it: a register-blocked micro-kernel applies (a matmul; a convolution as an
    implicit GEMM over its output channels)."""

    a: int
    b: int
    t: str
    rows: int                # rows of points per block (each its own accumulators)
    width: int               # lanes per vector
    vectors: int             # vectors per row of a tile
    add_step: int            # the step whose value is the sum (output 0's yield)
    epilogue: tuple[int, ...]  # steps computed from the final sum (the other outputs' values)


def gemm_operands(k: Kernel, attrs: Sequence[OpAttrs | None]) -> Gemm | None:
    if not k.reduction_dims or not k.parallel_dims or not k.is_static or k.params:
        return None
    t = k.outputs[0].element_type
    if t not in ("f32", "f64") or not k.read_outputs[0] or any(k.read_outputs[1:]):
        return None
    n_in = len(k.inputs)
    base = len(k.operands)
    names = [a.name if a is not None else "" for a in attrs]
    s_add = k.yields[0] - base
    if s_add < 0 or names[s_add] != "arith.addf":
        return None
    add_args = k.steps[s_add][2]
    if n_in not in add_args:
        return None
    m = add_args[1] if add_args[0] == n_in else add_args[0]
    if m < base or names[m - base] != "arith.mulf":
        return None
    x, y = k.steps[m - base][2]
    if x == y or x >= n_in or y >= n_in or k.inputs[x].is_gather or k.inputs[y].is_gather:
        return None
    if any(op.element_type != t for op in k.inputs):
        return None
    # The other steps: an epilogue of the sum (a fused relu or bias), computed once at the end.
    epilogue: list[int] = []
    known = {base + s_add}
    for s, step in enumerate(k.steps):
        if s in (s_add, m - base):
            continue
        if step[0] != kx.STEP_OP or not all(v in known for v in step[2]):
            return None
        epilogue.append(s)
        known.add(base + s)
    if not all(y in known for y in k.yields[1:]):
        return None
    lays = [kx.layout(op, k.static_loop_ranges, ()) for op in k.operands]
    p = k.parallel_dims[-1]
    lead = k.parallel_dims[:-1]
    if lays[n_in].coeffs[p] != 1:
        return None
    for a, bb in ((x, y), (y, x)):
        if lays[a].coeffs[p] == 0 and lays[bb].coeffs[p] == 1 and \
                all(lays[bb].coeffs[j] == 0 for j in lead):
            wide = "+avx512f" in _host_features()
            lane_bytes = 64 if wide else 32
            return Gemm(a, bb, t, 6 if wide else 4, lane_bytes // (4 if t == "f32" else 8),
                        4 if wide else 2, s_add, tuple(epilogue))
    return None


def _host_features() -> str:
    from hal_cpu import llvm_jit
    return llvm_jit.target().features


def _gemm_rows(fn: ir.Function, b: ir.IRBuilder, e: Emitter, k: Kernel, facts: _Facts,
               ptrs: list[ir.Value], g: Gemm, inner: ir.Value, start: ir.Value, end: ir.Value,
               row_lo: ir.Value, row_hi: ir.Value,
               lead_index: Callable[[ir.Value], dict[int, ir.Value]],
               row: Callable[..., None],
               epilogue_at: Callable[[dict[int, ir.Value]], None]) -> None:
    """Rows of the chunk: a partial first row, then blocks of `g.rows` whole rows through the
    micro-kernel (whole tiles of `vectors * width` points; the rest of each row generic), the
    whole rows left one by one through it, then the partial last row generic. Every point still folds its products in loop order."""
    one = ir.Constant(I64, 1)
    full_lo = b.udiv(b.add(start, b.sub(inner, one)), inner)      # first row inside the chunk
    full_hi = b.udiv(end, inner)                                   # past the last one
    rows_c = ir.Constant(I64, g.rows)
    span = e.call_intrinsic("llvm.smax", I64, [b.sub(full_hi, full_lo), ir.Constant(I64, 0)])
    blocks = b.udiv(span, rows_c)
    head_hi = e.call_intrinsic("llvm.smin", I64, [full_lo, row_hi])
    _loop(fn, b, row_lo, head_hi, row, "head")
    n_in = len(k.inputs)
    et = F32 if g.t == "f32" else F64
    vt = ir.VectorType(et, g.width)
    tile = g.width * g.vectors
    with b.goto_entry_block():
        accs = [[b.alloca(vt) for _ in range(g.vectors)] for _ in range(g.rows)]
    rdims = list(k.reduction_dims)

    def offset(i: int, ix: dict[int, ir.Value], dims: Sequence[int]) -> ir.Value:
        flat: ir.Value = ir.Constant(I64, 0)
        for j in dims:
            c = facts.layouts[i].coeffs[j]
            if c:
                flat = b.add(flat, b.mul(ir.Constant(I64, c), ix[j]))
        return flat

    def splat(x: ir.Value) -> ir.Value:
        v = b.insert_element(ir.Constant(vt, ir.Undefined), x, ir.Constant(I32, 0))
        return b.shuffle_vector(v, ir.Constant(vt, ir.Undefined),
                                ir.Constant(ir.VectorType(I32, g.width), [0] * g.width))

    def block(first: ir.Value, bi: ir.Value, nrows: int) -> None:
        rows_n = ir.Constant(I64, nrows)
        r0 = b.add(first, b.mul(bi, rows_n))
        lead_ix = [lead_index(b.add(r0, ir.Constant(I64, r))) for r in range(nrows)]
        lead_dims = list(k.parallel_dims[:-1])
        a_base = [b.add(facts.const(g.a), offset(g.a, ix, lead_dims)) for ix in lead_ix]
        c_base = [b.add(facts.const(n_in), offset(n_in, ix, lead_dims)) for ix in lead_ix]
        b_base = facts.const(g.b)
        tiles = b.udiv(inner, ir.Constant(I64, tile))

        def one_tile(ti: ir.Value) -> None:
            j0 = b.mul(ti, ir.Constant(I64, tile))
            for r in range(nrows):
                for v in range(g.vectors):
                    at = b.add(b.add(c_base[r], j0), ir.Constant(I64, v * g.width))
                    b.store(b.load(b.gep(ptrs[n_in], [at], source_etype=et), typ=vt, align=4),
                            accs[r][v])

            def leaf(ix: dict[int, ir.Value]) -> None:
                boff = b.add(b.add(b_base, offset(g.b, ix, rdims)), j0)
                bv = [b.load(b.gep(ptrs[g.b], [b.add(boff, ir.Constant(I64, v * g.width))],
                                   source_etype=et), typ=vt, align=4) for v in range(g.vectors)]
                a_red = offset(g.a, ix, rdims)
                for r in range(nrows):
                    a = b.load(b.gep(ptrs[g.a], [b.add(a_base[r], a_red)], source_etype=et),
                               typ=et)
                    av = splat(a)
                    for v in range(g.vectors):
                        # The product, rounded, then the sum: as the kernel's two ops.
                        acc = b.load(accs[r][v], typ=vt)
                        b.store(b.fadd(acc, b.fmul(av, bv[v])), accs[r][v])

            def nest(level: int, ix: dict[int, ir.Value]) -> None:
                if level == len(rdims):
                    leaf(ix)
                    return
                j = rdims[level]
                _loop(fn, b, ir.Constant(I64, 0), facts.loop_range(j),
                      lambda v: nest(level + 1, {**ix, j: v}), f"g{j}")
            nest(0, {})
            for r in range(nrows):
                for v in range(g.vectors):
                    at = b.add(b.add(c_base[r], j0), ir.Constant(I64, v * g.width))
                    b.store(b.load(accs[r][v], typ=vt),
                            b.gep(ptrs[n_in], [at], source_etype=et), align=4)
            if g.epilogue or len(k.outputs) > 1:
                p = k.parallel_dims[-1]

                def epilogue_row(r: ir.Value) -> None:
                    ix = lead_index(r)
                    _loop(fn, b, j0, b.add(j0, ir.Constant(I64, tile)),
                          lambda j: epilogue_at({**ix, p: j}), "epi")
                _loop(fn, b, r0, b.add(r0, rows_n), epilogue_row, "epirow")
        _loop(fn, b, ir.Constant(I64, 0), tiles, one_tile, "tile")
        rest = b.mul(tiles, ir.Constant(I64, tile))
        _loop(fn, b, r0, b.add(r0, rows_n), lambda r: row(r, rest), "rest")

    _loop(fn, b, ir.Constant(I64, 0), blocks, lambda bi: block(full_lo, bi, g.rows), "block")
    # Whole rows left over (fewer than a block): one row at a time, still through tiles.
    single = b.add(full_lo, b.mul(blocks, rows_c))
    _loop(fn, b, ir.Constant(I64, 0), b.sub(span, b.mul(blocks, rows_c)),
          lambda bi: block(single, bi, 1), "single")
    tail_lo = e.call_intrinsic("llvm.smax", I64, [b.add(full_lo, span), head_hi])
    _loop(fn, b, tail_lo, row_hi, row, "tail")


__all__ = ["ArgLayout", "Unsupported", "arg_layout", "build", "check_supported",
           "reduction_innermost", "uses_args"]
