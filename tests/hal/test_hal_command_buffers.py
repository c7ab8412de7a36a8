"""Command buffers: dispatches checked against numpy, recorded once and executed many times
with binding tables filled at submit, execution barriers, and the errors of bad recordings."""
from __future__ import annotations

import numpy as np
import pytest

from irtk.errors import RuntimeFailure
from irtk.hal import BindingRef, Fence
from tests.hal import programs
from tests.hal.helpers import (TIMEOUT, floats, mul_add_reference, new_fence, record_mul_add,
                               run, upload)


@pytest.fixture
def program(device):
    program = programs.load(device, 1000)
    yield program
    program.executable.release()


def _inputs(rng, n):
    return (rng.standard_normal(n).astype(np.float32),
            rng.standard_normal(n).astype(np.float32))


def test_dispatch_matches_numpy(device, program, rng):
    a, b = _inputs(rng, program.n)
    ba, bb, bc = upload(device, a), upload(device, b), device.allocator.allocate(4 * program.n)
    cb = record_mul_add(device, program, [BindingRef(x, 0, -1) for x in (ba, bb, bc)])
    run(device, [cb])
    np.testing.assert_allclose(floats(bc), mul_add_reference(a, b), rtol=1e-6, atol=1e-6)


def test_recorded_once_executed_many_times_with_different_binding_tables(device, program,
                                                                          rng):
    n = program.n
    slots = [BindingRef(None, 0, -1, slot=i) for i in range(3)]
    cb = record_mul_add(device, program, slots, capacity=3)
    for round_ in range(4):
        a, b = _inputs(rng, n)
        # Entries at an offset inside larger buffers, so the table's offsets matter too.
        pad = device.info.binding_alignment * round_
        big = device.allocator.allocate(pad + 4 * n)
        big.write(a.tobytes(), pad)
        bb, bc = upload(device, b), device.allocator.allocate(4 * n)
        run(device, [cb], [[(big, pad, 4 * n), (bb, 0, -1), (bc, 0, 4 * n)]])
        np.testing.assert_allclose(floats(bc), mul_add_reference(a, b), rtol=1e-6, atol=1e-6)


def test_the_same_table_again_gives_the_same_result(device, program, rng):
    a, b = _inputs(rng, program.n)
    ba, bb, bc = upload(device, a), upload(device, b), device.allocator.allocate(4 * program.n)
    cb = record_mul_add(device, program,
                        [BindingRef(ba, 0, -1), BindingRef(None, 0, -1, slot=0),
                         BindingRef(None, 0, -1, slot=1)], capacity=2)
    for _ in range(3):
        bc.write(bytes(4 * program.n))
        run(device, [cb], [[(bb, 0, -1), (bc, 0, -1)]])
        np.testing.assert_allclose(floats(bc), mul_add_reference(a, b), rtol=1e-6, atol=1e-6)


