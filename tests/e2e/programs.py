"""Elementwise test programs: MLIR text built from a scalar body, plus a numpy reference.

Each case is one linalg.generic over a 2-D iteration space whose body is written as MLIR scalar
ops; the reference computes the same thing in float64 (or exact integers).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass
class Case:
    name: str
    arg_types: list[str]          # element types of the inputs: "f32" / "i32"
    result_type: str
    body: str                     # MLIR ops over %a, %b, %c (inputs); yields %r
    reference: Callable[..., np.ndarray]
    domain: str = "any"           # input range: "any", "positive", "small", "shift"


def generic_program(case: Case, shape: tuple[int, ...]) -> str:
    rank = len(shape)
    dims = ", ".join(f"d{i}" for i in range(rank))
    idmap = f"affine_map<({dims}) -> ({dims})>"
    tensor = lambda et: f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{et}>"
    names = ["a", "b", "c"][: len(case.arg_types)]
    params = ", ".join(f"%{n}: {tensor(t)}" for n, t in zip(names, case.arg_types))
    ins = ", ".join(f"%{n}" for n in names)
    in_types = ", ".join(tensor(t) for t in case.arg_types)
    bargs = ", ".join(f"%{n}_s: {t}" for n, t in zip(names, case.arg_types))
    body = case.body
    for n in names:
        body = body.replace(f"%{n} ", f"%{n}_s ").replace(f"%{n},", f"%{n}_s,").replace(f"%{n}\n", f"%{n}_s\n")
    maps = ", ".join([idmap] * (len(names) + 1))
    iters = ", ".join(['"parallel"'] * rank)
    rt = tensor(case.result_type)
    return f"""func.func @main({params}) -> {rt} {{
  %init = tensor.empty() : {rt}
  %res = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iters}]}}
      ins({ins} : {in_types}) outs(%init : {rt}) {{
  ^bb0({bargs}, %out: {case.result_type}):
{body}
    linalg.yield %r : {case.result_type}
  }} -> {rt}
  return %res : {rt}
}}
"""


def random_input(rng: np.random.Generator, et: str, shape: tuple[int, ...], domain: str) -> np.ndarray:
    if et == "f32":
        if domain == "positive":
            x = rng.uniform(0.1, 10.0, shape)
        elif domain == "small":
            x = rng.uniform(-3.0, 3.0, shape)
        else:
            x = rng.uniform(-100.0, 100.0, shape)
        return x.astype(np.float32)
    if domain == "shift":
        return rng.integers(0, 32, shape, dtype=np.int32)
    if domain == "positive":
        return rng.integers(1, 1000, shape, dtype=np.int32)
    if domain == "nonzero":
        x = rng.integers(-(2**31), 2**31 - 1, shape, dtype=np.int32, endpoint=True)
        return np.where(x == 0, 7, x).astype(np.int32)
    return rng.integers(-(2**31), 2**31 - 1, shape, dtype=np.int32, endpoint=True)


def _f(x):
    return np.asarray(x, dtype=np.float64)


def _wrap(x):
    return (np.asarray(x, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _tdiv(a, b):
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    q = np.abs(a) // np.abs(b)
    return _wrap(np.where((a < 0) != (b < 0), -q, q))


def _trem(a, b):
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    return _wrap(a - np.asarray(_tdiv(a, b), np.int64) * b)


def _fptosi(x):
    x = np.trunc(_f(x))
    return np.clip(x, -(2.0**31), 2.0**31 - 1).astype(np.int64).astype(np.int32)


CASES = [
    Case("addf", ["f32", "f32"], "f32", "    %r = arith.addf %a, %b : f32", lambda a, b: _f(a) + _f(b)),
    Case("subf", ["f32", "f32"], "f32", "    %r = arith.subf %a, %b : f32", lambda a, b: _f(a) - _f(b)),
    Case("mulf", ["f32", "f32"], "f32", "    %r = arith.mulf %a, %b : f32", lambda a, b: _f(a) * _f(b)),
    Case("divf", ["f32", "f32"], "f32", "    %r = arith.divf %a, %b : f32", lambda a, b: _f(a) / _f(b), "positive"),
    Case("remf", ["f32", "f32"], "f32", "    %r = arith.remf %a, %b : f32", lambda a, b: np.fmod(_f(a), _f(b)), "positive"),
    Case("negf", ["f32"], "f32", "    %r = arith.negf %a : f32", lambda a: -_f(a)),
    Case("maxmin_f", ["f32", "f32", "f32"], "f32",
         "    %m = arith.maximumf %a, %b : f32\n    %r = arith.minimumf %m, %c : f32",
         lambda a, b, c: np.minimum(np.maximum(_f(a), _f(b)), _f(c))),
    Case("cmp_select_f", ["f32", "f32"], "f32",
         "    %p = arith.cmpf olt, %a, %b : f32\n    %r = arith.select %p, %a, %b : f32",
         lambda a, b: np.where(_f(a) < _f(b), _f(a), _f(b))),
    Case("exp", ["f32"], "f32", "    %r = math.exp %a : f32", lambda a: np.exp(_f(a)), "small"),
    Case("log", ["f32"], "f32", "    %r = math.log %a : f32", lambda a: np.log(_f(a)), "positive"),
    Case("tanh", ["f32"], "f32", "    %r = math.tanh %a : f32", lambda a: np.tanh(_f(a)), "small"),
    Case("sqrt", ["f32"], "f32", "    %r = math.sqrt %a : f32", lambda a: np.sqrt(_f(a)), "positive"),
    Case("rsqrt", ["f32"], "f32", "    %r = math.rsqrt %a : f32", lambda a: 1 / np.sqrt(_f(a)), "positive"),
    Case("absf", ["f32"], "f32", "    %r = math.absf %a : f32", lambda a: np.abs(_f(a))),
    Case("floor_ceil", ["f32"], "f32",
         "    %f = math.floor %a : f32\n    %c1 = math.ceil %a : f32\n    %r = arith.addf %f, %c1 : f32",
         lambda a: np.floor(_f(a)) + np.ceil(_f(a))),
    Case("powf", ["f32", "f32"], "f32", "    %q = arith.constant 0.25 : f32\n    %e = arith.mulf %b, %q : f32\n    %r = math.powf %a, %e : f32",
         lambda a, b: _f(a) ** (_f(b) / 4), "positive"),
    Case("addi", ["i32", "i32"], "i32", "    %r = arith.addi %a, %b : i32", lambda a, b: _wrap(_f(a).astype(np.int64) + np.asarray(b, np.int64))),
    Case("subi_muli", ["i32", "i32"], "i32",
         "    %s = arith.subi %a, %b : i32\n    %r = arith.muli %s, %a : i32",
         lambda a, b: _wrap((np.asarray(a, np.int64) - np.asarray(b, np.int64)) * np.asarray(a, np.int64))),
    Case("divsi_remsi", ["i32", "i32"], "i32",
         "    %q = arith.divsi %a, %b : i32\n    %m = arith.remsi %a, %b : i32\n    %r = arith.xori %q, %m : i32",
         lambda a, b: _tdiv(a, b) ^ _trem(a, b), "nonzero"),
    Case("maxmin_i", ["i32", "i32", "i32"], "i32",
         "    %m = arith.maxsi %a, %b : i32\n    %r = arith.minsi %m, %c : i32",
         lambda a, b, c: np.minimum(np.maximum(a, b), c)),
    Case("andi_ori_xori", ["i32", "i32", "i32"], "i32",
         "    %x = arith.andi %a, %b : i32\n    %y = arith.ori %x, %c : i32\n    %r = arith.xori %y, %a : i32",
         lambda a, b, c: ((a & b) | c) ^ a),
    Case("shifts", ["i32", "i32"], "i32",
         "    %l = arith.shli %a, %b : i32\n    %s = arith.shrsi %a, %b : i32\n"
         "    %u = arith.shrui %a, %b : i32\n    %t = arith.xori %l, %s : i32\n    %r = arith.xori %t, %u : i32",
         lambda a, b: _wrap(np.asarray(a, np.int64) << b) ^ (a >> b) ^ (a.view(np.uint32) >> b.view(np.uint32)).view(np.int32),
         "shift"),
    Case("cmp_select_i", ["i32", "i32"], "i32",
         "    %p = arith.cmpi sgt, %a, %b : i32\n    %n = arith.subi %a, %b : i32\n    %r = arith.select %p, %n, %b : i32",
         lambda a, b: np.where(a > b, _wrap(np.asarray(a, np.int64) - b), b)),
    Case("sitofp", ["i32"], "f32", "    %r = arith.sitofp %a : i32 to f32", lambda a: _f(a).astype(np.float32)),
    Case("fptosi", ["f32"], "i32", "    %r = arith.fptosi %a : f32 to i32", lambda a: _fptosi(a)),
    Case("absi", ["i32"], "i32", "    %r = math.absi %a : i32", lambda a: _wrap(np.abs(np.asarray(a, np.int64)))),
]
