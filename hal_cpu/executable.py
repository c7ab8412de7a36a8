"""Loading "cpu-kernel-fb" executables: FlatBuffers -> checked `Kernel`s, each with the plan
(`hal_cpu.plans`) it runs its boxes with.

Checking is separated from running: everything the executor relies on is proven here once —
the file identifier, every vector length, iterator types, params and their push-constant layout,
operand types, map shapes, that every static affine map stays inside its operand over the whole
loop box (dynamic ones are checked at each dispatch, once extents are known), that outputs do not
use reduction loops, SSA numbering, op types, gathers — so `hal_cpu.kernel` runs without
re-checking. Any malformed or inconsistent input raises `VerificationError` naming the kernel and
the field; FlatBuffers' own exceptions never escape.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from hal_cpu.kernel import (STEP_EXTRACT, STEP_INDEX, STEP_OP, STEP_PARAM, Kernel, Operand, Step,
                            map_bounds)
from hal_cpu.ops import I32, VALUE_TYPES, OpAttrs, OpError, compile_op
from hal_cpu import native_executor
from hal_cpu.plans import choose_plan
from irtk.body_ops import PARAM_TYPES, kernel_type
from irtk.errors import VerificationError
from irtk.hal.executable import Executable, ExportInfo
from irtk.types import storage_bytes
from schemas.cpu_executable_generated import ExecutableDef, KernelDef, OpDef, OperandDef

FILE_IDENTIFIER = b"IRCP"

# Sizes past these are certainly not a real kernel, and they keep every index inside int64.
MAX_ELEMENTS = 1 << 48
MAX_BINDING = 1 << 16
MAX_COEFFICIENT = 1 << 40
MAX_LOOPS = 16
ITERATORS = ("parallel", "reduction")

T = TypeVar("T")


class CpuExecutable(Executable):
    """A loaded CPU executable: one export per kernel, in file order."""

    def __init__(self, kernels: list[Kernel]) -> None:
        super().__init__([ExportInfo(k.name, k.binding_count, -(-k.push_constant_bytes // 4),
                                     (k.tile_size, 1, 1)) for k in kernels])
        self.kernels = kernels

    @classmethod
    def load(cls, data: bytes | bytearray | memoryview) -> CpuExecutable:
        kernels = parse_kernels(data)
        native_executor.attach(kernels)
        return cls(kernels)


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
        self.params: list[tuple[str, str, int]] = []

    def fail(self, field: str, message: str) -> VerificationError:
        return VerificationError(f"{self.where}: {field}: {message}")

    def decode(self) -> Kernel:
        k = self.kdef
        name = _string(self.where + ": name", k.Name)
        if not name:
            raise self.fail("name", "is missing")
        self.where = f"cpu executable: kernel '{name}'"
        self.params = self.decode_params()
        loop_ranges = self.int_vector("loop_ranges", k.LoopRangesIsNone, k.LoopRangesLength,
                                      k.LoopRangesAsNumpy, 8)
        nloops = len(loop_ranges)
        if nloops > MAX_LOOPS:
            raise self.fail("loop_ranges", f"has {nloops} loops (at most {MAX_LOOPS})")
        dyn_loops = self.dynamic("dynamic_loop_ranges", k.DynamicLoopRangesIsNone,
                                 k.DynamicLoopRangesLength, k.DynamicLoopRangesAsNumpy, nloops)
        for j, (r, p) in enumerate(zip(loop_ranges, dyn_loops)):
            if p < 0 and r < 0:
                raise self.fail(f"loop_ranges[{j}]", f"is {r}, expected >= 0")
            if p >= 0:
                loop_ranges[j] = 0
        if math.prod(loop_ranges) > MAX_ELEMENTS:
            raise self.fail("loop_ranges", f"{loop_ranges} has more than 2**48 iterations")
        codes = self.int_vector("iterator_types", k.IteratorTypesIsNone, k.IteratorTypesLength,
                                k.IteratorTypesAsNumpy, 1)
        if codes and len(codes) != nloops:
            raise self.fail("iterator_types", f"has {len(codes)} entries for {nloops} loops")
        if any(c not in (0, 1) for c in codes):
            raise self.fail("iterator_types", f"{codes} has a value other than 0 (parallel) "
                            "or 1 (reduction)")
        iterators = [ITERATORS[c] for c in codes] if codes else ["parallel"] * nloops
        tile_size = _get(self.where + ": tile_size", k.TileSize)
        if tile_size < 1:
            raise self.fail("tile_size", f"is {tile_size}, expected >= 1")
        self.check_grid(nloops, loop_ranges, dyn_loops, iterators, tile_size)
        static = all(p < 0 for p in dyn_loops)
        inputs = self.operands("inputs", k.InputsLength, k.Inputs, loop_ranges, static,
                               iterators)
        outputs = self.operands("outputs", k.OutputsLength, k.Outputs, loop_ranges, static,
                                iterators)
        types = [op.element_type for op in inputs + outputs]
        gathers = {i for i, op in enumerate(inputs) if op.is_gather}
        steps, step_names, step_attrs = self.ops(types, nloops, inputs, gathers)
        yields = self.int_vector("yields", k.YieldsIsNone, k.YieldsLength, k.YieldsAsNumpy, 4)
        if len(yields) != len(outputs):
            raise self.fail("yields", f"has {len(yields)} values for {len(outputs)} outputs")
        for n, (v, out) in enumerate(zip(yields, outputs)):
            if not 0 <= v < len(types) or v in gathers:
                raise self.fail(f"yields[{n}]", f"value {v} is not defined "
                                f"(the body has values 0..{len(types) - 1}, gathers excluded)")
            if types[v] != out.element_type:
                raise self.fail(f"yields[{n}]", f"value {v} is {types[v]} but outputs[{n}] is "
                                f"{out.element_type}")
        return Kernel(name, loop_ranges, dyn_loops, iterators, tile_size, inputs, outputs,
                      steps, step_names, yields, self.params, types, choose_plan=choose_plan,
                      step_attrs=step_attrs)

    # --- params and grid ---------------------------------------------------------------------

    def decode_params(self) -> list[tuple[str, str, int]]:
        k = self.kdef
        if _get(self.where + ": params", k.ParamsIsNone):
            return []
        count = _vector_length(self.buf, f"{self.where}: params", k.ParamsLength, 4)
        params, offset = [], 0
        for n in range(count):
            pdef = _get(f"{self.where}: params[{n}]", lambda: k.Params(n))
            pname = _string(f"{self.where}: params[{n}].name", pdef.Name) or ""
            ptype = _string(f"{self.where}: params[{n}].type", pdef.Type)
            if ptype not in PARAM_TYPES:
                raise self.fail(f"params[{n}].type", f"{ptype!r} is not one of "
                                f"{', '.join(PARAM_TYPES)}")
            size = storage_bytes(ptype, 1)
            offset = -(-offset // size) * size
            got = _get(f"{self.where}: params[{n}].offset", pdef.Offset)
            if got != offset:
                raise self.fail(f"params[{n}].offset", f"is {got}, expected {offset} (params "
                                "are laid out in order, each aligned to its size)")
            params.append((pname or f"param{n}", ptype, offset))
            offset += size
        return params

    def check_grid(self, nloops: int, loop_ranges: list[int], dyn_loops: list[int],
                   iterators: list[str], tile_size: int) -> None:
        """A declared grid, times tile_size, must cover every parallel point for every value of
        the dynamic extents: the host launches the grid's count, and a tile_size or divisor
        that leaves points uncovered would compute part of the output without a word."""
        grid = _get(self.where + ": grid", self.kdef.Grid)
        if grid is None:
            return
        axes: list[tuple[list[int], int]] = []
        for axis_name in ("X", "Y", "Z"):
            axis = _get(f"{self.where}: grid.{axis_name.lower()}", getattr(grid, axis_name))
            if axis is None:
                continue
            field = f"grid.{axis_name.lower()}"
            dims = self.int_vector(f"{field}.dims", axis.DimsIsNone, axis.DimsLength,
                                   axis.DimsAsNumpy, 4)
            if any(not 0 <= d < nloops for d in dims):
                raise self.fail(f"{field}.dims", f"{dims} names a loop outside [0, {nloops})")
            divisor = _get(f"{self.where}: {field}.divisor", axis.Divisor)
            if divisor < 1 and dims:
                raise self.fail(f"{field}.divisor", "must be >= 1")
            if dims:
                axes.append((dims, divisor))
        parallel = [j for j, t in enumerate(iterators) if t == "parallel"]
        if all(p < 0 for p in dyn_loops):
            total = math.prod(loop_ranges[j] for j in parallel)
            count = math.prod(-(-math.prod(loop_ranges[d] for d in dims) // divisor)
                              for dims, divisor in axes)
            if count * tile_size < total:
                raise self.fail("grid", f"launches {count} workgroup(s) of tile_size "
                                f"{tile_size}: {count * tile_size} of the {total} parallel "
                                "points")
            return
        named = {d for dims, _ in axes for d in dims}
        missing = [j for j in parallel if j not in named and (dyn_loops[j] >= 0
                                                                or loop_ranges[j] > 1)]
        if missing:
            raise self.fail("grid", f"no axis counts parallel loop(s) {missing}: the launch "
                            "does not grow with them")
        divisors = math.prod(divisor for _, divisor in axes)
        if divisors > tile_size:
            raise self.fail("grid", f"its divisors multiply to {divisors}, more than "
                            f"tile_size {tile_size}: some parallel points get no workgroup")

    def dynamic(self, field: str, is_none: Callable[[], bool], length: Callable[[], int],
                as_numpy: Callable[[], np.ndarray], count: int) -> list[int]:
        """A per-dimension list of -1 (static) or index-param positions; empty = all static."""
        values = self.int_vector(field, is_none, length, as_numpy, 4)
        if not values:
            return [-1] * count
        if len(values) != count:
            raise self.fail(field, f"has {len(values)} entries, expected {count}")
        for j, p in enumerate(values):
            if p < -1 or p >= len(self.params):
                raise self.fail(f"{field}[{j}]", f"param {p} does not exist "
                                f"({len(self.params)} params)")
            if p >= 0 and self.params[p][1] != "index":
                raise self.fail(f"{field}[{j}]", f"param {p} ({self.params[p][0]}) is "
                                f"{self.params[p][1]}, an extent must be an index param")
        return values

    # --- operands ----------------------------------------------------------------------------

    def operands(self, field: str, length: Callable[[], int], item: Callable[[int], OperandDef],
                 loop_ranges: list[int], static_loops: bool, iterators: list[str]
                 ) -> list[Operand]:
        count = _vector_length(self.buf, f"{self.where}: {field}", length, 4)
        result = []
        for n in range(count):
            odef = _get(f"{self.where}: {field}[{n}]", lambda: item(n))
            result.append(self.operand(f"{field}[{n}]", odef, loop_ranges, static_loops,
                                       iterators, field == "outputs"))
        return result

    def operand(self, field: str, odef: OperandDef, loop_ranges: list[int],
                static_loops: bool, iterators: list[str], is_output: bool) -> Operand:
        binding = _get(f"{self.where}: {field}.binding", odef.Binding)
        if binding >= MAX_BINDING:
            raise self.fail(f"{field}.binding", f"{binding} is out of range (< {MAX_BINDING})")
        etype = kernel_type(_string(f"{self.where}: {field}.element_type", odef.ElementType))
        if etype not in VALUE_TYPES:
            raise self.fail(f"{field}.element_type",
                            f"{etype!r} is not supported ({', '.join(VALUE_TYPES)}, index)")
        shape = self.int_vector(f"{field}.shape", odef.ShapeIsNone, odef.ShapeLength,
                                odef.ShapeAsNumpy, 8)
        dyn = self.dynamic(f"{field}.dynamic_dims", odef.DynamicDimsIsNone,
                           odef.DynamicDimsLength, odef.DynamicDimsAsNumpy, len(shape))
        for d, (extent, p) in enumerate(zip(shape, dyn)):
            if p >= 0:
                shape[d] = 0
            elif extent < 0:
                raise self.fail(f"{field}.shape[{d}]", f"is {extent}, expected >= 0")
        if math.prod(shape) > MAX_ELEMENTS:
            raise self.fail(f"{field}.shape", f"{shape} has more than 2**48 elements")
        label = field.replace("s[", " ").replace("]", "")  # "inputs[0]" -> "input 0"
        amap = _get(f"{self.where}: {field}.map", odef.Map)
        if amap is None:
            if is_output:
                raise self.fail(f"{field}.map", "is missing (only inputs may be gathers)")
            return Operand(label, binding, etype, tuple(shape), tuple(dyn), None)
        nloops = len(loop_ranges)
        num_dims = _get(f"{self.where}: {field}.map.num_dims", amap.NumDims)
        if num_dims != nloops:
            raise self.fail(f"{field}.map.num_dims",
                            f"is {num_dims}, expected {nloops} (the number of loops)")
        nsym = _get(f"{self.where}: {field}.map.num_symbols", amap.NumSymbols)
        if nsym not in (0, len(self.params)):
            raise self.fail(f"{field}.map.num_symbols", f"is {nsym}, expected 0 or "
                            f"{len(self.params)} (the number of params)")
        coeffs = self.int_vector(f"{field}.map.coefficients", amap.CoefficientsIsNone,
                                 amap.CoefficientsLength, amap.CoefficientsAsNumpy, 8)
        width = num_dims + nsym + 1
        if len(coeffs) != len(shape) * width:
            raise self.fail(f"{field}.map.coefficients",
                            f"has {len(coeffs)} entries, expected {len(shape) * width} "
                            f"({len(shape)} rows of {width})")
        if any(abs(c) > MAX_COEFFICIENT for c in coeffs):
            raise self.fail(f"{field}.map.coefficients", "has a coefficient beyond 2**40")
        rows = []
        for r in range(len(shape)):
            row = coeffs[r * width:(r + 1) * width]
            if nsym == 0:
                row = row[:-1] + [0] * len(self.params) + row[-1:]
            rows.append(tuple(row))
        if is_output:
            for r, coefficients in enumerate(rows):
                for j in range(nloops):
                    if coefficients[j] and iterators[j] == "reduction":
                        raise self.fail(f"{field}.map", f"row {r} uses loop {j}, a reduction "
                                        "loop (outputs are indexed by parallel loops only)")
        op = Operand(label, binding, etype, tuple(shape), tuple(dyn), tuple(rows))
        uses_symbols = any(any(row[nloops:-1]) for row in rows)
        if static_loops and op.is_static and not uses_symbols and math.prod(loop_ranges) > 0:
            bounds = map_bounds(op, loop_ranges, [0] * len(self.params))
            for r, (lo, hi, extent) in enumerate(bounds):
                if lo < 0 or hi >= extent:
                    raise self.fail(f"{field}.map", f"row {r} reaches indices [{lo}, {hi}] "
                                    f"outside dimension {r} of shape {shape}")
        return op

    # --- body --------------------------------------------------------------------------------

    def ops(self, types: list[str], num_loops: int, inputs: list[Operand], gathers: set[int]
            ) -> tuple[list[Step], list[str], list[OpAttrs | None]]:
        k = self.kdef
        count = _vector_length(self.buf, f"{self.where}: ops", k.OpsLength, 4)
        steps: list[Step] = []
        names: list[str] = []
        attrs: list[OpAttrs | None] = []
        for n in range(count):
            odef = _get(f"{self.where}: ops[{n}]", lambda: k.Ops(n))
            step, rtype, name, attr = self.op(n, odef, types, num_loops, inputs, gathers)
            steps.append(step)
            names.append(name)
            attrs.append(attr)
            types.append(rtype)
        return steps, names, attrs

    def op(self, n: int, odef: OpDef, types: list[str], num_loops: int, inputs: list[Operand],
           gathers: set[int]) -> tuple[Step, str, str, OpAttrs | None]:
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
            if v in gathers:
                raise self.fail(f"{field}.operands[{i}]", f"value {v} is gather input {v}, "
                                "which only tensor.extract may read")
        rtype = kernel_type(_string(f"{self.where}: {field}.result_type", odef.ResultType))
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
            return (STEP_INDEX, int_value, ()), I32, name, None
        if name == "kernel.param":
            if operands:
                raise self.fail(f"{field}.operands", "kernel.param takes no operands")
            if not 0 <= int_value < len(self.params):
                raise self.fail(f"{field}.int_value", f"param {int_value} does not exist "
                                f"({len(self.params)} params)")
            ptype = kernel_type(self.params[int_value][1])
            if rtype not in (None, ptype):
                raise self.fail(f"{field}.result_type", f"{rtype!r} should be {ptype}")
            return (STEP_PARAM, int_value, ()), ptype, name, None
        if name == "tensor.extract":
            if int_value not in gathers:
                raise self.fail(f"{field}.int_value", f"input {int_value} is not a gather "
                                "input (an input without a map)")
            source = inputs[int_value]
            if len(operands) != len(source.shape):
                raise self.fail(f"{field}.operands", f"has {len(operands)} indices for a "
                                f"rank-{len(source.shape)} input")
            for i, v in enumerate(operands):
                if types[v] != I32:
                    raise self.fail(f"{field}.operands[{i}]", f"index value {v} is {types[v]}, "
                                    "expected index")
            if rtype not in (None, source.element_type):
                raise self.fail(f"{field}.result_type",
                                f"{rtype!r} should be {source.element_type}")
            return (STEP_EXTRACT, int_value, tuple(operands)), source.element_type, name, None
        attrs = OpAttrs(name, rtype, predicate, int_value, float_value)
        try:
            fn, result = compile_op(attrs, [types[v] for v in operands])
        except OpError as e:
            raise self.fail(field, str(e)) from None
        return (STEP_OP, fn, tuple(operands)), result, name, attrs

    def int_vector(self, field: str, is_none: Callable[[], bool], length: Callable[[], int],
                   as_numpy: Callable[[], np.ndarray], elem_size: int) -> list[int]:
        """A scalar vector as Python ints (an absent vector is empty)."""
        where = f"{self.where}: {field}"
        if _get(where, is_none):
            return []
        _vector_length(self.buf, where, length, elem_size)
        return [int(x) for x in _get(where, as_numpy)]


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
