"""Register allocation for host functions: virtual registers -> the VM's register file.

Host lowering (host_function.py) takes a fresh register for every value it makes, so a function
of N scalar ops would name N registers; the VM encodes a register in 16 bits (65,536 a bank)
and a register-list entry (call arguments and results, `return`) in 13 (8,192). `VirtualBuilder`
records what lowering emits with registers numbered without limit; `allocate` then computes
which registers are live where (a backward dataflow over the blocks), gives every virtual
register a live interval (the hull of the points where it is defined or live) and assigns
registers per bank by linear scan, the lowest free one first, so that values whose lives do not
overlap share a register. The instructions are then replayed into a `FunctionBuilder`.

Within an instruction the operands are read before the results are written (the interpreter
and the fused runs of vm/fusion.py both work that way), so a result may take the register of
an operand that dies there. Registers live when the function starts keep their own register
for as long as they live: the arguments arrive in the first registers of each bank, in order,
and are the only such registers lowering makes.

A function that still needs more registers than the encoding has is a CompileError naming the
bank, how many registers it needs and the limit, located at the function.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

from irtk.errors import CompileError
from irtk.vm import isa
from irtk.vm.writer import FunctionBuilder, Label, Reg

MAX_REGISTERS = 0xFFFF + 1                  # a u16 register operand
MAX_LIST_REGISTERS = isa.REGS_MAX_INDEX + 1  # an entry of a `regs` list (13-bit index)

# Ops with two register lists: the first is read (arguments), the second written (results).
# Every other `regs` list is read (`return`, `discard.refs`).
_Var = tuple[str, int]   # (bank, virtual index)


class VirtualBuilder:
    """What host lowering needs of a FunctionBuilder (`emit`, `bind`, `location`), recording
    the instructions for `allocate` instead of encoding them."""

    def __init__(self) -> None:
        # ("op", isa.Op, operands, location) or ("label", Label)
        self.items: list[tuple[Any, ...]] = []
        self._pending_location: str | None = None
        self._last_op: isa.Op | None = None

    def location(self, text: str) -> None:
        self._pending_location = text

    def set_register_counts(self, **counts: int) -> None:
        """Counts come from allocation; accepted for FunctionBuilder's interface."""

    def bind(self, label: Label) -> None:
        # As FunctionBuilder.bind: a block that would fall through into the label ends in `br`.
        if self._last_op is not None and not self._last_op.is_terminator:
            self.emit("br", label)
        self.items.append(("label", label))

    def emit(self, op_name: str, *operands: Any) -> None:
        try:
            op = isa.lookup(op_name)
        except KeyError as e:
            raise ValueError(str(e.args[0])) from None
        if len(operands) != len(op.operands):
            raise ValueError(f"'{op.name}' takes {len(op.operands)} operands "
                             f"({op.operand_text}), got {len(operands)}")
        self.items.append(("op", op, operands, self._pending_location))
        self._pending_location = None
        self._last_op = op

    def allocate(self, arg_banks: list[str], where: str) -> FunctionBuilder:
        """The function with physical registers; `arg_banks` are the banks of its arguments
        (the first registers of each bank), `where` its location for errors. Dead code is
        dropped first (`eliminate_dead_code`)."""
        _, flow = _eliminate(self)
        return allocate(self, arg_banks, where, flow)


def _uses_defs(op: isa.Op, operands: tuple[Any, ...]) -> tuple[list[_Var], list[_Var]]:
    uses: list[_Var] = []
    defs: list[_Var] = []
    lists = [i for i, kind in enumerate(op.operands) if kind == "regs"]
    for i, (kind, value) in enumerate(zip(op.operands, operands)):
        if kind in isa.READ_KINDS:
            uses.append((value.bank, value.index))
        elif kind in isa.WRITE_KINDS:
            defs.append((value.bank, value.index))
        elif kind == "regs":
            target = defs if len(lists) == 2 and i == lists[1] else uses
            target.extend((r.bank, r.index) for r in value)
    return uses, defs


def _successors(op: isa.Op, operands: tuple[Any, ...]) -> list[Label]:
    out: list[Label] = []
    for kind, value in zip(op.operands, operands):
        if kind == "block":
            out.append(value)
        elif kind == "blocks":
            out.extend(value)
    return out


@dataclass
class _Flow:
    """The blocks of a recorded function and the registers live into and out of each."""

    ops: list[tuple[Any, ...]]
    uses_defs: list[tuple[list[_Var], list[_Var]]]
    starts: list[int]
    ends: list[int]
    live_in: list[set[_Var]]
    live_out: list[set[_Var]]


