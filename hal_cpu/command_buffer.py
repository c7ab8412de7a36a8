"""Command buffers of the CPU drivers: the shared deferred recorder, run as work items.

Recording and binding-table resolution are `irtk.hal.deferred_command_buffer`'s, the same as
every driver's. At each execution the resolved commands between two barriers become one batch of
work items (a dispatch's chunks, fills, copies, updates), which the task system may run
concurrently; a barrier waits for the batch before it.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from hal_cpu.buffer import CpuBuffer
from hal_cpu.direct_program import DirectProgram
from hal_cpu.executable import CpuExecutable
from hal_cpu.kernel import work_items
from hal_cpu.task_system import Runner, WorkItem
from irtk import tracing
from irtk.errors import RuntimeFailure
from irtk.hal.binding import BindingRef, BindingTable, ResolvedBinding
from irtk.hal.deferred_command_buffer import (Barrier, DeferredCommandBuffer, ResolvedCommand,
                                              ResolvedCopy, ResolvedDispatch, ResolvedFill,
                                              ResolvedUpdate)
from irtk.hal.executable import Executable


__all__ = ["BindingTable", "CpuCommandBuffer", "Runner", "run_commands"]


class CpuCommandBuffer(DeferredCommandBuffer):
    buffer_type = CpuBuffer
    _direct: DirectProgram | None = None
    _direct_built = False

    def direct_work(self, table: BindingTable | None, runner: Runner
                    ) -> Callable[[], None] | None:
        """This execution as a `DirectProgram` (hal_cpu/direct_program.py), or None when
        the general path (`resolve`, `run_commands`) must run it."""
        if not self.finalized or self.released:
            return None
        if not self._direct_built:
            self._direct = DirectProgram.build(self.commands)
            self._direct_built = True
        program = self._direct
        return None if program is None else program.bind(table, runner)

    def lookup_export(self, executable: Executable, ordinal: int) -> tuple[Any, str]:
        if not isinstance(executable, CpuExecutable):
            raise RuntimeFailure(
                f"dispatch: executable {type(executable).__name__} is not a CPU executable")
        if not 0 <= ordinal < len(executable.kernels):
            raise RuntimeFailure(f"dispatch: export ordinal {ordinal} is out of range "
                                 f"({len(executable.kernels)} exports)")
        kernel = executable.kernels[ordinal]
        return kernel, kernel.name

    def check_dispatch(self, entry: Any, name: str, workgroups: tuple[int, int, int],
                       constants: list[int], bindings: list[BindingRef]) -> None:
        if len(bindings) < entry.min_binding_count:
            raise RuntimeFailure(f"dispatch of '{name}': {len(bindings)} binding(s) given, "
                                 f"the kernel uses bindings {entry.bindings}")

    def execute(self, table: BindingTable | None, runner: Runner) -> None:
        """Resolve against `table`, then run (so a bad table has no partial effect)."""
        run_commands(self.resolve(table), runner)


def run_commands(resolved: list[ResolvedCommand], runner: Runner,
                 trace: tuple[tracing.Tracer, str] | None = None) -> None:
    """Run resolved commands: barrier-free stretches as one batch of work items each. Traced
    (`trace`: the tracer and the device's name), each dispatch runs as a batch of its own, so
    its time is its own."""
    batch: list[WorkItem] = []
    for cmd in resolved:
        if isinstance(cmd, Barrier):
            runner.run(batch)
            batch = []
        elif trace is not None and isinstance(cmd, ResolvedDispatch):
            runner.run(batch)
            batch = []
            tracer, device = trace
            start = time.monotonic_ns()
            runner.run(_work(cmd, runner))
            tracer.device_event(device, cmd.command.name, "dispatch", start,
                                time.monotonic_ns() - start,
                                workgroups=list(cmd.command.workgroups))
        else:
            batch.extend(_work(cmd, runner))
    runner.run(batch)


def _work(cmd: ResolvedCommand, runner: Runner) -> list[WorkItem]:
    if isinstance(cmd, ResolvedDispatch):
        kernel = cmd.command.entry
        views = kernel.bind(list(cmd.bindings), cmd.command.constants)
        end = kernel.iteration_end(cmd.command.workgroups, views)
        if end == 0:
            return []
        return work_items(kernel, views, runner.split(end, kernel.tile_size,
                                                      kernel.plan.min_chunk_points(views)))
    if isinstance(cmd, ResolvedFill):
        return [lambda: _fill(cmd.target, cmd.pattern)]
    if isinstance(cmd, ResolvedCopy):
        return [lambda: _copy(cmd.source, cmd.target)]
    if isinstance(cmd, ResolvedUpdate):
        return [lambda: _write(cmd.target, cmd.data)]
    raise AssertionError(f"unknown command {cmd!r}")


def _memory(binding: ResolvedBinding) -> np.ndarray:
    return binding.buffer.host_memory[binding.offset:binding.offset + binding.length]


def _fill(target: ResolvedBinding, pattern: bytes) -> None:
    mem = _memory(target)
    if len(pattern) == 1:
        mem[:] = pattern[0]
    else:
        dtype = np.uint16 if len(pattern) == 2 else np.uint32
        mem.view(dtype)[:] = np.frombuffer(pattern, dtype=dtype)[0]


def _copy(src: ResolvedBinding, dst: ResolvedBinding) -> None:
    _memory(dst)[:] = _memory(src)


def _write(target: ResolvedBinding, data: bytes) -> None:
    _memory(target)[:] = np.frombuffer(data, dtype=np.uint8)
