"""Hand-built kernels for the codegen tests, and random inputs that suit each op."""
from __future__ import annotations

import numpy as np

from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand, Param
from irtk.types import is_float

INT_MIN, INT_MAX = np.iinfo(np.int32).min, np.iinfo(np.int32).max


def identity(rank: int) -> AffineMap:
    return AffineMap.identity(rank)


def projection(num_dims: int, dims: list[int]) -> AffineMap:
    """The map (d0, ..., dn-1) -> (d[dims[0]], d[dims[1]], ...): broadcasts and transposes."""
    return AffineMap(num_dims, tuple(tuple(1 if j == d else 0 for j in range(num_dims + 1))
                                     for d in dims))


def row_reduce(combiner: str, in_type: str, out_type: str, rows, cols,
               dynamic: bool = False) -> Kernel:
    """out[r] = combine(out[r], x[r, c]) over c (with `dynamic`, rows and cols are params)."""
    params: tuple[Param, ...] = ()
    if dynamic:
        params, rows, cols = (Param("R", "index"), Param("C", "index")), "R", "C"
    return Kernel(f"rows_{combiner[6:]}_{out_type}", (rows, cols),
                  [Operand(0, in_type, (rows, cols), identity(2))],
                  [Operand(1, out_type, (rows,), projection(2, [0]))],
                  [Op(combiner, (1, 0), out_type)], [2], ("parallel", "reduction"), params)


def multiply_accumulate(in_type: str, acc: str) -> list[Op]:
    """The body of acc += x * y over inputs 0 and 1 (value 2 is the accumulator), with x and y
    widened to `acc` first when `in_type` is narrower; its result is the last value."""
    ops: list[Op] = []
    x, y = 0, 1
    if in_type != acc:
        conv = "arith.extf" if is_float(acc) else "arith.extsi"
        ops += [Op(conv, (0,), acc), Op(conv, (1,), acc)]
        x, y = 3, 4
    add, mul = ("arith.addf", "arith.mulf") if is_float(acc) else ("arith.addi", "arith.muli")
    ops.append(Op(mul, (x, y), acc))
    ops.append(Op(add, (2, 2 + len(ops)), acc))
    return ops


def elementwise(name: str, shape: tuple[int, ...], in_types: list[str], out_types: list[str],
                ops: list[Op], yields: list[int],
                in_maps: list[AffineMap] | None = None,
                in_shapes: list[tuple[int, ...]] | None = None) -> Kernel:
    """A kernel over `shape` with identity-mapped outputs; inputs identity unless given."""
    rank = len(shape)
    in_maps = in_maps or [identity(rank)] * len(in_types)
    in_shapes = in_shapes or [shape] * len(in_types)
    inputs = [Operand(i, t, s, m) for i, (t, s, m) in enumerate(zip(in_types, in_shapes, in_maps))]
    outputs = [Operand(len(inputs) + i, t, shape, identity(rank)) for i, t in enumerate(out_types)]
    return Kernel(name, shape, inputs, outputs, ops, yields)


def single_op(name: str, in_types: list[str], out_type: str, shape: tuple[int, ...] = (1000,),
              **fields: object) -> Kernel:
    """out = op(in0, in1, ...); i1 operands arrive as i32 (trunci) and leave as i32 (extui),
    since i1 tensors are not supported as buffers."""
    n = len(in_types)
    ops: list[Op] = []
    args = []
    for i, t in enumerate(in_types):
        if t == "i1":
            ops.append(Op("arith.trunci", (i,), "i1"))
            args.append(n + 1 + len(ops) - 1)
        else:
            args.append(i)
    ops.append(Op(name, tuple(args), out_type, **fields))  # type: ignore[arg-type]
    result = n + len(ops)
    if out_type == "i1":
        ops.append(Op("arith.extui", (result,), "i32"))
        result += 1
    buffer_types = ["i32" if t == "i1" else t for t in in_types]
    return elementwise(name.replace(".", "_"), shape, buffer_types,
                       ["i32" if out_type == "i1" else out_type], ops, [result])


