"""Host lowering: one TIR function (after dispatch formation and buffer planning) -> VM code.

A tensor lives in registers as a !hal.buffer plus one i64 register per dynamic dim; a scalar in
the bank of its type (host_arith). `FunctionGen` combines the lowerings, one concern a module:
- host_function.py: the function under construction (registers, constants, calls);
- host_batching.py: device commands batched into segments, barriers, the fence chain;
- host_buffers.py: buffer sizes, allocation, fills, buffer views at function boundaries;
- host_dispatch.py: dispatch ops (output buffers, extent checks, push constants, launches);
- host_elements.py: tensor.extract, decoding an element on the host;
- host_checks.py: check.* ops;
- host_control.py: scf.for / scf.while / scf.if as VM blocks and branches;
- host_arith.py: host scalar arithmetic;
and lowers here what is left: arguments and results, tensor metadata ops (reshape, cast, dim,
...), globals and calls. The module it goes into is reached through
module_context.ModuleContext.
"""
from __future__ import annotations

import numpy as np

from irtk.compiler import host_arith, tir
from irtk.compiler.host_buffers import element_type_code
from irtk.compiler.host_checks import CheckLowering
from irtk.compiler.host_control import ControlFlowLowering
from irtk.compiler.host_dispatch import DispatchLowering
from irtk.compiler.host_elements import ElementReads
from irtk.compiler.host_values import TensorVal
from irtk.compiler.module_context import ModuleContext
from irtk.compiler.stream import StreamPlan
from irtk.errors import CompileError
from irtk.hal.buffer_view import DENSE_ROW_MAJOR
from irtk.types import SCALAR_TYPES
from irtk.vm.calling_convention import format_banks
from irtk.vm.writer import FunctionBuilder, Reg


def cconv(arg_types: list[tir.Type], result_types: list[tir.Type]) -> str:
    """The VM calling convention of a function: tensors as refs (buffer views), scalars in
    the bank of their type."""
    def bank(t: tir.Type) -> str:
        return "ref" if isinstance(t, tir.TensorType) else SCALAR_TYPES[t.name].vm_bank
    return format_banks([bank(t) for t in arg_types], [bank(t) for t in result_types])


