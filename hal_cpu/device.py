"""The CPU device, shared by local-sync and local-task; they differ only in where work runs.

local-sync runs each queue operation inline on the caller's thread. local-task hands it to an
in-order queue and returns at once; a queue thread runs it, or the host thread that then waits
for it without a time limit (submission_queue.py); dispatches spread over the task system.
Either way a queue operation waits on its wait fence, does its work, and signals its signal
fence — or fails the signal fence with the error, which then reaches whoever waits on it.
Nothing is raised into the queue thread or the workers.
"""
from __future__ import annotations

from collections.abc import Callable

from hal_cpu.buffer import CpuAllocator
from hal_cpu.command_buffer import BindingTable, CpuCommandBuffer, run_commands
from hal_cpu.executable import CpuExecutable
from hal_cpu.semaphore import CpuSemaphore
from hal_cpu.submission_queue import SubmissionQueue
from hal_cpu.task_system import MIN_CHUNK_ITERATIONS, InlineRunner, TaskSystem
from irtk import tracing
from irtk.errors import DeviceError, RuntimeFailure
from irtk.hal.buffer import Buffer
from irtk.hal.command_buffer import CommandBuffer
from irtk.hal.device import Device, DeviceInfo
from irtk.hal.host_queue import HostQueueOp
from irtk.hal.semaphore import Fence
from schemas import CPU_EXECUTABLE_FORMAT as EXECUTABLE_FORMAT


class CpuDevice(Device):
    def __init__(self, info: DeviceInfo, asynchronous: bool,
                 min_chunk_iterations: int = MIN_CHUNK_ITERATIONS) -> None:
        super().__init__(info, CpuAllocator())
        self.task_system: TaskSystem | InlineRunner
        if asynchronous:
            self.task_system = TaskSystem(info.worker_count, name=f"irtk-{info.driver}",
                                          min_chunk_iterations=min_chunk_iterations)
            self._queue: SubmissionQueue | None = SubmissionQueue(f"irtk-{info.driver}-queue")
        else:
            self.task_system = InlineRunner()
            self._queue = None
        self._released = False

    def create_executable(self, executable_format: str, data: bytes) -> CpuExecutable:
        self._check_live()
        if executable_format != EXECUTABLE_FORMAT:
            raise DeviceError(f"{self.info.driver} cannot load executable format "
                              f"'{executable_format}' (supported: {EXECUTABLE_FORMAT})")
        return CpuExecutable.load(data)

    def create_command_buffer(self, binding_capacity: int = 0) -> CpuCommandBuffer:
        self._check_live()
        if binding_capacity < 0:
            raise ValueError(f"binding_capacity must be >= 0, got {binding_capacity}")
        return CpuCommandBuffer(binding_capacity)

    def create_semaphore(self, initial_value: int = 0) -> CpuSemaphore:
        return CpuSemaphore(initial_value, self._queue)

    def queue_execute(self, wait: Fence, signal: Fence, command_buffers: list[CommandBuffer],
                      binding_tables: list[list[tuple[Buffer, int, int]]] | None = None) -> None:
        self._check_live()
        cbs: list[CpuCommandBuffer] = []
        for i, cb in enumerate(command_buffers):
            if not isinstance(cb, CpuCommandBuffer):
                raise RuntimeFailure(f"queue_execute: command buffer {i} is "
                                     f"{type(cb).__name__}, not a CPU command buffer")
            if not cb.finalized:
                raise RuntimeFailure(f"queue_execute: command buffer {i} was not finalized")
            cbs.append(cb)
        if binding_tables is None:
            tables: list[BindingTable | None] = [None] * len(cbs)
        else:
            if len(binding_tables) != len(cbs):
                raise RuntimeFailure(f"queue_execute: {len(binding_tables)} binding tables for "
                                     f"{len(cbs)} command buffers")
            tables = list(binding_tables)
        runner = self.task_system
        tracer = tracing.active
        if tracer is None and len(cbs) == 1:
            direct = cbs[0].direct_work(tables[0], runner)
            if direct is not None:
                self._submit(wait, signal, direct)
                return
        # Resolved now, as the Vulkan driver records at submit: a bad binding table is raised
        # here (and fails the signal fence), and later changes to the caller's lists do not
        # reach the queued work.
        try:
            plans = [cb.resolve(table) for cb, table in zip(cbs, tables)]
        except RuntimeFailure as e:
            signal.fail(e)
            raise
        trace = None if tracer is None else (tracer, self.info.name)
        if tracer is not None:
            tracer.add_flush(self, self._trace_flush)

        def work() -> None:
            for plan in plans:
                run_commands(plan, runner, trace)
        if tracer is None:
            self._submit(wait, signal, work)
            return
        with tracer.span("queue_execute", "submit", device=self.info.name,
                         command_buffers=len(cbs)):
            self._submit(wait, signal, work)

    def _trace_flush(self) -> None:
        """Let queued traced work run, so its dispatch times are recorded (tracing.stop)."""
        if self._queue is not None and not self._released:
            self._queue.drain()

    def queue_alloca(self, wait: Fence, signal: Fence, size: int) -> Buffer:
        self._check_live()
        buffer = self.allocator.allocate(size)
        self._submit(wait, signal, lambda: None, inline=True)
        return buffer

    def queue_dealloca(self, wait: Fence, signal: Fence, buffer: Buffer) -> None:
        self._check_live()
        self._submit(wait, signal, buffer.release, inline=True)

    def _host_submit(self, wait: Fence, signal: Fence, work: Callable[[], None]) -> None:
        """Host transfers (queue_read/queue_write) are ordinary work on the CPU queue."""
        self._check_live()
        self._submit(wait, signal, work)

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        if self._queue is not None:
            self._queue.shutdown()
        self.task_system.shutdown()

    def _submit(self, wait: Fence, signal: Fence, work: Callable[[], None],
                inline: bool = False) -> None:
        """`inline`: cheap work that may run on the caller when the queue is idle."""
        job = HostQueueOp(wait, signal, work)
        queue = self._queue
        if queue is None:
            job()
            return
        # Only this device's semaphores let a waiter donate itself (or wake the queue thread),
        # so only then may the queue thread sleep on until something asks for it.
        own = bool(signal.points) and all(isinstance(s, CpuSemaphore) and s.queue is queue for s, _ in signal.points)
        queue.submit(job, defer_wake=own, inline=inline)

    def _check_live(self) -> None:
        if self._released:
            raise DeviceError(f"device '{self.info.name}' was released")

