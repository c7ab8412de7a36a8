"""`check.*` test ops -> calls into the `check` native module (irtk/modules/check.py).

Each check waits for the device first (it reads data); tensors pass as buffer views with the
device, as IREE's check module takes them. `expect_almost_eq` without tolerances uses IREE's.
"""
from __future__ import annotations

from irtk.compiler import tir
from irtk.compiler.host_buffers import BufferLowering
from irtk.compiler.host_values import TensorVal
from irtk.vm.writer import Reg

DEFAULT_ATOL, DEFAULT_RTOL = 1e-4, 0.0


class CheckLowering(BufferLowering):
    def call_check(self, name: str, args: list[Reg]) -> None:
        self.b.emit("call.import", self.m.import_(name), args, [])

    def op_check_expect_true(self, op: tir.Op, name: str = "check.expect_true") -> None:
        v = self.get(op.operands[0])
        if isinstance(v, TensorVal):  # a 0-d tensor of i1
            raise self.error(op, f"{name} takes a scalar")
        self.sync()
        self.call_check(name, [v])

    def op_check_expect_false(self, op: tir.Op) -> None:
        self.op_check_expect_true(op, "check.expect_false")

    def op_check_expect_all_true(self, op: tir.Op) -> None:
        (view,) = self.pass_values(op.operands[:1])
        self.sync()
        self.call_check("check.expect_all_true", [self.device(), view])

    def op_check_expect_eq(self, op: tir.Op) -> None:
        lhs, rhs = self.pass_values(op.operands[:2])
        self.sync()
        self.call_check("check.expect_eq", [self.device(), lhs, rhs])

    def op_check_expect_almost_eq(self, op: tir.Op) -> None:
        lhs, rhs = self.pass_values(op.operands[:2])
        self.sync()
        atol = op.attrs.get("atol")
        rtol = op.attrs.get("rtol")
        self.call_check("check.expect_almost_eq", [
            self.device(), lhs, rhs,
            self.const("f32", DEFAULT_ATOL if atol is None else atol),
            self.const("f32", DEFAULT_RTOL if rtol is None else rtol)])
