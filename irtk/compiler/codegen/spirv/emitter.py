"""The SPIR-V emission context shared by the kernel code generators.

A thin layer over `spirv.builder.ModuleBuilder` that fixes the scalar types a kernel computes in
(bool, signed i32, u32 for index arithmetic, f32) and provides the few bit-level helpers the op
mappings need.

Function-body instructions are recorded and written to the builder only by `finish_function`,
so types and constants, which the op mappings create on demand, are always declared while no
function is open (they belong to the module's global section). Recording also lets the emitter
reuse an identical pure instruction within a block instead of emitting it twice.

A left shift of a 32-bit scalar by a constant is emitted as a multiply by that power of two
(the same bits for every value, two's complement wrapping included): SwiftShader's Subzero
backend has no per-lane variable shift without AVX2 and takes a vector shift lane by lane,
while a multiply stays one vector instruction (an f32 `exp` went 1.20 -> 0.96 ms over 256K
elements); LLVM-based drivers turn the multiply back into a shift.

NaN tests are done on the bit pattern, not with OpIsNan or unordered comparisons: without the
float-controls extension a Vulkan driver may assume that floats are never NaN and fold those
away, while integer compares are always honoured.
"""
from __future__ import annotations

import math
import struct

from spirv.builder import ModuleBuilder
from spirv.tables import Capability, Decoration, ExecutionMode, GLSLstd450, Op

from irtk.errors import CompileError
from irtk.types import SCALAR_TYPES

# Instructions that read memory or have effects: never merged with an earlier identical one.
_IMPURE = frozenset({Op.Load, Op.Store, Op.FunctionCall, Op.Variable, Op.AtomicAnd,
                     Op.AtomicOr, Op.AtomicIAdd, Op.ControlBarrier, Op.MemoryBarrier,
                     Op.GroupNonUniformFAdd, Op.GroupNonUniformIAdd, Op.GroupNonUniformFMul,
                     Op.GroupNonUniformIMul, Op.GroupNonUniformFMax, Op.GroupNonUniformFMin,
                     Op.GroupNonUniformSMax, Op.GroupNonUniformSMin, Op.GroupNonUniformUMax,
                     Op.GroupNonUniformUMin, Op.GroupNonUniformBitwiseAnd,
                     Op.GroupNonUniformBitwiseOr, Op.GroupNonUniformBitwiseXor,
                     Op.GroupNonUniformLogicalAnd, Op.GroupNonUniformLogicalOr,
                     Op.GroupNonUniformLogicalXor})
_F32_ABS_MASK = 0x7FFFFFFF
_F32_INF_BITS = 0x7F800000


