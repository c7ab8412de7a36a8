"""TIR as MLIR-like text, for `irtk compile --dump-after=PHASE` and for reading test failures.

Generics and dispatches print their bodies as `linalg.generic` regions; a dispatch is a
`flow.dispatch` region holding its kernel, with its params, fills and (after buffer planning)
where each output lives.
"""
from __future__ import annotations

import numpy as np

from irtk.compiler import kernel as K
from irtk.compiler import tir
from irtk.compiler.stream import StreamPlan
from irtk.types import SCALAR_TYPES


def affine_text(m: K.AffineMap | None) -> str:
    if m is None:
        return "gather"
    dims = [f"d{i}" for i in range(m.num_dims)]
    results = []
    for row in m.rows:
        terms = []
        for j, c in enumerate(row[:m.num_dims]):
            if c:
                terms.append(dims[j] if c == 1 else f"d{j} * {c}")
        for s, c in enumerate(row[m.num_dims:-1]):
            if c:
                terms.append(f"s{s}" if c == 1 else f"s{s} * {c}")
        if row[-1] or not terms:
            terms.append(str(row[-1]))
        results.append(" + ".join(terms))
    return f"affine_map<({', '.join(dims)}) -> ({', '.join(results)})>"


def body_text(ops: list[K.Op], yields: list[int], n_in: int, n_out: int,
              arg_types: list[str], indent: str) -> list[str]:
    names = [f"%in{i}" for i in range(n_in)] + [f"%out{i}" for i in range(n_out)]
    lines = [f"{indent}^bb0(" + ", ".join(f"{n}: {t}" for n, t in zip(names, arg_types)) + "):"]
    for i, op in enumerate(ops):
        v = f"%v{n_in + n_out + i}"
        names.append(v)
        attrs = []
        if op.predicate:
            attrs.append(op.predicate)
        if op.name == "arith.constant":
            attrs.append(repr(op.float_value) if SCALAR_TYPES[op.result_type].is_float
                         else str(op.int_value))
        elif op.name in ("linalg.index", "kernel.param", "tensor.extract"):
            attrs.append(str(op.int_value))
        args = ", ".join(names[a] for a in op.operands)
        text = " ".join(x for x in (op.name, ", ".join(attrs), args) if x)
        lines.append(f"{indent}  {v} = {text} : {op.result_type}")
    lines.append(f"{indent}  linalg.yield " + ", ".join(names[y] for y in yields))
    return lines


