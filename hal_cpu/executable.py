"""Loading "cpu-kernel-fb" executables: FlatBuffers -> checked `Kernel`s.

Checking is separated from running: everything the executor relies on is proven here once —
the file identifier, every vector length, operand types, map shapes, that every affine map stays
inside its operand over the whole loop box, SSA numbering, op types — so `hal_cpu.kernel` runs
without re-checking. Any malformed or inconsistent input raises `VerificationError` naming the
kernel and the field; FlatBuffers' own exceptions never escape.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from hal_cpu.kernel import Kernel, Operand, Step
from hal_cpu.ops import F32, I1, I32, OpAttrs, OpError, compile_op, normalize_type
from irtk.errors import VerificationError
from irtk.hal.executable import Executable, ExportInfo
from schemas.cpu_executable_generated import ExecutableDef, KernelDef, OpDef, OperandDef

EXECUTABLE_FORMAT = "cpu-kernel-fb"
FILE_IDENTIFIER = b"IRCP"

# Sizes past these are certainly not a real kernel, and they keep every index inside int64.
MAX_ELEMENTS = 1 << 48
MAX_BINDING = 1 << 16

# How each element type is stored; i1 takes one byte per element.
_STORAGE: dict[str, np.dtype] = {F32: np.dtype(np.float32), I32: np.dtype(np.int32),
                                 I1: np.dtype(np.uint8)}

T = TypeVar("T")


class CpuExecutable(Executable):
    """A loaded CPU executable: one export per kernel, in file order."""

    def __init__(self, kernels: list[Kernel]) -> None:
        super().__init__([ExportInfo(k.name, k.binding_count, 0, (k.tile_size, 1, 1))
                          for k in kernels])
        self.kernels = kernels

    @classmethod
    def load(cls, data: bytes | bytearray | memoryview) -> CpuExecutable:
        return cls(parse_kernels(data))


def parse_kernels(data: bytes | bytearray | memoryview) -> list[Kernel]:
    """Decode and verify every kernel of a "cpu-kernel-fb" executable."""
    buf = bytes(data)
    if len(buf) < 8 or not ExecutableDef.ExecutableDefBufferHasIdentifier(buf, 0):
        found = buf[4:8] if len(buf) >= 8 else b""
        raise VerificationError(
            f"cpu executable: file identifier is {found!r}, expected {FILE_IDENTIFIER!r} "
            f"({len(buf)} bytes)")
    root = _get("cpu executable: root table", lambda: ExecutableDef.GetRootAs(buf, 0))
    count = _vector_length(buf, "cpu executable: kernels", root.KernelsLength, 4)
    if count == 0:
        raise VerificationError("cpu executable: has no kernels")
    kernels: list[Kernel] = []
    names: set[str] = set()
    for i in range(count):
        kdef = _get(f"cpu executable: kernels[{i}]", lambda: root.Kernels(i))
        kernel = _KernelDecoder(buf, kdef, i).decode()
        if kernel.name in names:
            raise VerificationError(f"cpu executable: kernel name '{kernel.name}' is used twice")
        names.add(kernel.name)
        kernels.append(kernel)
    return kernels


class _KernelDecoder:
    """Decodes one KernelDef; `where` names the kernel in every message."""

    def __init__(self, buf: bytes, kdef: KernelDef, index: int) -> None:
        self.buf = buf
        self.kdef = kdef
        self.where = f"cpu executable: kernels[{index}]"

    def fail(self, field: str, message: str) -> VerificationError:
        return VerificationError(f"{self.where}: {field}: {message}")

    def decode(self) -> Kernel:
        k = self.kdef
        name = _string(self.where + ": name", k.Name)
        if not name:
            raise self.fail("name", "is missing")
        self.where = f"cpu executable: kernel '{name}'"
        loop_ranges = self.int_vector("loop_ranges", k.LoopRangesIsNone, k.LoopRangesLength,
                                      k.LoopRangesAsNumpy, 8)
        for j, r in enumerate(loop_ranges):
            if r < 0:
                raise self.fail(f"loop_ranges[{j}]", f"is {r}, expected >= 0")
        if math.prod(loop_ranges) > MAX_ELEMENTS:
            raise self.fail("loop_ranges", f"{loop_ranges} has more than 2**48 iterations")
        tile_size = _get(self.where + ": tile_size", k.TileSize)
        if tile_size < 1:
            raise self.fail("tile_size", f"is {tile_size}, expected >= 1")
        inputs = self.operands("inputs", k.InputsLength, k.Inputs, loop_ranges)
        outputs = self.operands("outputs", k.OutputsLength, k.Outputs, loop_ranges)
        types = [op.element_type for op in inputs + outputs]
        steps = self.ops(types, len(loop_ranges))
        yields = self.int_vector("yields", k.YieldsIsNone, k.YieldsLength, k.YieldsAsNumpy, 4)
        if len(yields) != len(outputs):
            raise self.fail("yields", f"has {len(yields)} values for {len(outputs)} outputs")
        for n, (v, out) in enumerate(zip(yields, outputs)):
            if not 0 <= v < len(types):
                raise self.fail(f"yields[{n}]", f"value {v} is not defined "
                                f"(the body has values 0..{len(types) - 1})")
            if types[v] != out.element_type:
                raise self.fail(f"yields[{n}]", f"value {v} is {types[v]} but outputs[{n}] is "
                                f"{out.element_type}")
        return Kernel(name, loop_ranges, tile_size, inputs, outputs, steps, yields)

    # --- operands ----------------------------------------------------------------------------

    def operands(self, field: str, length: Callable[[], int], item: Callable[[int], OperandDef],
                 loop_ranges: list[int]) -> list[Operand]:
        count = _vector_length(self.buf, f"{self.where}: {field}", length, 4)
        result = []
        for n in range(count):
            odef = _get(f"{self.where}: {field}[{n}]", lambda: item(n))
            result.append(self.operand(f"{field}[{n}]", odef, loop_ranges))
        return result

    def operand(self, field: str, odef: OperandDef, loop_ranges: list[int]) -> Operand:
        binding = _get(f"{self.where}: {field}.binding", odef.Binding)
        if binding >= MAX_BINDING:
            raise self.fail(f"{field}.binding", f"{binding} is out of range (< {MAX_BINDING})")
        etype = _string(f"{self.where}: {field}.element_type", odef.ElementType)
        if etype not in _STORAGE:
            raise self.fail(f"{field}.element_type",
                            f"{etype!r} is not supported (f32, i32, i1)")
        shape = self.int_vector(f"{field}.shape", odef.ShapeIsNone, odef.ShapeLength,
                                odef.ShapeAsNumpy, 8)
        for d, extent in enumerate(shape):
            if extent < 0:
                raise self.fail(f"{field}.shape[{d}]", f"is {extent}, expected >= 0")
        if math.prod(shape) > MAX_ELEMENTS:
            raise self.fail(f"{field}.shape", f"{shape} has more than 2**48 elements")
        amap = _get(f"{self.where}: {field}.map", odef.Map)
        if amap is None:
            raise self.fail(f"{field}.map", "is missing")
        num_dims = _get(f"{self.where}: {field}.map.num_dims", amap.NumDims)
        if num_dims != len(loop_ranges):
            raise self.fail(f"{field}.map.num_dims",
                            f"is {num_dims}, expected {len(loop_ranges)} (the number of loops)")
        coeffs = self.int_vector(f"{field}.map.coefficients", amap.CoefficientsIsNone,
                                 amap.CoefficientsLength, amap.CoefficientsAsNumpy, 8)
        width = num_dims + 1
        if len(coeffs) != len(shape) * width:
            raise self.fail(f"{field}.map.coefficients",
                            f"has {len(coeffs)} entries, expected {len(shape) * width} "
                            f"({len(shape)} rows of {width})")
        rows = [coeffs[r * width:(r + 1) * width] for r in range(len(shape))]
        if math.prod(loop_ranges) > 0:
            for r, row in enumerate(rows):
                lo, hi = _row_bounds(row, loop_ranges)
                if lo < 0 or hi >= shape[r]:
                    raise self.fail(f"{field}.map", f"row {r} reaches indices [{lo}, {hi}] "
                                    f"outside dimension {r} of shape {shape}")
        label = field.replace("s[", " ").replace("]", "")  # "inputs[0]" -> "input 0"
        return Operand.from_map(label, binding, etype, _STORAGE[etype], shape, loop_ranges, rows)

    # --- body --------------------------------------------------------------------------------

    def ops(self, types: list[str], num_loops: int) -> list[Step]:
        k = self.kdef
        count = _vector_length(self.buf, f"{self.where}: ops", k.OpsLength, 4)
        steps: list[Step] = []
        for n in range(count):
            odef = _get(f"{self.where}: ops[{n}]", lambda: k.Ops(n))
            step, rtype = self.op(n, odef, types, num_loops)
            steps.append(step)
            types.append(rtype)
        return steps

    def op(self, n: int, odef: OpDef, types: list[str], num_loops: int) -> tuple[Step, str]:
        field = f"ops[{n}]"
        name = _string(f"{self.where}: {field}.name", odef.Name)
        if not name:
            raise self.fail(f"{field}.name", "is missing")
        field = f"ops[{n}] ({name})"
        operands = self.int_vector(f"{field}.operands", odef.OperandsIsNone,
                                   odef.OperandsLength, odef.OperandsAsNumpy, 4)
        for i, v in enumerate(operands):
            if not 0 <= v < len(types):
                raise self.fail(f"{field}.operands[{i}]", f"value {v} is not defined before "
                                f"this op (values 0..{len(types) - 1})")
        rtype = normalize_type(_string(f"{self.where}: {field}.result_type", odef.ResultType))
        predicate = _string(f"{self.where}: {field}.predicate", odef.Predicate)
        int_value = _get(f"{self.where}: {field}.int_value", odef.IntValue)
        float_value = _get(f"{self.where}: {field}.float_value", odef.FloatValue)
        if name == "linalg.index":
            if operands:
                raise self.fail(f"{field}.operands", "linalg.index takes no operands")
            if not 0 <= int_value < num_loops:
                raise self.fail(f"{field}.int_value",
                                f"loop dimension {int_value} is not in [0, {num_loops})")
            if rtype not in (None, I32):
                raise self.fail(f"{field}.result_type", f"{rtype!r} should be index or i32")
            return (None, (int_value,)), I32
        attrs = OpAttrs(name, rtype, predicate, int_value, float_value)
        try:
            fn, result = compile_op(attrs, [types[v] for v in operands])
        except OpError as e:
            raise self.fail(field, str(e)) from None
        return (fn, tuple(operands)), result

    def int_vector(self, field: str, is_none: Callable[[], bool], length: Callable[[], int],
                   as_numpy: Callable[[], np.ndarray], elem_size: int) -> list[int]:
        """A scalar vector as Python ints (an absent vector is empty)."""
        where = f"{self.where}: {field}"
        if _get(where, is_none):
            return []
        _vector_length(self.buf, where, length, elem_size)
        return [int(x) for x in _get(where, as_numpy)]


def _row_bounds(row: list[int], loop_ranges: list[int]) -> tuple[int, int]:
    """The smallest and largest index an affine row reaches over the loop box."""
    lo = hi = row[len(loop_ranges)]
    for c, r in zip(row, loop_ranges):
        lo += min(0, c * (r - 1))
        hi += max(0, c * (r - 1))
    return lo, hi


def _get(where: str, read: Callable[[], T]) -> T:
    """Run one FlatBuffers accessor; whatever it raises on bad bytes becomes a VerificationError."""
    try:
        return read()
    except VerificationError:
        raise
    except Exception as e:  # struct.error, IndexError, ValueError, ... from corrupt offsets
        raise VerificationError(f"{where}: malformed FlatBuffer data "
                                f"({type(e).__name__}: {e})") from None


def _vector_length(buf: bytes, where: str, length: Callable[[], int], elem_size: int) -> int:
    n = _get(where, length)
    if n * elem_size > len(buf):
        raise VerificationError(f"{where}: vector of {n} entries does not fit in the "
                                f"{len(buf)}-byte executable")
    return n


def _string(where: str, read: Callable[[], bytes | None]) -> str | None:
    raw = _get(where, read)
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise VerificationError(f"{where}: is not valid UTF-8") from None
