"""Programs that drive the HAL through the `hal` module: on a fake device and on local-sync."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from irtk import hal
from irtk.errors import DeviceError, InputError, RuntimeFailure
from irtk.modules.hal import HalModule
from irtk.runtime import load, vm_context
from irtk.vm.writer import FunctionBuilder, ModuleWriter, Reg
from tests.vm.fakes import FAKE_FORMAT, FakeDevice
from tests.vm.helpers import i32, i64, ref

SIGNATURES = {f.name: f.calling_convention for f in HalModule.EXPORTS}
F32 = int(hal.ElementType.f32)


class Program:
    """A ModuleWriter plus a `call` helper that imports `hal.*` functions on first use."""

    def __init__(self, name: str = "program") -> None:
        self.w = ModuleWriter(name)

    def imp(self, name: str) -> int:
        return self.w.add_import(f"hal.{name}", SIGNATURES[name])

    def text(self, value: str) -> int:
        return self.w.add_rodata(value, "text/plain", value.encode())

    def call(self, b: FunctionBuilder, name: str, args: list[Reg], results: list[Reg],
             sizes: list[int] | None = None) -> None:
        if sizes is None:
            b.emit("call.import", self.imp(name), args, results)
        else:
            b.emit("call.import.variadic", self.imp(name), sizes, args, results)


def fill_program(count: int = 4, pattern: int = 0x3F800000) -> bytes:
    """main() -> 4xf32 buffer view filled with 1.0 by a command buffer, after a fence wait."""
    p = Program("fill")
    dev_global, alloc_global = p.w.add_global("ref"), p.w.add_global("ref")
    init = FunctionBuilder()
    p.call(init, "device.default", [], [ref(0)])
    p.call(init, "device.allocator", [ref(0)], [ref(1)])
    init.emit("global.store.ref", dev_global, ref(0))
    init.emit("global.store.ref", alloc_global, ref(1))
    init.emit("return", [])
    p.w.set_init_function(p.w.add_function("__init", "0v_v", init))

    b = FunctionBuilder()
    b.emit("global.load.ref", ref(0), dev_global)
    b.emit("global.load.ref", ref(1), alloc_global)
    b.emit("const.i32", i32(0), 0)
    b.emit("const.i64", i64(0), 4 * count)
    p.call(b, "allocator.allocate", [ref(1), i32(0), i32(0), i64(0)],
           [ref(2)])
    b.emit("const.i32", i32(1), 1)
    p.call(b, "command_buffer.create", [ref(0), i32(1), i32(1),
                                        i32(0)], [ref(3)])
    b.emit("const.i64", i64(1), 0)
    b.emit("const.i64", i64(3), pattern)
    b.emit("const.i32", i32(3), 4)
    p.call(b, "command_buffer.fill_buffer", [ref(3), ref(2), i64(1),
                                             i64(0), i32(0), i64(3), i32(3), i64(1)], [])
    p.call(b, "command_buffer.execution_barrier", [ref(3), i32(0), i32(0),
                                                   i32(0)], [])
    p.call(b, "command_buffer.finalize", [ref(3)], [])
    p.call(b, "fence.create", [ref(0), i32(0)], [ref(4)])
    b.emit("const.ref.null", ref(5))
    b.emit("const.i64", i64(2), -1)
    p.call(b, "device.queue.execute", [ref(0), i64(2), ref(5),
                                       ref(4), ref(3)], [], sizes=[1])
    b.emit("const.i32", i32(4), -1)
    p.call(b, "fence.await", [i32(4), ref(4)], [i32(5)], sizes=[1])
    ok, bad = b.new_label(), b.new_label()
    b.emit("cond_br", i32(5), bad, ok)
    b.bind(bad)
    b.emit("fail", i32(5), "fence wait timed out")
    b.bind(ok)
    b.emit("const.i32", i32(6), F32)
    b.emit("const.i64", i64(3), count)
    p.call(b, "buffer_view.create", [ref(2), i64(1), i64(0), i32(6),
                                     i32(1), i64(3)], [ref(6)], sizes=[1])
    b.emit("return", [ref(6)])
    p.w.add_export("main", p.w.add_function("main", "0v_r", b), {"abi.args": "",
                                                                 "abi.results": f"{count}xf32"})
    return p.w.to_bytes()


def test_fill_submit_await_returns_a_buffer_view_on_a_fake_device():
    device = FakeDevice()
    m = load(fill_program(), device=device)
    np.testing.assert_array_equal(m.main(), np.ones(4, np.float32))
    (cmd,), = device.submissions
    assert [c[0] for c in cmd.commands] == ["fill", "barrier"]


HAS_HAL_CPU = importlib.util.find_spec("hal_cpu") is not None and \
    importlib.util.find_spec("hal_cpu.driver") is not None


@pytest.mark.skipif(not HAS_HAL_CPU, reason="hal_cpu is not importable")
@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_fill_submit_await_returns_a_buffer_view_on_the_cpu_driver(device):
    m = load(fill_program(count=6, pattern=0x40000000), device=device)
    np.testing.assert_array_equal(m.main(), np.full(6, 2.0, np.float32))


def passthrough_program(with_abi: bool) -> bytes:
    """main(view) asserts 4xf32, copies it into a new buffer and returns a view of the copy."""
    p = Program("copy")
    message = p.text("input 0")
    b = FunctionBuilder()
    b.emit("const.ref.rodata", ref(1), message)
    b.emit("const.i32", i32(0), F32)
    b.emit("const.i32", i32(1), 1)
    b.emit("const.i64", i64(0), 4)
    p.call(b, "buffer_view.assert", [ref(0), ref(1), i32(0), i32(1),
                                     i64(0)], [], sizes=[1])
    p.call(b, "buffer_view.buffer", [ref(0)], [ref(2)])
    p.call(b, "buffer.length", [ref(2)], [i64(1)])
    p.call(b, "device.default", [], [ref(3)])
    p.call(b, "device.allocator", [ref(3)], [ref(4)])
    b.emit("const.i32", i32(2), 0)
    p.call(b, "allocator.allocate", [ref(4), i32(2), i32(2), i64(1)],
           [ref(5)])
    p.call(b, "command_buffer.create", [ref(3), i32(1), i32(1),
                                        i32(2)], [ref(6)])
    b.emit("const.i64", i64(2), 0)
    p.call(b, "command_buffer.copy_buffer", [ref(6), i32(2), i32(2), ref(2), i64(2),
                                             ref(5), i64(2), i64(1), i64(2)], [])
    p.call(b, "command_buffer.finalize", [ref(6)], [])
    p.call(b, "fence.create", [ref(3), i32(2)], [ref(7)])
    b.emit("const.ref.null", ref(8))
    p.call(b, "device.queue.execute", [ref(3), i64(2), ref(8),
                                       ref(7), ref(6)], [], sizes=[1])
    b.emit("const.i32", i32(3), -1)
    p.call(b, "fence.await", [i32(3), ref(7)], [i32(4)], sizes=[1])
    p.call(b, "buffer_view.create", [ref(5), i64(2), i64(1), i32(0),
                                     i32(1), i64(0)], [ref(9)], sizes=[1])
    b.emit("return", [ref(9)])
    reflection = {"abi.args": "4xf32", "abi.results": "4xf32"} if with_abi else {}
    p.w.add_export("main", p.w.add_function("main", "0r_r", b), reflection)
    return p.w.to_bytes()


DEVICES = ["fake"] + [pytest.param(uri, marks=pytest.mark.skipif(
    not HAS_HAL_CPU, reason="hal_cpu is not importable")) for uri in ("local-sync", "local-task")]


@pytest.mark.parametrize("device", DEVICES)
def test_arrays_round_trip_through_device_buffers(device):
    m = load(passthrough_program(with_abi=True),
             device=FakeDevice() if device == "fake" else device)
    x = np.array([1.5, -2.0, 3.25, 4.0], np.float32)
    np.testing.assert_array_equal(m.main(x), x)
    with pytest.raises(InputError, match=r"main: argument 0: expected 4xf32, got 2x2xf32"):
        m.main(x.reshape(2, 2))


def test_buffer_view_assert_reports_expected_and_actual_type():
    m = load(passthrough_program(with_abi=False), device=FakeDevice())
    with pytest.raises(InputError, match="^input 0: expected 4xf32, got 3xf32$"):
        m.main(np.zeros(3, np.float32))
    with pytest.raises(InputError, match="^input 0: expected 4xf32, got 4xi32$"):
        m.main(np.zeros(4, np.int32))
    ctx = vm_context(passthrough_program(with_abi=False), device=FakeDevice())
    with pytest.raises(InputError, match="^input 0: expected 4xf32, got null$"):
        ctx.call("main", [None])


def init_checks_format_program(fmt: str) -> bytes:
    p = Program("needs-format")
    category, key = p.text("hal.executable.format"), p.text(fmt)
    init = FunctionBuilder()
    p.call(init, "device.default", [], [ref(0)])
    init.emit("const.ref.rodata", ref(1), category)
    init.emit("const.ref.rodata", ref(2), key)
    p.call(init, "device.query.i64", [ref(0), ref(1), ref(2)],
           [i32(0), i64(0)])
    init.emit("trunc.i64.i32", i32(1), i64(0))
    ok, missing = init.new_label(), init.new_label()
    init.emit("cond_br", i32(1), ok, missing)
    init.bind(missing)
    init.emit("const.i32", i32(2), 9)
    init.emit("fail", i32(2), f"no executable in this module supports the device (needs {fmt})")
    init.bind(ok)
    init.emit("return", [])
    p.w.set_init_function(p.w.add_function("__init", "0v_v", init))
    return p.w.to_bytes()


def test_module_without_an_executable_for_the_device_fails_at_load_with_the_fail_message():
    load(init_checks_format_program(FAKE_FORMAT), device=FakeDevice())
    with pytest.raises(RuntimeFailure, match=r"no executable in this module supports the device "
                                             r"\(needs vulkan-spirv-fb\) \(in function '__init'"):
        load(init_checks_format_program("vulkan-spirv-fb"), device=FakeDevice())


def dispatch_program(fmt: str = FAKE_FORMAT) -> bytes:
    """Creates an executable from rodata and records one dispatch; returns the command buffer."""
    p = Program("dispatch")
    exe_data = p.w.add_rodata("kernel", fmt, b"KERNEL")
    fmt_text = p.text(fmt)
    b = FunctionBuilder()   # arg: ref:0 a buffer
    p.call(b, "device.default", [], [ref(1)])
    b.emit("const.ref.rodata", ref(2), fmt_text)
    b.emit("const.ref.rodata", ref(3), exe_data)
    b.emit("const.ref.null", ref(4))
    p.call(b, "executable.create", [ref(1), ref(2), ref(3), ref(4)],
           [ref(5)])
    b.emit("const.i32", i32(0), 0)
    b.emit("const.i32", i32(1), 2)
    p.call(b, "command_buffer.create", [ref(1), i32(0), i32(0),
                                        i32(1)], [ref(6)])
    b.emit("const.i32", i32(2), 8)
    b.emit("const.i32", i32(3), 1)
    b.emit("const.i64", i64(0), 0)
    b.emit("const.i32", i32(4), -1)
    b.emit("const.i32", i32(5), 7)
    b.emit("const.i64", i64(1), 16)
    args = [ref(6), ref(5), i32(0), i32(2), i32(3),
            i32(3), i64(0),
            i32(4), i32(5),                                   # 2 constants
            i32(0), ref(0), i64(0), i64(1),     # direct binding
            i32(3), ref(4), i64(0), i64(1)]     # table slot 1
    p.call(b, "command_buffer.dispatch", args, [], sizes=[2, 2])
    p.call(b, "command_buffer.finalize", [ref(6)], [])
    b.emit("return", [ref(6)])
    p.w.add_export("main", p.w.add_function("main", "0r_r", b))
    return p.w.to_bytes()


def test_dispatch_passes_constants_and_direct_and_slot_bindings():
    device = FakeDevice()
    buffer = device.allocator.allocate(16)
    (cmd,) = vm_context(dispatch_program(), device=device).call("main", [buffer])
    ((kind, exe, ordinal, grid, constants, bindings),) = cmd.commands
    assert (kind, exe.data, ordinal, grid) == ("dispatch", b"KERNEL", 0, (8, 1, 1))
    assert constants == [0xFFFFFFFF, 7]
    assert bindings == [hal.BindingRef(buffer, 0, 16), hal.BindingRef(None, 0, 16, slot=1)]
    assert cmd.finalized and cmd.binding_capacity == 2


def test_executable_creation_errors_pass_through():
    with pytest.raises(DeviceError, match="fake device cannot run 'other-fb'"):
        vm_context(dispatch_program("other-fb"), device=FakeDevice()).call("main", [None])


def test_a_failed_fence_raises_runtime_failure():
    device = FakeDevice()
    m = load(fill_program(), device=device)
    device.fail_next = DeviceError("device lost")
    with pytest.raises(RuntimeFailure, match="hal.fence.await: the device failed: device lost"):
        m.main()


def test_wrong_ref_type_names_the_import_and_argument():
    p = Program("bad-ref")
    b = FunctionBuilder()
    b.emit("const.ref.null", ref(0))
    p.call(b, "buffer.length", [ref(0)], [i64(0)])
    b.emit("return", [])
    p.w.add_export("main", p.w.add_function("main", "0v_v", b))
    with pytest.raises(RuntimeFailure,
                       match="hal.buffer.length: buffer must be a !hal.buffer, got null"):
        vm_context(p.w.to_bytes(), device=FakeDevice()).call("main")


def test_cmp_type_ref_tells_the_hal_modules_ref_types_apart():
    p = Program("type-tests")
    names = ["!hal.buffer", "!hal.buffer_view", "!hal.fence", "!vm.buffer"]
    for name in names:
        p.w.add_type(name)
    b = FunctionBuilder()
    for i in range(len(names)):
        b.emit("cmp.type.ref", i32(i), ref(0), i)
    b.emit("return", [i32(i) for i in range(len(names))])
    p.w.add_export("main", p.w.add_function("main", "0r_iiii", b))
    ctx = vm_context(p.w.to_bytes(), device=FakeDevice())
    buffer = ctx.native_modules[0].device.allocator.allocate(16)
    assert ctx.call("main", [buffer]) == [1, 0, 0, 0]   # a driver's subclass of hal.Buffer
    assert ctx.call("main", [hal.BufferView(buffer, (4,), hal.ElementType.f32)]) == [0, 1, 0, 0]
    assert ctx.call("main", [hal.Fence()]) == [0, 0, 1, 0]
    assert ctx.call("main", [None]) == [0, 0, 0, 0]


def test_device_name_and_queries():
    hal_module = HalModule(FakeDevice())
    from irtk.vm import VMBuffer
    assert hal_module.device_name(hal_module.device).text() == "Fake device"
    q = hal_module.device_query_i64
    t = VMBuffer.from_text
    assert q(hal_module.device, t("hal.executable.format"), t(FAKE_FORMAT)) == (1, 1)
    assert q(hal_module.device, t("hal.executable.format"), t("cpu-kernel-fb")) == (1, 0)
    assert q(hal_module.device, t("hal.device.id"), t("fa*")) == (1, 1)
    assert q(hal_module.device, t("hal.nope"), t("x")) == (0, 0)


def test_hal_signatures_are_the_contract():
    assert SIGNATURES == {
        "device.default": "0v_r", "device.allocator": "0r_r", "device.query.i64": "0rrr_iI",
        "device.name": "0r_r", "executable.create": "0rrrr_r",
        "allocator.allocate": "0riiI_r", "buffer.length": "0r_I",
        "buffer_view.create": "0rIIiiCID_r", "buffer_view.assert": "0rriiCID_v",
        "buffer_view.buffer": "0r_r", "command_buffer.create": "0riii_r",
        "command_buffer.finalize": "0r_v", "command_buffer.execution_barrier": "0riii_v",
        "command_buffer.fill_buffer": "0rrIIiIiI_v", "command_buffer.copy_buffer": "0riirIrIII_v",
        "command_buffer.dispatch": "0rriiiiICiDCirIID_v", "fence.create": "0ri_r",
        "fence.await": "0iCrD_i", "device.queue.execute": "0rIrrCrD_v",
        "device.queue.alloca": "0rIrriiiI_r", "device.queue.dealloca": "0rIrrr_v",
        "buffer.subspan": "0rII_r", "buffer.load": "0rIi_i", "buffer.store": "0irIi_v",
        "buffer_view.rank": "0r_i", "buffer_view.dim": "0ri_I",
        "buffer_view.element_type": "0r_i", "buffer_view.encoding_type": "0r_i",
        "buffer_view.byte_length": "0r_I", "allocator.allocate.initialized": "0rIiirII_r",
        "allocator.import": "0riIiirII_r",
        "command_buffer.update_buffer": "0rrIrIIiI_v",
        "device.queue.execute.indirect": "0rIrrrCrIID_v",
    }
    assert [f.name for f in HalModule.EXPORTS if f.yieldable] == ["fence.await"]