class _Printer:
    def __init__(self, plan: StreamPlan | None) -> None:
        self.plan = plan
        self.lines: list[str] = []

    def value(self, v: tir.Value) -> str:
        return f"%{v.id}"

    def values(self, vs: list[tir.Value]) -> str:
        return ", ".join(self.value(v) for v in vs)

    def types(self, vs: list[tir.Value]) -> str:
        return ", ".join(v.type.spelling() for v in vs)

    def function(self, f: tir.Function) -> None:
        args = ", ".join(f"{self.value(a)}: {a.type.spelling()}" for a in f.args)
        results = ", ".join(t.spelling() for t in f.result_types)
        vis = "" if f.public else "private "
        self.lines.append(f"func.func {vis}@{f.name}({args}) -> ({results}) {{")
        self.region(f.body, "  ")
        self.lines.append("}")

    def region(self, region: tir.Region, indent: str) -> None:
        for op in region.ops:
            self.op(op, indent)

    def op(self, op: tir.Op, indent: str) -> None:
        lhs = f"{self.values(op.results)} = " if op.results else ""
        loc = f"  // {op.location}" if op.location else ""
        if op.kind == "generic":
            self.generic(op, indent, lhs, loc)
            return
        if op.kind == "dispatch":
            self.dispatch(op, indent, lhs, loc)
            return
        attrs = {k: v for k, v in op.attrs.items()}
        if op.kind == "constant":
            attrs["value"] = _value_text(attrs["value"])
        attr_text = (" {" + ", ".join(f"{k} = {v}" for k, v in attrs.items()) + "}") \
            if attrs else ""
        sig = f" : ({self.types(op.operands)}) -> ({self.types(op.results)})"
        self.lines.append(f"{indent}{lhs}{op.kind}({self.values(op.operands)}){attr_text}"
                          f"{sig}{loc}")
        for r in op.regions:
            args = ", ".join(f"{self.value(a)}: {a.type.spelling()}" for a in r.args)
            self.lines.append(f"{indent}  ^bb({args}):" if r.args else f"{indent}  ^bb:")
            self.region(r, indent + "    ")

    def generic(self, op: tir.Op, indent: str, lhs: str, loc: str) -> None:
        n_in = op.attrs["num_inputs"]
        n_cap = op.attrs.get("num_captures", 0)
        n_out = len(op.operands) - n_in - n_cap
        ins, outs = op.operands[:n_in], op.operands[n_in:n_in + n_out]
        caps = op.operands[n_in + n_out:]
        maps = ", ".join(affine_text(m) for m in op.attrs["maps"])
        iters = ", ".join(f'"{t}"' for t in op.attrs["iterator_types"])
        cap_text = f" captures({self.values(caps)})" if caps else ""
        self.lines.append(
            f"{indent}{lhs}linalg.generic {{indexing_maps = [{maps}], iterator_types = "
            f"[{iters}]}} ins({self.values(ins)} : {self.types(ins)}) outs({self.values(outs)}"
            f" : {self.types(outs)}){cap_text} {{{loc}")
        types = [v.tensor_type.element_type for v in ins + outs]
        self.lines += body_text(op.attrs["ops"], op.attrs["yields"], n_in, n_out, types,
                                indent + "  ")
        self.lines.append(f"{indent}}} -> {self.types(op.results)}")

    def dispatch(self, op: tir.Op, indent: str, lhs: str, loc: str) -> None:
        kern: K.Kernel = op.attrs["kernel"]
        n_in, n_out = op.attrs["num_inputs"], op.attrs["num_outputs"]
        ins = op.operands[:n_in]
        outs = op.operands[n_in:n_in + n_out]
        params = op.operands[n_in + n_out:]
        ptext = ", ".join(f"{p.name} = {self.value(v)}" for p, v in zip(kern.params, params))
        extra = []
        for k, fill in enumerate(op.attrs["fills"]):
            if fill is not None:
                extra.append(f"fill out{k} = {fill}")
        if self.plan is not None:
            for k in range(n_out):
                plan = self.plan.outputs.get((id(op), k))
                if plan is not None:
                    reuse = f" reusing storage {plan.reuse}" if plan.reuse is not None else ""
                    extra.append(f"out{k}: {plan.mode} in storage "
                                 f"{self.plan.storage.get(op.results[k].id)}{reuse}")
        extra_text = f" {{{'; '.join(extra)}}}" if extra else ""
        self.lines.append(
            f"{indent}{lhs}flow.dispatch @{kern.name}[{ptext}] ins({self.values(ins)} : "
            f"{self.types(ins)}) outs({self.values(outs)} : {self.types(outs)}){extra_text} "
            f"{{{loc}")
        maps = ", ".join(affine_text(o.map) for o in kern.inputs + kern.outputs)
        iters = ", ".join(f'"{t}"' for t in kern.iterator_types)
        ranges = ", ".join(str(r) for r in kern.loop_ranges)
        self.lines.append(f"{indent}  linalg.generic {{loop_ranges = [{ranges}], indexing_maps "
                          f"= [{maps}], iterator_types = [{iters}]}} {{")
        types = [o.element_type for o in kern.inputs + kern.outputs]
        self.lines += body_text(kern.ops, kern.yields, len(kern.inputs), len(kern.outputs),
                                types, indent + "    ")
        self.lines.append(f"{indent}  }}")
        self.lines.append(f"{indent}}} -> {self.types(op.results)}")


def _value_text(value: object) -> str:
    """A constant as `dense<...>`, long ones abbreviated."""
    arr = np.asarray(value)
    if arr.ndim == 0:
        return str(arr.item())
    if arr.size > 8:
        return f"dense<{arr.flat[0].item()}, ...> ({arr.size} elements)"
    return f"dense<{arr.tolist()}>"


def print_program(program: tir.Program, plans: dict[str, StreamPlan] | None = None) -> str:
    p = _Printer(None)
    for g in program.globals:
        mut = "mutable " if g.mutable else ""
        init = "" if g.initial is None else f" = {_value_text(g.initial)}"
        p.lines.append(f"util.global private {mut}@{g.name}{init} : {g.type.spelling()}")
    for f in program.functions:
        p.plan = plans.get(f.name) if plans else None
        p.function(f)
    for name, message in program.unsupported.items():
        p.lines.append(f"// @{name} is compiled to fail at run time: {message}")
    return "\n".join(p.lines) + "\n"
