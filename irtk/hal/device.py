"""A device: one GPU (or the CPU) with its allocator, queue and object factories.

Queue operations all take a wait fence and a signal fence: the operation starts once the wait
fence is reached and signals the signal fence when done, or fails it with the error, which then
reaches whoever waits on it (and every operation that waits on it in turn). Whether the call
itself returns before the work is done is the driver's business (local-sync: never; local-task
and Vulkan: as soon as it is queued); only the fences say when it happened. Errors found when
the operation is submitted (a bad range, a released buffer) are raised and fail the signal fence.

The transfers here (fill, copy, update) are written once, on top of command buffers, as IREE's
drivers do; `read`/`write`, which touch host memory, run on the device's host queue.
"""
from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from irtk.errors import RuntimeFailure
from irtk.hal.allocator import Allocator
from irtk.hal.binding import BindingRef, resolve_range
from irtk.hal.buffer import Buffer
from irtk.hal.capabilities import ShaderCapabilities
from irtk.hal.command_buffer import CommandBuffer
from irtk.hal.executable import Executable
from irtk.hal.host_queue import HostQueue, HostQueueOp
from irtk.hal.semaphore import Fence, Semaphore


@dataclass(frozen=True)
class DeviceInfo(ShaderCapabilities):
    """What a device is and can do (its shader capabilities among it); queried once when the
    driver enumerates it."""

    driver: str
    name: str
    index: int = 0
    api_version: str = ""
    driver_version: str = ""
    subgroup_size: int = 1
    max_workgroup_invocations: int = 1024
    max_workgroup_size: tuple[int, int, int] = (1024, 1024, 64)
    max_workgroup_count: tuple[int, int, int] = (65535, 65535, 65535)
    shared_memory_bytes: int = 32768
    push_descriptors: bool = False
    # Dispatch bindings must start at multiples of this and span at most max_binding_bytes
    # (Vulkan's minStorageBufferOffsetAlignment and maxStorageBufferRange).
    binding_alignment: int = 1
    max_binding_bytes: int = 1 << 62
    worker_count: int = 1
    executable_formats: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return f"{self.driver}://{self.index}"