def test_slot_ranges_are_relative_to_their_table_entry(device, program, rng):
    n = program.n
    a, b = _inputs(rng, n)
    gap = -(-4 * n // device.info.binding_alignment) * device.info.binding_alignment
    packed = device.allocator.allocate(gap + 4 * n)  # one buffer, two slots into it
    packed.write(a.tobytes(), 0)
    packed.write(b.tobytes(), gap)
    bc = device.allocator.allocate(4 * n + 12)
    cb = record_mul_add(device, program, [BindingRef(None, 0, 4 * n, slot=0),
                                          BindingRef(None, gap, 4 * n, slot=0),
                                          BindingRef(None, 0, -1, slot=1)], capacity=2)
    run(device, [cb], [[(packed, 0, -1), (bc, 0, 4 * n)]])
    np.testing.assert_allclose(floats(bc, 0, n), mul_add_reference(a, b), rtol=1e-6,
                               atol=1e-6)


def test_barrier_orders_a_dispatch_before_what_reads_its_output(device, program, rng):
    n = program.n
    a, b = _inputs(rng, n)
    ba, bb, bc = upload(device, a), upload(device, b), device.allocator.allocate(4 * n)
    copy = device.allocator.allocate(4 * n)
    cb = device.create_command_buffer()
    exe = program.executable
    cb.dispatch(exe, exe.lookup("mul_add"), program.workgroups, program.mul_add_constants,
                [BindingRef(x, 0, -1) for x in (ba, bb, bc)])
    cb.execution_barrier()
    cb.dispatch(exe, exe.lookup("scale"), program.workgroups, program.scale_constants,
                [BindingRef(bc, 0, -1)])
    cb.execution_barrier()
    cb.copy_buffer(BindingRef(bc, 0, 4 * n), BindingRef(copy, 0, 4 * n))
    cb.finalize()
    run(device, [cb])
    expected = 2.0 * mul_add_reference(a, b)
    np.testing.assert_allclose(floats(bc), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(floats(copy), floats(bc))


def test_command_buffers_of_one_submission_run_in_order(device, program, rng):
    n = program.n
    x = rng.standard_normal(n).astype(np.float32)
    bx = upload(device, x)
    cbs = []
    for _ in range(3):
        cb = device.create_command_buffer()
        cb.dispatch(program.executable, program.executable.lookup("scale"), program.workgroups,
                    program.scale_constants, [BindingRef(bx, 0, -1)])
        cb.finalize()
        cbs.append(cb)
    reset = device.create_command_buffer()
    reset.update_buffer(x.tobytes(), BindingRef(bx, 0, 4 * n))
    reset.finalize()
    run(device, [reset, *cbs])
    np.testing.assert_array_equal(floats(bx), x * np.float32(8))


def test_slot_beyond_the_binding_capacity_is_refused_at_record(device, program):
    cb = device.create_command_buffer(2)
    with pytest.raises(RuntimeFailure, match="slot 2 is beyond the command buffer's binding "
                                             "capacity of 2"):
        cb.dispatch(program.executable, 0, program.workgroups, program.mul_add_constants,
                    [BindingRef(None, 0, -1, slot=i) for i in range(3)])


@pytest.mark.parametrize("table,message", [
    ([], "uses binding-table slot 0 but the binding table has 0 entries"),
    ([(None, 0, -1)], "uses binding-table slot 0, which is empty"),
    ([("not a buffer", 0, -1)], "holds str, not a buffer"),
    ("short", r"range \[0, 4000\) is outside binding-table slot 0 \(400 bytes\)"),
    ("outside", r"binding-table entry 0: range \[8, 4008\) is outside the buffer of 4000"),
    ("released", "released"),
])
def test_a_bad_binding_table_is_raised_at_submit_and_fails_the_fence(device, program, table,
                                                                       message):
    n = program.n
    bufs = [device.allocator.allocate(4 * n) for _ in range(3)]
    if table == "short":
        table = [(bufs[0], 0, 400)]
    elif table == "outside":
        table = [(bufs[0], 8, 4 * n)]
    elif table == "released":
        spare = device.allocator.allocate(4 * n)
        spare.release()
        table = [(spare, 0, -1)]
    cb = record_mul_add(device, program, [BindingRef(None, 0, 4 * n, slot=0),
                                          BindingRef(bufs[1], 0, -1),
                                          BindingRef(bufs[2], 0, -1)], capacity=1)
    done = new_fence(device)
    with pytest.raises(RuntimeFailure, match=message):
        device.queue_execute(Fence(), done, [cb], [table])
    with pytest.raises(RuntimeFailure, match=message):
        done.wait(TIMEOUT)


def test_a_finalized_command_buffer_takes_no_more_commands(device):
    cb = device.create_command_buffer()
    cb.execution_barrier()
    cb.finalize()
    with pytest.raises(RuntimeFailure, match="finalized"):
        cb.fill_buffer(BindingRef(device.allocator.allocate(4), 0, 4), b"\x00")


def test_an_unfinalized_command_buffer_is_refused_at_submit(device):
    cb = device.create_command_buffer()
    cb.fill_buffer(BindingRef(device.allocator.allocate(4), 0, 4), b"\x00")
    with pytest.raises(RuntimeFailure, match="not finalized"):
        device.queue_execute(Fence(), new_fence(device), [cb])


def test_dispatch_checks_its_export_and_bindings(device, program):
    cb = device.create_command_buffer()
    with pytest.raises(RuntimeFailure, match="ordinal 5"):
        cb.dispatch(program.executable, 5, (1, 1, 1), [], [])
    with pytest.raises(RuntimeFailure, match="workgroup count"):
        cb.dispatch(program.executable, 0, (1, -1, 1), program.mul_add_constants,
                    [BindingRef(device.allocator.allocate(4), 0, -1)] * 3)
    released = device.allocator.allocate(4000)
    released.release()
    with pytest.raises(RuntimeFailure, match="released"):
        cb.dispatch(program.executable, 0, program.workgroups, program.mul_add_constants,
                    [BindingRef(released, 0, -1)] * 3)
