"""Structured control flow on the host: scf.if / scf.for / scf.while -> VM blocks and branches.

The values a region carries (iter_args, results, while's forwarded values) get fixed registers;
each branch into a block first moves the new values in, through temporaries, so a value may
move into a register another moved value comes from. The open command buffer segment is
submitted before every branch: a segment never spans blocks.
"""
from __future__ import annotations

from irtk.compiler import tir
from irtk.compiler.host_buffers import BufferLowering
from irtk.compiler.host_values import TensorVal
from irtk.types import SCALAR_TYPES
from irtk.vm.writer import Label, Reg

FAILED_PRECONDITION = 9   # IREE's status code for a failed assertion (vm.cond_fail)


class ControlFlowLowering(BufferLowering):
    def carried(self, values: list[tir.Value]) -> list[TensorVal | Reg]:
        """Fixed registers for values carried across blocks (region args, results)."""
        out: list[TensorVal | Reg] = []
        for v in values:
            if isinstance(v.type, tir.TensorType):
                dims = [d if d is not None else self.new("i64") for d in v.type.shape]
                out.append(TensorVal(v.type, self.new("ref"), dims, self.plan.storage.get(
                    v.id, -1)))
            else:
                out.append(self.new(SCALAR_TYPES[v.type.name].vm_bank))
        return out

    def op_cf_assert(self, op: tir.Op) -> None:
        """`cf.assert %cond, "msg"`: the call fails with the message (and where the assert is)
        when the condition is false, as IREE's `vm.cond_fail` does."""
        cond = self.scalar(op.operands[0])
        where = f"{op.location}: " if op.location else ""
        self.fail_unless(cond, f"{where}assertion failed: {op.attrs.get('message', '')}",
                         FAILED_PRECONDITION)

    def move(self, targets: list[TensorVal | Reg], sources: list[tir.Value]) -> None:
        """Parallel move: sources first into temporaries, so targets may be sources too."""
        temps: list[tuple[TensorVal | Reg, list[Reg]]] = []
        for t, s in zip(targets, sources):
            x = self.get(s)
            regs = []
            if isinstance(x, TensorVal):
                for r in [self.buffer_of(x)] + [d for d in x.dims if not isinstance(d, int)]:
                    tmp = self.new(r.bank)
                    self.b.emit(f"mov.{r.bank}", tmp, r)
                    regs.append(tmp)
            else:
                tmp = self.new(x.bank)
                self.b.emit(f"mov.{x.bank}", tmp, x)
                regs.append(tmp)
            temps.append((t, regs))
        for t, regs in temps:
            if isinstance(t, TensorVal):
                dsts = [self.buffer_of(t)] + [d for d in t.dims if not isinstance(d, int)]
            else:
                dsts = [t]
            for d, r in zip(dsts, regs):
                self.b.emit(f"mov.{d.bank}", d, r)

    def bind_values(self, values: list[tir.Value], regs: list[TensorVal | Reg]) -> None:
        for v, r in zip(values, regs):
            if isinstance(r, TensorVal):
                r = TensorVal(r.type, r.buffer, list(r.dims), self.plan.storage.get(v.id, -1))
            self.values[v.id] = r

    def region_with_yield(self, region: tir.Region, targets: list[TensorVal | Reg],
                          after: Label, terminator: str = "scf.yield") -> tir.Op:
        """Lower a region's ops; its terminator's operands move into `targets`, then br."""
        *body, term = region.ops
        if term.kind != terminator:
            raise self.error(term, f"region ends with '{term.kind}', expected '{terminator}'")
        self.region(tir.Region(region.args, body))
        return term

    def op_scf_if(self, op: tir.Op) -> None:
        cond = self.scalar(op.operands[0])
        self.flush()
        results = self.carried(op.results)
        then_l, else_l, join = Label(), Label(), Label()
        self.b.emit("cond_br", cond, then_l, else_l)
        self.terminated = True
        for label, region in zip((then_l, else_l), op.regions):
            self.bind(label)
            if region.ops:
                term = self.region_with_yield(region, results, join)
                self.flush()
                self.move(results, term.operands)
            self.br(join)
        self.bind(join)
        self.bind_values(op.results, results)

    def op_scf_for(self, op: tir.Op) -> None:
        lb, ub, step = (self.scalar(v) for v in op.operands[:3])
        inits = op.operands[3:]
        (body,) = op.regions
        self.flush()
        iv = self.new("i64")
        iters = self.carried(body.args[1:])
        self.b.emit("mov.i64", iv, lb)
        self.move(iters, inits)
        header, loop, done = Label(), Label(), Label()
        self.br(header)
        self.bind(header)
        more = self.new("i32")
        self.b.emit("cmp.lt.s.i64", more, iv, ub)
        self.b.emit("cond_br", more, loop, done)
        self.terminated = True
        self.bind(loop)
        self.values[body.args[0].id] = iv
        self.bind_values(body.args[1:], iters)
        term = self.region_with_yield(body, iters, header)
        self.flush()
        self.move(iters, term.operands)
        self.b.emit("add.i64", iv, iv, step)
        self.br(header)
        self.bind(done)
        self.bind_values(op.results, iters)

    def op_scf_while(self, op: tir.Op) -> None:
        before, after = op.regions
        self.flush()
        args = self.carried(before.args)
        self.move(args, op.operands)
        head, body_l, done = Label(), Label(), Label()
        self.br(head)
        self.bind(head)
        self.bind_values(before.args, args)
        term = self.region_with_yield(before, [], head, "scf.condition")
        cond = self.scalar(term.operands[0])
        forwarded = self.carried(op.results)
        self.flush()
        self.move(forwarded, term.operands[1:])
        self.b.emit("cond_br", cond, body_l, done)
        self.terminated = True
        self.bind(body_l)
        self.bind_values(after.args, forwarded)
        yterm = self.region_with_yield(after, args, head)
        self.flush()
        self.move(args, yterm.operands)
        self.br(head)
        self.bind(done)
        self.bind_values(op.results, forwarded)

