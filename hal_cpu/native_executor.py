"""The native executor: each kernel of an executable runs as machine code built by LLVM.

When an executable is created, `attach` builds one LLVM module with a function per kernel
(`hal_cpu.native_codegen`), compiles it for the host (or finds it in the disk cache,
`hal_cpu.llvm_jit`) and gives every kernel it could compile a `NativePlan`; the others keep
their numpy plan. A dispatch's chunks call the function through ctypes, which releases the GIL,
so local-task's workers run chunks on every core at once.

The module file never carries machine code: the code is generated here from the kernel IR the
loader verified, so a hostile module still cannot run anything the verifier did not prove in
bounds (static maps over the whole loop box at load, dynamic ones at each bind; gathers clamp
their indices as the reference does).

`IRTK_CPU_EXECUTOR` selects the executor: `native` (the default) or `reference` (numpy only,
the executor every native result is checked against).
"""
from __future__ import annotations

import ctypes
import math
import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from llvmlite import ir

from hal_cpu import llvm_jit, native_codegen
from hal_cpu.kernel import Bound, Kernel, LoopBox, Plan
from irtk.errors import DeviceError
from irtk.types import SCALAR_TYPES

EXECUTORS = ("native", "reference")
# Body evaluations (points x reduction points x steps) that make a native chunk worth handing
# to another thread: machine code does one in about a nanosecond, a hand-off costs tens of
# microseconds of Python.
CHUNK_WORK = 1 << 22
_log = logging.getLogger("irtk.hal_cpu")


def executor() -> str:
    """The executor `IRTK_CPU_EXECUTOR` selects (native unless it says reference)."""
    value = os.environ.get("IRTK_CPU_EXECUTOR", "native").strip() or "native"
    if value not in EXECUTORS:
        raise DeviceError(f"IRTK_CPU_EXECUTOR is {value!r}: expected one of "
                          f"{', '.join(EXECUTORS)}")
    return value


