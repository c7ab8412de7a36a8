"""How the executor runs one box of a kernel: the strategy is chosen once per kernel at load.

`choose_plan` recognizes the body shapes that numpy can run wholesale (see `hal_cpu.kernel`):
a kernel without reduction loops is elementwise; an integer multiply-accumulate is a
contraction (`numpy.einsum`, exact in any order); outputs that each fold a recognized combiner
over a value that does not depend on any output use numpy's accumulations and reductions;
everything else runs its reduction points one after another, vectorized over the parallel points.

Float summation order (kernel.py, "Reassociation"): a float add/mul combiner whose other operand
is an input element as loaded is reassociated (pairwise, numpy's `reduce`); any other float
reduction (a computed addend, e.g. a matmul's product) keeps the loop's sequential order, each
step rounded, as linalg specifies.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hal_cpu import kernel as kx
from hal_cpu.kernel import Bound, Kernel, LoopBox
from hal_cpu.ops import (FLOAT_TYPES, INT_TYPES, NATIVE_FLOATS, SUB_BYTE_INTS, as_unsigned,
                         from_unsigned)
from irtk.hal import numerics
from irtk.types import SCALAR_TYPES

Reducer = Callable[[np.ndarray, tuple[int, ...]], np.ndarray]
# Folds a slab of values (reduction axes given) into an accumulator, with the combiner op.
Fold = Callable[[np.ndarray, np.ndarray, tuple[int, ...], Callable], np.ndarray]

# Integers numpy's reductions and einsum handle as numbers (i1's arithmetic is logical).
_WHOLE_INTS = tuple(t for t in INT_TYPES if t != "i1")
_CASTS = ("arith.extf", "arith.extsi", "arith.extui", "arith.sitofp", "arith.uitofp")


class _Plan:
    """What every plan has: its kernel, and blocks of `kx.BLOCK_ITERATIONS` points."""

    name = ""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    def block_points(self, bound: Bound) -> int:
        return kx.BLOCK_ITERATIONS

    def run_box(self, bound: Bound, box: LoopBox) -> None:
        raise NotImplementedError

    def run_range(self, bound: Bound, start: int, end: int) -> None:
        self.kernel.run_boxes(self, bound, start, end)

    def min_chunk_points(self, bound: Bound) -> int | None:
        return None


class Elementwise(_Plan):
    """No reduction loop: the body runs once over each box."""

    name = "elementwise"

    def run_box(self, bound: Bound, box: LoopBox) -> None:
        k = self.kernel
        values = kx.evaluate(bound, box, None)
        n_in = len(k.inputs)
        for i, y in enumerate(k.yields):
            kx.write(bound, n_in + i, box, values[y])


class Sequential(_Plan):
    """Reduction points one after another, each vectorized over the box's parallel points."""

    name = "sequential"

    def run_box(self, bound: Bound, box: LoopBox) -> None:
        k = self.kernel
        n_in = len(k.inputs)
        carried: list = [kx.read(bound, n_in + i, box, copy=True) if k.read_outputs[i] else None
                         for i in range(len(k.outputs))]
        step = list(box)
        for rbox in kx.boxes(bound.reduction_extents, 0, bound.reduction_total):
            # Walk each reduction box point by point, in lexicographic order.
            for point in np.ndindex(*[n for _, n in rbox]):
                for j, (lo, _), p in zip(k.reduction_dims, rbox, point):
                    step[j] = (lo + p, 1)
                values = kx.evaluate(bound, step, carried)
                carried = [values[y] for y in k.yields]
        for i, value in enumerate(carried):
            kx.write(bound, n_in + i, box, value)


