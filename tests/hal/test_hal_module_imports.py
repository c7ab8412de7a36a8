"""The `hal.*` imports the compiler emits, called as the VM calls them, on every driver."""
from __future__ import annotations

import numpy as np
import pytest

from irtk import hal
from irtk.errors import RuntimeFailure
from irtk.modules.hal import HalModule
from irtk.vm.refs import VMBuffer
from tests.hal import programs
from tests.hal.helpers import TIMEOUT, floats, mul_add_reference, record_mul_add, run


@pytest.fixture
def module(device) -> HalModule:
    return HalModule(device)


def _await(module: HalModule, fence: hal.Fence) -> None:
    assert fence.wait(TIMEOUT)


def test_subspan_load_and_store(module, device, rng):
    data = rng.integers(0, 256, 64, dtype=np.uint8).tobytes()
    buf = device.allocator.allocate_with_data(data)
    span = module.buffer_subspan(buf, 8, 32)
    assert module.buffer_length(span) == 32
    for length in (1, 2, 4):
        expected = int.from_bytes(data[8 + 5:8 + 5 + length], "little")
        got = module.buffer_load(span, 5, length) & 0xFFFFFFFF
        assert got == expected  # zero-extended
    module.buffer_store(-2, span, 30, 2)  # the low two bytes, little endian
    assert buf.read(38, 2) == b"\xfe\xff"
    module.buffer_store(0x12345678, buf, 1, 4)
    assert buf.read(1, 4) == bytes.fromhex("78563412")
    assert module.buffer_load(buf, 1, 4) == 0x12345678


@pytest.mark.parametrize("call,message", [
    (lambda m, b: m.buffer_subspan(b, 10, 7), r"hal.buffer.subspan: buffer range \[10, 17\) is "
                                              r"outside the 16-byte buffer"),
    (lambda m, b: m.buffer_load(b, 14, 4), r"hal.buffer.load: buffer range \[14, 18\)"),
    (lambda m, b: m.buffer_load(b, 0, 3), r"hal.buffer.load: length must be 1, 2 or 4 bytes"),
    (lambda m, b: m.buffer_store(1, b, -1, 1), r"hal.buffer.store: buffer range \[-1, 0\)"),
    (lambda m, b: m.buffer_load("x", 0, 1), "hal.buffer.load: buffer must be a !hal.buffer"),
    (lambda m, b: m.buffer_view_rank(b), "hal.buffer_view.rank: buffer view must be a "
                                         "!hal.buffer_view"),
])
def test_range_and_type_errors_name_the_import_and_argument(module, device, call, message):
    buf = device.allocator.allocate(16)
    with pytest.raises(RuntimeFailure, match=message):
        call(module, buf)


def test_buffer_view_queries(module, device):
    buf = device.allocator.allocate(4 * 24 + 8)
    et = int(hal.ElementType.f32)
    view = module.buffer_view_create(buf, 8, 4 * 24, et, 1, [2, 3, 4])
    assert module.buffer_view_rank(view) == 3
    assert [module.buffer_view_dim(view, i) for i in range(3)] == [2, 3, 4]
    assert module.buffer_view_element_type(view) & 0xFFFFFFFF == et
    assert module.buffer_view_encoding_type(view) == 1
    assert module.buffer_view_byte_length(view) == 96
    with pytest.raises(RuntimeFailure, match="hal.buffer_view.dim: axis 3 is out of range"):
        module.buffer_view_dim(view, 3)


def test_allocate_initialized_copies_the_source_bytes(module, device, rng):
    data = rng.integers(0, 256, 100, dtype=np.uint8).tobytes()
    source = VMBuffer(data)
    buf = module.allocator_allocate_initialized(module.device_allocator(device), -1, 0, 0,
                                                source, 10, 50)
    assert buf.size == 50 and buf.read() == data[10:60]
    with pytest.raises(RuntimeFailure, match=r"allocator.allocate.initialized: source range "
                                             r"\[60, 101\) is outside the 100-byte source"):
        module.allocator_allocate_initialized(device.allocator, -1, 0, 0, source, 60, 41)


def test_import_uses_read_only_bytes_in_place_or_gives_null(module, device, rng):
    data = rng.integers(0, 256, 100, dtype=np.uint8).tobytes()
    source = VMBuffer(memoryview(data), readonly=True)   # as rodata is
    buf = module.allocator_import(device.allocator, 1, -1, 0, 0, source, 10, 50)
    if buf is None:   # a device that cannot use host memory in place (Vulkan): the caller copies
        with pytest.raises(RuntimeFailure, match="hal.allocator.import: the device cannot use "
                                                 "this read-only host memory in place"):
            module.allocator_import(device.allocator, 0, -1, 0, 0, source, 10, 50)
        return
    assert buf.size == 50 and buf.read() == data[10:60] and not buf.writable
    # In place: the device reads the source's own bytes (the mapped module file).
    assert np.shares_memory(buf.host_memory, np.frombuffer(data, np.uint8))
    # A writable source could change under the device: never imported.
    assert module.allocator_import(device.allocator, 1, -1, 0, 0,
                                   VMBuffer(bytearray(data)), 0, 8) is None
    with pytest.raises(RuntimeFailure, match=r"allocator.import: source range \[60, 101\) is "
                                             r"outside the 100-byte source"):
        module.allocator_import(device.allocator, 1, -1, 0, 0, source, 60, 41)


