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
from irtk.modules import hal_types
from irtk.vm import limits
from irtk.vm.native_module import NativeFunction, NativeModule
from irtk.vm.ref_types import RefType, ref_type_name
from irtk.vm.refs import VM_BUFFER, VMBuffer

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


_USAGES: dict[int, hal.BufferUsage] = {}


def _usage(bits: int) -> hal.BufferUsage:
    """The usage flags a buffer import asks for (DEFAULT when none of its bits are known);
    remembered per value, as every call of a program allocates with the same few."""
    flags = _USAGES.get(bits)
    if flags is None:
        flags = hal.BufferUsage(bits & int(hal.BufferUsage.DEFAULT)) or hal.BufferUsage.DEFAULT
        if len(_USAGES) < 256:
            _USAGES[bits] = flags
    return flags


def _check(value: Any, ref_type: RefType, function: str, what: str, noun: str = "") -> Any:
    """`value` if it carries `ref_type`, else a RuntimeFailure naming the import, the argument,
    the type expected (`noun` after it, e.g. "string") and the one it got."""
    if not isinstance(value, ref_type.classes):
        expected = f"{ref_type.name} {noun}" if noun else ref_type.name
        raise RuntimeFailure(f"hal.{function}: {what} must be a {expected}, "
                             f"got {ref_type_name(value)}")
    return value


def _text(value: Any, function: str, what: str) -> str:
    buf = _check(value, VM_BUFFER, function, what, "string")
    try:
        return buf.tobytes().decode("utf-8")
    except UnicodeDecodeError:
        raise RuntimeFailure(f"hal.{function}: {what} is not UTF-8 text") from None


def _fence_or_empty(value: Any, function: str, what: str) -> hal.Fence:
    if value is None:
        return hal.Fence()
    return _check(value, hal_types.FENCE, function, what)


def _range(function: str, what: str, offset: int, length: int, size: int) -> None:
    """RuntimeFailure naming the import and argument unless [offset, offset+length) fits."""
    if offset < 0 or length < 0 or offset + length > size:
        raise RuntimeFailure(f"hal.{function}: {what} range [{offset}, {offset + length}) is "
                             f"outside the {size}-byte {what}")


def _access_length(function: str, length: int) -> int:
    if length not in (1, 2, 4):
        raise RuntimeFailure(f"hal.{function}: length must be 1, 2 or 4 bytes, got {length}")
    return length


