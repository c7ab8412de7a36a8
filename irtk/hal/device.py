"""A device: one GPU (or the CPU) with its allocator, queue and object factories."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from irtk.hal.allocator import Allocator
from irtk.hal.buffer import Buffer
from irtk.hal.command_buffer import CommandBuffer
from irtk.hal.executable import Executable
from irtk.hal.semaphore import Fence, Semaphore


@dataclass
class DeviceInfo:
    """What a device is and can do; queried once when the driver enumerates it."""

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
    float16: bool = False
    float64: bool = False
    int8: bool = False
    int16: bool = False
    int64: bool = False
    push_descriptors: bool = False
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
        wait.wait()
        buffer.release()
        signal.signal()

    def release(self) -> None:
        """Destroy the device and everything it still owns; idempotent."""