class Emitter:
    """A module under construction plus its scalar types; every helper returns a result id."""

    def __init__(self, version: tuple[int, int], native_float16: bool = False) -> None:
        b = self.b = ModuleBuilder(version=version)
        self.version = version
        # f16 rounds with native conversions (the profile has shaderFloat16) instead of the
        # integer code of float_formats.round_to; `uses_float16` records that it happened.
        self.native_float16 = native_float16
        self.uses_float16 = False
        self.void = b.type_void()
        self.bool = b.type_bool()
        self.f32 = b.type_float(32)
        self.i32 = b.type_int(32, True)
        self.u32 = b.type_int(32, False)
        self.emulate_i64 = False   # i64 values are uvec2 (low, high) words
        self._body: list[tuple[str, int, int | None, tuple[int, ...], int]] = []
        self._block_values: dict[tuple[int, int, tuple[int, ...]], int] = {}
        self._exact: set[int] = set()

    # --- types and constants ---------------------------------------------------

    def scalar_type(self, name: str) -> int:
        """The register type of a kernel scalar type ("i1" is a SPIR-V bool).

        Integers narrower than 32 bits and "index" live in i32 registers, every float narrower
        than 32 bits in an f32 register (see typed_ops.py); 64-bit types need the profile's
        native support, which the caller has checked.
        """
        if name not in SCALAR_TYPES:
            raise CompileError(f"vulkan-spirv: scalar type '{name}' is not supported")
        register = SCALAR_TYPES[name].register
        if register == "i1":
            return self.bool
        if register == "i32":
            return self.i32
        if register == "i64":
            return self.b.type_vector(self.u32, 2) if self.emulate_i64 else self.i64
        if register == "f64":
            return self.f64
        return self.f32

    @property
    def i64(self) -> int:
        return self.b.type_int(64, True)

    @property
    def u64(self) -> int:
        return self.b.type_int(64, False)

    @property
    def f64(self) -> int:
        return self.b.type_float(64)

    def local(self, value_type: int) -> int:
        """A Function-storage variable (the builder puts it at the top of the first block)."""
        from spirv.tables import StorageClass
        ptr = self.b.type_pointer(StorageClass.Function, value_type)
        rid = self.b.new_id()
        self._body.append(("op", int(Op.Variable), ptr, (int(StorageClass.Function),), rid))
        return rid

    def load(self, value_type: int, pointer: int) -> int:
        return self.op(Op.Load, value_type, pointer)

    def store(self, pointer: int, value: int) -> None:
        self.op_void(Op.Store, pointer, value)

    def f32c(self, value: float) -> int:
        return self.b.constant(self.f32, _to_f32(value))

    def i32c(self, value: int) -> int:
        """A signed 32-bit constant; `value` is taken modulo 2**32 (MLIR's two's complement)."""
        value &= 0xFFFFFFFF
        return self.b.constant(self.i32, value - (1 << 32) if value >= 1 << 31 else value)

    def u32c(self, value: int) -> int:
        return self.b.constant(self.u32, value & 0xFFFFFFFF)

    def boolc(self, value: bool) -> int:
        return self.b.constant_bool(bool(value))

    def const(self, scalar: str, value: int | float) -> int:
        if scalar == "f32":
            return self.f32c(float(value))
        if scalar == "i1":
            return self.boolc(bool(value))
        return self.i32c(int(value))

    # --- instructions ----------------------------------------------------------

    def op(self, opcode: int, result_type: int, *operands: int) -> int:
        """A function-body instruction with a result; pure ones are reused within a block."""
        if opcode == Op.ShiftLeftLogical and result_type in (self.i32, self.u32):
            amount = self.b.constant_value(operands[1])
            if isinstance(amount, int) and not isinstance(amount, bool) and 0 <= amount < 32:
                factor = self.i32c(1 << amount) if result_type == self.i32 \
                    else self.u32c(1 << amount)
                return self.op(Op.IMul, result_type, operands[0], factor)
        key = (int(opcode), result_type, operands)
        reusable = opcode not in _IMPURE
        if reusable and key in self._block_values:
            return self._block_values[key]
        rid = self.b.new_id()
        self._body.append(("op", int(opcode), result_type, operands, rid))
        if reusable:
            self._block_values[key] = rid
        return rid

    def exact_op(self, opcode: int, result_type: int, *operands: int) -> int:
        """A float op decorated NoContraction: drivers may neither fuse it with another op
        nor reassociate or fold it (for rounding tricks such as `(x + c) - c`)."""
        rid = self.op(opcode, result_type, *operands)
        if rid not in self._exact:
            self._exact.add(rid)
            self.b.decorate(rid, Decoration.NoContraction)
        return rid

    def round_f16_natively(self, x: int) -> int:
        """The f32 `x` rounded to f16 by converting there and back (exact on the way back;
        the way there rounds to nearest even under the RoundingModeRTE mode that
        `declare_float_modes` sets)."""
        if not self.uses_float16:
            self.uses_float16 = True
            self.b.capability(Capability.Float16)
        return self.op(Op.FConvert, self.f32, self.op(Op.FConvert, self.b.type_float(16), x))

    def declare_float_modes(self, fn: int) -> None:
        """Execution modes the body needs (after its entry point): RTE for f16 conversions."""
        if not self.uses_float16:
            return
        if self.version < (1, 4):
            self.b.extension("SPV_KHR_float_controls")
        self.b.capability(Capability.RoundingModeRTE)
        self.b.execution_mode(fn, ExecutionMode.RoundingModeRTE, 16)

    def op_void(self, opcode: int, *operands: int) -> None:
        self._body.append(("void", int(opcode), None, operands, 0))

    def label(self, label_id: int | None = None) -> int:
        """Start a block (ids from `new_id` let branches name it first)."""
        rid = self.b.new_id() if label_id is None else label_id
        self._body.append(("label", 0, None, (), rid))
        self._block_values.clear()
        return rid

    def new_id(self) -> int:
        return self.b.new_id()

    def finish_function(self, name: str) -> int:
        """Write the recorded body as a `void name()` function; returns the function id."""
        fn = self.b.begin_function(self.void, self.b.type_function(self.void, []))
        self.b.name(fn, name)
        for kind, opcode, result_type, operands, rid in self._body:
            if kind == "label":
                self.b.label(rid)
            elif kind == "void":
                self.b.op_void(opcode, *operands)
            else:
                self.b.op(opcode, result_type, *operands, result_id=rid)
        self.b.end_function()
        self._body = []
        return fn

    def glsl(self, result_type: int, instruction: GLSLstd450, *operands: int) -> int:
        glsl_set = self.b.ext_inst_import("GLSL.std.450")
        return self.op(Op.ExtInst, result_type, glsl_set, int(instruction), *operands)

    def select(self, result_type: int, cond: int, if_true: int, if_false: int) -> int:
        return self.op(Op.Select, result_type, cond, if_true, if_false)

    def not_(self, a: int) -> int:
        return self.op(Op.LogicalNot, self.bool, a)

    def and_(self, *conds: int) -> int:
        result = conds[0]
        for c in conds[1:]:
            result = self.op(Op.LogicalAnd, self.bool, result, c)
        return result

    def or_(self, *conds: int) -> int:
        result = conds[0]
        for c in conds[1:]:
            result = self.op(Op.LogicalOr, self.bool, result, c)
        return result

    # --- float bit tests -------------------------------------------------------

    def f32_bits(self, x: int) -> int:
        return self.op(Op.Bitcast, self.u32, x)

    def is_nan(self, x: int) -> int:
        magnitude = self.op(Op.BitwiseAnd, self.u32, self.f32_bits(x), self.u32c(_F32_ABS_MASK))
        return self.op(Op.UGreaterThan, self.bool, magnitude, self.u32c(_F32_INF_BITS))

    def is_inf(self, x: int) -> int:
        magnitude = self.op(Op.BitwiseAnd, self.u32, self.f32_bits(x), self.u32c(_F32_ABS_MASK))
        return self.op(Op.IEqual, self.bool, magnitude, self.u32c(_F32_INF_BITS))

    def is_finite(self, x: int) -> int:
        magnitude = self.op(Op.BitwiseAnd, self.u32, self.f32_bits(x), self.u32c(_F32_ABS_MASK))
        return self.op(Op.ULessThan, self.bool, magnitude, self.u32c(_F32_INF_BITS))

    def sign_bit(self, x: int) -> int:
        """True for negative numbers, -0.0 and NaNs with the sign bit set."""
        return self.op(Op.SLessThan, self.bool, self.op(Op.Bitcast, self.i32, x), self.i32c(0))

    def ordered(self, a: int, b: int) -> int:
        """Neither operand is NaN."""
        return self.not_(self.or_(self.is_nan(a), self.is_nan(b)))


def _to_f32(value: float) -> float:
    """Round a Python float to f32 the way MLIR's constant folding does (overflow -> inf)."""
    if math.isnan(value) or math.isinf(value):
        return value
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)
