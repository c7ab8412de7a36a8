"""The `hal` native module: the VM's door to the HAL (`irtk.hal`), bound to one device.

Every import a compiled module may make is listed once, sorted, in `EXPORTS` with its calling
convention (the contract with the compiler; see docs/vm.md). Methods check the refs they get and
raise RuntimeFailure naming the import and the argument, so a bad program fails with a message
instead of an AttributeError deep in a driver.
"""
from __future__ import annotations

import fnmatch
import math
from typing import Any

from irtk import hal
from irtk.errors import InputError, RuntimeFailure
from irtk.hal.buffer_view import DENSE_ROW_MAJOR
from irtk.vm.native_module import NativeFunction, NativeModule
from irtk.vm.refs import VMBuffer, ref_type_name

F = NativeFunction

STATUS_OK = 0
STATUS_TIMEOUT = 1


def element_type_name(code: int) -> str:
    try:
        return hal.ElementType(code).name
    except ValueError:
        return f"type(0x{code & 0xFFFFFFFF:08X})"


def format_tensor_type(shape: list[int] | tuple[int, ...], element_type: int) -> str:
    """IREE's spelling of a tensor type, e.g. `4x2xf32` (`f32` for a scalar)."""
    return "x".join([str(d) for d in shape] + [element_type_name(element_type)])


def _check(value: Any, cls: type, function: str, what: str, type_name: str) -> Any:
    if not isinstance(value, cls):
        raise RuntimeFailure(f"hal.{function}: {what} must be a {type_name}, "
                             f"got {ref_type_name(value)}")
    return value


def _text(value: Any, function: str, what: str) -> str:
    buf = _check(value, VMBuffer, function, what, "!vm.buffer string")
    try:
        return buf.tobytes().decode("utf-8")
    except UnicodeDecodeError:
        raise RuntimeFailure(f"hal.{function}: {what} is not UTF-8 text") from None


def _fence_or_empty(value: Any, function: str, what: str) -> hal.Fence:
    if value is None:
        return hal.Fence()
    return _check(value, hal.Fence, function, what, "!hal.fence")