def test_nothing_writes_an_imported_buffer(module, device, rng):
    data = rng.standard_normal(WRITE_N).astype(np.float32).tobytes()
    buf = module.allocator_import(device.allocator, 1, -1, 0, 0,
                                  VMBuffer(memoryview(data), readonly=True), 0, len(data))
    if buf is None:
        pytest.skip("the device imports no host memory")
    read_only = "read-only buffer"
    with pytest.raises(RuntimeFailure, match=read_only):
        module.buffer_store(1, buf, 0, 4)
    records = [lambda cb: cb.fill_buffer(hal.BindingRef(buf, 0, 16), b"\0\0\0\0"),
               lambda cb: cb.update_buffer(b"1234", hal.BindingRef(buf, 0, 4)),
               lambda cb: cb.copy_buffer(hal.BindingRef(device.allocator.allocate(8), 0, 8),
                                         hal.BindingRef(buf, 0, 8))]
    for record in records:
        cb = device.create_command_buffer()
        record(cb)
        cb.finalize()
        fence = module.fence_create(device, 0)
        with pytest.raises(RuntimeFailure, match=read_only):
            device.queue_execute(hal.Fence(), fence, [cb])
            assert fence.wait(TIMEOUT)
    # A dispatch reads it, and may not write it.
    program = programs.load(device, WRITE_N)
    a = device.allocator.allocate_with_data(data)
    out = device.allocator.allocate(len(data))
    run(device, [record_mul_add(device, program, [hal.BindingRef(b, 0, len(data))
                                                  for b in (buf, a, out)])])
    x = np.frombuffer(data, np.float32)
    np.testing.assert_allclose(floats(out), mul_add_reference(x, x), rtol=1e-6)
    cb = record_mul_add(device, program, [hal.BindingRef(b, 0, len(data)) for b in (a, a, buf)])
    with pytest.raises(RuntimeFailure, match="is written, but its binding 2 is a read-only"):
        run(device, [cb])
    assert buf.read() == data


WRITE_N = 64


def test_update_buffer_then_execute(module, device, rng):
    data = rng.integers(0, 256, 40, dtype=np.uint8).tobytes()
    target = device.allocator.allocate_with_data(bytes(64))
    cmd = module.command_buffer_create(device, 1, 1, 0)
    module.command_buffer_update_buffer(cmd, VMBuffer(data), 3, target, 5, 30, 0, 0)
    module.command_buffer_finalize(cmd)
    fence = module.fence_create(device, 0)
    module.device_queue_execute(device, -1, None, fence, [cmd])
    _await(module, fence)
    assert target.read() == bytes(5) + data[3:33] + bytes(29)
    with pytest.raises(RuntimeFailure, match=r"command_buffer.update_buffer: target range "
                                             r"\[60, 70\) is outside the 64-byte target"):
        module.command_buffer_update_buffer(module.command_buffer_create(device, 1, 1, 0),
                                            VMBuffer(data), 0, target, 60, 10, 0, 0)


def test_execute_indirect_reuses_one_command_buffer_with_new_bindings(module, device, rng):
    program = programs.load(device, 500)
    n, exe = program.n, program.executable
    cmd = module.command_buffer_create(device, 0, 1, 3)
    module.command_buffer_dispatch(cmd, exe, exe.lookup("mul_add"), *program.workgroups, 0,
                                   program.mul_add_constants,
                                   [(i, None, 0, 4 * n) for i in range(3)])
    module.command_buffer_finalize(cmd)
    for _ in range(3):
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        ba = device.allocator.allocate_with_data(a.tobytes())
        bb = device.allocator.allocate_with_data(b.tobytes())
        bc = device.allocator.allocate(4 * n)
        fence = module.fence_create(device, 0)
        module.device_queue_execute_indirect(device, -1, None, fence, cmd,
                                             [(ba, 0, 4 * n), (bb, 0, -1), (bc, 0, 4 * n)])
        _await(module, fence)
        np.testing.assert_allclose(np.frombuffer(bc.read(), np.float32),
                                   mul_add_reference(a, b), rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeFailure, match="device.queue.execute.indirect: binding 1 range "
                                             r"\[0, 4000\) is outside the 2000-byte buffer"):
        module.device_queue_execute_indirect(device, -1, None, None, cmd,
                                             [(ba, 0, -1), (bb, 0, 4000), (bc, 0, -1)])
    with pytest.raises(RuntimeFailure, match="4 bindings exceed the command buffer's binding "
                                             "capacity of 3"):
        module.device_queue_execute_indirect(device, -1, None, None, cmd,
                                             [(ba, 0, -1)] * 4)
    exe.release()


