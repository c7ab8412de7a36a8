"""Tensors in device buffers on the host: sizes, allocation, fills, and buffer views.

Inside a function a tensor is a !hal.buffer plus its dims (`TensorVal`); at a function
boundary (arguments, calls, returns, globals, checks) it travels as a !hal.buffer_view that
carries its shape and element type. Buffers are allocated rounded up to whole 32-bit words
(`word_length`); views and bindings keep the exact `byte_length`.
"""
from __future__ import annotations

import math

from irtk.compiler import tir
from irtk.compiler.host_batching import Command, CommandBatching
from irtk.compiler.host_values import TensorVal
from irtk.compiler.module_context import ModuleContext
from irtk.compiler.stream import StreamPlan
from irtk.errors import CompileError
from irtk.hal.buffer_view import DENSE_ROW_MAJOR
from irtk.hal.element_type import ElementType
from irtk.body_ops import kernel_type
from irtk.types import SCALAR_TYPES, storage_bytes
from irtk.vm.writer import Reg


def element_type_code(name: str) -> int:
    """The HAL element type code a buffer view of `name` elements carries."""
    name = kernel_type(name)   # index crosses the boundary as i32
    try:
        return int(ElementType.from_name(name))
    except ValueError:
        raise CompileError(f"tensors of element type {name} cannot cross the host boundary "
                           "yet: buffer views have no element type code for it") from None