class HalModule(NativeModule):
    """`hal.*` imports for modules loaded on `device`."""

    name = "hal"
    REF_TYPES = hal_types.HAL_TYPES
    EXPORTS = (
        F("allocator.allocate", "0riiI_r"),
        F("allocator.allocate.initialized", "0rIiirII_r"),
        F("allocator.import", "0riIiirII_r"),
        F("buffer.length", "0r_I"),
        F("buffer.load", "0rIi_i"),
        F("buffer.store", "0irIi_v"),
        F("buffer.subspan", "0rII_r"),
        F("buffer_view.assert", "0rriiCID_v"),
        F("buffer_view.buffer", "0r_r"),
        F("buffer_view.byte_length", "0r_I"),
        F("buffer_view.create", "0rIIiiCID_r"),
        F("buffer_view.dim", "0ri_I"),
        F("buffer_view.element_type", "0r_i"),
        F("buffer_view.encoding_type", "0r_i"),
        F("buffer_view.rank", "0r_i"),
        F("command_buffer.copy_buffer", "0riirIrIII_v"),
        F("command_buffer.create", "0riii_r"),
        F("command_buffer.dispatch", "0rriiiiICiDCirIID_v"),
        F("command_buffer.execution_barrier", "0riii_v"),
        F("command_buffer.fill_buffer", "0rrIIiIiI_v"),
        F("command_buffer.finalize", "0r_v"),
        F("command_buffer.update_buffer", "0rrIrIIiI_v"),
        F("device.allocator", "0r_r"),
        F("device.default", "0v_r"),
        F("device.name", "0r_r"),
        F("device.query.i64", "0rrr_iI"),
        F("device.queue.alloca", "0rIrriiiI_r"),
        F("device.queue.dealloca", "0rIrrr_v"),
        F("device.queue.execute", "0rIrrCrD_v"),
        F("device.queue.execute.indirect", "0rIrrrCrIID_v"),
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
        return _check(device, hal_types.DEVICE, "device.allocator", "device").allocator

    def device_name(self, device: Any) -> VMBuffer:
        dev = _check(device, hal_types.DEVICE, "device.name", "device")
        return VMBuffer.from_text(dev.info.name)

    def device_query_i64(self, device: Any, category: Any, key: Any) -> tuple[int, int]:
        """(1, value) for a known category/key, else (0, 0).

        "hal.executable.format" / a format name: 1 if the device runs it.
        "hal.device.id" / a glob such as "vulkan*": 1 if the driver name matches.
        """
        dev = _check(device, hal_types.DEVICE, "device.query.i64", "device")
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
        dev = _check(device, hal_types.DEVICE, fn, "device")
        if size < 0:
            raise RuntimeFailure(f"hal.{fn}: negative size {size}")
        wait_fence = _fence_or_empty(wait, fn, "wait fence")
        signal_fence = _fence_or_empty(signal, fn, "signal fence")
        return limits.device_allocation(size, f"hal.{fn} of {size} bytes",
                                        lambda: dev.queue_alloca(wait_fence, signal_fence, size))

    def device_queue_dealloca(self, device: Any, affinity: int, wait: Any, signal: Any,
                              buffer: Any) -> None:
        fn = "device.queue.dealloca"
        dev = _check(device, hal_types.DEVICE, fn, "device")
        buf = _check(buffer, hal_types.BUFFER, fn, "buffer")
        dev.queue_dealloca(_fence_or_empty(wait, fn, "wait fence"),
                           _fence_or_empty(signal, fn, "signal fence"), buf)

    def device_queue_execute(self, device: Any, affinity: int, wait: Any, signal: Any,
                             command_buffers: list[Any]) -> None:
        fn = "device.queue.execute"
        dev = _check(device, hal_types.DEVICE, fn, "device")
        cmds = [_check(c, hal_types.COMMAND_BUFFER, fn, f"command buffer {i}")
                for i, c in enumerate(command_buffers)]
        dev.queue_execute(_fence_or_empty(wait, fn, "wait fence"),
                          _fence_or_empty(signal, fn, "signal fence"), cmds)

    def device_queue_execute_indirect(self, device: Any, affinity: int, wait: Any, signal: Any,
                                      command_buffer: Any,
                                      bindings: list[tuple[Any, int, int]]) -> None:
        """Run one reusable command buffer with `bindings` as its binding table (slot i is
        tuple i; a null buffer leaves the slot empty, an error only if a command uses it)."""
        fn = "device.queue.execute.indirect"
        dev = _check(device, hal_types.DEVICE, fn, "device")
        cmd = _check(command_buffer, hal_types.COMMAND_BUFFER, fn, "command buffer")
        table: list[tuple[hal.Buffer | None, int, int]] = []
        for i, (buffer, offset, length) in enumerate(bindings):
            if buffer is not None:
                buf = _check(buffer, hal_types.BUFFER, fn, f"binding {i}")
                if offset < 0 or (length >= 0 and offset + length > buf.size) or \
                        offset > buf.size:
                    raise RuntimeFailure(f"hal.{fn}: binding {i} range [{offset}, "
                                         f"{offset + max(length, 0)}) is outside the "
                                         f"{buf.size}-byte buffer")
                table.append((buf, offset, length))
            else:
                table.append((None, offset, length))
        if cmd.binding_capacity and len(table) > cmd.binding_capacity:
            raise RuntimeFailure(f"hal.{fn}: {len(table)} bindings exceed the command buffer's "
                                 f"binding capacity of {cmd.binding_capacity}")
        dev.queue_execute(_fence_or_empty(wait, fn, "wait fence"),
                          _fence_or_empty(signal, fn, "signal fence"), [cmd], [table])

    # -- allocator and buffers -------------------------------------------------------------------

    def allocator_allocate(self, allocator: Any, memory_types: int, usage: int,
                           size: int) -> hal.Buffer:
        fn = "allocator.allocate"
        alloc = _check(allocator, hal_types.ALLOCATOR, fn, "allocator")
        if size < 0:
            raise RuntimeFailure(f"hal.{fn}: negative size {size}")
        flags = _usage(usage)
        return limits.device_allocation(size, f"hal.{fn} of {size} bytes",
                                        lambda: alloc.allocate(size, flags))

    def allocator_allocate_initialized(self, allocator: Any, affinity: int, memory_types: int,
                                       usage: int, source: Any, source_offset: int,
                                       length: int) -> hal.Buffer:
        """A new buffer holding a copy of `length` bytes of `source` from `source_offset`."""
        fn = "allocator.allocate.initialized"
        alloc = _check(allocator, hal_types.ALLOCATOR, fn, "allocator")
        src = _check(source, VM_BUFFER, fn, "source")
        _range(fn, "source", source_offset, length, len(src))
        flags = _usage(usage)
        data = src.data[source_offset:source_offset + length]
        return limits.device_allocation(length, f"hal.{fn} of {length} bytes",
                                        lambda: alloc.allocate_with_data(data, flags))

    def allocator_import(self, allocator: Any, try_: int, affinity: int, memory_types: int,
                         usage: int, source: Any, source_offset: int,
                         length: int) -> hal.Buffer | None:
        """A buffer over `length` bytes of the read-only `source` in place (rodata: the
        mapped module file), as IREE's `hal.allocator.import`. Null when the device cannot use
        host memory in place or `source` is writable and `try_` is set; a failure otherwise."""
        fn = "allocator.import"
        alloc = _check(allocator, hal_types.ALLOCATOR, fn, "allocator")
        src = _check(source, VM_BUFFER, fn, "source")
        _range(fn, "source", source_offset, length, len(src))
        flags = _usage(usage)
        imported = None
        if src.readonly:
            imported = alloc.import_host(src.data[source_offset:source_offset + length], flags)
        if imported is None and not try_:
            raise RuntimeFailure(f"hal.{fn}: the device cannot use this "
                                 f"{'read-only' if src.readonly else 'writable'} host memory "
                                 "in place")
        return imported

    def buffer_length(self, buffer: Any) -> int:
        return _check(buffer, hal_types.BUFFER, "buffer.length", "buffer").size

    def buffer_load(self, buffer: Any, offset: int, length: int) -> int:
        """`length` (1, 2 or 4) bytes at `offset`, little endian, zero-extended to i32."""
        fn = "buffer.load"
        buf = _check(buffer, hal_types.BUFFER, fn, "buffer")
        _access_length(fn, length)
        _range(fn, "buffer", offset, length, buf.size)
        value = int.from_bytes(buf.read(offset, length), "little")
        return value - (1 << 32) if value >= 1 << 31 else value  # the i32 register's bits

    def buffer_store(self, value: int, buffer: Any, offset: int, length: int) -> None:
        """The low `length` (1, 2 or 4) bytes of `value` at `offset`, little endian."""
        fn = "buffer.store"
        buf = _check(buffer, hal_types.BUFFER, fn, "buffer")
        _access_length(fn, length)
        _range(fn, "buffer", offset, length, buf.size)
        buf.write((value & ((1 << (8 * length)) - 1)).to_bytes(length, "little"), offset)

    def buffer_subspan(self, buffer: Any, offset: int, length: int) -> hal.Buffer:
        fn = "buffer.subspan"
        buf = _check(buffer, hal_types.BUFFER, fn, "buffer")
        _range(fn, "buffer", offset, length, buf.size)
        return buf.subspan(offset, length)

    # -- buffer views ----------------------------------------------------------------------------

    def buffer_view_create(self, buffer: Any, byte_offset: int, byte_length: int,
                           element_type: int, encoding: int, dims: list[int]) -> hal.BufferView:
        fn = "buffer_view.create"
        buf = _check(buffer, hal_types.BUFFER, fn, "buffer")
        try:
            et = hal.ElementType(element_type & 0xFFFFFFFF)
        except ValueError:
            raise RuntimeFailure(f"hal.{fn}: unknown element type 0x{element_type:08X}") from None
        if any(d < 0 for d in dims):
            raise RuntimeFailure(f"hal.{fn}: negative dimension in shape {dims}")
        needed = et.storage_bytes(math.prod(dims))
        if needed > byte_length or byte_offset < 0 or byte_offset + byte_length > buf.size:
            raise RuntimeFailure(
                f"hal.{fn}: {format_tensor_type(dims, element_type)} ({needed} bytes) does not "
                f"fit bytes [{byte_offset}, {byte_offset + byte_length}) of a {buf.size}-byte "
                "buffer")
        return hal.BufferView(buf, tuple(dims), et, byte_offset, encoding or DENSE_ROW_MAJOR)

    def buffer_view_assert(self, view: Any, message: Any, element_type: int, encoding: int,
                           dims: list[int]) -> None:
        """InputError "<message>: expected 4x2xf32, got 3x2xf32" unless the view matches.
        Every call of a function checks each argument: the texts are made only on a mismatch."""
        if (isinstance(view, hal.BufferView) and isinstance(message, VMBuffer)
                and int(view.element_type) == element_type & 0xFFFFFFFF
                and list(view.shape) == list(dims)
                and (not encoding or view.encoding == encoding)):
            return
        text = _text(message, "buffer_view.assert", "message")
        expected = format_tensor_type(dims, element_type)
        if not isinstance(view, hal.BufferView):
            raise InputError(f"{text}: expected {expected}, got {ref_type_name(view)}")
        got = format_tensor_type(view.shape, int(view.element_type))
        raise InputError(f"{text}: expected {expected}, got {got}")

    def buffer_view_buffer(self, view: Any) -> hal.Buffer:
        return _check(view, hal_types.BUFFER_VIEW, "buffer_view.buffer", "buffer view").buffer

    def buffer_view_byte_length(self, view: Any) -> int:
        return _check(view, hal_types.BUFFER_VIEW, "buffer_view.byte_length",
                      "buffer view").byte_length

    def buffer_view_dim(self, view: Any, axis: int) -> int:
        fn = "buffer_view.dim"
        v = _check(view, hal_types.BUFFER_VIEW, fn, "buffer view")
        if not 0 <= axis < len(v.shape):
            raise RuntimeFailure(f"hal.{fn}: axis {axis} is out of range for a "
                                 f"{v.format_shape()} view of rank {len(v.shape)}")
        return v.shape[axis]

    def buffer_view_element_type(self, view: Any) -> int:
        et = _check(view, hal_types.BUFFER_VIEW, "buffer_view.element_type",
                    "buffer view").element_type
        code = int(et)
        return code - (1 << 32) if code >= 1 << 31 else code

    def buffer_view_encoding_type(self, view: Any) -> int:
        return _check(view, hal_types.BUFFER_VIEW, "buffer_view.encoding_type",
                      "buffer view").encoding

    def buffer_view_rank(self, view: Any) -> int:
        return len(_check(view, hal_types.BUFFER_VIEW, "buffer_view.rank", "buffer view").shape)

    # -- executables and command buffers ---------------------------------------------------------

    def executable_create(self, device: Any, executable_format: Any, data: Any,
                          constants: Any) -> hal.Executable:
        """Constants (IREE's executable-level constants) are accepted and unused for now."""
        fn = "executable.create"
        dev = _check(device, hal_types.DEVICE, fn, "device")
        fmt = _text(executable_format, fn, "format")
        blob = _check(data, VM_BUFFER, fn, "data")
        if constants is not None:
            _check(constants, VM_BUFFER, fn, "constants")
        return dev.create_executable(fmt, blob.tobytes())

    def command_buffer_create(self, device: Any, modes: int, categories: int,
                              binding_capacity: int) -> hal.CommandBuffer:
        dev = _check(device, hal_types.DEVICE, "command_buffer.create", "device")
        return dev.create_command_buffer(binding_capacity)

    def command_buffer_finalize(self, cmd: Any) -> None:
        _check(cmd, hal_types.COMMAND_BUFFER, "command_buffer.finalize",
               "command buffer").finalize()

    def command_buffer_execution_barrier(self, cmd: Any, source_stage_mask: int,
                                         target_stage_mask: int, flags: int) -> None:
        _check(cmd, hal_types.COMMAND_BUFFER, "command_buffer.execution_barrier",
               "command buffer").execution_barrier()

    def command_buffer_fill_buffer(self, cmd: Any, target: Any, offset: int, length: int,
                                   target_slot: int, pattern: int, pattern_length: int,
                                   flags: int) -> None:
        """IREE's form: a null target means binding-table slot `target_slot` (a command buffer
        recorded once and submitted with each call's buffers)."""
        fn = "command_buffer.fill_buffer"
        c = _check(cmd, hal_types.COMMAND_BUFFER, fn, "command buffer")
        if pattern_length not in (1, 2, 4):
            raise RuntimeFailure(f"hal.{fn}: pattern length must be 1, 2 or 4, "
                                 f"got {pattern_length}")
        data = (pattern & ((1 << (8 * pattern_length)) - 1)).to_bytes(pattern_length, "little")
        c.fill_buffer(self._buffer_ref(target, offset, length, target_slot, fn, "target"), data)

    def command_buffer_copy_buffer(self, cmd: Any, source_slot: int, target_slot: int,
                                   source: Any, source_offset: int, target: Any,
                                   target_offset: int, length: int, flags: int) -> None:
        """IREE's form: a null source or target means binding-table slot `source_slot` or
        `target_slot` (a command buffer recorded once and submitted with each call's
        buffers)."""
        fn = "command_buffer.copy_buffer"
        c = _check(cmd, hal_types.COMMAND_BUFFER, fn, "command buffer")
        c.copy_buffer(self._buffer_ref(source, source_offset, length, source_slot, fn, "source"),
                      self._buffer_ref(target, target_offset, length, target_slot, fn, "target"))

    def command_buffer_update_buffer(self, cmd: Any, source: Any, source_offset: int,
                                     target: Any, target_offset: int, length: int,
                                     target_slot: int, flags: int) -> None:
        """Bytes of a `!vm.buffer`, captured now, written to the target when executed; a null
        target means binding-table slot `target_slot` (IREE's form)."""
        fn = "command_buffer.update_buffer"
        c = _check(cmd, hal_types.COMMAND_BUFFER, fn, "command buffer")
        src = _check(source, VM_BUFFER, fn, "source")
        _range(fn, "source", source_offset, length, len(src))
        ref = self._buffer_ref(target, target_offset, length, target_slot, fn, "target")
        if ref.buffer is not None:
            _range(fn, "target", target_offset, length, ref.buffer.size)
        c.update_buffer(src.data[source_offset:source_offset + length].tobytes(), ref)

    @staticmethod
    def _buffer_ref(buffer: Any, offset: int, length: int, slot: int, fn: str,
                    what: str) -> hal.BindingRef:
        """A transfer operand: `buffer`'s range, or slot `slot` of the binding table where
        `buffer` is null."""
        if buffer is None:
            return hal.BindingRef(None, offset, length, slot)
        return hal.BindingRef(_check(buffer, hal_types.BUFFER, fn, what), offset, length)

    def command_buffer_dispatch(self, cmd: Any, executable: Any, ordinal: int, x: int, y: int,
                                z: int, flags: int, constants: list[int],
                                bindings: list[tuple[int, Any, int, int]]) -> None:
        """A binding with a null buffer refers to `slot` of the binding table given at submit."""
        fn = "command_buffer.dispatch"
        c = _check(cmd, hal_types.COMMAND_BUFFER, fn, "command buffer")
        exe = _check(executable, hal_types.EXECUTABLE, fn, "executable")
        refs = []
        for i, (slot, buffer, offset, length) in enumerate(bindings):
            if buffer is None:
                refs.append(hal.BindingRef(None, offset, length, slot))
            else:
                buf = _check(buffer, hal_types.BUFFER, fn, f"binding {i}")
                refs.append(hal.BindingRef(buf, offset, length))
        c.dispatch(exe, ordinal, (x, y, z), [v & 0xFFFFFFFF for v in constants], refs)

    # -- fences ----------------------------------------------------------------------------------

    def fence_create(self, device: Any, flags: int) -> hal.Fence:
        dev = _check(device, hal_types.DEVICE, "fence.create", "device")
        fence = hal.Fence()
        fence.insert(dev.create_semaphore(0), 1)
        return fence

    def fence_await(self, timeout_ms: int, fences: list[Any]) -> Any:
        """0 when every fence is reached, 1 on timeout (-1 waits forever); a failed fence raises
        RuntimeFailure. Yieldable: when a fence is not reached yet it returns a `FenceWait`,
        which suspends the calling invocation until the fences are reached or the timeout
        passes, so other invocations on the same thread can run meanwhile."""
        from irtk.vm.yielding import FenceWait
        fn = "fence.await"
        checked = [_check(fence, hal_types.FENCE, fn, f"fence {i}")
                   for i, fence in enumerate(fences) if fence is not None]

        def failed(e: Exception) -> Exception:
            if isinstance(e, RuntimeFailure):
                return e
            return RuntimeFailure(f"hal.{fn}: the device failed: {e}")
        try:
            if all(fence.is_reached(flush=False) for fence in checked):
                return STATUS_OK
        except Exception as e:
            raise failed(e) from e
        if timeout_ms == 0:
            for fence in checked:   # a program that polls must see its work progress
                fence.flush()
            return STATUS_TIMEOUT
        timeout = None if timeout_ms < 0 else timeout_ms / 1000.0
        return FenceWait(checked, timeout,
                         lambda reached: STATUS_OK if reached else STATUS_TIMEOUT, failed)
