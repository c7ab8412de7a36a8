"""MLIR (as parsed by xDSL) -> TIR (irtk/compiler/tir.py), normalizing on the way.

Every named linalg op and every tensor op that computes contents becomes one or more `generic`s
(named_ops.py, tensor_ops.py); host scalars stay host ops; constants become numpy arrays. A
function that uses something the importer cannot lower is recorded in `Program.unsupported`
with a located message, and the rest of the file still imports.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import arith, func, scf, tensor
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr, ModuleOp
from xdsl.ir import Attribute, Block, Operation, SSAValue

from irtk import body_ops
from irtk.compiler import kernel, tir
from irtk.compiler.frontend import cfg, named_ops, tensor_ops
from irtk.compiler.frontend.body import Body, Unsupported
from irtk.compiler.frontend.body_translation import (body_op_attrs, translate_block,
                                                     translate_scalar_op)
from irtk.compiler.frontend.convert import (affine_map, convert_tensor_type, convert_type,
                                            dense_array)
from irtk.compiler.frontend.dialects import check, flow, util
from irtk.compiler.frontend.dialects.linalg import GenericOp, NamedOp, PackOp, UnpackOp
from irtk.compiler.frontend.source_map import SourceMap

class FunctionImporter:
    """Imports one func.func; the named-op and tensor-op lowerings call back into it
    (import_context.ImportContext is what they may use)."""

    def __init__(self, program: "ProgramImporter", fn: func.FuncOp) -> None:
        self.program = program
        self.source_map = program.source_map
        self.fn = fn
        self.values: dict[SSAValue, tir.Value] = {}
        self.constants: dict[int, Any] = {}     # tir.Value.id -> folded scalar value
        self.region_stack: list[tir.Region] = []

    # ---- helpers for lowerings ----------------------------------------------------------
    def loc(self, op: Operation | None) -> str:
        return self.source_map.location(op)

    def value(self, v: SSAValue) -> tir.Value:
        found = self.values.get(v)
        if found is None:   # the verifier's dominance check makes this unreachable for ops
            raise Unsupported("a value is used where its definition is not visible", v.owner
                              if isinstance(v.owner, Operation) else None)
        return found

    def emit(self, kind: str, operands: Sequence[tir.Value], result_types: Sequence[tir.Type],
             op: Operation | None, **attrs: Any) -> tir.Op:
        top = tir.Op(kind, list(operands), [tir.Value(t) for t in result_types], dict(attrs),
                     [], self.loc(op))
        self.region_stack[-1].ops.append(top)
        return top

    def index_const(self, n: int, op: Operation | None) -> tir.Value:
        v = self.emit("constant", [], [tir.ScalarType("index")], op, value=int(n),
                      unfoldable=False).result
        self.constants[v.id] = int(n)
        return v

    def dims(self, v: tir.Value, op: Operation | None) -> list[int | tir.Value]:
        """Each dim of tensor `v`: an int if static, else a host tensor.dim value."""
        assert isinstance(v.type, tir.TensorType)
        out: list[int | tir.Value] = []
        for i, d in enumerate(v.type.shape):
            if d is not None:
                out.append(d)
            else:
                out.append(self.emit("tensor.dim", [v, self.index_const(i, op)],
                                     [tir.ScalarType("index")], op).result)
        return out

    def empty(self, dims: list[int | tir.Value], elt: str, op: Operation | None) -> tir.Value:
        shape = tuple(d if isinstance(d, int) else None for d in dims)
        dyn = [d for d in dims if not isinstance(d, int)]
        return self.emit("empty", dyn, [tir.TensorType(shape, elt)], op).result

    def index_value(self, d: int | tir.Value, op: Operation | None) -> tir.Value:
        return self.index_const(d, op) if isinstance(d, int) else d

    def host_arith(self, name: str, a: tir.Value, b: tir.Value, op: Operation | None) -> tir.Value:
        """A host index op, folded when both sides are known constants."""
        ca, cb = self.constants.get(a.id), self.constants.get(b.id)
        if ca is not None and cb is not None and name in _FOLD:
            try:
                return self.index_const(_FOLD[name](ca, cb), op)
            except ZeroDivisionError:
                pass
        return self.emit(name, [a, b], [tir.ScalarType("index")], op).result

    def capture(self, body: Body, captures: list[tir.Value], v: tir.Value) -> int:
        """A host scalar in a body: inlined if it is a folded constant, else a kernel.param."""
        assert isinstance(v.type, tir.ScalarType)
        if v.id in self.constants:
            return body.const(self.constants[v.id], v.type.name)
        for k, c in enumerate(captures):
            if c is v:
                return body.param(k, v.type.name)
        captures.append(v)
        return body.param(len(captures) - 1, v.type.name)

    def generic(self, inputs: list[tuple[tir.Value, kernel.AffineMap | None]],
                outputs: list[tuple[tir.Value, kernel.AffineMap]], iterator_types: Sequence[str],
                body: Body, yields: list[int], captures: list[tir.Value],
                op: Operation | None) -> list[tir.Value]:
        assert body.num_inputs == len(inputs) and body.num_outputs == len(outputs)
        top = self.emit("generic", [v for v, _ in inputs] + [v for v, _ in outputs] + captures,
                        [v.type for v, _ in outputs], op,
                        num_inputs=len(inputs), num_captures=len(captures),
                        maps=[m for _, m in inputs] + [m for _, m in outputs],
                        iterator_types=list(iterator_types), ops=list(body.ops),
                        yields=list(yields))
        if body.asserts:
            top.attrs["asserts"] = list(body.asserts)
        return top.results

    # ---- functions and regions ---------------------------------------------------------
    def run(self) -> tir.Function:
        fn = self.fn
        block = fn.body.blocks[0]
        args = []
        for a in block.args:
            args.append(tir.Value(convert_type(a.type, fn)))
            self.values[a] = args[-1]
        region = tir.Region(args)
        self.region_stack.append(region)
        result_types = [convert_type(t, fn) for t in fn.function_type.outputs.data]
        if cfg.is_unstructured(fn.body):
            cfg.lift_function(self, fn.body, result_types)
        else:
            for op in block.ops:
                self.op(op)
        self.region_stack.pop()
        return self._function(args, result_types, region)

    def signature(self) -> tir.Function:
        """The function with its arguments, results and visibility but no body: what a stub
        for a function that failed to import keeps."""
        args = [tir.Value(convert_type(a.type, self.fn)) for a in self.fn.body.blocks[0].args]
        result_types = [convert_type(t, self.fn) for t in self.fn.function_type.outputs.data]
        return self._function(args, result_types, tir.Region(args))

    def _function(self, args: list[tir.Value], result_types: list[tir.Type],
                  region: tir.Region) -> tir.Function:
        fn = self.fn
        visibility = fn.sym_visibility.data if fn.sym_visibility is not None else "public"
        return tir.Function(fn.sym_name.data, args, result_types, region,
                            public=visibility == "public", location=self.loc(fn))

    def region(self, block: Block) -> tir.Region:
        args = []
        for a in block.args:
            args.append(tir.Value(convert_type(a.type, block.parent_op())))
            self.values[a] = args[-1]
        region = tir.Region(args)
        self.region_stack.append(region)
        for op in block.ops:
            self.op(op)
        self.region_stack.pop()
        return region

    def bind(self, op: Operation, values: list[tir.Value]) -> None:
        for r, v in zip(op.results, values):
            self.values[r] = v

    # ---- one op --------------------------------------------------------------------------
    def op(self, op: Operation) -> None:
        name = op.name
        if isinstance(op, GenericOp):
            self.bind(op, self.linalg_generic(op))
        elif isinstance(op, NamedOp):
            self.bind(op, named_ops.lower(self, op))
        elif isinstance(op, PackOp):
            self.bind(op, [tensor_ops.pack(self, op)])
        elif isinstance(op, UnpackOp):
            self.bind(op, [tensor_ops.unpack(self, op)])
        elif (lowered := tensor_ops.lower(self, op)) is not None:
            self.bind(op, lowered)
        elif isinstance(op, arith.ConstantOp):
            self.constant(op, op.value, unfoldable=False)
        elif isinstance(op, util.UnfoldableConstantOp):
            self.constant(op, op.value, unfoldable=True)
        elif isinstance(op, flow.TensorDynamicConstantOp):
            t = convert_type(op.result.type, op)
            attr = self.dense(op.value, op)
            value = dense_array(attr, convert_tensor_type(attr.get_type(), op))
            self.bind(op, self.emit("constant", [], [t], op, value=value, unfoldable=True).results)
        elif isinstance(op, util.OptimizationBarrierOp):
            self.bind(op, self.emit("barrier", [self.value(v) for v in op.operands],
                                    [self.value(v).type for v in op.operands], op).results)
        elif isinstance(op, flow.TensorTieShapeOp):
            self.bind(op, self.emit("tie_shape", [self.value(v) for v in op.operands],
                                    [convert_type(op.result.type, op)], op).results)
        elif isinstance(op, flow.TensorBitCastOp):
            self.bind(op, [tensor_ops.flow_bitcast(self, op)])
        elif isinstance(op, util.GlobalLoadOp):
            self.bind(op, self.emit("global.load", [], [convert_type(op.result.type, op)], op,
                                    name=op.global_.root_reference.data).results)
        elif isinstance(op, util.GlobalStoreOp):
            self.emit("global.store", [self.value(op.value)], [], op,
                      name=op.global_.root_reference.data)
        elif isinstance(op, check._CheckOp):
            self.check(op)
        elif isinstance(op, func.CallOp):
            self.bind(op, self.emit("call", [self.value(v) for v in op.arguments],
                                    [convert_type(r.type, op) for r in op.results], op,
                                    callee=op.callee.root_reference.data).results)
        elif isinstance(op, func.ReturnOp):
            self.emit("return", [self.value(v) for v in op.operands], [], op)
        elif isinstance(op, (scf.YieldOp, scf.ConditionOp)):
            self.emit(name, [self.value(v) for v in op.operands], [], op)
        elif isinstance(op, scf.ForOp):
            top = self.emit("scf.for", [self.value(v) for v in op.operands],
                            [convert_type(r.type, op) for r in op.results], op)
            top.regions.append(self.region(op.body.blocks[0]))
            self.bind(op, top.results)
        elif isinstance(op, scf.IfOp):
            top = self.emit("scf.if", [self.value(op.cond)],
                            [convert_type(r.type, op) for r in op.results], op)
            for r in (op.true_region, op.false_region):
                top.regions.append(self.region(r.blocks[0]) if r.blocks else tir.Region())
            self.bind(op, top.results)
        elif isinstance(op, scf.WhileOp):
            top = self.emit("scf.while", [self.value(v) for v in op.arguments],
                            [convert_type(r.type, op) for r in op.results], op)
            top.regions.append(self.region(op.before_region.blocks[0]))
            top.regions.append(self.region(op.after_region.blocks[0]))
            self.bind(op, top.results)
        elif name.startswith(("arith.", "math.")):
            self.arith(op)
        elif name == "cf.assert":   # a runtime check: the call fails with the message
            msg = op.properties.get("msg") or op.attributes.get("msg")
            self.emit("cf.assert", [self.value(op.operands[0])], [], op,
                      message=getattr(msg, "data", ""))
        elif name.startswith("cf.") and op.successors:
            parent = op.parent_op()
            where = f"the region of '{parent.name}'" if parent is not None else "a region"
            raise Unsupported(f"'{name}' is supported only between the blocks of a function "
                              f"body, not inside {where}", op)
        else:
            raise Unsupported(f"unsupported op '{name}'", op)

    def constant(self, op: Operation, attr: Attribute, unfoldable: bool) -> None:
        t = convert_type(op.results[0].type, op)
        if isinstance(t, tir.TensorType):
            if not isinstance(attr, DenseIntOrFPElementsAttr):
                raise Unsupported(f"constant attribute {attr} is not supported", op)
            value: np.ndarray | float | int = dense_array(attr, t)
        elif isinstance(attr, FloatAttr):
            value = float(attr.value.data)
        elif isinstance(attr, IntegerAttr):
            value = int(attr.value.data)
        else:
            raise Unsupported(f"constant attribute {attr} is not supported", op)
        result = self.emit("constant", [], [t], op, value=value, unfoldable=unfoldable).result
        if not unfoldable and isinstance(t, tir.ScalarType):
            self.constants[result.id] = value
        self.values[op.results[0]] = result

    def check(self, op: check._CheckOp) -> None:
        lhs = self.value(op.operands[0])
        attrs: dict[str, Any] = {}
        if op.HAS_TOLERANCE:   # IREE's defaults: atol 1e-4, rtol 0
            for key, default in (("atol", 1e-4), ("rtol", 0.0)):
                given = op.attributes.get(key)   # a FloatAttr (verified)
                attrs[key] = float(given.value.data) if isinstance(given, FloatAttr) \
                    else default
        if op.HAS_CONST:
            attr = self.dense(op.attributes["value"], op)
            t = convert_tensor_type(attr.get_type(), op)
            rhs = self.emit("constant", [], [t], op, value=dense_array(attr, t),
                            unfoldable=False).result
            self.emit(op.name.removesuffix("_const"), [lhs, rhs], [], op, **attrs)
        else:
            self.emit(op.name, [self.value(v) for v in op.operands], [], op, **attrs)

    def dense(self, attr: Attribute, op: Operation) -> DenseIntOrFPElementsAttr:
        """`attr`, which must be a dense elements attribute (Unsupported if it is not)."""
        if not isinstance(attr, DenseIntOrFPElementsAttr):
            raise Unsupported(f"constant attribute {attr} is not supported", op)
        return attr

    def arith(self, op: Operation) -> None:
        """An arith/math op: on scalars a host op; on tensors an elementwise generic."""
        result_type = convert_type(op.results[0].type, op)
        operands = [self.value(v) for v in op.operands]
        if isinstance(result_type, tir.TensorType) or any(
                isinstance(v.type, tir.TensorType) for v in operands):
            self.bind(op, [self.elementwise(op, operands, result_type)])
            return
        if op.name not in body_ops.SCALAR_OPS:
            raise Unsupported(f"unsupported op '{op.name}' on host scalars", op)
        attrs = body_op_attrs(op)
        folded = self.fold(op.name, operands, attrs)
        if folded is not None:
            self.values[op.results[0]] = self.index_const(folded, op)
            return
        top = self.emit(op.name, operands, [result_type], op, **attrs)
        self.values[op.results[0]] = top.result

    def fold(self, name: str, operands: list[tir.Value], attrs: dict[str, Any]) -> int | None:
        """Fold index arithmetic on known constants (keeps static shapes static)."""
        if name not in _FOLD or not operands or any(
                v.id not in self.constants or v.type != tir.ScalarType("index") for v in operands):
            return None
        try:
            return _FOLD[name](*(self.constants[v.id] for v in operands))
        except ZeroDivisionError:   # left to run time, as MLIR leaves it undefined
            return None

    def elementwise(self, op: Operation, operands: list[tir.Value],
                    result_type: tir.Type) -> tir.Value:
        if not isinstance(result_type, tir.TensorType) or any(
                not isinstance(v.type, tir.TensorType) for v in operands):
            raise Unsupported(f"'{op.name}' mixes tensors and scalars", op)
        rank = len(result_type.shape)
        ident = kernel.AffineMap.identity(rank)
        source = next(v for v in operands if isinstance(v.type, tir.TensorType))
        dims = self.dims(source, op)
        init = self.empty(dims, result_type.element_type, op)
        body = Body(len(operands), 1)
        args = [body.arg(i) for i in range(len(operands))]
        types = [v.tensor_type.element_type for v in operands]
        result = translate_scalar_op(body, op, args, types, result_type.element_type)
        return self.generic([(v, ident) for v in operands], [(init, ident)],
                            ["parallel"] * rank, body, [result], [], op)[0]

    # ---- linalg.generic -----------------------------------------------------------------
    def linalg_generic(self, op: GenericOp) -> list[tir.Value]:
        maps = [affine_map(m.data, op) for m in op.indexing_maps]
        iterators = [t.data.value for t in op.iterator_types]
        if any(t not in kernel.ITERATOR_TYPES for t in iterators):
            raise Unsupported("only parallel and reduction iterators are supported", op)
        n_in = len(op.inputs)
        tensor_inputs: list[tuple[tir.Value, kernel.AffineMap | None]] = []
        scalar_inputs: dict[int, tir.Value] = {}
        for i, v in enumerate(op.inputs):
            value = self.value(v)
            if isinstance(value.type, tir.TensorType):
                tensor_inputs.append((value, maps[i]))
            else:
                scalar_inputs[i] = value
        block = op.body.blocks[0]
        # Tensors from outside the body that it reads with tensor.extract become gather inputs.
        gathers: list[SSAValue] = []
        for bop in block.walk():
            if isinstance(bop, tensor.ExtractOp) and bop.tensor not in block.args \
                    and bop.tensor not in gathers:
                gathers.append(bop.tensor)
        inputs = tensor_inputs + [(self.value(g), None) for g in gathers]
        outputs = [(self.value(v), maps[n_in + k]) for k, v in enumerate(op.outputs)]
        body = Body(len(inputs), len(outputs))
        captures: list[tir.Value] = []
        env: dict[SSAValue, int] = {}
        pos = 0
        for i in range(n_in):
            if i in scalar_inputs:
                env[block.args[i]] = self.capture(body, captures, scalar_inputs[i])
            else:
                env[block.args[i]] = body.arg(pos)
                pos += 1
        for k in range(len(outputs)):
            env[block.args[n_in + k]] = body.out(k)
        gather_pos = {g: len(tensor_inputs) + j for j, g in enumerate(gathers)}
        yields = translate_block(self, body, block, env, captures, gather_pos)
        return self.generic(inputs, outputs, iterators, body, yields, captures, op)


_FOLD: dict[str, Callable[[int, int], int]] = {
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.ceildivui": lambda a, b: -(-a // b), "arith.ceildivsi": lambda a, b: -(-a // b),
    "arith.divui": lambda a, b: a // b, "arith.floordivsi": lambda a, b: a // b,
    "arith.remui": lambda a, b: a % b, "arith.maxui": max, "arith.minui": min,
    "arith.maxsi": max, "arith.minsi": min}


class ProgramImporter:
    def __init__(self, module: ModuleOp, source_map: SourceMap, filename: str) -> None:
        self.module = module
        self.source_map = source_map
        self.filename = filename

    def run(self) -> tir.Program:
        program = tir.Program([], filename=self.filename)
        private: list[func.FuncOp] = []
        for op in self.module.ops:
            if isinstance(op, func.FuncOp):
                if not op.body.blocks:
                    continue   # an external declaration
                if op.sym_visibility is not None and op.sym_visibility.data != "public":
                    private.append(op)
                try:
                    program.functions.append(FunctionImporter(self, op).run())
                except Unsupported as e:
                    program.unsupported[op.sym_name.data] = self.source_map.error(e.op or op, str(e))
                    self._record_signature(program, op)
                except Exception as e:  # noqa: BLE001 - a bug must not take the file down
                    program.unsupported[op.sym_name.data] = self.source_map.error(
                        op, f"internal error importing this function: {type(e).__name__}: {e}")
            elif isinstance(op, util.GlobalOp):
                program.globals.append(self.global_(op))
            else:
                raise Unsupported(f"unsupported top-level op '{op.name}'", op)
        if not program.unsupported and not any(f.public for f in program.functions):
            # A module without exports could never be called: say so rather than write one.
            if not private:
                raise Unsupported("module has no function to compile: define a public "
                                  "func.func with a body (it becomes the module's export)",
                                  self.module)
            names = ", ".join(f"@{f.sym_name.data}" for f in private)
            raise Unsupported(f"module exports no function: {names} "
                              f"{'is' if len(private) == 1 else 'are'} private; make the "
                              "function to call public (drop 'private')", private[0])
        return program

    def _record_signature(self, program: tir.Program, op: func.FuncOp) -> None:
        """Keep a failed function's signature for its stub; a type that does not convert
        leaves the stub without one."""
        try:
            program.failed[op.sym_name.data] = FunctionImporter(self, op).signature()
        except Unsupported:
            pass

    def global_(self, op: util.GlobalOp) -> tir.Global:
        t = convert_type(op.type, op)
        initial: Any = None
        if op.initial_value is not None:
            attr = op.initial_value
            if isinstance(t, tir.TensorType) and isinstance(attr, DenseIntOrFPElementsAttr):
                initial = dense_array(attr, t)
            elif isinstance(attr, (IntegerAttr, FloatAttr)):
                initial = attr.value.data
            else:
                raise Unsupported(f"global initial value {attr} is not supported", op)
        return tir.Global(op.sym_name.data, t, initial, op.is_mutable is not None,
                          self.source_map.location(op))


def import_program(module: ModuleOp, source_map: SourceMap, filename: str) -> tir.Program:
    """Import every function of `module`; unsupported functions land in Program.unsupported.
    Raises irtk.CompileError for a problem outside any function (an unsupported global)."""
    from irtk.errors import CompileError
    try:
        return ProgramImporter(module, source_map, filename).run()
    except Unsupported as e:
        raise CompileError(source_map.error(e.op, str(e))) from None
