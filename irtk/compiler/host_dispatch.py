"""Dispatch ops -> device commands: output buffers, extent checks, push constants, launches.

Each output gets its buffer as buffer planning (stream.py) decided: the init's own (in place),
a reused transient's, or a new one, zeroed, filled or copied from the init first. A new static
output filled with a constant, or starting as a tensor constant (a folded bias broadcast), of at
most `HOST_INIT_BYTES` starts as a copy of rodata (a pattern at full length, or the constant's
own bytes) instead of a fill or copy command, so its segment can be one `__init` records
once. Operand dims that index a dynamic loop directly are checked against its extent; the
workgroup count is the one `__init` stored for a static dispatch, else the grid rule of the
executable variant `__init` chose, evaluated on the extents.
"""
from __future__ import annotations

from irtk.compiler import kernel as K
from irtk.compiler import tir
from irtk.compiler.constants import HOST_INIT_BYTES, fill_pattern
from irtk.compiler.host_batching import Command
from irtk.compiler.host_buffers import BufferLowering
from irtk.compiler.host_values import TensorVal
from irtk.compiler.module_context import Launch
from irtk.errors import CompileError
from irtk.vm.writer import Reg

class DispatchLowering(BufferLowering):
    def op_dispatch(self, op: tir.Op) -> None:
        kern: K.Kernel = op.attrs["kernel"]
        n_in, n_out = op.attrs["num_inputs"], op.attrs["num_outputs"]
        inputs = [self.tensor(v) for v in op.operands[:n_in]]
        inits = [self.tensor(v) for v in op.operands[n_in:n_in + n_out]]
        params = [self.scalar(v) for v in op.operands[n_in + n_out:]]
        param_values = {p.name: r for p, r in zip(kern.params, params)}
        for tv in inputs:
            self.buffer_of(tv)
        self.check_extents(op, kern, inputs + inits, param_values)
        outputs = [self.output(op, k, init) for k, init in enumerate(inits)]
        if kern.is_static and kern.iteration_count == 0:
            return
        self.record_dispatch(kern, inputs, outputs, params, param_values)

    def output(self, op: tir.Op, k: int, init: TensorVal) -> TensorVal:
        """Output `k` of dispatch `op` in the buffer buffer planning chose, initialized."""
        result = op.results[k]
        plan = self.plan.output(op, k)
        storage = self.plan.storage[result.id]
        out = TensorVal(result.tensor_type, None, list(init.dims), storage)
        self.values[result.id] = out
        if plan.mode == "inplace":
            out.buffer = self.buffer_of(init)
            return out
        pattern = None
        if plan.mode == "zero":
            pattern = (0, 1)
        elif plan.mode == "fill":
            pattern = fill_pattern(out.type.element_type, op.attrs["fills"][k])
            assert pattern is not None, "fill fusion and split reductions make only fills " \
                "that a pattern writes"
        copy = plan.mode == "copy"
        constant = self.initial_constant(op, k, out) if copy else None
        if plan.reuse is not None and plan.reuse in self.storage_buffers:
            out.buffer = self.storage_buffers[plan.reuse]
        elif pattern is not None and (size := self.host_fill_bytes(out)) is not None:
            out.buffer = self.allocate_filled(size, *pattern)
            pattern = None  # filled on the host: no device fill in the segment
        elif constant is not None:
            out.buffer = self.allocate_initialized(*self.m.constant_rodata(constant))
            copy = False    # written on the host: no device copy in the segment
        else:
            out.buffer = self.allocate(self.word_length(out))
        self.storage_buffers[storage] = out.buffer
        if pattern is not None:
            self.fill(out, *pattern)
        elif copy:
            self.copy(init, out)
        return out

    def host_fill_bytes(self, tv: TensorVal) -> int | None:
        """The byte size of `tv` when a new buffer for it starts filled from rodata: static
        and at most HOST_INIT_BYTES (the module holds the pattern at full length); else None."""
        size = self.static_byte_length(tv)
        return size if size is not None and 0 < size <= HOST_INIT_BYTES else None

    def initial_constant(self, op: tir.Op, k: int, out: TensorVal) -> tir.Op | None:
        """The tensor constant that output `k` of `op` starts as, when the host writes it into
        the new buffer: at most HOST_INIT_BYTES, static, whole 32-bit words (the buffer's
        allocated length); else None."""
        constant = self.constant_ops.get(op.operands[op.attrs["num_inputs"] + k].id)
        size = self.host_fill_bytes(out)
        if constant is None or size is None or size % 4:
            return None
        return constant

    def allocate_filled(self, byte_size: int, pattern: int, pattern_length: int) -> Reg:
        """A new buffer of `byte_size` holding `pattern` repeated, written by the host as it is
        allocated (`allocate_initialized`)."""
        size = -(-byte_size // 4) * 4
        data = pattern.to_bytes(pattern_length, "little") * (size // pattern_length)
        return self.allocate_initialized(self.m.blob(f"fill{pattern_length}", data), size)

    def allocate_initialized(self, rodata: int, size: int) -> Reg:
        """A new buffer of `size` bytes holding rodata segment `rodata`, written by the host as
        it is allocated (`hal.allocator.allocate.initialized`). The buffer is new, so no queued
        work can touch it; a segment without a fill or copy can be a recorded one."""
        src = self.new("ref")
        self.b.emit("const.ref.rodata", src, rodata)
        buf = self.new("ref")
        zero, zero64 = self.const("i32", 0), self.const("i64", 0)
        self.call("hal.allocator.allocate.initialized",
                  [self.allocator(), self.const("i64", -1), zero, zero, src, zero64,
                   self.const("i64", size)], [buf])
        return buf

    def record_dispatch(self, kern: K.Kernel, inputs: list[TensorVal],
                        outputs: list[TensorVal], params: list[Reg],
                        param_values: dict[str, Reg]) -> None:
        """The dispatch command, reusable (recorded once by __init) when it is static and has
        no push constants."""
        ordinal = self.m.kernel_ordinal(kern)
        grid = self.workgroups(ordinal, kern, param_values)
        words = self.push_constants(kern, params)
        bindings: list[Reg] = []
        static: list[tuple[int, Reg, int]] = []
        for operand, tv in zip(kern.inputs + kern.outputs, inputs + outputs):
            buf = self.buffer_of(tv)   # op_dispatch gave every input and output its buffer
            bindings += [self.const("i32", operand.binding), buf, self.const("i64", 0),
                         self.byte_length(tv)]
            if operand.is_static:
                static.append((operand.binding, buf, operand.byte_size))
        reusable = kern.is_static and not words and len(static) == kern.binding_count
        self.record(Command(
            "dispatch", [self.executable(), self.const("i32", ordinal), *grid,
                         self.const("i64", 0), *words, *bindings],
            [len(words), len(bindings) // 4], ordinal, static, reusable),
            {tv.storage for tv in inputs}, {tv.storage for tv in outputs})

    def check_extents(self, op: tir.Op, kern: K.Kernel, tensors: list[TensorVal],
                      params: dict[str, Reg]) -> None:
        """Operands whose dims index a dynamic loop directly must match its extent at run time
        (a shorter operand would be read out of bounds)."""
        for operand, tv in zip(kern.inputs + kern.outputs, tensors):
            if operand.map is None:
                continue
            for r, j in enumerate(operand.map.row_loops()):
                if j is None:
                    continue
                extent = kern.loop_ranges[j]
                have = tv.dims[r]
                if isinstance(extent, int) and isinstance(have, int):
                    continue
                want = self.const("i64", extent) if isinstance(extent, int) else params[extent]
                if want is have:
                    continue
                ok = self.new("i32")
                self.b.emit("cmp.eq.i64", ok, self.dim_reg(have), want)
                self.fail_unless(ok, f"{op.location}: error: operand {operand.binding} of "
                                     f"dispatch {kern.name}: dimension {r} does not match the "
                                     "extent of the loop it indexes")

    def push_constants(self, kern: K.Kernel, params: list[Reg]) -> list[Reg]:
        """The params as 32-bit words at their offsets (8-byte ones low word first)."""
        words: list[Reg] = []
        for p, offset, r in zip(kern.params, kern.param_offsets(), params):
            while len(words) * 4 < offset:
                words.append(self.const("i32", 0))
            if r.bank == "i64":
                lo, hi = self.new("i32"), self.new("i32")
                self.b.emit("trunc.i64.i32", lo, r)
                if p.byte_size == 8:
                    shifted = self.new("i64")
                    self.b.emit("shr.u.i64", shifted, r, self.const("i64", 32))
                    self.b.emit("trunc.i64.i32", hi, shifted)
                    words += [lo, hi]
                else:
                    words.append(lo)
            elif r.bank == "f32":
                w = self.new("i32")
                self.b.emit("bitcast.f32.i32", w, r)
                words.append(w)
            elif r.bank == "f64":
                bits = self.new("i64")
                self.b.emit("bitcast.f64.i64", bits, r)
                lo, hi, shifted = self.new("i32"), self.new("i32"), self.new("i64")
                self.b.emit("trunc.i64.i32", lo, bits)
                self.b.emit("shr.u.i64", shifted, bits, self.const("i64", 32))
                self.b.emit("trunc.i64.i32", hi, shifted)
                words += [lo, hi]
            else:
                words.append(r)
        return words

    # -- launches ----------------------------------------------------------------------------------
    def workgroups(self, ordinal: int, kernel: K.Kernel, params: dict[str, Reg]) -> list[Reg]:
        """The launch of dispatch `ordinal`: set in __init when static, else evaluated from the
        grid rule of each variant and selected by the variant `__init` chose."""
        static = self.m.workgroup_globals(ordinal)
        if static is not None:
            out = []
            for g in static:
                r = self.new("i32")
                self.b.emit("global.load.i32", r, g)
                out.append(r)
            return out
        ranges = [self.const("i64", r) if isinstance(r, int) else params[r]
                  for r in kernel.loop_ranges]
        per_variant = [self.grid_counts(launch, ranges, kernel)
                       for launch in self.m.launches(ordinal)]
        if len(per_variant) == 1:
            return per_variant[0]
        variant = self.new("i32")
        self.b.emit("global.load.i32", variant, self.m.variant_global)
        out = list(per_variant[0])
        for i, counts in enumerate(per_variant[1:], 1):
            is_i = self.new("i32")
            self.b.emit("cmp.eq.i32", is_i, variant, self.const("i32", i))
            merged = []
            for a, c in zip(out, counts):
                r = self.new("i32")
                self.b.emit("select.i32", r, is_i, c, a)
                merged.append(r)
            out = merged
        return out

    def grid_counts(self, launch: Launch, ranges: list[Reg], kernel: K.Kernel) -> list[Reg]:
        """Evaluate a grid rule on the loop extents in `ranges` (i64): three i32 counts."""
        if not isinstance(launch, K.Grid):
            raise CompileError(f"dispatch {kernel.name} has dynamic extents but its code "
                               "generator gave no grid rule")
        axes = []
        for axis in (launch.x, launch.y, launch.z):
            n = self.const("i64", 1)
            for d in axis.dims:
                r = self.new("i64")
                self.b.emit("mul.i64", r, n, ranges[d])
                n = r
            if axis.divisor != 1:
                r = self.new("i64")
                self.b.emit("add.i64", r, n, self.const("i64", axis.divisor - 1))
                self.b.emit("div.s.i64", r, r, self.const("i64", axis.divisor))
                n = r
            axes.append(n)
        if launch.linear:  # (min(n, 65535), ceil(n / 65535), 1)
            limit = self.const("i64", 65535)
            x = self.new("i64")
            self.b.emit("min.s.i64", x, axes[0], limit)
            y = self.new("i64")
            self.b.emit("add.i64", y, axes[0], self.const("i64", 65534))
            self.b.emit("div.s.i64", y, y, limit)
            self.b.emit("max.s.i64", y, y, self.const("i64", 1))
            axes = [x, y, self.const("i64", 1)]
        out = []
        for a in axes:
            r = self.new("i32")
            self.b.emit("trunc.i64.i32", r, a)
            out.append(r)
        return out
