"""Command buffers: a list of recorded commands, turned into work items at each execution.

Recording checks what can be known then (finalization, ordinals, direct buffer ranges, binding
counts, fill patterns), so a bad recording fails where it was made. Binding-table slots are
resolved at execution against the table given to `queue_execute`; one recording serves any
number of submissions with different tables. Commands between two barriers carry no order
among themselves, so the task system may run them concurrently.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from hal_cpu.buffer import CpuBuffer
from hal_cpu.executable import CpuExecutable
from hal_cpu.kernel import Kernel, ResolvedBinding, work_items
from irtk.errors import RuntimeFailure
from irtk.hal.buffer import Buffer
from irtk.hal.command_buffer import BindingRef, CommandBuffer
from irtk.hal.executable import Executable

BindingTable = Sequence[tuple[Buffer, int, int]]
WorkItem = Callable[[], None]


class Runner(Protocol):
    """Where work items run: inline (local-sync) or on the task system (local-task)."""

    def split(self, end: int, granule: int) -> list[tuple[int, int]]:
        """Cut iterations [0, end) into chunks whose bounds are multiples of `granule`."""

    def run(self, items: Sequence[WorkItem]) -> None:
        """Run independent work items; returns when all are done, raising the first error."""


@dataclass(frozen=True)
class _Dispatch:
    kernel: Kernel
    workgroups: tuple[int, int, int]
    bindings: tuple[BindingRef, ...]


@dataclass(frozen=True)
class _Fill:
    target: BindingRef
    pattern: bytes


@dataclass(frozen=True)
class _Copy:
    source: BindingRef
    target: BindingRef


@dataclass(frozen=True)
class _Update:
    data: bytes
    target: BindingRef


class _Barrier:
    pass


_Command = _Dispatch | _Fill | _Copy | _Update | _Barrier


class CpuCommandBuffer(CommandBuffer):
    def __init__(self, binding_capacity: int = 0) -> None:
        super().__init__(binding_capacity)
        self._commands: list[_Command] = []

    @property
    def command_count(self) -> int:
        return len(self._commands)

    # --- recording ---------------------------------------------------------------------------

    def dispatch(self, executable: Executable, ordinal: int, workgroups: tuple[int, int, int],
                 constants: list[int], bindings: list[BindingRef]) -> None:
        self._check_recording("dispatch")
        if not isinstance(executable, CpuExecutable):
            raise RuntimeFailure(
                f"dispatch: executable {type(executable).__name__} is not a CPU executable")
        if not 0 <= ordinal < len(executable.kernels):
            raise RuntimeFailure(f"dispatch: export ordinal {ordinal} is out of range "
                                 f"({len(executable.kernels)} exports)")
        kernel = executable.kernels[ordinal]
        grid = tuple(int(n) for n in workgroups)
        if len(grid) != 3 or any(n < 0 for n in grid):
            raise RuntimeFailure(f"dispatch of '{kernel.name}': workgroup count {workgroups} "
                                 "must be three non-negative integers")
        if len(bindings) < kernel.min_binding_count:
            raise RuntimeFailure(f"dispatch of '{kernel.name}': {len(bindings)} binding(s) "
                                 f"given, the kernel uses bindings {kernel.bindings}")
        for i, ref in enumerate(bindings):
            self._check_ref(ref, f"dispatch of '{kernel.name}': binding {i}")
        self._commands.append(_Dispatch(kernel, grid, tuple(bindings)))  # type: ignore[arg-type]

    def execution_barrier(self) -> None:
        self._check_recording("execution_barrier")
        if self._commands and not isinstance(self._commands[-1], _Barrier):
            self._commands.append(_Barrier())

    def fill_buffer(self, target: BindingRef, pattern: bytes) -> None:
        self._check_recording("fill_buffer")
        pattern = bytes(pattern)
        if len(pattern) not in (1, 2, 4):
            raise RuntimeFailure(f"fill_buffer: pattern of {len(pattern)} bytes "
                                 "(expected 1, 2 or 4)")
        self._check_ref(target, "fill_buffer: target")
        if target.length >= 0 and target.length % len(pattern):
            raise RuntimeFailure(f"fill_buffer: length {target.length} is not a multiple of "
                                 f"the {len(pattern)}-byte pattern")
        self._commands.append(_Fill(target, pattern))

    def copy_buffer(self, source: BindingRef, target: BindingRef) -> None:
        self._check_recording("copy_buffer")
        self._check_ref(source, "copy_buffer: source")
        self._check_ref(target, "copy_buffer: target")
        self._commands.append(_Copy(source, target))

    def update_buffer(self, data: bytes, target: BindingRef) -> None:
        self._check_recording("update_buffer")
        self._check_ref(target, "update_buffer: target")
        data = bytes(data)
        if 0 <= target.length < len(data):
            raise RuntimeFailure(f"update_buffer: {len(data)} bytes do not fit in the "
                                 f"{target.length}-byte target range")
        self._commands.append(_Update(data, target))

    def finalize(self) -> None:
        while self._commands and isinstance(self._commands[-1], _Barrier):
            self._commands.pop()  # a trailing barrier orders nothing
        super().finalize()

    def release(self) -> None:
        self._commands = []

    def _check_recording(self, what: str) -> None:
        if self.finalized:
            raise RuntimeFailure(f"{what}: the command buffer is finalized; record a new one")

    def _check_ref(self, ref: BindingRef, what: str) -> None:
        if ref.slot >= 0:
            if ref.slot >= self.binding_capacity:
                raise RuntimeFailure(f"{what}: binding table slot {ref.slot} is beyond the "
                                     f"command buffer's capacity of {self.binding_capacity}")
            if ref.offset < 0:
                raise RuntimeFailure(f"{what}: negative offset {ref.offset}")
            return
        if not isinstance(ref.buffer, CpuBuffer):
            raise RuntimeFailure(f"{what}: {type(ref.buffer).__name__} is not a CPU buffer "
                                 "(and no binding table slot is given)")
        _resolve_range(ref.buffer, 0, ref.buffer.size, ref.offset, ref.length, what)

    # --- execution ---------------------------------------------------------------------------

    def execute(self, table: BindingTable | None, runner: Runner) -> None:
        """Run the commands: barrier-free stretches as one batch of work items each."""
        if not self.finalized:
            raise RuntimeFailure("queue_execute: the command buffer was not finalized")
        batch: list[WorkItem] = []
        for index, cmd in enumerate(self._commands):
            if isinstance(cmd, _Barrier):
                runner.run(batch)
                batch = []
            else:
                batch.extend(self._prepare(index, cmd, table, runner))
        runner.run(batch)

    def _prepare(self, index: int, cmd: _Command, table: BindingTable | None,
                 runner: Runner) -> list[WorkItem]:
        """Resolve one command's bindings into work items; errors name the command."""
        if isinstance(cmd, _Dispatch):
            what = f"command {index} (dispatch of '{cmd.kernel.name}')"
            resolved = [_resolve(ref, table, f"{what}: binding {i}")
                        for i, ref in enumerate(cmd.bindings)]
            views = cmd.kernel.bind(resolved)
            end = cmd.kernel.iteration_end(cmd.workgroups)
            if end == 0:
                return []
            return work_items(cmd.kernel, views, runner.split(end, cmd.kernel.tile_size))
        if isinstance(cmd, _Fill):
            buf, off, length = _resolve(cmd.target, table, f"command {index} (fill): target")
            if length % len(cmd.pattern):
                raise RuntimeFailure(f"command {index} (fill): length {length} is not a "
                                     f"multiple of the {len(cmd.pattern)}-byte pattern")
            return [lambda: _fill(buf, off, length, cmd.pattern)]
        if isinstance(cmd, _Copy):
            src = _resolve(cmd.source, table, f"command {index} (copy): source")
            dst = _resolve(cmd.target, table, f"command {index} (copy): target")
            if dst[2] < src[2]:
                raise RuntimeFailure(f"command {index} (copy): {src[2]} source bytes do not "
                                     f"fit in the {dst[2]}-byte target range")
            return [lambda: _copy(src, dst)]
        if isinstance(cmd, _Update):
            buf, off, length = _resolve(cmd.target, table, f"command {index} (update): target")
            if length < len(cmd.data):
                raise RuntimeFailure(f"command {index} (update): {len(cmd.data)} bytes do not "
                                     f"fit in the {length}-byte target range")
            return [lambda: _write(buf, off, cmd.data)]
        raise AssertionError(f"unknown command {cmd!r}")