def _flow(vb: VirtualBuilder) -> _Flow:
    ops = [item for item in vb.items if item[0] == "op"]
    n = len(ops)
    uses_defs = [_uses_defs(item[1], item[2]) for item in ops]

    # Blocks: a label, the function's start and the instruction after a terminator start one.
    label_at: dict[int, int] = {}
    cut = {0}
    index = 0
    for item in vb.items:
        if item[0] == "label":
            label_at[id(item[1])] = index
            cut.add(index)
        else:
            index += 1
            if item[1].is_terminator:
                cut.add(index)
    starts = sorted(c for c in cut if c < n) or [0]
    ends = starts[1:] + [n]
    block_at = {s: b for b, s in enumerate(starts)}
    nblocks = len(starts)
    succs: list[list[int]] = []
    for b in range(nblocks):
        if ends[b] <= starts[b]:
            succs.append([])
            continue
        _, last_op, last_operands, _ = ops[ends[b] - 1]
        if last_op.is_terminator:
            targets = (label_at.get(id(label), n) for label in _successors(last_op, last_operands))
            succs.append([block_at[t] for t in targets if t in block_at])
        else:  # the last block may lack a terminator (FunctionBuilder leaves that to the verifier)
            succs.append([b + 1] if b + 1 < nblocks else [])

    # Per block: registers read before written (gen) and written (kill).
    gen: list[set[_Var]] = []
    kill: list[set[_Var]] = []
    for b in range(nblocks):
        g: set[_Var] = set()
        k: set[_Var] = set()
        for i in range(starts[b], ends[b]):
            uses, defs = uses_defs[i]
            g.update(u for u in uses if u not in k)
            k.update(defs)
        gen.append(g)
        kill.append(k)
    live_in: list[set[_Var]] = [set(g) for g in gen]
    live_out: list[set[_Var]] = [set() for _ in range(nblocks)]
    preds: list[list[int]] = [[] for _ in range(nblocks)]
    for b, ss in enumerate(succs):
        for s in ss:
            preds[s].append(b)
    work = list(range(nblocks))
    queued = [True] * nblocks
    while work:
        b = work.pop()
        queued[b] = False
        out: set[_Var] = set()
        for s in succs[b]:
            out |= live_in[s]
        live_out[b] = out
        new_in = gen[b] | (out - kill[b])
        if new_in != live_in[b]:
            live_in[b] = new_in
            for p in preds[b]:
                if not queued[p]:
                    queued[p] = True
                    work.append(p)
    return _Flow(ops, uses_defs, starts, ends, live_in, live_out)


def _removable(op: isa.Op) -> bool:
    """An op that only computes its results: no effect, and no way to fail (integer division
    and float-to-int casts can trap; `const.ref.null` is how lowering releases a ref early)."""
    name = op.name
    if name in _PURE_NAMES:
        return True
    return not name.startswith(_TRAPPING_PREFIXES) and name.startswith(_PURE_PREFIXES)


_PURE_NAMES = frozenset({"const.i32", "const.i64", "const.f32", "const.f64", "const.ref.rodata",
                         "mov.i32", "mov.i64", "mov.f32", "mov.f64", "mov.ref",
                         "cast.f32.f64", "cast.f64.f32"})
_TRAPPING_PREFIXES = ("div.s.", "div.u.", "rem.s.", "rem.u.", "cast.f32.", "cast.f64.")
_PURE_PREFIXES = ("global.load.", "select.", "add.", "sub.", "mul.", "div.f", "rem.f", "and.",
                  "or.", "xor.", "not.", "shl.", "shr.", "neg.", "abs.", "min.", "max.", "cmp.",
                  "ext.", "trunc.", "cast.", "bitcast.", "fma.", "exp.", "exp2.", "log.",
                  "log2.", "sqrt.", "rsqrt.", "tanh.", "sin.", "cos.", "pow.", "floor.", "ceil.",
                  "round.")


def eliminate_dead_code(vb: VirtualBuilder) -> int:
    """Drop the instructions whose results nothing reads and that have no other effect
    (`_removable`), until none is left; the count dropped. Lowering leaves such code where a
    later phase took over a value's use: the operands of dispatches that `__init` records
    once are still computed in the call (host_batching.py)."""
    return _eliminate(vb)[0]