class Combiner(_Plan):
    """Each output folds an associative combiner over a value computed from the inputs."""

    name = "combiner"

    def __init__(self, kernel: Kernel, combiners: list[tuple[int, int, Fold]]) -> None:
        super().__init__(kernel)
        self.combiners = combiners          # per output: (combiner step, folded value, fold)
        self.skip = frozenset(s for s, _, _ in combiners)

    def block_points(self, bound: Bound) -> int:
        return max(1, min(kx.BLOCK_ITERATIONS, kx.SLAB_ELEMENTS // max(1, bound.reduction_total)))

    def run_box(self, bound: Bound, box: LoopBox) -> None:
        k = self.kernel
        n_in = len(k.inputs)
        axes = k.reduction_dims
        points = 1
        for j in k.parallel_dims:
            points *= box[j][1]
        acc = [kx.read(bound, n_in + i, box, copy=True) for i in range(len(k.outputs))]
        slab = max(1, kx.SLAB_ELEMENTS // max(1, points))
        sub = list(box)
        for s in range(0, bound.reduction_total, slab):
            for rbox in kx.boxes(bound.reduction_extents, s, min(s + slab, bound.reduction_total)):
                for j, r in zip(axes, rbox):
                    sub[j] = r
                values = kx.evaluate(bound, sub, [None] * len(k.outputs), self.skip)
                shape = tuple(n for _, n in sub)
                for i, (step, folded, fold) in enumerate(self.combiners):
                    x = np.broadcast_to(values[folded], shape)
                    acc[i] = fold(acc[i], x, axes, k.op_fn(step))
        for i, value in enumerate(acc):
            kx.write(bound, n_in + i, box, value)


class Contraction(_Plan):
    """out = out + a*b summed over the reduction loops: one einsum per box."""

    name = "contraction"

    def __init__(self, kernel: Kernel, add_step: int, factors: list[tuple[int, int | None]]
                 ) -> None:
        super().__init__(kernel)
        self.add_step = add_step
        self.factors = factors              # (input index, cast step or None)

    def run_box(self, bound: Bound, box: LoopBox) -> None:
        k = self.kernel
        n_in = len(k.inputs)
        arrays, subscripts, used = [], [], set()
        for index, cast in self.factors:
            lay = bound.layouts[index]
            dims = [j for j, c in enumerate(lay.coeffs) if c != 0]
            view = _decode(k.inputs[index].element_type, kx.strided(bound, index, box, True))
            if cast is not None:
                view = k.op_fn(cast)(view)
            arrays.append(view)
            subscripts.append("".join(chr(97 + j) for j in dims))
            used.update(dims)
        out_dims = [j for j in k.parallel_dims if j in used]
        spec = f"{subscripts[0]},{subscripts[1]}->{''.join(chr(97 + j) for j in out_dims)}"
        total = np.einsum(spec, *arrays, optimize=True)
        shape = [1] * len(box)
        for j in out_dims:
            shape[j] = box[j][1]
        total = np.asarray(total).reshape(shape)
        current = kx.read(bound, n_in, box, copy=True)
        add = k.op_fn(self.add_step)
        kx.write(bound, n_in, box, add(current, total))


def _decode(t: str, view: np.ndarray) -> np.ndarray:
    if SCALAR_TYPES[t].packed or SCALAR_TYPES[t].stores_values:
        return view
    return numerics.from_bits(t, view)


# --- recognition -------------------------------------------------------------------------------

def _max_reduce(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    r = np.max(x, axis=axes, keepdims=True)        # propagates NaN
    zero = r == 0
    if zero.any():                                  # +0 is above -0
        pos = np.any((x == 0) & ~np.signbit(x), axis=axes, keepdims=True)
        r = np.where(zero, np.where(pos, x.dtype.type(0), x.dtype.type(-0.0)), r)
    return r


def _min_reduce(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    r = np.min(x, axis=axes, keepdims=True)
    zero = r == 0
    if zero.any():
        neg = np.any((x == 0) & np.signbit(x), axis=axes, keepdims=True)
        r = np.where(zero, np.where(neg, x.dtype.type(-0.0), x.dtype.type(0)), r)
    return r


def _signed_zeros(reduce: Reducer, larger: bool) -> Reducer:
    """A max/min reduction whose zero result is ordered -0 < +0 (numpy's fmax/fmin leave it
    open)."""
    def fixed(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        r = reduce(x, axes)
        zero = r == 0
        if zero.any():
            pick = ~np.signbit(x) if larger else np.signbit(x)
            found = np.any((x == 0) & pick, axis=axes, keepdims=True)
            plus, minus = x.dtype.type(0), x.dtype.type(-0.0)
            r = np.where(zero, np.where(found, plus if larger else minus,
                                        minus if larger else plus), r)
        return r
    return fixed


def _ufunc_reducer(ufunc: np.ufunc, t: str) -> Reducer:
    def reduce(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        r = ufunc.reduce(x, axis=axes, dtype=x.dtype, keepdims=True)
        return numerics.wrap_int(t, r) if t in SUB_BYTE_INTS else r
    return reduce


def _unsigned_reducer(ufunc: np.ufunc, t: str) -> Reducer:
    return lambda x, axes: from_unsigned(t, ufunc.reduce(as_unsigned(t, x), axis=axes, keepdims=True))


def _unordered(reduce: Reducer) -> Fold:
    """An exact combiner (integers, max/min): any order gives the same result."""
    return lambda acc, x, axes, combine: combine(acc, reduce(x, axes))


def _ordered(ufunc: np.ufunc) -> Fold:
    """Float add/mul: fold in the loop's own order (lexicographic over the reduction loops), each
    step rounded, with `ufunc.accumulate` running the sequence in C."""
    def fold(acc: np.ndarray, x: np.ndarray, axes: tuple[int, ...], combine: Callable
             ) -> np.ndarray:
        n, r = x.ndim, len(axes)
        ends = tuple(range(n - r, n))
        seq = np.moveaxis(x, axes, ends)
        seq = seq.reshape(seq.shape[:n - r] + (-1,))
        start = np.broadcast_to(acc, tuple(1 if j in axes else d for j, d in enumerate(x.shape)))
        start = np.moveaxis(start, axes, ends).reshape(seq.shape[:-1] + (1,))
        run = ufunc.accumulate(np.concatenate([start, seq], axis=-1), axis=-1)
        return np.expand_dims(run[..., -1], axes)
    return fold


def _pairwise(ufunc: np.ufunc) -> Fold:
    """Float add/mul over input elements as loaded: reassociated, numpy's pairwise reduction
    over the flattened reduction loops."""
    def fold(acc: np.ndarray, x: np.ndarray, axes: tuple[int, ...], combine: Callable
             ) -> np.ndarray:
        n, r = x.ndim, len(axes)
        seq = np.moveaxis(x, axes, tuple(range(n - r, n)))
        seq = np.ascontiguousarray(seq).reshape(seq.shape[:n - r] + (-1,))
        total = ufunc.reduce(seq, axis=-1, dtype=x.dtype)
        return combine(acc, np.expand_dims(total, axes))
    return fold


def _reducer(name: str, t: str) -> Fold | None:
    if name in ("arith.addf", "arith.mulf"):
        # f16/f32/f64 round after each step in their own dtype; bf16 and the small floats
        # need a rounding numpy cannot do inside accumulate: they run sequentially.
        if t in NATIVE_FLOATS:
            return _ordered(np.add if name == "arith.addf" else np.multiply)
        return None
    floats = {"arith.maximumf": _max_reduce, "arith.minimumf": _min_reduce,
              "arith.maxnumf": _signed_zeros(_ufunc_reducer(np.fmax, t), True),
              "arith.minnumf": _signed_zeros(_ufunc_reducer(np.fmin, t), False)}
    if name in floats and t in FLOAT_TYPES:
        return _unordered(floats[name])
    if t not in _WHOLE_INTS:
        return None
    table = {"arith.addi": np.add, "arith.muli": np.multiply, "arith.andi": np.bitwise_and,
             "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor,
             "arith.maxsi": np.maximum, "arith.minsi": np.minimum}
    if name in table:
        return _unordered(_ufunc_reducer(table[name], t))
    if name in ("arith.maxui", "arith.minui"):
        return _unordered(_unsigned_reducer(np.maximum if name == "arith.maxui"
                                            else np.minimum, t))
    return None


def _users(kernel: Kernel) -> dict[int, list[int]]:
    """Value -> the steps that use it (yields are step -1)."""
    users: dict[int, list[int]] = {}
    for s, (_, _, args) in enumerate(kernel.steps):
        for a in args:
            users.setdefault(a, []).append(s)
    for y in kernel.yields:
        users.setdefault(y, []).append(-1)
    return users


def _combiner_plan(kernel: Kernel) -> Combiner | None:
    n_in = len(kernel.inputs)
    base = len(kernel.operands)
    users = _users(kernel)
    outs = {n_in + i for i in range(len(kernel.outputs))}
    combiner_steps: set[int] = set()
    found = []
    for i, y in enumerate(kernel.yields):
        s = y - base
        if s < 0 or kernel.steps[s][0] != kx.STEP_OP or kernel.yields.count(y) != 1:
            return None
        name, t = kernel.step_names[s], kernel.value_types[y]
        reducer = _reducer(name, t)
        args = kernel.steps[s][2]
        if reducer is None or len(args) != 2 or (n_in + i) not in args:
            return None
        folded = args[1] if args[0] == n_in + i else args[0]
        if name in ("arith.addf", "arith.mulf") and t in NATIVE_FLOATS \
                and folded < n_in and not kernel.inputs[folded].is_gather:
            reducer = _pairwise(np.add if name == "arith.addf" else np.multiply)
        if folded == n_in + i or users.get(n_in + i) != [s] or users.get(y) != [-1]:
            return None
        combiner_steps.add(s)
        found.append((s, folded, reducer))
    # Nothing but the combiners may look at an output's value or at a combiner's result.
    for s, (_, _, args) in enumerate(kernel.steps):
        if s not in combiner_steps and \
                any(a in outs or (a >= base and a - base in combiner_steps) for a in args):
            return None
    return Combiner(kernel, found)


def _contraction_plan(kernel: Kernel) -> Contraction | None:
    n_in = len(kernel.inputs)
    base = len(kernel.operands)
    if len(kernel.outputs) != 1 or len(kernel.reduction_dims) == 0 or \
            len(kernel.iterator_types) > 26:
        return None
    t = kernel.outputs[0].element_type
    # Float contractions keep the sequential order (the combiner plan runs them exactly).
    if t not in _WHOLE_INTS:
        return None
    add_name, mul_name = "arith.addi", "arith.muli"
    s_add = kernel.yields[0] - base
    if s_add < 0 or kernel.step_names[s_add] != add_name:
        return None
    a, b = kernel.steps[s_add][2]
    m = b if a == n_in else a if b == n_in else None
    if m is None or m == n_in or m < base or kernel.step_names[m - base] != mul_name:
        return None
    steps_used = {s_add, m - base}
    factors: list[tuple[int, int | None]] = []
    for f in kernel.steps[m - base][2]:
        if f < n_in and not kernel.inputs[f].is_gather:
            factors.append((f, None))
        elif f >= base and kernel.step_names[f - base] in _CASTS:
            (src,) = kernel.steps[f - base][2]
            if src >= n_in or kernel.inputs[src].is_gather:
                return None
            factors.append((src, f - base))
            steps_used.add(f - base)
        else:
            return None
    if steps_used != set(range(len(kernel.steps))):
        return None
    # Every reduction loop must be summed by einsum: some factor has to walk it.
    walked = {j for i, _ in factors for row in kernel.inputs[i].rows or ()
              for j in range(len(kernel.iterator_types)) if row[j]}
    if not set(kernel.reduction_dims) <= walked:
        return None
    return Contraction(kernel, s_add, factors)


def choose_plan(kernel: Kernel) -> Elementwise | Sequential | Combiner | Contraction:
    if not kernel.reduction_dims:
        return Elementwise(kernel)
    return _contraction_plan(kernel) or _combiner_plan(kernel) or Sequential(kernel)
