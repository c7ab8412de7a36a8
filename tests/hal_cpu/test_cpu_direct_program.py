"""A command buffer of static native dispatches on binding-table slots runs straight from the
table's addresses (hal_cpu/direct_program.py); every table the shortcut does not take runs
the general path, with its results and its errors."""
from __future__ import annotations

import numpy as np
import pytest

import hal_cpu.direct_program as direct
import hal_cpu.kernel as kmod
import hal_cpu.native_executor as native
from irtk.errors import RuntimeFailure
from irtk.hal import BindingRef, Fence

from .cpu_kernel_builder import binary, workgroups_for

N = 1000


@pytest.fixture
def paths(monkeypatch):
    """'direct' for each execution the shortcut ran, 'general' for each dispatch the general
    path ran, and the number of machine-code calls of each direct execution."""
    ran: list[str] = []
    calls: list[int] = []
    original_run, original_direct = kmod.Kernel.run, direct._run

    def spy(self, bound, start, end):
        ran.append("general")
        original_run(self, bound, start, end)

    def spy_direct(stages, runner, keep):
        ran.append("direct")
        calls.append(sum(len(stage) for stage in stages))
        original_direct(stages, runner, keep)
    monkeypatch.setattr(kmod.Kernel, "run", spy)
    monkeypatch.setattr(direct, "_run", spy_direct)
    return ran, calls


def _slot(i: int, length: int = -1) -> BindingRef:
    return BindingRef(None, 0, length, slot=i)


def _add_twice(device, n: int = N):
    """t = s0 + s1; barrier; s3 = t + s0 (t in slot 2): two dispatches on table slots."""
    exe = device.create_executable("cpu-kernel-fb", binary("add", "arith.addf", "f32", "f32", n))
    assert isinstance(exe.kernels[0].plan, native.NativePlan)
    cb = device.create_command_buffer(binding_capacity=4)
    grid = workgroups_for(n, 64)
    cb.dispatch(exe, 0, grid, [], [_slot(0), _slot(1, 4 * n), _slot(2)])
    cb.execution_barrier()
    cb.dispatch(exe, 0, grid, [], [_slot(2), _slot(0), _slot(3)])
    cb.finalize()
    return cb


def _execute(device, cb, table) -> None:
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), [cb], [table])
    assert sem.wait(1, timeout=30)


def _upload(device, array: np.ndarray):
    return device.allocator.allocate_with_data(array.tobytes())


def _read(buffer) -> np.ndarray:
    return np.frombuffer(buffer.read(), np.float32)


def test_slot_dispatches_run_directly_and_match_numpy(device, rng, paths):
    ran, _ = paths
    cb = _add_twice(device)
    for _ in range(2):       # the program is worked out once, then reused with a new table
        a, b = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
        t, out = device.allocator.allocate(4 * N), device.allocator.allocate(4 * N)
        _execute(device, cb, [(_upload(device, a), 0, -1), (_upload(device, b), 0, 4 * N),
                              (t, 0, -1), (out, 0, 4 * N)])
        np.testing.assert_array_equal(_read(t), a + b)
        np.testing.assert_array_equal(_read(out), (a + b) + a)
    assert ran == ["direct", "direct"]


def test_one_input_in_two_operands_runs_directly(device, rng, paths):
    ran, _ = paths
    cb = _add_twice(device)
    a = rng.standard_normal(N).astype(np.float32)
    buf = _upload(device, a)
    t, out = device.allocator.allocate(4 * N), device.allocator.allocate(4 * N)
    _execute(device, cb, [(buf, 0, -1), (buf, 0, -1), (t, 0, -1), (out, 0, -1)])
    np.testing.assert_array_equal(_read(out), (a + a) + a)
    assert ran == ["direct"]


def test_an_output_over_an_input_takes_the_general_path(device, rng, paths):
    """Slot 2 (written) holds slot 0's buffer: only the general path knows how to read it."""
    ran, _ = paths
    cb = _add_twice(device)
    a, b = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
    buf, out = _upload(device, a), device.allocator.allocate(4 * N)
    _execute(device, cb, [(buf, 0, -1), (_upload(device, b), 0, -1), (buf, 0, -1),
                          (out, 0, -1)])
    np.testing.assert_array_equal(_read(buf), a + b)
    np.testing.assert_array_equal(_read(out), (a + b) + (a + b))
    assert "direct" not in ran and "general" in ran


def test_a_table_entry_inside_a_buffer_takes_the_general_path(device, rng, paths):
    ran, _ = paths
    cb = _add_twice(device)
    a, b = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
    both = _upload(device, np.concatenate([a, b]))
    t, out = device.allocator.allocate(4 * N), device.allocator.allocate(4 * N)
    _execute(device, cb, [(both, 0, 4 * N), (both, 4 * N, 4 * N), (t, 0, -1), (out, 0, -1)])
    np.testing.assert_array_equal(_read(out), (a + b) + a)
    assert "direct" not in ran