class FunctionGen(ElementReads, CheckLowering, DispatchLowering, ControlFlowLowering):
    def __init__(self, module: ModuleContext, function: tir.Function, plan: StreamPlan) -> None:
        super().__init__(module, function, plan)
        self.const_ints: dict[int, int] = {}   # value id -> a known index/i32/i64 constant

    # -- the function ----------------------------------------------------------------------
    def generate(self) -> FunctionBuilder:
        self.b.location(self.f.location)
        # Arguments arrive in the first registers of each bank, in order.
        regs = [self.new("ref" if isinstance(a.type, tir.TensorType)
                         else SCALAR_TYPES[a.type.name].vm_bank) for a in self.f.args]
        self.start_chain()
        for i, (a, r) in enumerate(zip(self.f.args, regs)):
            if isinstance(a.type, tir.TensorType):
                self.values[a.id] = self.argument(i, a, r)
            else:
                self.values[a.id] = r
        self.region(self.f.body)
        if not self.terminated:
            self.sync()
            self.b.emit("return", [])
        arg_banks = ["ref" if isinstance(a.type, tir.TensorType)
                     else SCALAR_TYPES[a.type.name].vm_bank for a in self.f.args]
        return self.b.allocate(arg_banks, self.f.location or f"@{self.f.name}")

    def argument(self, i: int, a: tir.Value, view: Reg) -> TensorVal:
        t = a.tensor_type
        where = f"{self.f.name}: argument {i}"
        et = self.const("i32", element_type_code(t.element_type))
        if not t.is_static:
            rank = self.new("i32")
            self.call("hal.buffer_view.rank", [view], [rank])
            ok = self.new("i32")
            self.b.emit("cmp.eq.i32", ok, rank, self.const("i32", len(t.shape)))
            self.fail_unless(ok, f"{where}: expected {_spell(t)}, got a tensor of another rank")
        tv = self.from_view(view, t, self.plan.storage.get(a.id, -1 - i))
        msg = self.string(where)
        self.call_variadic("hal.buffer_view.assert", [len(t.shape)],
                           [view, msg, et, self.const("i32", DENSE_ROW_MAJOR),
                            *[self.dim_reg(d) for d in tv.dims]], [])
        return tv

    def region(self, region: tir.Region) -> None:
        for op in region.ops:
            if self.terminated:
                raise self.error(op, "op after the end of its block")
            self.b.location(op.location) if op.location else None
            handler = getattr(self, "op_" + op.kind.replace(".", "_"), None)
            if handler is None:
                if op.kind.startswith(("arith.", "math.")):
                    handler = self.op_scalar
                else:
                    raise self.error(op, f"'{op.kind}' cannot be lowered to the host yet")
            try:
                handler(op)
            except CompileError as e:
                if ": error: " in str(e):
                    raise
                raise self.error(op, str(e)) from None

    # -- tensors -------------------------------------------------------------------------
    def op_constant(self, op: tir.Op) -> None:
        t = op.result.type
        if isinstance(t, tir.TensorType):
            buf = self.new("ref")
            global_ = self.m.constant_global(op)
            self.b.emit("global.load.ref", buf, global_)
            self.constant_buffers[buf] = global_
            self.constant_ops[op.result.id] = op
            dims: list[int | Reg] = list(t.shape_for(np.shape(op.attrs["value"])))
            self.values[op.result.id] = TensorVal(t, buf, dims, self.plan.storage[op.result.id])
        else:
            self.values[op.result.id] = self.scalar_const(t.name, op.attrs["value"])
            if SCALAR_TYPES[t.name].is_int and SCALAR_TYPES[t.name].bits >= 32:  # index, i32, i64
                self.const_ints[op.result.id] = int(op.attrs["value"])

    op_arith_constant = op_constant

    def op_empty(self, op: tir.Op) -> None:
        t = op.result.tensor_type
        dyn = iter(op.operands)
        dims: list[int | Reg] = [d if d is not None else self.scalar(next(dyn)) for d in t.shape]
        self.values[op.result.id] = TensorVal(t, None, dims, self.plan.storage[op.result.id])

    def alias(self, op: tir.Op, src: TensorVal, dims: list[int | Reg]) -> None:
        buf = self.buffer_of(src)
        self.values[op.result.id] = TensorVal(op.result.tensor_type, buf, dims, src.storage)

    def op_reshape(self, op: tir.Op) -> None:
        t = op.result.tensor_type
        dyn = iter(op.operands[1:])
        self.alias(op, self.tensor(op.operands[0]),
                   [d if d is not None else self.scalar(next(dyn)) for d in t.shape])

    def op_barrier(self, op: tir.Op) -> None:
        for v, r in zip(op.operands, op.results):
            self.values[r.id] = self.values[v.id]

    def op_tie_shape(self, op: tir.Op) -> None:
        src = self.tensor(op.operands[0])
        dyn = iter(op.operands[1:])
        self.alias(op, src, [d if d is not None else self.scalar(next(dyn))
                             for d in op.result.tensor_type.shape])

    def op_cast(self, op: tir.Op) -> None:
        src = self.tensor(op.operands[0])
        t = op.result.tensor_type
        dims: list[int | Reg] = []
        for i, (want, have) in enumerate(zip(t.shape, src.dims)):
            if want is not None and not isinstance(have, int):
                ok = self.new("i32")
                self.b.emit("cmp.eq.i64", ok, have, self.const("i64", want))
                self.fail_unless(ok, f"{op.location}: error: tensor.cast to {t.spelling()}: "
                                     f"dimension {i} is not {want}")
                dims.append(want)
            else:
                dims.append(have)
        self.alias(op, src, dims)

    def op_tensor_dim(self, op: tir.Op) -> None:
        tv = self.tensor(op.operands[0])
        index_def = self.constant_index(op.operands[1])
        if index_def is not None:
            self.values[op.result.id] = self.dim_reg(tv.dims[index_def])
            return
        idx = self.scalar(op.operands[1])
        r = self.new("i64")
        self.b.emit("mov.i64", r, self.dim_reg(tv.dims[0]))
        for i, d in enumerate(tv.dims[1:], 1):
            is_i = self.new("i32")
            self.b.emit("cmp.eq.i64", is_i, idx, self.const("i64", i))
            self.b.emit("select.i64", r, is_i, self.dim_reg(d), r)
        self.values[op.result.id] = r

    def constant_index(self, v: tir.Value) -> int | None:
        return self.const_ints.get(v.id)

    # -- scalars ---------------------------------------------------------------------------
    def op_scalar(self, op: tir.Op) -> None:
        args = [self.scalar(v) for v in op.operands]
        self.values[op.result.id] = host_arith.lower(
            self.b, self.new, op, args, lambda msg: self.error(op, msg))

    # -- globals, calls, return --------------------------------------------------------------
    def op_global_load(self, op: tir.Op) -> None:
        g = self.m.global_(op.attrs["name"], op)
        t = op.result.type
        if isinstance(t, tir.TensorType):
            view = self.new("ref")
            self.b.emit("global.load.ref", view, g)
            self.values[op.result.id] = self.from_view(view, t, self.plan.storage[op.result.id])
        else:
            bank = SCALAR_TYPES[t.name].vm_bank
            r = self.new(bank)
            self.b.emit(f"global.load.{bank}", r, g)
            self.values[op.result.id] = r

    def op_global_store(self, op: tir.Op) -> None:
        g = self.m.global_(op.attrs["name"], op)
        v = self.get(op.operands[0])
        if isinstance(v, TensorVal):
            self.b.emit("global.store.ref", g, self.view(v))
        else:
            self.b.emit(f"global.store.{v.bank}", g, v)

    def op_call(self, op: tir.Op) -> None:
        ordinal = self.m.function_ordinal(op.attrs["callee"], op)
        args = self.pass_values(op.operands)
        self.sync()
        results = [self.new("ref" if isinstance(v.type, tir.TensorType)
                            else SCALAR_TYPES[v.type.name].vm_bank) for v in op.results]
        self.b.emit("call", ordinal, args, results)
        self.receive(results, op.results)

    def op_return(self, op: tir.Op) -> None:
        regs = self.pass_values(op.operands)
        self.sync()
        self.b.emit("return", regs)
        self.terminated = True


def _spell(t: tir.TensorType) -> str:
    return "x".join(["?" if d is None else str(d) for d in t.shape] + [t.element_type])
