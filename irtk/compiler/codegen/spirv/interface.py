"""The shader interface every strategy shares: storage buffers as 32-bit words, push constants,
builtins, and element loads and stores for every storage type.

Each binding is one `StorageBuffer` runtime array of u32 at descriptor set 0, whatever its
element type, so a device needs no 8/16/64-bit storage feature:
- 32-bit elements are one word; 64-bit elements two (low word first);
- 16-, 8- and 4-bit elements are read from their word with a shift and a mask, and written with
  an `OpAtomicAnd` that clears their bits and an `OpAtomicOr` that sets them, since
  neighbouring elements of one word may be written by other invocations at the same time.
  Buffers of such types must be bound with their length rounded up to whole words.

On profiles with `texel_buffer_loads` (llvmpipe) a binding the kernel only reads is a uniform
texel buffer of R32G32B32A32_UINT texels instead: word w is component w % 4 of texel w / 4
(OpImageFetch), and a 16-byte load is one fetch. The runtime binds it through a buffer view.
A strategy may instead ask for a binding's `texel_windows` (profiles with a `texel_window`): an
array of views of `texel_window` texels starting every `texel_window / 2` texels, of which
`select_window` picks, for the loads that follow, the one holding a given half-window-long
range; the pick must be dynamically uniform (docs/codegen_spirv.md, "Texel windows").

Push constants are one `Block` of u32 words; `Kernel.param_offsets()` says where each param
is (i64/f64 params are two words; narrower ints are sign-extended from their width, narrower
floats are their bits in the low bits of the word).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from spirv.tables import (AddressingModel, BuiltIn, Capability, Decoration,
                          ExecutionMode, GLSLstd450,
                          ExecutionModel, MemoryModel, MemorySemantics, Op as SpvOp, Scope,
                          StorageClass)

from irtk.compiler.kernel import Extent, Grid, Kernel, Operand
from irtk.compiler.targets import VulkanProfile
from irtk.errors import CompileError
from irtk.types import SCALAR_TYPES

from .bindings import (fetch, fetch_image, storage_buffer, texel_buffer, texel_window_array,
                       window_image)
from .emitter import Emitter
from .executable import SpirvKernel
from .typed_ops import float_bits, float_from_bits, is_float, register_class, wrap

MAX_LINEAR_GROUPS = 65535


def fits_one_view(kernel: Kernel, operand: Operand, profile: VulkanProfile) -> bool:
    """Whether a strategy may read `operand` as one texel view on a profile with texel windows:
    static, read-only, and no larger than one window (SwiftShader: 1 MiB)."""
    written = {o.binding for o in kernel.outputs}
    return bool(profile.texel_window) and operand.is_static and operand.map is not None \
        and operand.binding not in written and operand.byte_size <= 16 * profile.texel_window


# Texel views one kernel may read through: SwiftShader allows 200 per stage
# (maxPerStageDescriptorSampledImages), and the runtime checks the device's own limit.
MAX_TEXEL_VIEWS = 128


def add_windows(windows: dict[int, int], operand: Operand, profile: VulkanProfile) -> None:
    """Read `operand`'s binding through texel windows (`windows`: binding -> views) unless
    the kernel's views would then exceed MAX_TEXEL_VIEWS: view k holds `texel_window` texels
    from k * texel_window / 2 on."""
    views = -(-operand.byte_size // (8 * profile.texel_window))
    if sum(windows.values()) + views <= MAX_TEXEL_VIEWS:
        windows[operand.binding] = views


class ShaderInterface:
    """Declarations of one compute shader plus helpers that read and write its operands."""

    def __init__(self, kernel: Kernel, profile: VulkanProfile, local_size: tuple[int, int, int],
                 texel_windows: dict[int, int] | None = None,
                 texel_views: frozenset[int] = frozenset()) -> None:
        self.kernel, self.profile, self.local_size = kernel, profile, local_size
        # bindings a strategy reads as one texel view (`fits_one_view`) on any profile
        self.texel_views = texel_views
        # binding -> number of window views it is read through (read-only bindings only)
        self.texel_windows = dict(texel_windows or {})
        self._window: dict[int, tuple[int, int]] = {}  # binding -> (image, first texel)
        e = self.e = Emitter(profile.spirv_version, native_float16=profile.float16)
        b = e.b
        b.capability(Capability.Shader)
        b.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
        self.operands = kernel.inputs + kernel.outputs
        self.interface: list[int] = []
        self.globals: list[int] = []
        self.buffers: dict[int, int] = {}
        self.texel_bindings: set[int] = set()   # bindings read as uniform texel buffers
        self._builtins: dict[int, int] = {}
        self._params: dict[int, int] = {}
        self._vector_views: dict[tuple[int, int], int] = {}
        self.uses_int64 = self.uses_float64 = False
        self._check_types()
        self._declare_buffers()
        self._push = self._declare_push_constants()

    # --- declarations -------------------------------------------------------------------------

    def _check_types(self) -> None:
        where = f"vulkan-spirv: kernel '{self.kernel.name}'"
        kinds = {o.element_type for o in self.operands} | {op.result_type
                                                            for op in self.kernel.ops}
        kinds |= {p.type for p in self.kernel.params}
        if "f64" in kinds and not self.profile.float64:
            raise CompileError(f"{where} computes in f64, which needs 64-bit floats "
                               f"(shaderFloat64); target profile '{self.profile.name}' lacks "
                               f"it (use a profile with float64, e.g. --vulkan-target=llvmpipe, or "
                               f"compute it in f32: leave out --keep-f64)")
        if "i64" in kinds and not self.profile.int64:
            self.e.emulate_i64 = True       # uvec2 words: int64_emulation.py
        elif "i64" in kinds:
            self.e.b.capability(Capability.Int64)
            self.uses_int64 = True
        if "f64" in kinds:
            self.e.b.capability(Capability.Float64)
            self.uses_float64 = True
        # Float64 code converts through u64 for NaN tests.
        if self.uses_float64 and not self.uses_int64:
            self.e.b.capability(Capability.Int64)
            self.uses_int64 = True

    def _declare_buffers(self) -> None:
        e = self.e
        written = {o.binding for o in self.kernel.outputs}
        for operand in self.operands:
            if operand.binding in self.buffers:
                continue
            binding = operand.binding
            if binding in self.texel_windows and binding not in written:
                var = texel_window_array(e, binding, self.texel_windows[binding],
                                         f"t{binding}")
                self.texel_bindings.add(binding)
            elif (self.profile.texel_buffer_loads or binding in self.texel_views) \
                    and binding not in written:
                var = texel_buffer(e, binding, f"t{binding}")
                self.texel_bindings.add(binding)
            else:
                var = storage_buffer(e, binding, e.u32, 4, f"b{binding}",
                                     writable=binding in written)
            self.buffers[binding] = var
            self.globals.append(var)

    def _declare_push_constants(self) -> int | None:
        words = self.push_constant_count
        if not words:
            return None
        e, b = self.e, self.e.b
        array = b.type_array(e.u32, words, stride=4)
        block = b.type_struct([array])
        b.decorate(block, Decoration.Block)
        b.member_decorate(block, 0, Decoration.Offset, 0)
        var = b.variable(b.type_pointer(StorageClass.PushConstant, block),
                         StorageClass.PushConstant)
        b.name(var, "params")
        self.globals.append(var)
        return var

    @property
    def push_constant_count(self) -> int:
        return -(-self.kernel.push_constant_bytes // 4)

    @property
    def bindings(self) -> list[tuple[int, bool]]:
        written = {o.binding for o in self.kernel.outputs}
        return [(binding, binding not in written) for binding in sorted(self.buffers)]

    def builtin(self, builtin: BuiltIn, component: int = 0) -> int:
        """Component of a uvec3 Input builtin, as u32 (loaded once, in the entry block)."""
        e, b = self.e, self.e.b
        if builtin not in self._builtins:
            v3 = b.type_vector(e.u32, 3)
            var = b.variable(b.type_pointer(StorageClass.Input, v3), StorageClass.Input)
            b.decorate(var, Decoration.BuiltIn, builtin)
            self.interface.append(var)
            self._builtins[builtin] = var
        vector = e.op(SpvOp.Load, b.type_vector(e.u32, 3), self._builtins[builtin])
        return e.op(SpvOp.CompositeExtract, e.u32, vector, component)

    def scalar_builtin(self, builtin: BuiltIn) -> int:
        """A u32 Input builtin (SubgroupSize, SubgroupLocalInvocationId, ...)."""
        e, b = self.e, self.e.b
        if builtin not in self._builtins:
            var = b.variable(b.type_pointer(StorageClass.Input, e.u32), StorageClass.Input)
            b.decorate(var, Decoration.BuiltIn, builtin)
            self.interface.append(var)
            self._builtins[builtin] = var
        return e.op(SpvOp.Load, e.u32, self._builtins[builtin])

    def linear_workgroup(self) -> int:
        """The workgroup id of a `Grid(linear=True)` launch: x + y * 65535 (u32)."""
        e = self.e
        x = self.builtin(BuiltIn.WorkgroupId, 0)
        y = self.builtin(BuiltIn.WorkgroupId, 1)
        return e.op(SpvOp.IAdd, e.u32, x, e.op(SpvOp.IMul, e.u32, y, e.u32c(MAX_LINEAR_GROUPS)))

    def finish(self, shared: Sequence[int] = ()) -> bytes:
        """Close the function, declare the entry point and return the module bytes."""
        e, b = self.e, self.e.b
        fn = e.finish_function(self.kernel.name)
        interface = list(self.interface)
        if self.profile.spirv_version >= (1, 4):
            interface += self.globals + list(shared)
        b.entry_point(ExecutionModel.GLCompute, fn, self.kernel.name, interface)
        b.execution_mode(fn, ExecutionMode.LocalSize, *self.local_size)
        e.declare_float_modes(fn)
        return b.to_bytes()

    def result(self, code: bytes, grid: Grid,
               requirements: dict[str, int | bool] | None = None) -> SpirvKernel:
        """The SpirvKernel for this module, with the needs it really has."""
        kernel = self.kernel
        needs: dict[str, int | bool] = {"max_workgroup_invocations": math.prod(self.local_size)}
        if self.uses_int64:
            needs["int64"] = True
        if self.uses_float64:
            needs["float64"] = True
        if self.e.uses_float16:
            needs["float16"] = True
        if self.push_constant_count:
            needs["push_constant_bytes"] = 4 * self.push_constant_count
        if self.texel_windows:
            needs["texel_array_indexing"] = True
        needs.update(requirements or {})
        count = grid.counts(kernel.static_ranges) if kernel.is_static else (0, 0, 0)
        return SpirvKernel(code=code, entry_point=kernel.name, workgroup_size=self.local_size,
                           workgroup_count=count, bindings=self.bindings,
                           push_constant_count=self.push_constant_count, requirements=needs,
                           grid=grid, texel_bindings=tuple(sorted(self.texel_bindings)),
                           texel_windows=dict(self.texel_windows),
                           texel_window=self.profile.texel_window if self.texel_windows else 0)

    # --- params and extents -------------------------------------------------------------------

    def _push_word(self, index: int) -> int:
        e, b = self.e, self.e.b
        if self._push is None:
            raise ValueError(f"kernel '{self.kernel.name}' has no push constants")
        ptr = e.op(SpvOp.AccessChain, b.type_pointer(StorageClass.PushConstant, e.u32),
                   self._push, e.u32c(0), e.u32c(index))
        return e.op(SpvOp.Load, e.u32, ptr)

    def param(self, k: int) -> int:
        """Param `k` as a register value of its type."""
        e = self.e
        p = self.kernel.params[k]
        word = self.kernel.param_offsets()[k] // 4
        low = self._push_word(word)
        if p.byte_size == 8:                    # two push-constant words
            vec = e.op(SpvOp.CompositeConstruct, e.b.type_vector(e.u32, 2), low,
                       self._push_word(word + 1))
            if p.type == "i64" and e.emulate_i64:
                return vec
            return e.op(SpvOp.Bitcast, e.scalar_type(p.type), vec)
        if p.type == "i1":
            return e.op(SpvOp.INotEqual, e.bool, low, e.u32c(0))
        if is_float(p.type):
            return float_from_bits(e, low, p.type)
        return wrap(e, e.op(SpvOp.Bitcast, e.i32, low), p.type)

    def extent(self, value: Extent) -> int:
        """A loop range or dimension as an i32 (a constant, or the index param it names)."""
        if isinstance(value, int):
            return self.e.i32c(value)
        names = [p.name for p in self.kernel.params]
        return self.param(names.index(value))

    def symbols(self) -> list[int]:
        """Every param as an i32, for maps with symbols (non-index params read as their bits)."""
        e = self.e
        out = []
        for k, p in enumerate(self.kernel.params):
            v = self.param(k)
            if register_class(p.type) != "i32":
                v = e.op(SpvOp.Bitcast, e.i32, self._push_word(self.kernel.param_offsets()[k] // 4))
            out.append(v)
        return out

    # --- addressing ---------------------------------------------------------------------------

    def row_major_offset(self, shape: tuple[Extent, ...], indices: list[int]) -> int:
        """sum(index_r * stride_r) in i32, strides from `shape` (static or param extents)."""
        e = self.e
        total = None
        for r, index in enumerate(indices):
            if total is None:
                total = index
            else:
                total = e.op(SpvOp.IAdd, e.i32, e.op(SpvOp.IMul, e.i32, total,
                                                     self.extent(shape[r])), index)
        return total if total is not None else e.i32c(0)

    def affine(self, row: tuple[int, ...], loops: Sequence[int | None],
               symbols: list[int] | None) -> int:
        """`row` at loop indices `loops` (i32); None for a loop the row does not use."""
        e = self.e
        n = len(loops)
        terms = []
        for j, c in enumerate(row[:n]):
            if c:
                index = loops[j]
                if index is None:
                    raise ValueError(f"affine row {row} uses loop {j}, which has no index here")
                terms.append(index if c == 1 else e.op(SpvOp.IMul, e.i32, index, e.i32c(c)))
        for s, c in enumerate(row[n:-1]):
            if c and symbols is not None:
                terms.append(e.op(SpvOp.IMul, e.i32, symbols[s], e.i32c(c)))
        if row[-1] or not terms:
            terms.append(e.i32c(row[-1]))
        total = terms[0]
        for t in terms[1:]:
            total = e.op(SpvOp.IAdd, e.i32, total, t)
        return total

    def operand_offset(self, operand: Operand, loops: Sequence[int | None]) -> int:
        """The element offset of operand (which has a map) at loop indices `loops` (i32; None
        for a loop its map does not use)."""
        m = operand.point_map
        symbols = self.symbols() if m.num_symbols else None
        indices = [self.affine(row, loops, symbols) for row in m.rows]
        return self.row_major_offset(operand.shape, indices)

    def gather_offset(self, operand: Operand, indices: list[int]) -> int:
        """Element offset of a `tensor.extract`, each index clamped into its dimension (an
        out-of-range extract is undefined in MLIR; clamping keeps the shader in bounds)."""
        e = self.e
        clamped = []
        for index, dim in zip(indices, operand.shape):
            top = e.op(SpvOp.ISub, e.i32, self.extent(dim), e.i32c(1))
            clamped.append(e.glsl(e.i32, GLSLstd450.SClamp, index, e.i32c(0), top))
        return self.row_major_offset(operand.shape, clamped)

    # --- element access -----------------------------------------------------------------------

    def _word_pointer(self, binding: int, word_index: int) -> int:
        e, b = self.e, self.e.b
        return e.op(SpvOp.AccessChain, b.type_pointer(StorageClass.StorageBuffer, e.u32),
                    self.buffers[binding], e.u32c(0), word_index)

    def select_window(self, binding: int, first_texel: int) -> int:
        """Read `binding` (declared with `texel_windows`) through the window holding texels
        [first_texel, first_texel + texel_window / 2) (u32, dynamically uniform), until the
        next call: the window starting at the multiple of texel_window / 2 at or below it.
        Returns first_texel's index in that window (`fetch_window_texel`)."""
        e = self.e
        shift = (self.profile.texel_window // 2).bit_length() - 1
        window = e.op(SpvOp.ShiftRightLogical, e.u32, first_texel, e.u32c(shift))
        self._window[binding] = (window_image(e, self.buffers[binding], window),
                                 e.op(SpvOp.ShiftLeftLogical, e.u32, window, e.u32c(shift)))
        return e.op(SpvOp.ISub, e.u32, first_texel, self._window[binding][1])

    def fetch_window_texel(self, binding: int, texel: int) -> list[int]:
        """The four words (u32) of texel `texel` of the selected window (an index into the
        window, not the binding: what the loads address by needs no subtraction per fetch)."""
        return self._components(fetch_image(self.e, self._window[binding][0], texel))

    def _components(self, words: int) -> list[int]:
        """The four u32 components of a uvec4 (a fetched texel or a 16-byte load)."""
        e = self.e
        return [e.op(SpvOp.CompositeExtract, e.u32, words, i) for i in range(4)]

    def _fetch(self, binding: int, texel: int) -> int:
        """Texel `texel` (u32) of a texel-buffer binding, through its selected window if it
        has windows."""
        e = self.e
        if binding not in self.texel_windows:
            return fetch(e, self.buffers[binding], texel)
        if binding not in self._window:
            raise CompileError(f"vulkan-spirv: internal error: kernel '{self.kernel.name}' "
                               f"reads binding {binding} before selecting a texel window")
        image, first = self._window[binding]
        return fetch_image(e, image, e.op(SpvOp.ISub, e.u32, texel, first))

    def load_words(self, binding: int, first: int, count: int) -> list[int]:
        """`count` (1, 2, 4 or 8) consecutive words (u32) from word `first` (u32, a multiple of
        `count`) of a binding: texel fetches, or a uvec4 load (4) or word loads from a storage
        buffer (`load_wide` has the 64-bit storage loads)."""
        e, b = self.e, self.e.b
        if binding in self.texel_bindings:
            texel = e.op(SpvOp.ShiftRightLogical, e.u32, first, e.u32c(2))
            if count >= 4:
                out = []
                for t in range(count // 4):
                    at = texel if t == 0 else e.op(SpvOp.IAdd, e.u32, texel, e.u32c(t))
                    out += self._components(self._fetch(binding, at))
                return out
            # Word w is component w % 4 of texel w / 4.
            words = self._fetch(binding, texel)
            component = e.op(SpvOp.BitwiseAnd, e.u32, first, e.u32c(3))
            return [e.op(SpvOp.VectorExtractDynamic, e.u32, words, component if i == 0 else
                         e.op(SpvOp.IAdd, e.u32, component, e.u32c(i))) for i in range(count)]
        if count == 4:
            v4 = b.type_vector(e.u32, 4)
            view = self.read_only_view(binding, v4, 16)
            index = e.op(SpvOp.ShiftRightLogical, e.u32, first, e.u32c(2))
            return self._components(e.op(SpvOp.Load, v4, e.op(SpvOp.AccessChain, b.type_pointer(
                StorageClass.StorageBuffer, v4), view, e.u32c(0), index)))
        return [e.op(SpvOp.Load, e.u32, self._word_pointer(
            binding, first if i == 0 else e.op(SpvOp.IAdd, e.u32, first, e.u32c(i))))
            for i in range(count)]

    def _load_u64_words(self, binding: int, first: int, count: int) -> list[int]:
        """2 or 8 words with one u64 or u64vec4 load (needs Int64): lavapipe loads a storage
        buffer per lane and 64-bit component, so 8 words cost 4 loads, not 8, and 2 words one."""
        e, b = self.e, self.e.b
        b.capability(Capability.Int64)
        self.uses_int64 = True
        wide = e.u64 if count == 2 else b.type_vector(e.u64, 4)
        view = self.read_only_view(binding, wide, 4 * count)
        index = e.op(SpvOp.ShiftRightLogical, e.u32, first, e.u32c(count.bit_length() - 1))
        loaded = e.op(SpvOp.Load, wide, e.op(SpvOp.AccessChain, b.type_pointer(
            StorageClass.StorageBuffer, wide), view, e.u32c(0), index))
        u2 = b.type_vector(e.u32, 2)
        quads = [loaded] if count == 2 else [e.op(SpvOp.CompositeExtract, e.u64, loaded, i)
                                             for i in range(4)]
        out = []
        for quad in quads:
            pair = e.op(SpvOp.Bitcast, u2, quad)
            out += [e.op(SpvOp.CompositeExtract, e.u32, pair, w) for w in range(2)]
        return out

    def _word_and_shift(self, offset: int, bits: int) -> tuple[int, int]:
        e = self.e
        per_word = 32 // bits
        u = e.op(SpvOp.Bitcast, e.u32, offset)
        word = e.op(SpvOp.ShiftRightLogical, e.u32, u, e.u32c(per_word.bit_length() - 1))
        shift = e.op(SpvOp.IMul, e.u32, e.op(SpvOp.BitwiseAnd, e.u32, u, e.u32c(per_word - 1)),
                     e.u32c(bits))
        return word, shift

    def read_only_view(self, binding: int, vector_type: int, stride: int) -> int:
        """A second, read-only variable over `binding` as a runtime array of `vector_type`
        (one per binding and type), for wide loads: software drivers pay per load, not per
        byte."""
        key = (binding, vector_type)
        if key not in self._vector_views:
            var = storage_buffer(self.e, binding, vector_type, stride,
                                 f"b{binding}_x{stride}", writable=False)
            self._vector_views[key] = var
            self.globals.append(var)
        return self._vector_views[key]

    def load_vector4(self, operand: Operand, offset: int, scalar_type: int) -> list[int]:
        """Four consecutive 32-bit elements from `offset` (a multiple of 4) with one 16-byte
        load (a uvec4 view of a storage buffer, or one texel fetch)."""
        e = self.e
        words = self.load_words(operand.binding, e.op(SpvOp.Bitcast, e.u32, offset), 4)
        return [e.op(SpvOp.Bitcast, scalar_type, w) for w in words]

    def load_wide(self, operand: Operand, offset: int, words: int, scalar_type: int
                  ) -> list[int]:
        """`words` (2 or 8) consecutive 32-bit elements from `offset` (a multiple of `words`):
        u64 / u64vec4 loads from a storage buffer (the profile must have int64), one or two
        fetches from a texel buffer."""
        e = self.e
        first = e.op(SpvOp.Bitcast, e.u32, offset)
        if operand.binding not in self.texel_bindings:
            loaded = self._load_u64_words(operand.binding, first, words)
        else:
            loaded = self.load_words(operand.binding, first, words)
        return [e.op(SpvOp.Bitcast, scalar_type, w) for w in loaded]

    def load_bits(self, operand: Operand, offset: int) -> int:
        """The element's storage bits (u32; a uvec2 for 64-bit types)."""
        e = self.e
        bits = SCALAR_TYPES[operand.element_type].storage_bits
        if bits == 32:
            return self.load_words(operand.binding, e.op(SpvOp.Bitcast, e.u32, offset), 1)[0]
        if bits == 64:
            first = e.op(SpvOp.ShiftLeftLogical, e.u32, e.op(SpvOp.Bitcast, e.u32, offset),
                         e.u32c(1))
            lo, hi = self.load_words(operand.binding, first, 2)
            return e.op(SpvOp.CompositeConstruct, e.b.type_vector(e.u32, 2), lo, hi)
        word, shift = self._word_and_shift(offset, bits)
        value = self.load_words(operand.binding, word, 1)[0]
        return e.op(SpvOp.BitwiseAnd, e.u32, e.op(SpvOp.ShiftRightLogical, e.u32, value, shift),
                    e.u32c((1 << bits) - 1))

    def load(self, operand: Operand, offset: int) -> int:
        """The element at `offset` as a register value of its type."""
        e = self.e
        kind = operand.element_type
        bits = self.load_bits(operand, offset)
        if SCALAR_TYPES[kind].storage_bits == 64:
            if kind == "i64" and e.emulate_i64:
                return bits
            return e.op(SpvOp.Bitcast, e.scalar_type(kind), bits)
        if kind == "i1":
            return e.op(SpvOp.INotEqual, e.bool, bits, e.u32c(0))
        if is_float(kind):
            return float_from_bits(e, bits, kind)
        return wrap(e, e.op(SpvOp.Bitcast, e.i32, bits), kind)

    def store(self, operand: Operand, offset: int, value: int) -> None:
        e = self.e
        kind = operand.element_type
        width = SCALAR_TYPES[kind].storage_bits
        if width == 64:
            vec = value if kind == "i64" and e.emulate_i64 else \
                e.op(SpvOp.Bitcast, e.b.type_vector(e.u32, 2), value)
            first = e.op(SpvOp.ShiftLeftLogical, e.u32, e.op(SpvOp.Bitcast, e.u32, offset),
                         e.u32c(1))
            for half in range(2):
                word = first if half == 0 else e.op(SpvOp.IAdd, e.u32, first, e.u32c(1))
                e.op_void(SpvOp.Store, self._word_pointer(operand.binding, word),
                          e.op(SpvOp.CompositeExtract, e.u32, vec, half))
            return
        if kind == "i1":
            bits = e.select(e.u32, value, e.u32c(1), e.u32c(0))
        elif is_float(kind):
            bits = float_bits(e, value, kind)
        else:
            bits = e.op(SpvOp.Bitcast, e.u32, value)
        if width == 32:
            e.op_void(SpvOp.Store, self._word_pointer(
                operand.binding, e.op(SpvOp.Bitcast, e.u32, offset)), bits)
            return
        mask = (1 << width) - 1
        word, shift = self._word_and_shift(offset, width)
        pointer = self._word_pointer(operand.binding, word)
        placed = e.op(SpvOp.ShiftLeftLogical, e.u32,
                      e.op(SpvOp.BitwiseAnd, e.u32, bits, e.u32c(mask)), shift)
        keep = e.op(SpvOp.Not, e.u32, e.op(SpvOp.ShiftLeftLogical, e.u32, e.u32c(mask), shift))
        scope, semantics = e.u32c(Scope.Device), e.u32c(MemorySemantics.Relaxed)
        e.op(SpvOp.AtomicAnd, e.u32, pointer, scope, semantics, keep)
        e.op(SpvOp.AtomicOr, e.u32, pointer, scope, semantics, placed)


def storage_words(operand: Operand) -> int:
    """Whole 32-bit words a static operand occupies (what its binding must cover)."""
    bits = math.prod(operand.static_shape) * SCALAR_TYPES[operand.element_type].storage_bits
    return -(-bits // 32)


def shared_array(iface: ShaderInterface, element: int, length: int, name: str) -> int:
    """A Workgroup-storage array variable (listed in the entry point's interface from 1.4)."""
    b = iface.e.b
    array = b.type_array(element, length)
    var = b.variable(b.type_pointer(StorageClass.Workgroup, array), StorageClass.Workgroup)
    b.name(var, name)
    iface.globals.append(var)
    return var


def shared_pointer(iface: ShaderInterface, var: int, element: int, index: int) -> int:
    e = iface.e
    return e.op(SpvOp.AccessChain, e.b.type_pointer(StorageClass.Workgroup, element), var, index)


def barrier(iface: ShaderInterface) -> None:
    """Workgroup execution and Workgroup-memory barrier."""
    e = iface.e
    semantics = MemorySemantics.AcquireRelease | MemorySemantics.WorkgroupMemory
    e.op_void(SpvOp.ControlBarrier, e.u32c(Scope.Workgroup), e.u32c(Scope.Workgroup),
              e.u32c(int(semantics)))