class Device(ABC):
    def __init__(self, info: DeviceInfo, allocator: Allocator) -> None:
        self.info = info
        self.allocator = allocator
        self._host_queue: HostQueue | None = None  # started by the first host transfer
        self._host_queue_lock = threading.Lock()

    def supports_format(self, executable_format: str) -> bool:
        return executable_format in self.info.executable_formats

    @abstractmethod
    def create_executable(self, executable_format: str, data: bytes) -> Executable:
        """Load an executable of `executable_format`; raises DeviceError when unsupported."""

    @abstractmethod
    def create_command_buffer(self, binding_capacity: int = 0) -> CommandBuffer: ...

    @abstractmethod
    def create_semaphore(self, initial_value: int = 0) -> Semaphore: ...

    @abstractmethod
    def queue_execute(self, wait: Fence, signal: Fence, command_buffers: list[CommandBuffer],
                      binding_tables: list[list[tuple[Buffer, int, int]]] | None = None) -> None:
        """Run command buffers after `wait` is reached; signal `signal` when done (or fail it)."""

    def queue_alloca(self, wait: Fence, signal: Fence, size: int) -> Buffer:
        """A transient buffer usable once `signal` is reached."""
        wait.wait()
        buf = self.allocator.allocate(size)
        signal.signal()
        return buf

    def queue_dealloca(self, wait: Fence, signal: Fence, buffer: Buffer) -> None:
        """Release `buffer` once `wait` is reached (work using it must be before `wait`)."""
        wait.wait()
        buffer.release()
        signal.signal()

    def queue_fill(self, wait: Fence, signal: Fence, target: Buffer, offset: int, length: int,
                   pattern: bytes) -> None:
        """Fill bytes [offset, offset+length) of `target` with a 1-, 2- or 4-byte pattern."""
        self._queue_commands(wait, signal, "queue_fill",
                             lambda cb: cb.fill_buffer(BindingRef(target, offset, length),
                                                       pattern))

    def queue_copy(self, wait: Fence, signal: Fence, source: Buffer, source_offset: int,
                   target: Buffer, target_offset: int, length: int) -> None:
        self._queue_commands(wait, signal, "queue_copy",
                             lambda cb: cb.copy_buffer(BindingRef(source, source_offset, length),
                                                       BindingRef(target, target_offset, length)))

    def queue_update(self, wait: Fence, signal: Fence, data: bytes | bytearray | memoryview,
                     target: Buffer, offset: int) -> None:
        """Write host bytes (captured now) into `target` at `offset`."""
        captured = bytes(data)
        self._queue_commands(wait, signal, "queue_update",
                             lambda cb: cb.update_buffer(
                                 captured, BindingRef(target, offset, len(captured))))

    def queue_write(self, wait: Fence, signal: Fence, source: bytes | bytearray | memoryview,
                    target: Buffer, offset: int) -> None:
        """Copy host memory into `target` once `wait` is reached. Unlike `queue_update`, the
        bytes may be read at any time until `signal` is reached (here: when the operation
        runs, without a copy at the call): the caller keeps `source` unchanged until then."""
        view = _bytes_view(source)
        self._check_transfer("queue_write", signal, target, offset, view.nbytes)
        self._host_submit(wait, signal, lambda: target.write(view, offset))

    def queue_read(self, wait: Fence, signal: Fence, source: Buffer, offset: int,
                   target: bytearray | memoryview, length: int) -> None:
        """Copy `length` bytes of `source` at `offset` into host memory `target` once `wait`
        is reached; `target` holds them when `signal` is reached."""
        view = _bytes_view(target)
        problem = None
        if view.readonly:
            problem = "queue_read: the host target is read-only"
        elif view.nbytes < length:
            problem = f"queue_read: {length} bytes do not fit the {view.nbytes}-byte host target"
        if problem is not None:
            error = RuntimeFailure(problem)
            signal.fail(error)
            raise error
        self._check_transfer("queue_read", signal, source, offset, length)

        def work() -> None:
            view[:length] = source.read(offset, length)
        self._host_submit(wait, signal, work)

    def release(self) -> None:
        """Destroy the device and everything it still owns; idempotent."""

    # -- helpers for the queue operations ------------------------------------------------------
    def _queue_commands(self, wait: Fence, signal: Fence, what: str,
                        record: Callable[[CommandBuffer], None]) -> None:
        """One transfer as a one-shot command buffer; errors at record time fail `signal`."""
        try:
            cb = self.create_command_buffer()
            record(cb)
            cb.finalize()
        except Exception as e:
            error = e if isinstance(e, RuntimeFailure) else RuntimeFailure(f"{what}: {e}")
            if error is not e:
                error.__cause__ = e
            signal.fail(error)
            raise error from None
        self.queue_execute(wait, signal, [cb])
        cb.release()  # drivers keep what a pending submission still needs

    def _check_transfer(self, what: str, signal: Fence, buffer: Buffer, offset: int,
                        length: int) -> None:
        """Raise (and fail `signal`) unless the range is inside a live buffer."""
        try:
            resolve_range(buffer, offset, length, f"{what}: buffer")
            if getattr(buffer.allocated_buffer, "released", False):
                raise RuntimeFailure(f"{what}: the buffer was released")
        except RuntimeFailure as e:
            signal.fail(e)
            raise

    def _host_submit(self, wait: Fence, signal: Fence, work: Callable[[], None]) -> None:
        """Run `work` on the host queue, ordered by the fences."""
        with self._host_queue_lock:
            if self._host_queue is None:
                self._host_queue = HostQueue(f"irtk-{self.info.driver}-host-queue")
            host_queue = self._host_queue
        host_queue.submit(HostQueueOp(wait, signal, work))

    def _drain_host_queue(self, timeout: float | None = None) -> bool:
        """Wait for the host queue operations submitted so far (wait_idle); True when done."""
        with self._host_queue_lock:
            host_queue = self._host_queue
        return True if host_queue is None else host_queue.drain(timeout)

    def _shutdown_host_queue(self) -> None:
        """Drivers call this first when released: finish queued host work, stop its thread."""
        with self._host_queue_lock:
            host_queue, self._host_queue = self._host_queue, None
        if host_queue is not None:
            host_queue.shutdown()


def _bytes_view(data: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")