def random_input(rng: np.random.Generator, element_type: str, shape: tuple[int, ...],
                 kind: str = "any") -> np.ndarray:
    """Seeded data in a range where the op under test is accurate on every driver."""
    if element_type == "i32":
        if kind == "shift":
            return rng.integers(-4, 40, shape).astype(np.int32)
        if kind == "floatbits":  # patterns of normal floats (drivers may flush denormals)
            return rng.uniform(-4.0, 4.0, shape).astype(np.float32).view(np.int32)
        if kind == "small":
            return rng.integers(-50, 50, shape).astype(np.int32)
        values = rng.integers(INT_MIN, INT_MAX, shape, dtype=np.int64, endpoint=True)
        edges = np.array([0, 1, -1, 2, -2, 7, INT_MIN, INT_MAX, INT_MIN + 1, 31, 32])
        flat = values.reshape(-1)
        flat[:min(flat.size, edges.size)] = edges[:flat.size]
        return rng.permutation(flat).reshape(shape).astype(np.int32)
    if kind == "wide":  # beyond the i32 and u32 ranges as well as inside them
        values = rng.uniform(-6e9, 6e9, shape) * 10.0 ** rng.integers(-9, 1, shape)
        return values.astype(np.float32)
    if kind == "tanh":
        return np.concatenate([rng.uniform(-3, 3, shape[0] - shape[0] // 8),
                               rng.uniform(-100, 100, shape[0] // 8)]).astype(np.float32)
    if kind == "halves":
        halves = rng.integers(-20, 20, shape) * 0.5 + rng.choice([0, 0.25], shape)
        return halves.astype(np.float32)
    if kind == "exponent":
        return rng.uniform(-3.0, 3.0, shape).astype(np.float32)
    if kind == "integral":
        return rng.integers(-4, 5, shape).astype(np.float32)
    if kind == "positive":
        return rng.uniform(0.05, 8.0, shape).astype(np.float32)
    if kind == "nonzero":
        mags = rng.uniform(0.5, 4.0, shape)
        return (mags * rng.choice([-1.0, 1.0], shape)).astype(np.float32)
    if kind == "exp":
        return rng.uniform(-6.0, 6.0, shape).astype(np.float32)
    return rng.uniform(-4.0, 4.0, shape).astype(np.float32)


# (op, operand types, result type, input kinds for random_input, op fields): every op and
# signature the generator supports, each run on random data against the numpy reference.
OP_CASES: list[tuple[str, list[str], str, list[str], dict[str, object]]] = [
    *[(f"arith.{n}", ["f32", "f32"], "f32", ["any", "any"], {})
      for n in ("addf", "subf", "mulf", "maximumf", "minimumf", "maxnumf", "minnumf")],
    ("arith.divf", ["f32", "f32"], "f32", ["any", "nonzero"], {}),
    ("arith.remf", ["f32", "f32"], "f32", ["any", "nonzero"], {}),
    ("arith.negf", ["f32"], "f32", ["any"], {}),
    *[(f"arith.{n}", ["i32", "i32"], "i32", ["any", "any"], {})
      for n in ("addi", "subi", "muli", "divsi", "divui", "remsi", "remui", "maxsi", "minsi",
                "maxui", "minui", "andi", "ori", "xori")],
    *[(f"arith.{n}", ["i32", "i32"], "i32", ["small", "small"], {})
      for n in ("divsi", "remsi", "divui", "remui")],
    *[(f"arith.{n}", ["i32", "i32"], "i32", ["any", "shift"], {})
      for n in ("shli", "shrsi", "shrui")],
    *[(f"arith.{n}", ["i1", "i1"], "i1", ["any", "any"], {})
      for n in ("addi", "subi", "muli", "andi", "ori", "xori", "maxsi", "minsi", "maxui",
                "minui", "shli", "shrsi", "shrui")],
    *[("arith.cmpf", ["f32", "f32"], "i1", ["any", "any"], {"predicate": p})
      for p in ("oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult",
                "ule", "une", "uno", "true", "false")],
    *[("arith.cmpi", ["i32", "i32"], "i1", ["small", "small"], {"predicate": p})
      for p in ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")],
    *[("arith.cmpi", ["i1", "i1"], "i1", ["any", "any"], {"predicate": p})
      for p in ("eq", "slt", "ult", "sge")],
    ("arith.select", ["i1", "f32", "f32"], "f32", ["any", "any", "any"], {}),
    ("arith.select", ["i1", "i32", "i32"], "i32", ["any", "any", "any"], {}),
    ("arith.select", ["i1", "i1", "i1"], "i1", ["any", "any", "any"], {}),
    ("arith.sitofp", ["i32"], "f32", ["any"], {}),
    ("arith.uitofp", ["i32"], "f32", ["any"], {}),
    ("arith.sitofp", ["i1"], "f32", ["any"], {}),
    ("arith.uitofp", ["i1"], "f32", ["any"], {}),
    ("arith.fptosi", ["f32"], "i32", ["wide"], {}),
    ("arith.fptoui", ["f32"], "i32", ["wide"], {}),
    ("arith.extui", ["i1"], "i32", ["any"], {}),
    ("arith.extsi", ["i1"], "i32", ["any"], {}),
    ("arith.trunci", ["i32"], "i1", ["any"], {}),
    ("arith.bitcast", ["f32"], "i32", ["any"], {}),
    ("arith.bitcast", ["i32"], "f32", ["floatbits"], {}),
    ("arith.index_cast", ["i32"], "i32", ["any"], {}),
    ("math.exp", ["f32"], "f32", ["exp"], {}),
    ("math.exp2", ["f32"], "f32", ["exp"], {}),
    ("math.log", ["f32"], "f32", ["positive"], {}),
    ("math.log2", ["f32"], "f32", ["positive"], {}),
    ("math.tanh", ["f32"], "f32", ["tanh"], {}),
    ("math.sqrt", ["f32"], "f32", ["positive"], {}),
    ("math.rsqrt", ["f32"], "f32", ["positive"], {}),
    ("math.absf", ["f32"], "f32", ["any"], {}),
    ("math.absi", ["i32"], "i32", ["any"], {}),
    ("math.floor", ["f32"], "f32", ["any"], {}),
    ("math.ceil", ["f32"], "f32", ["any"], {}),
    ("math.trunc", ["f32"], "f32", ["any"], {}),
    ("math.roundeven", ["f32"], "f32", ["halves"], {}),
    ("math.copysign", ["f32", "f32"], "f32", ["any", "any"], {}),
    ("math.fma", ["f32", "f32", "f32"], "f32", ["any", "any", "any"], {}),
    ("math.powf", ["f32", "f32"], "f32", ["positive", "exponent"], {}),
    ("math.powf", ["f32", "f32"], "f32", ["any", "integral"], {}),
]


def case_id(case: tuple[str, list[str], str, list[str], dict[str, object]]) -> str:
    name, ins, out, kinds, fields = case
    extra = f"-{fields['predicate']}" if "predicate" in fields else ""
    return f"{name}{extra}-{','.join(ins)}->{out}-{','.join(kinds)}"
