"""Reading one tensor element on the host (`tensor.extract`), decoded into its register bank.

The host reads the element's bytes from the buffer (`hal.buffer.load`, after waiting for the
device) and decodes them as IREE's VM holds an extracted value: narrow integers sign-extended
into i32, i1 as 0/1, index widened to i64, f16/bf16 and the f8/f4 small floats as their f32
value. Packed types (i2, i4, f4) are read from the byte that holds their code.
"""
from __future__ import annotations

import numpy as np

from irtk.compiler import host_arith, tir
from irtk.compiler.host_buffers import BufferLowering
from irtk.compiler.host_values import TensorVal
from irtk.hal import numerics
from irtk.types import SCALAR_TYPES, SMALL_FLOAT_TYPES
from irtk.vm.writer import Reg


class ElementReads(BufferLowering):
    def op_tensor_extract(self, op: tir.Op) -> None:
        tv = self.tensor(op.operands[0])
        buf = self.buffer_of(tv)
        self.sync()
        et = tv.type.element_type
        t = SCALAR_TYPES[et]
        index = self.linear_index(tv, op.operands[1:])
        out = self.new(t.vm_bank)
        if t.packed:
            self.read_packed(out, buf, index, et)
        else:
            self.decode(out, self.load_words(buf, index, t.storage_bits // 8), et)
        self.values[op.result.id] = out

    def linear_index(self, tv: TensorVal, indices: list[tir.Value]) -> Reg:
        """The row-major position of the element at `indices` (i64)."""
        offset = self.const("i64", 0)
        for i, idx in enumerate(indices):
            stride = self.new("i64")
            self.b.emit("mul.i64", stride, offset, self.dim_reg(tv.dims[i]))
            r = self.new("i64")
            self.b.emit("add.i64", r, stride, self.scalar(idx))
            offset = r
        return offset

    def read_packed(self, out: Reg, buf: Reg, index: Reg, et: str) -> None:
        t = SCALAR_TYPES[et]
        code = self.load_packed(buf, index, t.storage_bits)
        if t.is_float:
            self.decode_small_float(out, code, et)
        else:
            host_arith.narrow(self.b, self.new, code, et)
            self.b.emit("mov.i32", out, code)

    def load_packed(self, buf: Reg, index: Reg, bits: int) -> Reg:
        """The `bits`-wide code of packed element `index` (an i64 register), zero-extended in
        an i32 register: element (8 // bits) * k + j sits in bits [j * bits, ...) of byte k."""
        per_byte = 8 // bits
        byte = self.new("i64")
        self.b.emit("div.s.i64", byte, index, self.const("i64", per_byte))
        lane = self.new("i64")
        self.b.emit("rem.s.i64", lane, index, self.const("i64", per_byte))
        self.b.emit("mul.i64", lane, lane, self.const("i64", bits))
        shift = self.new("i32")
        self.b.emit("trunc.i64.i32", shift, lane)
        code = self.new("i32")
        self.call("hal.buffer.load", [buf, byte, self.const("i32", 1)], [code])
        self.b.emit("shr.u.i32", code, code, shift)
        self.b.emit("and.i32", code, code, self.const("i32", (1 << bits) - 1))
        return code

    def load_words(self, buf: Reg, index: Reg, size: int) -> list[Reg]:
        """The bytes of element `index` of `size` bytes, zero-extended into one i32 register
        (two, low word first, for an 8-byte element)."""
        byte = self.new("i64")
        self.b.emit("mul.i64", byte, index, self.const("i64", size))
        words = []
        for w in range(max(1, size // 4)):
            at = byte
            if w:
                at = self.new("i64")
                self.b.emit("add.i64", at, byte, self.const("i64", 4 * w))
            word = self.new("i32")
            self.call("hal.buffer.load", [buf, at, self.const("i32", min(size, 4))], [word])
            words.append(word)
        return words

    def decode(self, out: Reg, words: list[Reg], et: str) -> None:
        """The value of an element of type `et` from its bytes (`load_words`) into `out`."""
        bank = SCALAR_TYPES[et].vm_bank
        if len(words) == 2:
            lo, hi = self.new("i64"), self.new("i64")
            self.b.emit("ext.i32.i64.u", lo, words[0])
            self.b.emit("ext.i32.i64.u", hi, words[1])
            self.b.emit("shl.i64", hi, hi, self.const("i64", 32))
            bits64 = self.new("i64")
            self.b.emit("or.i64", bits64, lo, hi)
            if bank == "f64":
                self.b.emit("bitcast.i64.f64", out, bits64)
            else:
                self.b.emit("mov.i64", out, bits64)
        elif et == "f16":
            self.decode_f16(out, words[0])
        elif et == "bf16":
            shifted = self.new("i32")
            self.b.emit("shl.i32", shifted, words[0], self.const("i32", 16))
            self.b.emit("bitcast.i32.f32", out, shifted)
        elif et in SMALL_FLOAT_TYPES:
            self.decode_small_float(out, words[0], et)
        elif bank == "f32":
            self.b.emit("bitcast.i32.f32", out, words[0])
        elif et == "index":
            self.b.emit("ext.i32.i64.s", out, words[0])
        else:
            self.b.emit("mov.i32", out, words[0])
            if et == "i8":
                self.b.emit("ext.i8.i32.s", out, out)
            elif et == "i16":
                self.b.emit("ext.i16.i32.s", out, out)

    def decode_f16(self, out: Reg, half: Reg) -> None:
        """f32 value of the f16 bits in `half` (zero-extended): the magnitude's bits shifted
        into f32's exponent and mantissa fields and scaled by 2**112 (exact for normal and
        subnormal values), inf and NaN built directly, then the sign bit."""
        c = self.const
        mag = self.new("i32")
        self.b.emit("and.i32", mag, half, c("i32", 0x7FFF))
        shifted = self.new("i32")
        self.b.emit("shl.i32", shifted, mag, c("i32", 13))
        scaled = self.new("f32")
        self.b.emit("bitcast.i32.f32", scaled, shifted)
        self.b.emit("mul.f32", scaled, scaled, c("f32", 2.0 ** 112))
        finite_bits = self.new("i32")
        self.b.emit("bitcast.f32.i32", finite_bits, scaled)
        special_bits = self.new("i32")   # exponent all ones: inf, or NaN with its payload
        self.b.emit("or.i32", special_bits, shifted, c("i32", 0x7F800000))
        special = self.new("i32")
        self.b.emit("cmp.lte.s.i32", special, c("i32", 0x7C00), mag)
        magnitude = self.new("i32")
        self.b.emit("select.i32", magnitude, special, special_bits, finite_bits)
        sign = self.new("i32")
        self.b.emit("and.i32", sign, half, c("i32", 0x8000))
        self.b.emit("shl.i32", sign, sign, c("i32", 16))
        self.b.emit("or.i32", magnitude, magnitude, sign)
        self.b.emit("bitcast.i32.f32", out, magnitude)

    def decode_small_float(self, out: Reg, code: Reg, et: str) -> None:
        """f32 value of an f8/f4 code, looked up in a table of every code's value (rodata,
        built by the numerics every driver shares, so the host agrees with the devices)."""
        codes = np.arange(1 << SCALAR_TYPES[et].storage_bits, dtype=np.uint8)
        table = numerics.from_bits(et, codes).astype("<f4").tobytes()
        data = self.new("ref")
        self.b.emit("const.ref.rodata", data, self.m.blob(f"{et}_values", table))
        at = self.new("i32")
        self.b.emit("shl.i32", at, code, self.const("i32", 2))
        at64 = self.new("i64")
        self.b.emit("ext.i32.i64.u", at64, at)
        self.b.emit("buffer.load.f32", out, data, at64)
