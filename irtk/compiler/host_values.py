"""How host code holds a tensor at run time (shared by the host lowering modules)."""
from __future__ import annotations

from dataclasses import dataclass

from irtk.compiler import tir
from irtk.vm.writer import Reg


@dataclass
class TensorVal:
    """A tensor at run time: its buffer (None for a tensor.empty not yet materialized) and its
    dims (ints for static dims, i64 registers for dynamic ones)."""

    type: tir.TensorType
    buffer: Reg | None
    dims: list[int | Reg]
    storage: int
