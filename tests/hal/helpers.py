"""Small helpers shared by the conformance tests."""
from __future__ import annotations

import numpy as np

from irtk.hal import BindingRef, Buffer, CommandBuffer, Device, Fence
from tests.hal.programs import Program

TIMEOUT = 30.0


def new_fence(device: Device, value: int = 1) -> Fence:
    """A fence on a fresh semaphore at 0, reached when it gets to `value`."""
    return Fence([(device.create_semaphore(0), value)])


def run(device: Device, command_buffers: list[CommandBuffer],
        tables: list | None = None) -> None:
    """Submit and wait."""
    done = new_fence(device)
    device.queue_execute(Fence(), done, command_buffers, tables)
    assert done.wait(TIMEOUT)


def upload(device: Device, array: np.ndarray) -> Buffer:
    return device.allocator.allocate_with_data(np.ascontiguousarray(array).tobytes())


def floats(buffer: Buffer, offset: int = 0, count: int | None = None) -> np.ndarray:
    length = None if count is None else 4 * count
    return np.frombuffer(buffer.read(offset, length), dtype=np.float32)


def mul_add_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) * b.astype(np.float64) + 1.0


def record_mul_add(device: Device, program: Program, bindings: list[BindingRef],
                   capacity: int = 0) -> CommandBuffer:
    cb = device.create_command_buffer(capacity)
    cb.dispatch(program.executable, program.executable.lookup("mul_add"), program.workgroups,
                program.mul_add_constants, bindings)
    cb.finalize()
    return cb