def test_fill_buffer_with_a_null_target_fills_its_binding_table_slot(module, device, rng):
    cmd = module.command_buffer_create(device, 0, 1, 1)
    module.command_buffer_fill_buffer(cmd, None, 8, 24, 0, 0x3F800000, 4, 0)   # 1.0f
    module.command_buffer_finalize(cmd)
    for _ in range(2):
        data = rng.standard_normal(16).astype(np.float32)
        buf = device.allocator.allocate_with_data(data.tobytes())
        fence = module.fence_create(device, 0)
        module.device_queue_execute_indirect(device, -1, None, fence, cmd, [(buf, 0, -1)])
        _await(module, fence)
        expected = data.copy()
        expected[2:8] = 1.0
        np.testing.assert_array_equal(np.frombuffer(buf.read(), np.float32), expected)


@pytest.mark.parametrize("slot,message", [
    (1, "fill_buffer: target: binding-table slot 1 is beyond the command buffer's binding "
        "capacity of 1"),
    (-1, "fill_buffer: target: a binding needs a buffer or a slot"),
])
def test_fill_buffer_slot_errors_name_the_slot(module, device, slot, message):
    cmd = module.command_buffer_create(device, 0, 1, 1)
    with pytest.raises(RuntimeFailure, match=message):
        module.command_buffer_fill_buffer(cmd, None, 0, 16, slot, 0, 4, 0)


def test_copy_buffer_with_null_buffers_copies_between_binding_table_slots(module, device, rng):
    cmd = module.command_buffer_create(device, 0, 1, 2)
    module.command_buffer_copy_buffer(cmd, 1, 0, None, 4, None, 8, 20, 0)
    module.command_buffer_finalize(cmd)
    for _ in range(2):
        src = rng.standard_normal(8).astype(np.float32)
        dst = rng.standard_normal(12).astype(np.float32)
        bsrc = device.allocator.allocate_with_data(src.tobytes())
        bdst = device.allocator.allocate_with_data(dst.tobytes())
        fence = module.fence_create(device, 0)
        module.device_queue_execute_indirect(device, -1, None, fence, cmd,
                                             [(bdst, 0, -1), (bsrc, 0, -1)])
        _await(module, fence)
        expected = dst.copy()
        expected[2:7] = src[1:6]
        np.testing.assert_array_equal(np.frombuffer(bdst.read(), np.float32), expected)
    small = device.allocator.allocate(16)
    with pytest.raises(RuntimeFailure, match=r"command 0 \(copy\): source: range \[4, 24\) is "
                                             r"outside binding-table slot 1 \(16 bytes\)"):
        module.device_queue_execute_indirect(device, -1, None, None, cmd,
                                             [(bdst, 0, -1), (small, 0, -1)])


def test_copy_buffer_mixes_a_direct_source_with_a_slot_target(module, device, rng):
    src = rng.standard_normal(4).astype(np.float32)
    bsrc = device.allocator.allocate_with_data(src.tobytes())
    cmd = module.command_buffer_create(device, 0, 1, 1)
    module.command_buffer_copy_buffer(cmd, 0, 0, bsrc, 0, None, 0, 16, 0)
    module.command_buffer_finalize(cmd)
    bdst = device.allocator.allocate(16)
    fence = module.fence_create(device, 0)
    module.device_queue_execute_indirect(device, -1, None, fence, cmd, [(bdst, 0, -1)])
    _await(module, fence)
    np.testing.assert_array_equal(np.frombuffer(bdst.read(), np.float32), src)


@pytest.mark.parametrize("args,message", [
    ((2, 0), "copy_buffer: source: binding-table slot 2 is beyond the command buffer's "
             "binding capacity of 2"),
    ((0, -1), "copy_buffer: target: a binding needs a buffer or a slot"),
])
def test_copy_buffer_slot_errors_name_the_operand(module, device, args, message):
    cmd = module.command_buffer_create(device, 0, 1, 2)
    with pytest.raises(RuntimeFailure, match=message):
        module.command_buffer_copy_buffer(cmd, *args, None, 0, None, 0, 16, 0)


def test_update_buffer_with_a_null_target_writes_its_binding_table_slot(module, device, rng):
    data = rng.integers(0, 256, 12, dtype=np.uint8).tobytes()
    cmd = module.command_buffer_create(device, 0, 1, 1)
    module.command_buffer_update_buffer(cmd, VMBuffer(data), 4, None, 8, 8, 0, 0)
    module.command_buffer_finalize(cmd)
    target = device.allocator.allocate_with_data(bytes(32))
    fence = module.fence_create(device, 0)
    module.device_queue_execute_indirect(device, -1, None, fence, cmd, [(target, 0, -1)])
    _await(module, fence)
    assert target.read() == bytes(8) + data[4:12] + bytes(16)


@pytest.mark.parametrize("slot,message", [
    (1, "update_buffer: target: binding-table slot 1 is beyond the command buffer's binding "
        "capacity of 1"),
    (-1, "update_buffer: target: a binding needs a buffer or a slot"),
])
def test_update_buffer_slot_errors_name_the_slot(module, device, slot, message):
    cmd = module.command_buffer_create(device, 0, 1, 1)
    with pytest.raises(RuntimeFailure, match=message):
        module.command_buffer_update_buffer(cmd, VMBuffer(bytes(8)), 0, None, 0, 8, slot, 0)
