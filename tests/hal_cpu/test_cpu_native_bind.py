"""A static kernel's dispatch binds by addresses only (NativePlan.bind_direct); anything
unusual about its bindings goes through Kernel.bind, which checks and handles it."""
from __future__ import annotations

import numpy as np
import pytest

import hal_cpu.native_executor as native
from irtk.errors import RuntimeFailure
from irtk.hal import BindingRef, Fence

from .cpu_kernel_builder import binary, kernel, operand, op, executable


def _run(device, exe, refs, workgroups):
    cb = device.create_command_buffer()
    cb.dispatch(exe, 0, workgroups, [], refs)
    cb.finalize()
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), [cb])
    return sem.wait(1, timeout=30)


@pytest.fixture
def bound_kinds(monkeypatch):
    """The class of every Bound a dispatch ran with."""
    import hal_cpu.kernel as kmod
    kinds: list[str] = []
    original = kmod.Kernel.run

    def spy(self, bound, start, end):
        kinds.append(type(bound).__name__)
        original(self, bound, start, end)
    monkeypatch.setattr(kmod.Kernel, "run", spy)
    return kinds


def test_a_static_dispatch_binds_directly_and_matches_numpy(device, rng, bound_kinds):
    n = 1000
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    exe = device.create_executable("cpu-kernel-fb", binary("add", "arith.addf", "f32", "f32", n))
    # Inputs and the output at offsets inside one shared buffer, apart from each other.
    buf = device.allocator.allocate_with_data(np.concatenate([a, b, np.zeros(n, np.float32)]))
    assert _run(device, exe, [BindingRef(buf, 0, 4 * n), BindingRef(buf, 4 * n, 4 * n),
                              BindingRef(buf, 8 * n, 4 * n)], (-(-n // 64), 1, 1))
    out = np.frombuffer(buf.read(8 * n, 4 * n), np.float32)
    np.testing.assert_array_equal(out, a + b)
    assert set(bound_kinds) == {"DirectBound"}


def test_an_output_over_its_input_takes_the_checked_path(device, rng, bound_kinds):
    """out0 = x + 1 written over x: the input is read as a copy (Kernel.bind's rule)."""
    n = 200
    x = rng.standard_normal(n).astype(np.float32)
    k = kernel("inplace", [n], [operand(0, "f32", [n], 1)],
               [operand(0, "f32", [n], 1), operand(1, "f32", [n], 1)],
               [op("arith.constant", result_type="f32", float_value=1.0),
                op("arith.addf", 0, 3, result_type="f32")], [4, 0])
    exe = device.create_executable("cpu-kernel-fb", executable(k))
    assert isinstance(exe.kernels[0].plan, native.NativePlan)
    bx = device.allocator.allocate_with_data(x.tobytes())
    by = device.allocator.allocate(4 * n)
    assert _run(device, exe, [BindingRef(bx, 0, -1), BindingRef(by, 0, -1)], (4, 1, 1))
    np.testing.assert_array_equal(np.frombuffer(bx.read(), np.float32), x + np.float32(1))
    np.testing.assert_array_equal(np.frombuffer(by.read(), np.float32), x)
    assert "DirectBound" not in bound_kinds


def test_a_short_or_read_only_binding_is_still_reported(device, rng):
    n = 100
    exe = device.create_executable("cpu-kernel-fb", binary("add", "arith.addf", "f32", "f32", n))
    a = device.allocator.allocate_with_data(rng.standard_normal(n).astype(np.float32))
    short = device.allocator.allocate(4 * n - 4)
    cb = device.create_command_buffer()
    cb.dispatch(exe, 0, (2, 1, 1), [], [BindingRef(a, 0, -1), BindingRef(a, 0, -1),
                                        BindingRef(short, 0, -1)])
    cb.finalize()
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), [cb])
    with pytest.raises(RuntimeFailure, match="does not fit in binding 2"):
        sem.wait(1, timeout=30)
    constant = device.allocator.import_host(memoryview(bytes(4 * n)))
    cb = device.create_command_buffer()
    cb.dispatch(exe, 0, (2, 1, 1), [], [BindingRef(a, 0, -1), BindingRef(a, 0, -1),
                                        BindingRef(constant, 0, -1)])
    cb.finalize()
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), [cb])
    with pytest.raises(RuntimeFailure, match="read-only buffer"):
        sem.wait(1, timeout=30)