def _resolve(ref: BindingRef, table: BindingTable | None, what: str) -> ResolvedBinding:
    """A binding as (buffer, offset, length) in bytes; a negative length means "to the end".

    A slot reference's offset and length are relative to its binding-table entry, as in IREE.
    """
    if ref.slot < 0:
        assert isinstance(ref.buffer, CpuBuffer)
        return _resolve_range(ref.buffer, 0, ref.buffer.size, ref.offset, ref.length, what)
    if table is None or ref.slot >= len(table):
        size = "no binding table" if table is None else f"a table of {len(table)} entries"
        raise RuntimeFailure(f"{what}: binding table slot {ref.slot} is not in {size}")
    entry = table[ref.slot]
    try:
        buffer, base, length = entry
    except (TypeError, ValueError):
        raise RuntimeFailure(f"{what}: binding table entry {ref.slot} is {entry!r}, expected "
                             "(buffer, offset, length)") from None
    if not isinstance(buffer, CpuBuffer):
        raise RuntimeFailure(f"{what}: binding table entry {ref.slot} holds "
                             f"{type(buffer).__name__}, not a CPU buffer")
    base, length = _resolve_range(buffer, 0, buffer.size, int(base), int(length),
                                  f"{what}: binding table entry {ref.slot}")[1:]
    return _resolve_range(buffer, base, length, ref.offset, ref.length, what)


def _resolve_range(buffer: CpuBuffer, base: int, limit: int, offset: int, length: int,
                   what: str) -> ResolvedBinding:
    """The sub-range [offset, offset+length) of [base, base+limit) in `buffer`, checked."""
    if buffer.released:
        raise RuntimeFailure(f"{what}: the buffer was released")
    if length < 0:
        length = limit - offset
    if offset < 0 or length < 0 or offset + length > limit:
        raise RuntimeFailure(f"{what}: range [{offset}, {offset + length}) is outside the "
                             f"{limit}-byte range bound there")
    return buffer, base + offset, length


def _fill(buffer: CpuBuffer, offset: int, length: int, pattern: bytes) -> None:
    mem = buffer.host_memory[offset:offset + length]
    if len(pattern) == 1:
        mem[:] = pattern[0]
    else:
        dtype = np.uint16 if len(pattern) == 2 else np.uint32
        mem.view(dtype)[:] = np.frombuffer(pattern, dtype=dtype)[0]


def _copy(src: ResolvedBinding, dst: ResolvedBinding) -> None:
    (sbuf, soff, slen), (dbuf, doff, _) = src, dst
    dbuf.host_memory[doff:doff + slen] = sbuf.host_memory[soff:soff + slen]


def _write(buffer: CpuBuffer, offset: int, data: bytes) -> None:
    buffer.host_memory[offset:offset + len(data)] = np.frombuffer(data, dtype=np.uint8)
