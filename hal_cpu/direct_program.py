"""A command buffer of static native dispatches, run straight from its binding table.

What the VM records for a call — dispatches of static kernels on whole binding-table slots
(and on the module's constants, bound in the recording itself), with barriers between them —
needs, at each execution, only the address of each slot's buffer
and a few checks. The general path (`DeferredCommandBuffer.resolve`, then `Kernel.bind` per
dispatch) builds resolved commands, binding objects and work items for each execution, which
for a small program is most of a call's host time. So a finalized command buffer works out
once which kernel reads and writes which slot, how many bytes each needs, and how far each grid
reaches; an execution then checks each slot's buffer once and calls the machine code.

It is a shortcut and never a second set of rules: `bind` gives up (None) on anything the
general path would treat specially — a slot that is empty or not a whole live CPU allocation,
a buffer shorter than a kernel needs or read-only where one writes, one buffer in two operands
of a dispatch — and the general path then runs, raising its own errors.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from hal_cpu.buffer import CpuBuffer
from hal_cpu.native_executor import NO_ARGS, NativePlan
from hal_cpu.task_system import Runner
from irtk.hal.binding import BindingTable
from irtk.hal.deferred_command_buffer import Barrier, Dispatch


class _Step:
    """One dispatch: its kernel's entry, (source, bytes bound or -1 for the whole slot, bytes
    the kernel needs, written) per operand in the entry's pointer order, and the parallel
    points the grid covers. A source is a table slot (>= 0) or a buffer bound in the
    recording itself (-1 - its index in `DirectProgram.buffers`)."""

    __slots__ = ("entry", "operands", "end", "tile_size", "min_chunk", "pointer_array",
                 "split")

    def __init__(self, entry: Any, operands: list[tuple[int, int, int, bool]], end: int,
                 tile_size: int, min_chunk: int) -> None:
        self.entry = entry
        self.operands = operands
        self.end = end
        self.tile_size = tile_size
        self.min_chunk = min_chunk
        self.pointer_array = ctypes.c_void_p * max(1, len(operands))
        # The runner this step ran on last and its chunks (they depend on nothing else); one
        # tuple, so threads executing the command buffer at once read a consistent pair.
        self.split: tuple[Any, list[tuple[int, int]]] = (None, [])


class DirectProgram:
    """The dispatches of a finalized command buffer, between barriers (`stages`: each a list
    of steps that may run at once), ready to run from a binding table's addresses."""

    def __init__(self, stages: list[list[_Step]], buffers: Sequence[CpuBuffer] = ()) -> None:
        self.stages = stages
        self.buffers = list(buffers)
        self.slots = sorted({slot for stage in stages for step in stage
                             for slot, _, _, _ in step.operands if slot >= 0})

    @classmethod
    def build(cls, commands: Sequence[Any]) -> "DirectProgram | None":
        """The program of `commands`, or None unless every command is a barrier or a
        dispatch of a native kernel with static extents, no push constants and every binding
        a table slot or a CPU buffer from its start."""
        stages: list[list[_Step]] = [[]]
        buffers: list[CpuBuffer] = []
        for cmd in commands:
            if isinstance(cmd, Barrier):
                if stages[-1]:
                    stages.append([])
                continue
            if not isinstance(cmd, Dispatch):
                return None
            kernel = cmd.entry
            plan = getattr(kernel, "plan", None)
            if not isinstance(plan, NativePlan) or plan.direct_operands is None:
                return None
            operands = []
            for binding, need, written in plan.direct_operands:
                if binding >= len(cmd.bindings):
                    return None
                ref = cmd.bindings[binding]
                if ref.offset != 0:
                    return None
                if ref.buffer is None:
                    if ref.slot < 0:
                        return None
                    source = ref.slot
                elif isinstance(ref.buffer, CpuBuffer):
                    index = next((i for i, b in enumerate(buffers) if b is ref.buffer), None)
                    if index is None:
                        index = len(buffers)
                        buffers.append(ref.buffer)
                    source = -1 - index
                else:
                    return None
                operands.append((source, ref.length, need, written))
            shape = plan.static_shape
            if shape.reduction_total == 0:
                continue                        # no body evaluation: outputs keep their values
            end = kernel.iteration_end(cmd.workgroups)
            if end > 0:
                stages[-1].append(_Step(plan.entry, operands, end, kernel.tile_size,
                                        plan.chunk_points(shape.reduction_total)))
        return cls([stage for stage in stages if stage], buffers)

    def bind(self, table: BindingTable | None, runner: Runner
             ) -> Callable[[], None] | None:
        """The work of one execution with `table`, or None when the general path must run."""
        if table is None:
            return None
        count = len(table)
        slots: dict[int, tuple[CpuBuffer, int]] = {}
        keep: list[Any] = []
        for slot in self.slots:
            if slot >= count:
                return None
            entry = table[slot]
            if entry.__class__ is not tuple or len(entry) != 3:
                return None
            buffer, offset, length = entry
            if offset != 0 or not isinstance(buffer, CpuBuffer) or \
                    buffer.allocated_buffer is not buffer or buffer.released:
                return None
            size = buffer.size
            if length.__class__ is not int or (length >= 0 and length != size):
                return None
            keep.append(buffer.host_memory)    # the bytes outlive a release meanwhile
            slots[slot] = (buffer, size)
        for i, buffer in enumerate(self.buffers):   # bound in the recording: same checks
            if buffer.allocated_buffer is not buffer or buffer.released:
                return None
            keep.append(buffer.host_memory)
            slots[-1 - i] = (buffer, buffer.size)
        calls: list[list[tuple[Any, Any, int, int]]] = []
        for stage in self.stages:
            stage_calls = []
            for step in stage:
                addresses = []
                for slot, length, need, written in step.operands:
                    buffer, size = slots[slot]
                    if length > size or need > (size if length < 0 else length) or \
                            (written and buffer.read_only):
                        return None
                    addresses.append(buffer.address)
                if len(set(addresses)) < len(addresses) and _written_twice(step, slots):
                    return None             # the general path knows whether they overlap
                pointers = step.pointer_array(*addresses)
                keep.append(pointers)
                last_runner, chunks = step.split
                if last_runner is not runner:
                    chunks = runner.split(step.end, step.tile_size, step.min_chunk)
                    step.split = (runner, chunks)
                for start, end in chunks:
                    stage_calls.append((step.entry, pointers, start, end))
            calls.append(stage_calls)
        return partial(_run, calls, runner, keep)


def _written_twice(step: _Step, slots: dict[int, tuple[CpuBuffer, int]]) -> bool:
    """Whether a buffer that `step` writes is also another of its operands."""
    seen: dict[int, bool] = {}   # id of each buffer -> whether it is written
    for slot, _, _, written in step.operands:
        key = id(slots[slot][0])
        if key in seen and (written or seen[key]):
            return True
        seen[key] = written
    return False


def _run(calls: list[list[tuple[Any, Any, int, int]]], runner: Runner,
         keep: list[Any]) -> None:
    """Each stage's calls (a stage's calls at once on local-task), stage after stage."""
    for stage in calls:
        if len(stage) == 1:
            entry, pointers, start, end = stage[0]
            entry(pointers, NO_ARGS, start, end)
        else:
            runner.run([partial(entry, pointers, NO_ARGS, start, end)
                        for entry, pointers, start, end in stage])


__all__ = ["DirectProgram"]
