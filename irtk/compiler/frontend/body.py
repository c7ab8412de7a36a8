"""Building `generic` bodies in the kernel IR's value numbering (irtk/compiler/kernel.py).

`Body` is the scalar program of one generic: block arguments first (inputs, then outputs), then
one value per op. The importer's named-op and tensor-op lowerings write bodies directly; MLIR
`linalg.generic` regions are translated op by op by `body_ops.translate_block`.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from xdsl.ir import Operation

from irtk.compiler import kernel
from irtk.types import SCALAR_TYPES


class Unsupported(Exception):
    """Something the importer cannot lower; `op` locates it (an xDSL op, or None)."""

    def __init__(self, message: str, op: Operation | None = None) -> None:
        super().__init__(message)
        self.op = op


def is_float(t: str) -> bool:
    return SCALAR_TYPES[t].is_float


def is_int(t: str) -> bool:
    return SCALAR_TYPES[t].is_int


def bit_width(t: str) -> int:
    """Value bits, with index at its host width (64)."""
    return 64 if t == "index" else SCALAR_TYPES[t].bits


@dataclass
class Body:
    """One generic's body under construction."""

    num_inputs: int
    num_outputs: int
    ops: list[kernel.Op] = field(default_factory=list)
    # cf.asserts of the body that may fire: (condition value, message, location). Constant
    # evaluation checks them at compile time; a generic that keeps one is refused (consteval.py).
    asserts: list[tuple[int, str, str]] = field(default_factory=list)
    _params: dict[int, int] = field(default_factory=dict)

    @property
    def base(self) -> int:
        return self.num_inputs + self.num_outputs

    def arg(self, i: int) -> int:
        return i

    def out(self, i: int) -> int:
        return self.num_inputs + i

    def add(self, name: str, operands: Iterable[int], result_type: str, predicate: str = "",
            int_value: int = 0, float_value: float = 0.0) -> int:
        self.ops.append(kernel.Op(name, tuple(operands), result_type, predicate, int_value,
                                  float_value))
        return self.base + len(self.ops) - 1

    def const(self, value: float | int, t: str) -> int:
        if is_float(t):
            return self.add("arith.constant", (), t, float_value=float(value))
        return self.add("arith.constant", (), t, int_value=int(value))

    def index(self, dim: int) -> int:
        return self.add("linalg.index", (), "index", int_value=dim)

    def param(self, k: int, t: str) -> int:
        """The value of capture k (one kernel.param op per capture)."""
        if k not in self._params:
            self._params[k] = self.add("kernel.param", (), t, int_value=k)
        return self._params[k]

    def extract(self, input_pos: int, indices: Iterable[int], t: str) -> int:
        return self.add("tensor.extract", indices, t, int_value=input_pos)

    def binary(self, kind: str, a: int, b: int, t: str) -> int:
        """add/sub/mul/max/min/div picked for the type (`kind` without suffix)."""
        return self.add(_BINARY[kind][0 if is_float(t) else 1], (a, b), t)

    def cast(self, v: int, src: str, dst: str, unsigned: bool = False) -> int:
        """linalg's element conversion (TypeFn cast_signed / cast_unsigned)."""
        if src == dst:
            return v
        if is_float(src) and is_float(dst):
            name = "arith.extf" if kernel_float_rank(dst) > kernel_float_rank(src) else "arith.truncf"
            return self.add(name, (v,), dst)
        if is_int(src) and is_float(dst):
            if src == "index":
                v, src = self.add("arith.index_cast", (v,), "i64"), "i64"
            return self.add("arith.uitofp" if unsigned or src == "i1" else "arith.sitofp", (v,), dst)
        if is_float(src) and is_int(dst):
            if dst == "index":
                v = self.add("arith.fptoui" if unsigned else "arith.fptosi", (v,), "i64")
                return self.add("arith.index_cast", (v,), "index")
            return self.add("arith.fptoui" if unsigned else "arith.fptosi", (v,), dst)
        if src == "index" or dst == "index":
            return self.add("arith.index_castui" if unsigned else "arith.index_cast", (v,), dst)
        if bit_width(dst) > bit_width(src):
            return self.add("arith.extui" if unsigned or src == "i1" else "arith.extsi", (v,), dst)
        return self.add("arith.trunci", (v,), dst)


_BINARY = {"add": ("arith.addf", "arith.addi"), "sub": ("arith.subf", "arith.subi"),
           "mul": ("arith.mulf", "arith.muli"), "div": ("arith.divf", "arith.divsi"),
           "max": ("arith.maximumf", "arith.maxsi"), "min": ("arith.minimumf", "arith.minsi")}

_FLOAT_RANK = {"f4E2M1FN": 1, "f8E4M3FN": 2, "f8E4M3FNUZ": 2, "f8E5M2": 2, "f8E5M2FNUZ": 2,
               "f8E8M0FNU": 2, "f16": 3, "bf16": 3, "f32": 4, "f64": 5}


def kernel_float_rank(t: str) -> int:
    return _FLOAT_RANK[t]