class NativePlan:
    """Runs a kernel's parallel points with its native function; `fallback` (the numpy plan)
    takes dispatches whose outputs overlap each other, which the native code may not see."""

    name = "native"

    def __init__(self, kernel: Kernel, entry: Any, fallback: Plan, code: llvm_jit.LoadedCode,
                 order: str) -> None:
        self.kernel = kernel
        self.entry = entry
        self.fallback = fallback
        self.code = code                 # keeps the machine code alive
        self.order = order               # "points innermost" or "reduction innermost"
        self.uses_args = native_codegen.uses_args(kernel)
        self.arg_layout = native_codegen.arg_layout(kernel)

        self._direct = _direct_operands(kernel) if not self.uses_args else None
        if self._direct is not None:
            self._shape = _StaticShape(kernel)
            self._pointer_array = ctypes.c_void_p * max(1, len(self._direct))
            kernel.direct_bind = self.bind_direct

    def bind_direct(self, bindings: Sequence[Any]) -> Bound | None:
        """A static kernel's dispatch straight from its bindings' addresses, without the numpy
        views `Kernel.bind` makes (a small program's dispatches are mostly that cost). None
        when anything is unusual — a binding missing, short, read-only where written, or one
        an output shares with another operand — so `bind` reports or handles it."""
        direct = self._direct
        assert direct is not None
        addresses = []
        keep: list = []
        seen: set[int] = set()
        shared = False
        for binding, need, written in direct:
            if binding >= len(bindings):
                return None
            buffer, offset, length = bindings[binding]
            base = getattr(buffer, "address", None)
            if base is None or need > length or (written and buffer.read_only):
                return None
            keep.append(buffer.host_memory)   # raises for a released buffer, as bind does;
            addresses.append(base + offset)   # the bytes outlive a release meanwhile
            key = id(buffer)
            shared = shared or key in seen
            seen.add(key)
        if shared and self._overlapping(bindings):
            return None
        pointers = self._pointer_array(*addresses)
        keep.append(pointers)
        return DirectBound(self.kernel, (pointers, NO_ARGS, keep), self._shape)

    def _overlapping(self, bindings: Sequence[Any]) -> bool:
        """Whether a written operand's bytes overlap another operand's (a buffer bound twice)."""
        assert self._direct is not None
        spans = []
        for binding, need, written in self._direct:
            buffer, offset, _length = bindings[binding]
            spans.append((buffer, offset, offset + need, written))
        for i, (buf, lo, hi, written) in enumerate(spans):
            if written and any(b is buf and lo < h and l < hi
                               for j, (b, l, h, _) in enumerate(spans) if j != i):
                return True
        return False

    def block_points(self, bound: Bound) -> int:
        return self.fallback.block_points(bound)

    def min_chunk_points(self, bound: Bound) -> int | None:
        return self.chunk_points(bound.reduction_total)

    def chunk_points(self, reduction_total: int) -> int:
        """The fewest parallel points worth a chunk of their own (CHUNK_WORK)."""
        per_point = max(1, reduction_total) * max(1, len(self.kernel.steps))
        return max(1, CHUNK_WORK // per_point)

    @property
    def direct_operands(self) -> list[tuple[int, int, bool]] | None:
        """(binding, bytes it must hold, written) per operand, in the entry's pointer
        order, for a kernel whose dispatches need only addresses; else None."""
        return self._direct

    @property
    def static_shape(self) -> "_StaticShape":
        assert self._direct is not None
        return self._shape

    def run_box(self, bound: Bound, box: LoopBox) -> None:
        self.fallback.run_box(bound, box)

    def run_range(self, bound: Bound, start: int, end: int) -> None:
        prepared = bound.native
        if prepared is None:
            prepared = bound.native = self._prepare(bound)
        if prepared is False:
            self.kernel.run_boxes(self.fallback, bound, start, end)
            return
        pointers, args, _keep = prepared
        self.entry(pointers, args, start, end)

    def _prepare(self, bound: Bound) -> tuple[Any, Any, list] | bool:
        """Operand addresses and the args array of one dispatch (False: use the fallback)."""
        k = self.kernel
        n_in = len(k.inputs)
        memories = list(bound.memories)
        outs = memories[n_in:]
        for a in range(len(outs)):
            for c in range(a + 1, len(outs)):
                if np.may_share_memory(outs[a], outs[c]):
                    return False
        keep: list = []
        addresses = []
        for i, mem in enumerate(memories):
            if i in bound.copied_inputs:
                mem = mem.copy()          # an input an output overwrites: read the old values
            keep.append(mem)
            addresses.append(mem.ctypes.data)
        pointers = (ctypes.c_void_p * max(1, len(addresses)))(*addresses)
        keep.append(pointers)
        if self.uses_args:
            args = np.zeros(max(1, self.arg_layout.size), dtype=np.int64)
            lay = self.arg_layout
            args[:lay.loops] = bound.loop_ranges
            for i, op_lay in enumerate(bound.layouts):
                at = lay.operands + i * (lay.loops + 1)
                args[at] = op_lay.const
                args[at + 1:at + 1 + lay.loops] = op_lay.coeffs
            for i, at in enumerate(lay.gather_offsets):
                if at >= 0:
                    args[at:at + len(bound.layouts[i].shape)] = bound.layouts[i].shape
            for p, value in enumerate(bound.params):
                args[lay.params + p] = _param_bits(value)
            keep.append(args)
            arg_address = args.ctypes.data
        else:
            arg_address = 0
        return pointers, ctypes.c_void_p(arg_address), keep


# The args pointer of a kernel that takes no params.
NO_ARGS = ctypes.c_void_p(0)


class DirectBound(Bound):
    """A static kernel bound by addresses only: what `Kernel.run` and the task system read,
    and the native plan's prepared call; no numpy views (only the native plan runs it)."""

    def __init__(self, kernel: Kernel, native: tuple[Any, Any, list],
                 shape: "_StaticShape") -> None:
        self.kernel = kernel
        self.loop_ranges = kernel.static_loop_ranges
        self.params = ()
        self.layouts = shape.layouts
        self.memories = []
        self.parallel_extents = shape.parallel_extents
        self.reduction_extents = shape.reduction_extents
        self.total = shape.total
        self.reduction_total = shape.reduction_total
        self.copied_inputs = frozenset()
        self.packed_targets = {}
        self.native = native


class _StaticShape:
    """What every dispatch of a static kernel shares, worked out once per plan."""

    def __init__(self, kernel: Kernel) -> None:
        layouts = kernel.static_layouts
        assert layouts is not None
        ranges = kernel.static_loop_ranges
        self.layouts = layouts
        self.parallel_extents = tuple(ranges[j] for j in kernel.parallel_dims)
        self.reduction_extents = tuple(ranges[j] for j in kernel.reduction_dims)
        self.total = math.prod(self.parallel_extents)
        self.reduction_total = math.prod(self.reduction_extents)


def _direct_operands(kernel: Kernel) -> list[tuple[int, int, bool]] | None:
    """(binding, bytes it must hold, written) per operand of a kernel whose dispatches need
    nothing but addresses: static extents, no params, plain (unpacked) element types."""
    layouts = kernel.static_layouts
    if layouts is None:
        return None
    n_in = len(kernel.inputs)
    out = []
    for i, (op, lay) in enumerate(zip(kernel.operands, layouts)):
        t = SCALAR_TYPES[op.element_type]
        if t.storage_dtype is None:
            return None
        out.append((op.binding, t.storage_bytes(lay.count), i >= n_in))
    return out


def _param_bits(value: Any) -> int:
    v = np.asarray(value)
    if v.dtype == np.float32:
        return int(v.view(np.uint32))
    if v.dtype == np.float64:
        return int(v.view(np.int64))
    return int(v)


def attach(kernels: Sequence[Kernel]) -> None:
    """Compile every kernel the native backend can take into one module and give each its
    `NativePlan` (kernels it cannot take keep their numpy plan)."""
    if executor() != "native":
        return
    module = ir.Module(name="cpu_executable")
    names: dict[int, str] = {}
    for n, k in enumerate(kernels):
        try:
            native_codegen.build(module, k, k.step_attrs, f"kernel_{n}")
        except native_codegen.Unsupported as e:
            _log.debug("kernel '%s' stays on the numpy executor: %s", k.name, e)
            continue
        names[n] = f"kernel_{n}"
    if not names:
        return
    try:
        code = llvm_jit.load(str(module))
    except Exception as e:  # an irtk bug, not the module's: the reference still runs it
        _log.warning("native code generation failed, the numpy executor runs this "
                     "executable: %s: %s", type(e).__name__, e)
        if os.environ.get("IRTK_CPU_NATIVE_STRICT"):
            raise
        return
    for n, name in names.items():
        k = kernels[n]
        order = "reduction innermost" if native_codegen.reduction_innermost(k, k.step_attrs) \
            else "points innermost"
        k.plan = NativePlan(k, code.entry(name), k.plan, code, order)


__all__ = ["EXECUTORS", "NativePlan", "attach", "executor"]
