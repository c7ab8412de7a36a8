"""A tiny in-memory HAL device, so VM and runtime tests do not depend on a real driver.

Command buffers record fills and copies and replay them on `queue_execute`; dispatches are only
recorded (tests look at them). Semaphores are plain counters; a failed one raises on wait.
"""
from __future__ import annotations

from irtk import hal
from irtk.errors import DeviceError
from irtk.hal.executable import ExportInfo

FAKE_FORMAT = "fake-fb"


class FakeBuffer(hal.Buffer):
    def __init__(self, size: int, usage: hal.BufferUsage = hal.BufferUsage.DEFAULT) -> None:
        super().__init__(size, usage)
        self.data = bytearray(size)

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        length = self.size - offset if length is None else length
        self._check_range(offset, length)
        return bytes(self.data[offset:offset + length])

    def write(self, data, offset: int = 0) -> None:
        data = bytes(data)
        self._check_range(offset, len(data))
        self.data[offset:offset + len(data)] = data


class FakeAllocator(hal.Allocator):
    def __init__(self) -> None:
        self.allocations = 0

    def allocate(self, size: int, usage: hal.BufferUsage = hal.BufferUsage.DEFAULT) -> FakeBuffer:
        self.allocations += 1
        return FakeBuffer(size, usage)


class FakeExecutable(hal.Executable):
    def __init__(self, data: bytes) -> None:
        super().__init__([ExportInfo("kernel", 2, 1, (1, 1, 1))])
        self.data = data


class FakeCommandBuffer(hal.CommandBuffer):
    def __init__(self, binding_capacity: int = 0) -> None:
        super().__init__(binding_capacity)
        self.commands: list[tuple] = []

    def dispatch(self, executable, ordinal, workgroups, constants, bindings) -> None:
        self.commands.append(("dispatch", executable, ordinal, workgroups, constants, bindings))

    def execution_barrier(self) -> None:
        self.commands.append(("barrier",))

    def fill_buffer(self, target, pattern) -> None:
        self.commands.append(("fill", target, pattern))

    def copy_buffer(self, source, target) -> None:
        self.commands.append(("copy", source, target))

    def update_buffer(self, data, target) -> None:
        self.commands.append(("update", data, target))

    def replay(self) -> None:
        for command in self.commands:
            if command[0] == "fill":
                _, target, pattern = command
                target.buffer.write((pattern * (target.length // len(pattern) + 1))
                                    [:target.length], target.offset)
            elif command[0] == "copy":
                _, source, target = command
                target.buffer.write(source.buffer.read(source.offset, source.length),
                                    target.offset)


class FakeSemaphore(hal.Semaphore):
    def __init__(self, value: int = 0) -> None:
        self.value = value
        self.error: Exception | None = None

    def query(self) -> int:
        if self.error:
            raise self.error
        return self.value

    def signal(self, value: int) -> None:
        self.value = max(self.value, value)

    def wait(self, value: int, timeout: float | None = None) -> bool:
        if self.error:
            raise self.error
        return self.value >= value

    def fail(self, error: Exception) -> None:
        self.error = error


class FakeDevice(hal.Device):
    def __init__(self, formats: tuple[str, ...] = (FAKE_FORMAT,)) -> None:
        super().__init__(hal.DeviceInfo(driver="fake", name="Fake device",
                                        executable_formats=formats), FakeAllocator())
        self.submissions: list[list[FakeCommandBuffer]] = []
        self.fail_next: Exception | None = None

    def create_executable(self, executable_format: str, data: bytes) -> FakeExecutable:
        if not self.supports_format(executable_format):
            raise DeviceError(f"fake device cannot run '{executable_format}'")
        return FakeExecutable(data)

    def create_command_buffer(self, binding_capacity: int = 0) -> FakeCommandBuffer:
        return FakeCommandBuffer(binding_capacity)

    def create_semaphore(self, initial_value: int = 0) -> FakeSemaphore:
        return FakeSemaphore(initial_value)

    def queue_execute(self, wait, signal, command_buffers, binding_tables=None) -> None:
        if not wait.is_reached():
            raise DeviceError("fake device: wait fence not reached")
        self.submissions.append(list(command_buffers))
        if self.fail_next is not None:
            signal.fail(self.fail_next)
            self.fail_next = None
            return
        for cmd in command_buffers:
            cmd.replay()
        signal.signal()