def _eliminate(vb: VirtualBuilder) -> tuple[int, _Flow]:
    """`eliminate_dead_code`, and the flow of what is left (for `allocate`)."""
    dropped = 0
    while True:
        flow = _flow(vb)
        dead: set[int] = set()
        for b in range(len(flow.starts)):
            live = set(flow.live_out[b])
            for i in range(flow.ends[b] - 1, flow.starts[b] - 1, -1):
                uses, defs = flow.uses_defs[i]
                op = flow.ops[i][1]
                if defs and _removable(op) and not any(d in live for d in defs):
                    dead.add(i)
                    continue
                live.difference_update(defs)
                live.update(uses)
        if not dead:
            return dropped, flow
        dropped += len(dead)
        kept: list[tuple[Any, ...]] = []
        index = 0
        for item in vb.items:
            if item[0] == "op":
                index += 1
                if index - 1 in dead:
                    continue
            kept.append(item)
        vb.items = kept


def allocate(vb: VirtualBuilder, arg_banks: list[str], where: str,
             flow: _Flow | None = None) -> FunctionBuilder:
    """`vb` with physical registers; `flow` is `_flow(vb)` where the caller has it."""
    flow = flow or _flow(vb)
    ops, uses_defs = flow.ops, flow.uses_defs
    starts, ends, live_in, live_out = flow.starts, flow.ends, flow.live_in, flow.live_out
    nblocks = len(starts)

    # Live intervals over points: an instruction i reads at 2i and writes at 2i + 1.
    first: dict[_Var, int] = {}
    last: dict[_Var, int] = {}

    def cover(v: _Var, point: int) -> None:
        if v not in first or point < first[v]:
            first[v] = point
        if v not in last or point > last[v]:
            last[v] = point

    for b in range(nblocks):
        for v in live_in[b]:
            cover(v, 2 * starts[b])
        for v in live_out[b]:
            cover(v, 2 * ends[b] - 1)
    for i, (uses, defs) in enumerate(uses_defs):
        for v in uses:
            cover(v, 2 * i)
        for v in defs:
            cover(v, 2 * i + 1)
    entry = live_in[0] if nblocks else set()
    arg_index: dict[_Var, int] = {}
    seen = dict.fromkeys(isa.BANKS, 0)
    for bank in arg_banks:
        arg_index[(bank, seen[bank])] = seen[bank]
        seen[bank] += 1
    for v in arg_index:
        first[v] = -1            # arguments are written before the first instruction
        last.setdefault(v, -1)
    for v in entry:
        if v not in arg_index:   # read before written: keeps the zero value of a fresh frame
            first[v] = -1

    # Linear scan, per bank: lowest free register first; arguments take theirs in order.
    order = sorted(first, key=lambda v: (first[v], v not in arg_index, v[1]))
    expiring: dict[str, list[tuple[int, int]]] = {bank: [] for bank in isa.BANKS}
    free: dict[str, list[int]] = {bank: [] for bank in isa.BANKS}
    top = dict.fromkeys(isa.BANKS, 0)
    phys: dict[_Var, int] = {}
    for v in order:
        bank = v[0]
        start = first[v]
        active = expiring[bank]
        # A register whose value was last needed before this point is free here.
        while active and active[0][0] < start:
            heapq.heappush(free[bank], heapq.heappop(active)[1])
        if v in arg_index:
            r = arg_index[v]
            top[bank] = max(top[bank], r + 1)
        elif free[bank]:
            r = heapq.heappop(free[bank])
        else:
            r = top[bank]
            top[bank] += 1
        phys[v] = r
        heapq.heappush(active, (last[v], r))

    for bank in isa.BANKS:
        if top[bank] > MAX_REGISTERS:
            raise CompileError(
                f"{where}: error: function needs {top[bank]} {bank} registers at once, more "
                f"than the VM's {MAX_REGISTERS}; split it into smaller functions")

    def rename(r: Reg) -> Reg:
        return Reg(r.bank, phys[(r.bank, r.index)])

    fb = FunctionBuilder()
    for item in vb.items:
        if item[0] == "label":
            fb.bind(item[1])
            continue
        _, op, operands, loc = item
        new_operands: list[Any] = []
        for kind, value in zip(op.operands, operands):
            if kind in isa.READ_KINDS or kind in isa.WRITE_KINDS:
                value = rename(value)
            elif kind == "regs":
                value = [rename(r) for r in value]
                for r in value:
                    if r.index >= MAX_LIST_REGISTERS:
                        raise CompileError(
                            f"{loc or where}: error: '{op.name}' passes register {r.bank}:"
                            f"{r.index}, and a call or return can only pass the first "
                            f"{MAX_LIST_REGISTERS} registers of a bank: the function has too "
                            f"many values live at once; split it into smaller functions")
            new_operands.append(value)
        if loc is not None:
            fb.location(loc)
        fb.emit(op.name, *new_operands)
    counts = {bank: top[bank] for bank in isa.BANKS}
    fb.set_register_counts(**counts)
    return fb
