"""What the op lowerings ask of the function importer (importer.FunctionImporter).

The named-op, tensor-op and body lowerings and the CFG lifting build TIR through the importer
of the function they are in: its values, the region being filled, and helpers that emit host
ops and generics. They see it through this protocol, so none of them imports the importer
that dispatches to them.
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence

from xdsl.ir import Operation, SSAValue

from irtk.compiler import kernel, tir
from irtk.compiler.frontend.body import Body
from irtk.compiler.frontend.source_map import SourceMap


class ImportContext(Protocol):
    source_map: SourceMap
    values: dict[SSAValue, tir.Value]       # the MLIR values imported so far
    constants: dict[int, Any]               # tir.Value.id -> folded scalar value
    region_stack: list[tir.Region]          # the region ops are emitted into is the last

    def loc(self, op: Operation | None) -> str:
        """`file:line:col` of `op`."""
        ...

    def value(self, v: SSAValue) -> tir.Value:
        """The TIR value of MLIR value `v` (Unsupported if it is not visible)."""
        ...

    def op(self, op: Operation) -> None:
        """Import one op into the current region."""
        ...

    def emit(self, kind: str, operands: Sequence[tir.Value], result_types: Sequence[tir.Type],
             op: Operation | None, **attrs: Any) -> tir.Op:
        """Append a TIR op, located at `op`, to the current region."""
        ...

    def index_const(self, n: int, op: Operation | None) -> tir.Value:
        """A host index constant (known to folding)."""
        ...

    def index_value(self, d: int | tir.Value, op: Operation | None) -> tir.Value:
        """A host index value: `d` itself, or a constant of it."""
        ...

    def dims(self, v: tir.Value, op: Operation | None) -> list[int | tir.Value]:
        """Each dim of tensor `v`: an int if static, else a host tensor.dim value."""
        ...

    def empty(self, dims: list[int | tir.Value], elt: str, op: Operation | None) -> tir.Value:
        """A tensor.empty of those dims and element type."""
        ...

    def host_arith(self, name: str, a: tir.Value, b: tir.Value,
                   op: Operation | None) -> tir.Value:
        """A host index op, folded when both sides are known constants."""
        ...

    def capture(self, body: Body, captures: list[tir.Value], v: tir.Value) -> int:
        """A host scalar in a body: inlined if it is a folded constant, else a kernel.param."""
        ...

    def generic(self, inputs: list[tuple[tir.Value, kernel.AffineMap | None]],
                outputs: list[tuple[tir.Value, kernel.AffineMap]], iterator_types: Sequence[str],
                body: Body, yields: list[int], captures: list[tir.Value],
                op: Operation | None) -> list[tir.Value]:
        """A generic over `body`; its results."""
        ...