class BufferLowering(CommandBatching):
    def __init__(self, module: ModuleContext, function: tir.Function, plan: StreamPlan) -> None:
        super().__init__(module, function, plan)
        self.storage_buffers: dict[int, Reg] = {}   # storage id -> its buffer

    # -- sizes -----------------------------------------------------------------------------------
    def element_count(self, tv: TensorVal) -> int | Reg:
        static = math.prod(d for d in tv.dims if isinstance(d, int))
        dyn = [d for d in tv.dims if not isinstance(d, int)]
        if not dyn:
            return static
        acc = self.const("i64", static)
        for d in dyn:
            r = self.new("i64")
            self.b.emit("mul.i64", r, acc, d)
            acc = r
        return acc

    def static_byte_length(self, tv: TensorVal) -> int | None:
        """`tv`'s byte size when its shape is static, else None."""
        n = self.element_count(tv)
        return storage_bytes(tv.type.element_type, n) if isinstance(n, int) else None

    def byte_length(self, tv: TensorVal) -> Reg:
        static = self.static_byte_length(tv)
        if static is not None:
            return self.const("i64", static)
        n = self.element_count(tv)
        bits = SCALAR_TYPES[tv.type.element_type].storage_bits
        r = self.new("i64")
        if bits % 8 == 0:
            self.b.emit("mul.i64", r, n, self.const("i64", bits // 8))
        else:  # packed: ceil(n * bits / 8)
            self.b.emit("mul.i64", r, n, self.const("i64", bits))
            self.b.emit("add.i64", r, r, self.const("i64", 7))
            self.b.emit("div.s.i64", r, r, self.const("i64", 8))
        return r

    def word_length(self, tv: TensorVal) -> Reg:
        """`byte_length` rounded up to whole 32-bit words: what the host allocates for `tv`.
        Shaders read and write sub-word elements through the 32-bit words that hold them,
        and robust buffer access hides a word the bound range only partly covers (the last
        elements of an odd-length i8/i16 tensor would read 0 and drop their writes); the
        Vulkan HAL binds such a range rounded up to words, which needs the word allocated.
        Bindings keep the exact `byte_length`, which is valid for any buffer."""
        n = self.element_count(tv)
        if isinstance(n, int):
            return self.const("i64", -(-storage_bytes(tv.type.element_type, n) // 4) * 4)
        if SCALAR_TYPES[tv.type.element_type].storage_bits % 32 == 0:
            return self.byte_length(tv)
        r = self.new("i64")
        self.b.emit("add.i64", r, self.byte_length(tv), self.const("i64", 3))
        self.b.emit("div.s.i64", r, r, self.const("i64", 4))
        self.b.emit("mul.i64", r, r, self.const("i64", 4))
        return r

    # -- buffers -----------------------------------------------------------------------------------
    def allocate(self, length: Reg) -> Reg:
        buf = self.new("ref")
        zero = self.const("i32", 0)
        self.call("hal.allocator.allocate", [self.allocator(), zero, zero, length], [buf])
        return buf

    def fill(self, tv: TensorVal, pattern: int, pattern_length: int) -> None:
        """Fill `tv`'s buffer with `pattern` on the device, in the open segment; reusable
        (recorded once by __init, the buffer a binding-table slot) when its size is static."""
        buf = self.buffer_of(tv)
        length = self.byte_length(tv)
        size = self.static_byte_length(tv)
        zero64 = self.const("i64", 0)
        self.record(Command("fill", [
            buf, zero64, length, self.const("i32", 0), self.const("i64", pattern),
            self.const("i32", pattern_length), zero64],
            bindings=[] if size is None else [(0, buf, size)], reusable=size is not None,
            pattern=(pattern, pattern_length)), set(), {tv.storage})

    def copy(self, source: TensorVal, target: TensorVal) -> None:
        """Copy `source`'s bytes into `target`'s buffer on the device, in the open segment;
        reusable (recorded once by __init, both buffers binding-table slots) when the size is
        static."""
        src, dst = self.buffer_of(source), self.buffer_of(target)
        size = self.static_byte_length(target)
        zero32, zero64 = self.const("i32", 0), self.const("i64", 0)
        self.record(Command("copy", [zero32, zero32, src, zero64, dst, zero64,
                                     self.byte_length(target), zero64],
                            bindings=[] if size is None else [(0, src, size), (1, dst, size)],
                            reusable=size is not None), {source.storage}, {target.storage})

    def buffer_of(self, tv: TensorVal) -> Reg:
        """The buffer of `tv`, materializing an empty tensor as zeros."""
        if tv.buffer is None:
            tv.buffer = self.allocate(self.word_length(tv))
            self.storage_buffers[tv.storage] = tv.buffer
            self.fill(tv, 0, 1)
        return tv.buffer

    # -- buffer views ------------------------------------------------------------------------------
    def view(self, tv: TensorVal) -> Reg:
        buf = self.buffer_of(tv)
        bv = self.new("ref")
        et = self.const("i32", element_type_code(tv.type.element_type))
        dims = [self.dim_reg(d) for d in tv.dims]
        self.call_variadic("hal.buffer_view.create", [len(dims)],
                           [buf, self.const("i64", 0), self.byte_length(tv), et,
                            self.const("i32", DENSE_ROW_MAJOR), *dims], [bv])
        return bv

    def from_view(self, view: Reg, t: tir.TensorType, storage: int) -> TensorVal:
        buf = self.new("ref")
        self.call("hal.buffer_view.buffer", [view], [buf])
        dims: list[int | Reg] = []
        for i, d in enumerate(t.shape):
            if d is None:
                r = self.new("i64")
                self.call("hal.buffer_view.dim", [view, self.const("i32", i)], [r])
                dims.append(r)
            else:
                dims.append(d)
        return TensorVal(t, buf, dims, storage)

    def pass_values(self, values: list[tir.Value]) -> list[Reg]:
        """Registers that pass `values` across a function boundary: tensors as views."""
        out = []
        for v in values:
            x = self.get(v)
            out.append(self.view(x) if isinstance(x, TensorVal) else x)
        return out

    def receive(self, regs: list[Reg], values: list[tir.Value]) -> None:
        """Bind `values` to the registers they crossed a function boundary in."""
        for r, v in zip(regs, values):
            if isinstance(v.type, tir.TensorType):
                self.values[v.id] = self.from_view(r, v.type, self.plan.storage[v.id])
            else:
                self.values[v.id] = r
