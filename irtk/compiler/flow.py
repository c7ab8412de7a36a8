"""Dispatch formation: a `func.func` on tensors -> a host program of dispatches.

Each `linalg.generic` becomes one dispatch whose kernel (irtk.compiler.kernel) holds the generic's
loop nest, operand maps and scalar body. Scalar constants defined outside a generic and used in
its body are cloned into the kernel. Everything the skeleton does not yet lower is rejected here
with the op's source location, so no later phase sees it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.dialects import arith, func, tensor
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.builtin import (FloatAttr, IndexType,
                                   IntegerAttr, IntegerType, ModuleOp, TensorType)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr

from irtk.compiler.frontend import SourceMap
from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand, element_byte_size
from irtk.errors import CompileError

TENSOR_ELEMENT_TYPES = ("f32", "i32")

# Body ops the kernel IR carries, by MLIR name.
BODY_OPS = frozenset("""
arith.constant arith.addf arith.subf arith.mulf arith.divf arith.remf arith.negf
arith.addi arith.subi arith.muli arith.divsi arith.divui arith.remsi arith.remui
arith.maximumf arith.minimumf arith.maxnumf arith.minnumf arith.maxsi arith.minsi arith.maxui
arith.minui arith.andi arith.ori arith.xori arith.shli arith.shrsi arith.shrui arith.cmpf
arith.cmpi arith.select arith.sitofp arith.uitofp arith.fptosi arith.fptoui arith.extui
arith.extsi arith.trunci arith.bitcast arith.index_cast math.exp math.log math.tanh math.sqrt
math.rsqrt math.absf math.absi math.floor math.ceil math.powf linalg.index
""".split())


@dataclass(frozen=True)
class HostTensorType:
    shape: tuple[int, ...]
    element_type: str

    @property
    def byte_size(self) -> int:
        return math.prod(self.shape) * element_byte_size(self.element_type)

    def spelling(self) -> str:
        return "x".join([str(d) for d in self.shape] + [self.element_type])


@dataclass
class Value:
    """A tensor of the host program: a function argument, a dispatch result or an empty tensor."""

    id: int
    type: HostTensorType
    kind: str            # "arg", "result", "empty"
    index: int = 0       # argument number for "arg"


@dataclass
class Dispatch:
    kernel: Kernel
    inputs: list[Value]
    outputs: list[Value]
    location: str


@dataclass
class HostFunction:
    name: str
    args: list[Value]
    results: list[Value]
    dispatches: list[Dispatch] = field(default_factory=list)
    location: str = ""


@dataclass
class Program:
    functions: list[HostFunction]


def form_dispatches(module: ModuleOp, source: SourceMap) -> Program:
    return _Former(source).run(module)


class _Former:
    def __init__(self, source: SourceMap) -> None:
        self.source = source
        self.next_value = 0
        self.kernel_names: set[str] = set()

    def error(self, op: Operation, message: str) -> CompileError:
        return CompileError(self.source.error(op, message))

    def run(self, module: ModuleOp) -> Program:
        functions = []
        for op in module.ops:
            if isinstance(op, func.FuncOp):
                if op.sym_visibility is not None and op.sym_visibility.data == "private":
                    if not op.body.blocks:
                        raise self.error(op, f"external function '@{op.sym_name.data}' is not supported")
                    continue
                functions.append(self.function(op))
            else:
                raise self.error(op, f"unsupported top-level op '{op.name}'")
        if not functions:
            raise CompileError(f"{self.source.filename}:1:1: error: no public func.func to compile")
        return Program(functions)

    def new_value(self, ty: HostTensorType, kind: str, index: int = 0) -> Value:
        self.next_value += 1
        return Value(self.next_value, ty, kind, index)

    def function(self, f: func.FuncOp) -> HostFunction:
        name = f.sym_name.data
        if len(f.body.blocks) != 1:
            raise self.error(f, f"function '@{name}' has control flow, which is not supported yet")
        block = f.body.blocks[0]
        values: dict[SSAValue, Value] = {}
        args = []
        for i, arg in enumerate(block.args):
            v = self.new_value(self.tensor_type(arg.type, f, f"argument {i} of '@{name}'"), "arg", i)
            values[arg] = v
            args.append(v)
        hf = HostFunction(name, args, [], location=self.source.location(f))
        for op in block.ops:
            if isinstance(op, func.ReturnOp):
                for i, operand in enumerate(op.arguments):
                    if operand not in values:
                        raise self.error(op, f"result {i} of '@{name}' is not a tensor computed "
                                             "by the function")
                    hf.results.append(values[operand])
            elif isinstance(op, tensor.EmptyOp):
                if op.dynamic_sizes:
                    raise self.error(op, "dynamic shapes are not supported yet")
                values[op.tensor] = self.new_value(
                    self.tensor_type(op.tensor.type, op, "tensor.empty"), "empty")
            elif isinstance(op, linalg.GenericOp):
                hf.dispatches.append(self.generic(op, values, name, len(hf.dispatches)))
            elif isinstance(op, arith.ConstantOp) and not isinstance(op.result.type, TensorType):
                continue  # scalar constants are cloned into the kernels that use them
            else:
                raise self.error(op, f"unsupported op '{op.name}'")
        return hf

    def tensor_type(self, ty: Attribute, op: Operation, what: str) -> HostTensorType:
        if not isinstance(ty, TensorType):
            raise self.error(op, f"{what}: expected a tensor, got {ty}")
        shape = tuple(ty.get_shape())
        if any(d < 0 for d in shape):
            raise self.error(op, f"{what}: dynamic shapes are not supported yet ({ty})")
        et = scalar_type_name(ty.get_element_type())
        if et not in TENSOR_ELEMENT_TYPES:
            raise self.error(op, f"{what}: element type {ty.get_element_type()} is not supported "
                                 f"yet (supported: {', '.join(TENSOR_ELEMENT_TYPES)})")
        return HostTensorType(shape, et)

    def generic(self, op: linalg.GenericOp, values: dict[SSAValue, Value], fname: str,
                ordinal: int) -> Dispatch:
        iterators = [str(it.data.value) if hasattr(it.data, "value") else str(it.data)
                     for it in op.iterator_types.data]
        if any("parallel" not in it for it in iterators):
            raise self.error(op, "linalg.generic with reduction iterators is not supported yet")
        maps = [m.data for m in op.indexing_maps.data]
        num_loops = len(iterators)
        operands = list(op.inputs) + list(op.outputs)
        if len(maps) != len(operands):
            raise self.error(op, f"linalg.generic has {len(operands)} operands but {len(maps)} maps")
        for v in operands:
            if v not in values:
                raise self.error(op, "linalg.generic operands must be function arguments, "
                                     "tensor.empty or results of other generics")
        kmaps = [self.affine_map(m, num_loops, op) for m in maps]
        loop_ranges = self.loop_ranges(op, operands, kmaps, num_loops)

        block = op.body.blocks[0]
        n_in, n_out = len(op.inputs), len(op.outputs)
        # An output whose current value the body reads is bound as an extra input.
        in_values = [values[v] for v in op.inputs]
        in_maps = kmaps[:n_in]
        arg_value: dict[SSAValue, int] = {}
        for i in range(n_in):
            arg_value[block.args[i]] = i
        extra: list[tuple[int, int]] = []  # (output index, input slot)
        for j in range(n_out):
            barg = block.args[n_in + j]
            if barg.uses:
                extra.append((j, len(in_values)))
                in_values.append(values[op.outputs[j]])
                in_maps.append(kmaps[n_in + j])
        total_in = len(in_values)
        for j, slot in extra:
            arg_value[block.args[n_in + j]] = slot
        for j in range(n_out):
            arg_value.setdefault(block.args[n_in + j], total_in + j)

        inputs = [Operand(i, v.type.element_type, v.type.shape, m)
                  for i, (v, m) in enumerate(zip(in_values, in_maps))]
        out_values = []
        outputs = []
        for j, res in enumerate(op.res):
            ty = self.tensor_type(res.type, op, f"result {j}")
            outputs.append(Operand(total_in + j, ty.element_type, ty.shape, kmaps[n_in + j]))
            v = self.new_value(ty, "result")
            values[res] = v
            out_values.append(v)
        if len(op.res) != n_out:
            raise self.error(op, "linalg.generic on tensors must return one result per output")

        name = self.unique_name(f"{fname}_dispatch_{ordinal}_elementwise")
        kernel = Kernel(name, loop_ranges, inputs, outputs)
        self.body(op, block, kernel, arg_value, total_in + n_out)
        return Dispatch(kernel, in_values, out_values, self.source.location(op))

    def unique_name(self, base: str) -> str:
        name, n = base, 1
        while name in self.kernel_names:
            n += 1
            name = f"{base}_{n}"
        self.kernel_names.add(name)
        return name

    def affine_map(self, m, num_loops: int, op: Operation) -> AffineMap:
        if m.num_dims != num_loops or m.num_symbols:
            raise self.error(op, f"indexing map {m} does not match {num_loops} loops")
        rows = []
        for expr in m.results:
            coeffs = [0] * (num_loops + 1)
            self.flatten(expr, coeffs, 1, op)
            rows.append(tuple(coeffs))
        return AffineMap(num_loops, tuple(rows))

    def flatten(self, expr, coeffs: list[int], scale: int, op: Operation) -> None:
        """Accumulate `scale * expr` into coefficient form; only sums and constant multiples."""
        if isinstance(expr, AffineDimExpr):
            coeffs[expr.position] += scale
        elif isinstance(expr, AffineConstantExpr):
            coeffs[-1] += scale * expr.value
        elif isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Add:
            self.flatten(expr.lhs, coeffs, scale, op)
            self.flatten(expr.rhs, coeffs, scale, op)
        elif (isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Mul
              and isinstance(expr.rhs, AffineConstantExpr)):
            self.flatten(expr.lhs, coeffs, scale * expr.rhs.value, op)
        elif (isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Mul
              and isinstance(expr.lhs, AffineConstantExpr)):
            self.flatten(expr.rhs, coeffs, scale * expr.lhs.value, op)
        else:
            raise self.error(op, f"indexing map expression '{expr}' is not supported yet")

    def loop_ranges(self, op: Operation, operands: list[SSAValue], maps: list[AffineMap],
                    num_loops: int) -> tuple[int, ...]:
        ranges: list[int | None] = [None] * num_loops
        for v, m in zip(operands, maps):
            shape = tuple(v.type.get_shape())
            if len(shape) != len(m.rows):
                raise self.error(op, f"indexing map with {len(m.rows)} results for an operand "
                                     f"of rank {len(shape)}")
            for dim, row in zip(shape, m.rows):
                nz = [j for j, c in enumerate(row[:-1]) if c]
                if len(nz) == 1 and row[nz[0]] == 1 and row[-1] == 0 and ranges[nz[0]] is None:
                    ranges[nz[0]] = dim
        if any(r is None for r in ranges):
            raise self.error(op, "cannot infer the loop ranges from the indexing maps")
        final = tuple(int(r) for r in ranges)  # type: ignore[arg-type]
        for v, m in zip(operands, maps):
            shape = tuple(v.type.get_shape())
            for d, row in enumerate(m.rows):
                lo = row[-1] + sum(min(0, c * (n - 1)) for c, n in zip(row[:-1], final))
                hi = row[-1] + sum(max(0, c * (n - 1)) for c, n in zip(row[:-1], final))
                if math.prod(final) and (lo < 0 or hi >= shape[d]):
                    raise self.error(op, f"indexing map reads dimension {d} of a "
                                         f"{'x'.join(map(str, shape))} operand out of bounds")
        return final

    def body(self, op: linalg.GenericOp, block: Block, kernel: Kernel,
             arg_value: dict[SSAValue, int], first_op_value: int) -> None:
        ids: dict[SSAValue, int] = dict(arg_value)

        def value_id(v: SSAValue, user: Operation) -> int:
            if v in ids:
                return ids[v]
            owner = v.owner
            if isinstance(owner, arith.ConstantOp) and not isinstance(v.type, TensorType):
                ids[v] = self.emit(kernel, owner, [], first_op_value)
                return ids[v]
            raise self.error(user, "linalg.generic body uses a value defined outside it that "
                                   "is not a scalar constant")

        for bop in block.ops:
            if isinstance(bop, linalg.YieldOp):
                kernel.yields = [value_id(v, bop) for v in bop.operands]
                if len(kernel.yields) != len(kernel.outputs):
                    raise self.error(bop, "linalg.yield must yield one value per output")
                for j, (y, out) in enumerate(zip(kernel.yields, kernel.outputs)):
                    if kernel.value_type(y) != out.element_type:
                        raise self.error(bop, f"linalg.yield value {j} has type "
                                              f"{kernel.value_type(y)}, output is {out.element_type}")
                return
            if bop.name not in BODY_OPS:
                raise self.error(bop, f"unsupported op '{bop.name}' in linalg.generic body")
            operands = [value_id(v, bop) for v in bop.operands]
            ids[bop.results[0]] = self.emit(kernel, bop, operands, first_op_value)
        raise self.error(op, "linalg.generic body has no linalg.yield")

    def emit(self, kernel: Kernel, bop: Operation, operands: list[int], first: int) -> int:
        if len(bop.results) != 1:
            raise self.error(bop, f"'{bop.name}' must have one result")
        rtype = scalar_type_name(bop.results[0].type)
        if rtype == "index":
            rtype = "i32"
        if rtype not in ("i1", "i32", "f32"):
            raise self.error(bop, f"'{bop.name}': type {bop.results[0].type} is not supported yet")
        predicate, int_value, float_value = "", 0, 0.0
        if isinstance(bop, arith.ConstantOp):
            attr = bop.value
            if isinstance(attr, FloatAttr):
                float_value = float(attr.value.data)
            elif isinstance(attr, IntegerAttr):
                int_value = int(attr.value.data)
                if rtype == "i1":
                    int_value &= 1
            else:
                raise self.error(bop, f"unsupported constant {attr}")
        elif isinstance(bop, (arith.CmpfOp, arith.CmpiOp)):
            names = (arith.CMPF_COMPARISON_OPERATIONS if isinstance(bop, arith.CmpfOp)
                     else arith.CMPI_COMPARISON_OPERATIONS)
            predicate = names[bop.predicate.value.data]
        elif isinstance(bop, linalg.IndexOp):
            int_value = bop.dim.value.data
        for o in bop.operands:
            t = scalar_type_name(o.type)
            if t not in ("i1", "i32", "f32", "index"):
                raise self.error(bop, f"'{bop.name}': operand type {o.type} is not supported yet")
        kernel.ops.append(Op(bop.name, tuple(operands), rtype, predicate, int_value, float_value))
        return first + len(kernel.ops) - 1


def scalar_type_name(ty: Attribute) -> str:
    if isinstance(ty, IndexType):
        return "index"
    if isinstance(ty, IntegerType):
        return f"i{ty.width.data}"
    return str(ty)  # f16, bf16, f32, f64 print as their MLIR names