class HalModule(NativeModule):
    """`hal.*` imports for modules loaded on `device`."""

    name = "hal"
    EXPORTS = (
        F("allocator.allocate", "0riiI_r"),
        F("buffer.length", "0r_I"),
        F("buffer_view.assert", "0rriiCID_v"),
        F("buffer_view.buffer", "0r_r"),
        F("buffer_view.create", "0rIIiiCID_r"),
        F("command_buffer.copy_buffer", "0rrIrII_v"),
        F("command_buffer.create", "0riii_r"),
        F("command_buffer.dispatch", "0rriiiiICiDCirIID_v"),
        F("command_buffer.execution_barrier", "0riii_v"),
        F("command_buffer.fill_buffer", "0rrIIii_v"),
        F("command_buffer.finalize", "0r_v"),
        F("device.allocator", "0r_r"),
        F("device.default", "0v_r"),
        F("device.name", "0r_r"),
        F("device.query.i64", "0rrr_iI"),
        F("device.queue.alloca", "0rIrriiiI_r"),
        F("device.queue.dealloca", "0rIrrr_v"),
        F("device.queue.execute", "0rIrrCrD_v"),
        F("executable.create", "0rrrr_r"),
        F("fence.await", "0iCrD_i", yieldable=True),
        F("fence.create", "0ri_r"),
    )

    def __init__(self, device: hal.Device) -> None:
        self.device = device

    # -- device ----------------------------------------------------------------------------------

    def device_default(self) -> hal.Device:
        return self.device

    def device_allocator(self, device: Any) -> hal.Allocator:
        return _check(device, hal.Device, "device.allocator", "device", "!hal.device").allocator

    def device_name(self, device: Any) -> VMBuffer:
        dev = _check(device, hal.Device, "device.name", "device", "!hal.device")
        return VMBuffer.from_text(dev.info.name)

    def device_query_i64(self, device: Any, category: Any, key: Any) -> tuple[int, int]:
        """(1, value) for a known category/key, else (0, 0).

        "hal.executable.format" / a format name: 1 if the device runs it.
        "hal.device.id" / a glob such as "vulkan*": 1 if the driver name matches.
        """
        dev = _check(device, hal.Device, "device.query.i64", "device", "!hal.device")
        category_text = _text(category, "device.query.i64", "category")
        key_text = _text(key, "device.query.i64", "key")
        if category_text == "hal.executable.format":
            return 1, 1 if dev.supports_format(key_text) else 0
        if category_text == "hal.device.id":
            return 1, 1 if fnmatch.fnmatchcase(dev.info.driver, key_text) else 0
        return 0, 0

    def device_queue_alloca(self, device: Any, affinity: int, wait: Any, signal: Any,
                            pool: int, memory_types: int, usage: int, size: int) -> hal.Buffer:
        fn = "device.queue.alloca"
        dev = _check(device, hal.Device, fn, "device", "!hal.device")
        if size < 0:
            raise RuntimeFailure(f"hal.{fn}: negative size {size}")
        return dev.queue_alloca(_fence_or_empty(wait, fn, "wait fence"),
                                _fence_or_empty(signal, fn, "signal fence"), size)

    def device_queue_dealloca(self, device: Any, affinity: int, wait: Any, signal: Any,
                              buffer: Any) -> None:
        fn = "device.queue.dealloca"
        dev = _check(device, hal.Device, fn, "device", "!hal.device")
        buf = _check(buffer, hal.Buffer, fn, "buffer", "!hal.buffer")
        dev.queue_dealloca(_fence_or_empty(wait, fn, "wait fence"),
                           _fence_or_empty(signal, fn, "signal fence"), buf)

    def device_queue_execute(self, device: Any, affinity: int, wait: Any, signal: Any,
                             command_buffers: list[Any]) -> None:
        fn = "device.queue.execute"
        dev = _check(device, hal.Device, fn, "device", "!hal.device")
        cmds = [_check(c, hal.CommandBuffer, fn, f"command buffer {i}", "!hal.command_buffer")
                for i, c in enumerate(command_buffers)]
        dev.queue_execute(_fence_or_empty(wait, fn, "wait fence"),
                          _fence_or_empty(signal, fn, "signal fence"), cmds)

    # -- allocator and buffers -------------------------------------------------------------------

    def allocator_allocate(self, allocator: Any, memory_types: int, usage: int,
                           size: int) -> hal.Buffer:
        fn = "allocator.allocate"
        alloc = _check(allocator, hal.Allocator, fn, "allocator", "!hal.allocator")
        if size < 0:
            raise RuntimeFailure(f"hal.{fn}: negative size {size}")
        flags = hal.BufferUsage(usage & int(hal.BufferUsage.DEFAULT)) or hal.BufferUsage.DEFAULT
        return alloc.allocate(size, flags)

    def buffer_length(self, buffer: Any) -> int:
        return _check(buffer, hal.Buffer, "buffer.length", "buffer", "!hal.buffer").size

    # -- buffer views ----------------------------------------------------------------------------

    def buffer_view_create(self, buffer: Any, byte_offset: int, byte_length: int,
                           element_type: int, encoding: int, dims: list[int]) -> hal.BufferView:
        fn = "buffer_view.create"
        buf = _check(buffer, hal.Buffer, fn, "buffer", "!hal.buffer")
        try:
            et = hal.ElementType(element_type & 0xFFFFFFFF)
        except ValueError:
            raise RuntimeFailure(f"hal.{fn}: unknown element type 0x{element_type:08X}") from None
        if any(d < 0 for d in dims):
            raise RuntimeFailure(f"hal.{fn}: negative dimension in shape {dims}")
        needed = math.prod(dims) * et.byte_size
        if needed > byte_length or byte_offset < 0 or byte_offset + byte_length > buf.size:
            raise RuntimeFailure(
                f"hal.{fn}: {format_tensor_type(dims, element_type)} ({needed} bytes) does not "
                f"fit bytes [{byte_offset}, {byte_offset + byte_length}) of a {buf.size}-byte "
                "buffer")
        return hal.BufferView(buf, tuple(dims), et, byte_offset, encoding or DENSE_ROW_MAJOR)

    def buffer_view_assert(self, view: Any, message: Any, element_type: int, encoding: int,
                           dims: list[int]) -> None:
        """InputError "<message>: expected 4x2xf32, got 3x2xf32" unless the view matches."""
        text = _text(message, "buffer_view.assert", "message")
        expected = format_tensor_type(dims, element_type)
        if not isinstance(view, hal.BufferView):
            raise InputError(f"{text}: expected {expected}, got {ref_type_name(view)}")
        got = format_tensor_type(view.shape, int(view.element_type))
        if (list(view.shape) != list(dims) or int(view.element_type) != element_type & 0xFFFFFFFF
                or (encoding and view.encoding != encoding)):
            raise InputError(f"{text}: expected {expected}, got {got}")

    def buffer_view_buffer(self, view: Any) -> hal.Buffer:
        return _check(view, hal.BufferView, "buffer_view.buffer", "buffer view",
                      "!hal.buffer_view").buffer

    # -- executables and command buffers ---------------------------------------------------------

    def executable_create(self, device: Any, executable_format: Any, data: Any,
                          constants: Any) -> hal.Executable:
        """Constants (IREE's executable-level constants) are accepted and unused for now."""
        fn = "executable.create"
        dev = _check(device, hal.Device, fn, "device", "!hal.device")
        fmt = _text(executable_format, fn, "format")
        blob = _check(data, VMBuffer, fn, "data", "!vm.buffer")
        if constants is not None:
            _check(constants, VMBuffer, fn, "constants", "!vm.buffer")
        return dev.create_executable(fmt, blob.tobytes())

    def command_buffer_create(self, device: Any, modes: int, categories: int,
                              binding_capacity: int) -> hal.CommandBuffer:
        dev = _check(device, hal.Device, "command_buffer.create", "device", "!hal.device")
        return dev.create_command_buffer(binding_capacity)

    def command_buffer_finalize(self, cmd: Any) -> None:
        _check(cmd, hal.CommandBuffer, "command_buffer.finalize", "command buffer",
               "!hal.command_buffer").finalize()

    def command_buffer_execution_barrier(self, cmd: Any, source_stage_mask: int,
                                         target_stage_mask: int, flags: int) -> None:
        _check(cmd, hal.CommandBuffer, "command_buffer.execution_barrier", "command buffer",
               "!hal.command_buffer").execution_barrier()

    def command_buffer_fill_buffer(self, cmd: Any, target: Any, offset: int, length: int,
                                   pattern: int, pattern_length: int) -> None:
        fn = "command_buffer.fill_buffer"
        c = _check(cmd, hal.CommandBuffer, fn, "command buffer", "!hal.command_buffer")
        buf = _check(target, hal.Buffer, fn, "target", "!hal.buffer")
        if pattern_length not in (1, 2, 4):
            raise RuntimeFailure(f"hal.{fn}: pattern length must be 1, 2 or 4, "
                                 f"got {pattern_length}")
        data = (pattern & ((1 << (8 * pattern_length)) - 1)).to_bytes(pattern_length, "little")
        c.fill_buffer(hal.BindingRef(buf, offset, length), data)

    def command_buffer_copy_buffer(self, cmd: Any, source: Any, source_offset: int,
                                   target: Any, target_offset: int, length: int) -> None:
        fn = "command_buffer.copy_buffer"
        c = _check(cmd, hal.CommandBuffer, fn, "command buffer", "!hal.command_buffer")
        src = _check(source, hal.Buffer, fn, "source", "!hal.buffer")
        dst = _check(target, hal.Buffer, fn, "target", "!hal.buffer")
        c.copy_buffer(hal.BindingRef(src, source_offset, length),
                      hal.BindingRef(dst, target_offset, length))

    def command_buffer_dispatch(self, cmd: Any, executable: Any, ordinal: int, x: int, y: int,
                                z: int, flags: int, constants: list[int],
                                bindings: list[tuple[int, Any, int, int]]) -> None:
        """A binding with a null buffer refers to `slot` of the binding table given at submit."""
        fn = "command_buffer.dispatch"
        c = _check(cmd, hal.CommandBuffer, fn, "command buffer", "!hal.command_buffer")
        exe = _check(executable, hal.Executable, fn, "executable", "!hal.executable")
        refs = []
        for i, (slot, buffer, offset, length) in enumerate(bindings):
            if buffer is None:
                refs.append(hal.BindingRef(None, offset, length, slot))
            else:
                buf = _check(buffer, hal.Buffer, fn, f"binding {i}", "!hal.buffer")
                refs.append(hal.BindingRef(buf, offset, length))
        c.dispatch(exe, ordinal, (x, y, z), [v & 0xFFFFFFFF for v in constants], refs)

    # -- fences ----------------------------------------------------------------------------------

    def fence_create(self, device: Any, flags: int) -> hal.Fence:
        dev = _check(device, hal.Device, "fence.create", "device", "!hal.device")
        fence = hal.Fence()
        fence.insert(dev.create_semaphore(0), 1)
        return fence

    def fence_await(self, timeout_ms: int, fences: list[Any]) -> int:
        """0 when every fence is reached, 1 on timeout; a failed fence raises RuntimeFailure."""
        fn = "fence.await"
        timeout = None if timeout_ms < 0 else timeout_ms / 1000.0
        for i, fence in enumerate(fences):
            if fence is None:
                continue
            _check(fence, hal.Fence, fn, f"fence {i}", "!hal.fence")
            try:
                if not fence.wait(timeout):
                    return STATUS_TIMEOUT
            except RuntimeFailure:
                raise
            except Exception as e:
                raise RuntimeFailure(f"hal.{fn}: the device failed: {e}") from e
        return STATUS_OK