@pytest.mark.parametrize("case, message", [
    ("short", "does not fit in binding 2"),
    ("read-only", "read-only buffer"),
    ("released", "released"),
    ("empty", "slot 3"),
    ("past the table", "slot 3"),
])
def test_a_bad_table_gets_the_general_paths_error(device, rng, paths, case, message):
    ran, _ = paths
    cb = _add_twice(device)
    a = _upload(device, rng.standard_normal(N).astype(np.float32))
    t, out = device.allocator.allocate(4 * N), device.allocator.allocate(4 * N)
    table: list = [(a, 0, -1), (a, 0, -1), (t, 0, -1), (out, 0, -1)]
    if case == "short":
        table[2] = (device.allocator.allocate(4 * N - 4), 0, -1)
    elif case == "read-only":
        table[2] = (device.allocator.import_host(memoryview(bytes(4 * N))), 0, -1)
    elif case == "released":
        out.release()
    elif case == "empty":
        table[3] = (None, 0, -1)
    else:
        table = table[:3]
    sem = device.create_semaphore(0)
    with pytest.raises(RuntimeFailure, match=message):
        device.queue_execute(Fence(), Fence([(sem, 1)]), [cb], [table])
        sem.wait(1, timeout=30)
    assert "direct" not in ran


def test_local_task_splits_a_direct_dispatch_into_chunks(task_device, rng, paths,
                                                         monkeypatch):
    """With a small CHUNK_WORK the shortcut cuts each dispatch into chunks of whole
    workgroups, which run on the workers; the result is the same."""
    monkeypatch.setattr(native, "CHUNK_WORK", 256)
    ran, calls = paths
    n = 64 * 40
    cb = _add_twice(task_device, n)
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    t, out = task_device.allocator.allocate(4 * n), task_device.allocator.allocate(4 * n)
    _execute(task_device, cb, [(_upload(task_device, a), 0, -1),
                               (_upload(task_device, b), 0, -1), (t, 0, -1), (out, 0, -1)])
    np.testing.assert_array_equal(_read(out), (a + b) + a)
    assert ran == ["direct"] and calls[0] > 2


def _matmul_mlir(b: np.ndarray | None = None) -> str:
    """main(a[, b]) = a @ b over 64x32 and 32x16 f32; with `b` given, b is that constant."""
    if b is None:
        args, const = "%a: tensor<64x32xf32>, %b: tensor<32x16xf32>", ""
    else:
        rows = ", ".join("[" + ", ".join(repr(float(v)) for v in row) + "]" for row in b)
        args, const = "%a: tensor<64x32xf32>", \
            f"  %b = arith.constant dense<[{rows}]> : tensor<32x16xf32>\n"
    return f"""
func.func @main({args}) -> tensor<64x16xf32> {{
{const}  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x16xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<64x16xf32>) -> tensor<64x16xf32>
  %r = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x16xf32>)
                     outs(%f : tensor<64x16xf32>) -> tensor<64x16xf32>
  return %r : tensor<64x16xf32>
}}"""


def test_a_vm_call_takes_the_shortcut(rng, paths):
    """What the compiler emits for a call (an indirect command buffer) is what it is for."""
    import irtk
    ran, _ = paths
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 16)).astype(np.float32)
    for device in ("local-sync", "local-task"):
        module = irtk.load(irtk.compile_str(_matmul_mlir(), target="cpu"), device=device)
        np.testing.assert_allclose(module.main(a, b), a.astype(np.float64) @ b,
                                   rtol=1e-5, atol=1e-5)
    assert "direct" in ran and "general" not in ran


def test_a_vm_call_with_constants_takes_the_shortcut(rng, paths):
    """A constant's buffer is bound in the recording itself (docs/compiler.md): the shortcut
    reads it from there, call after call."""
    import irtk
    ran, _ = paths
    b = rng.standard_normal((32, 16)).astype(np.float32)
    for device in ("local-sync", "local-task"):
        module = irtk.load(irtk.compile_str(_matmul_mlir(b), target="cpu"), device=device)
        for _ in range(2):
            a = rng.standard_normal((64, 32)).astype(np.float32)
            np.testing.assert_allclose(module.main(a), a.astype(np.float64) @ b,
                                       rtol=1e-5, atol=1e-5)
    assert ran.count("direct") == 4 and "general" not in ran


def test_a_released_recorded_buffer_gets_the_general_paths_error(device, rng, paths):
    """A buffer bound in the recording itself and released since: the general path's error."""
    ran, _ = paths
    exe = device.create_executable("cpu-kernel-fb", binary("add", "arith.addf", "f32", "f32", N))
    const = _upload(device, rng.standard_normal(N).astype(np.float32))
    cb = device.create_command_buffer(binding_capacity=2)
    cb.dispatch(exe, 0, workgroups_for(N, 64), [],
                [_slot(0), BindingRef(const, 0, 4 * N), _slot(1)])
    cb.finalize()
    a = rng.standard_normal(N).astype(np.float32)
    out = device.allocator.allocate(4 * N)
    _execute(device, cb, [(_upload(device, a), 0, -1), (out, 0, -1)])
    np.testing.assert_array_equal(_read(out), a + np.frombuffer(const.read(), np.float32))
    assert ran == ["direct"]
    const.release()
    sem = device.create_semaphore(0)
    with pytest.raises(RuntimeFailure, match="released"):
        device.queue_execute(Fence(), Fence([(sem, 1)]), [cb],
                             [[(_upload(device, a), 0, -1), (out, 0, -1)]])
        sem.wait(1, timeout=30)
    assert ran == ["direct"]
