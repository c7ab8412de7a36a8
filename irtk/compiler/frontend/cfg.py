"""Unstructured control flow in a function body -> nested `scf.if` (TIR has no branches).

A `func.func` body may be a graph of blocks ending in `cf.br`, `cf.cond_br`, `cf.switch` or
`func.return`, with block arguments. The host lowering only knows structured control flow, so
the importer lifts such a body when the graph is acyclic:
- each `cf.cond_br` becomes an `scf.if` whose regions are the successor blocks inlined (block
  arguments replaced by the branch operands); a `cf.switch` becomes a chain of them, one
  `arith.cmpi eq` per case, the default last;
- where both arms meet again at the branching block's immediate post-dominator (a diamond),
  the `scf.if` yields that block's arguments and the lifting carries on after it, so a chain
  of diamonds stays linear in size;
- where the arms only meet at the function's exit, every path ends in its own `func.return`,
  which becomes the yield of the innermost `scf.if`; a block reached from several such paths
  is copied into each of them. Copies may add at most `MAX_DUPLICATED_OPS` ops in all.
A back edge (a loop) is refused at the branch that closes it: loops are written with
`scf.for` / `scf.while`. So is a use of a value whose block does not dominate the use (the
parser's dominance check treats the blocks of one region in text order only).
"""
from __future__ import annotations

import re
from typing import Callable, Sequence

from xdsl.dialects import cf, func
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue

from irtk.compiler import tir
from irtk.compiler.frontend.body import Unsupported
from irtk.compiler.frontend.convert import convert_type
from irtk.compiler.frontend.import_context import ImportContext

# Ops that join blocks copied into several paths may add to a lifted function, in all.
MAX_DUPLICATED_OPS = 10_000

EXIT = -1   # the virtual block every func.return leads to
_LABEL = re.compile(r"\^[A-Za-z0-9_$.-]+")

Arm = tuple[int, Sequence[SSAValue]]   # successor block index, branch operands


def is_unstructured(body: Region) -> bool:
    """Whether a function body needs lifting: several blocks, or a branch in its only one."""
    blocks = list(body.blocks)
    return len(blocks) > 1 or (bool(blocks) and blocks[0].last_op is not None
                               and blocks[0].last_op.name.startswith("cf."))


def lift_function(imp: ImportContext, body: Region,
                  result_types: list[tir.Type]) -> None:
    """Import the blocks of `body` into the region on top of `imp.region_stack` (whose
    arguments are already bound to the entry block's) as straight-line ops and nested
    scf.if, ending in one `return`."""
    lifter = _Lifter(imp, body, result_types)
    values = lifter.chain(0, EXIT)
    term = lifter.blocks[lifter.last_return].last_op if lifter.last_return >= 0 else None
    imp.emit("return", values, [], term)


def _successors(block: Block) -> tuple[Operation, list[tuple[Block, Sequence[SSAValue]]] | None]:
    """The block's terminator and its arms, (successor, branch operands) each (a cf.switch:
    the default first, then the cases in order); None for func.return."""
    term = block.last_op
    if isinstance(term, func.ReturnOp):
        return term, None
    if isinstance(term, cf.BranchOp):
        return term, [(term.successor, term.arguments)]
    if isinstance(term, cf.ConditionalBranchOp):
        return term, [(term.then_block, term.then_arguments),
                      (term.else_block, term.else_arguments)]
    if isinstance(term, cf.SwitchOp):
        return term, [(term.default_block, term.default_operands),
                      *zip(term.case_blocks, term.case_operand)]
    name = term.name if term is not None else "nothing"
    raise Unsupported(f"a block of a function body that ends with '{name}' is not supported: "
                      "blocks must end with cf.br, cf.cond_br, cf.switch or func.return",
                      term if term is not None else block.parent_op())


class _Lifter:
    """One function body's graph, its dominators and post-dominators, and the lifting."""

    def __init__(self, imp: ImportContext, body: Region,
                 result_types: list[tir.Type]) -> None:
        self.imp = imp
        self.result_types = result_types
        self.blocks = list(body.blocks)
        self.index = {id(b): i for i, b in enumerate(self.blocks)}
        self.terms: list[Operation] = []
        self.arms: list[list[Arm] | None] = []
        for b in self.blocks:
            term, arms = _successors(b)
            self.terms.append(term)
            self.arms.append(None if arms is None else
                             [(self.index[id(target)], ops) for target, ops in arms])
        self.order = self._topological_order()
        self._check_dominance()
        self.ipdom = self._post_dominators()
        self.size = [sum(1 for op in b.ops for _ in op.walk()) for b in self.blocks]
        self.copies = [0] * len(self.blocks)
        self.duplicated = 0
        self.last_return = -1

    # ---- names and messages --------------------------------------------------------------
    def label(self, i: int) -> str:
        """The block's label as written (`^bb2`), found just before its first op."""
        if i == 0:
            return "the entry block"
        first = self.blocks[i].first_op
        text = self.imp.source_map.text
        if first is not None:
            line, col = (int(x) for x in self.imp.loc(first).rsplit(":", 2)[1:])
            offset = 0
            for _ in range(line - 1):
                offset = text.index("\n", offset) + 1
            start = text.rfind("^", 0, offset + col - 1)
            m = _LABEL.match(text, start) if start >= 0 else None
            if m is not None:
                return m.group(0)
        return f"block #{i}"

    # ---- analysis --------------------------------------------------------------------------
    def _succ(self, i: int) -> list[int]:
        arms = self.arms[i]
        return list(dict.fromkeys(s for s, _ in arms)) if arms is not None else []

    def _topological_order(self) -> list[int]:
        """Reachable blocks, each before its successors; refuses a back edge."""
        state = [0] * len(self.blocks)     # 0 unseen, 1 on the path, 2 done
        post: list[int] = []
        stack: list[tuple[int, list[int]]] = [(0, self._succ(0))]
        state[0] = 1
        while stack:
            i, todo = stack[-1]
            if not todo:
                stack.pop()
                state[i] = 2
                post.append(i)
                continue
            s = todo.pop(0)
            if state[s] == 1:
                raise Unsupported(
                    f"control flow loops back from {self.label(i)} to {self.label(s)}: "
                    "branches in a function body must not form a loop; write loops with "
                    "scf.while or scf.for", self.terms[i])
            if state[s] == 0:
                state[s] = 1
                stack.append((s, self._succ(s)))
        return post[::-1]

    def _check_dominance(self) -> None:
        """Every value a reachable block uses comes from its own block or a dominating one."""
        preds: dict[int, list[int]] = {i: [] for i in self.order}
        for i in self.order:
            for s in self._succ(i):
                preds[s].append(i)
        dom: dict[int, set[int]] = {}
        for i in self.order:
            common = set.intersection(*(dom[p] for p in preds[i])) if preds[i] else set()
            dom[i] = common | {i}
        for i in self.order:
            for op in self.blocks[i].ops:
                for inner in op.walk():
                    for v in inner.operands:
                        block = v.block if isinstance(v, BlockArgument) else \
                            v.owner.parent_block()
                        d = self.index.get(id(block)) if block is not None else None
                        if d is not None and d not in dom[i]:
                            raise Unsupported(
                                f"'{inner.name}' uses a value of {self.label(d)}, which does "
                                f"not dominate {self.label(i)} (its definition is not on "
                                "every path to this use)", inner)

    def _post_dominators(self) -> dict[int, int]:
        """Each reachable block's immediate post-dominator (EXIT when paths only meet there)."""
        pdom: dict[int, frozenset[int]] = {EXIT: frozenset({EXIT})}
        for i in reversed(self.order):
            succ = self._succ(i) or [EXIT]
            pdom[i] = frozenset.intersection(*(pdom[s] for s in succ)) | {i}
        return {i: max(pdom[i] - {i}, key=lambda j: len(pdom[j])) for i in self.order}

    # ---- lifting ---------------------------------------------------------------------------
    def chain(self, i: int, stop: int) -> list[tir.Value]:
        """Inline blocks from `i` until a branch into `stop` (its operands are returned) or,
        when `stop` is EXIT, a func.return (its operands are returned)."""
        while True:
            self._count(i)
            block = self.blocks[i]
            for op in block.ops:
                if op is not self.terms[i]:
                    self.imp.op(op)
            term, arms = self.terms[i], self.arms[i]
            if arms is None:
                self.last_return = i
                values = [self.imp.value(v) for v in term.operands]
                self._check_types(values, self.result_types, term, "the function's results")
                return values
            if isinstance(term, cf.BranchOp) or (isinstance(term, cf.SwitchOp)
                                                 and not term.case_blocks):
                target, operands = arms[0]
                values = [self.imp.value(v) for v in operands]
                if target == stop:
                    self._check_types(values, self._arg_types(target), term,
                                      f"the arguments of {self.label(target)}")
                    return values
                self._enter(target, values, term)
                i = target
                continue
            join = self.ipdom[i]
            types = self.result_types if join == EXIT else self._arg_types(join)
            values = self._choose(self._cases(term, arms), arms[0] if isinstance(
                term, cf.SwitchOp) else arms[1], join, types, term)
            if join == stop:
                return values
            self._enter(join, values, term)
            i = join

    def _cases(self, term: Operation, arms: list[Arm]) -> list[tuple[Callable[[], tir.Value],
                                                                       Arm]]:
        """The (condition, arm) pairs tested in order before the default arm."""
        if isinstance(term, cf.ConditionalBranchOp):
            cond = self.imp.value(term.cond)
            return [(lambda: cond, arms[0])]
        assert isinstance(term, cf.SwitchOp) and term.case_values is not None
        flag = self.imp.value(term.flag)

        def equals(c: int) -> Callable[[], tir.Value]:
            def make() -> tir.Value:
                k = self.imp.emit("constant", [], [flag.type], term, value=c,
                                  unfoldable=False).result
                self.imp.constants[k.id] = c
                return self.imp.emit("arith.cmpi", [flag, k], [tir.ScalarType("i1")], term,
                                     predicate="eq").result
            return make
        values = [int(v) for v in term.case_values.get_values()]
        return [(equals(c), arm) for c, arm in zip(values, arms[1:])]

    def _choose(self, cases: list[tuple[Callable[[], tir.Value], Arm]], default: Arm, join: int,
                types: list[tir.Type], term: Operation) -> list[tir.Value]:
        """if cases[0] then its arm else (if cases[1] ... else default), yielding the values
        branched into `join` (the function's results when `join` is EXIT)."""
        if not cases:
            return self._arm(default, join, term)
        cond = cases[0][0]()
        top = self.imp.emit("scf.if", [cond], types, term)
        for build in (lambda: self._arm(cases[0][1], join, term),
                      lambda: self._choose(cases[1:], default, join, types, term)):
            region = tir.Region()
            self.imp.region_stack.append(region)
            values = build()
            self.imp.emit("scf.yield", values, [], term)
            self.imp.region_stack.pop()
            top.regions.append(region)
        return top.results

    def _arm(self, arm: Arm, join: int, term: Operation) -> list[tir.Value]:
        target, operands = arm
        values = [self.imp.value(v) for v in operands]
        if target == join:
            self._check_types(values, self._arg_types(target), term,
                              f"the arguments of {self.label(target)}")
            return values
        self._enter(target, values, term)
        return self.chain(target, join)

    def _enter(self, i: int, values: list[tir.Value], term: Operation) -> None:
        """Bind block `i`'s arguments to the branch operands."""
        self._check_types(values, self._arg_types(i), term, f"the arguments of {self.label(i)}")
        for arg, v in zip(self.blocks[i].args, values):
            self.imp.values[arg] = v

    def _arg_types(self, i: int) -> list[tir.Type]:
        return [convert_type(a.type, self.terms[i]) for a in self.blocks[i].args]

    def _check_types(self, values: list[tir.Value], types: list[tir.Type], op: Operation,
                     what: str) -> None:
        if len(values) != len(types):
            raise Unsupported(f"'{op.name}' passes {len(values)} value(s) to {what}, which "
                              f"take(s) {len(types)}", op)
        for n, (v, t) in enumerate(zip(values, types)):
            if v.type != t:
                raise Unsupported(f"'{op.name}' passes {v.type.spelling()} as value #{n} to "
                                  f"{what}, which is {t.spelling()}", op)

    def _count(self, i: int) -> None:
        """Count a block's copies; refuse the lifting past the duplication budget."""
        self.copies[i] += 1
        if self.copies[i] > 1:
            self.duplicated += self.size[i]
            if self.duplicated > MAX_DUPLICATED_OPS:
                raise Unsupported(
                    f"lifting this function's branches to scf.if copies blocks reached from "
                    f"several paths into more than {MAX_DUPLICATED_OPS} extra ops "
                    f"({self.label(i)} alone is copied {self.copies[i]} times); "
                    "join the paths in a block that post-dominates the branch, or write the "
                    "control flow with scf.if", self.blocks[i].first_op)
