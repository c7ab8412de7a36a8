"""Code generators: dispatch kernels -> device executables, one subpackage or module per target.

Each provides a `Codegen`, which `irtk/compiler/target_backends.py` names for its target; the
compiler driver imports a code generator only when its target is compiled. Codegen never talks
to a device: it only reads kernels and target profiles.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from irtk.compiler.kernel import Grid, Kernel

# How many workgroups a kernel launches: a static count, or the rule the host program evaluates
# once the loop extents are known.
Launch = tuple[int, int, int] | Grid


class Codegen(ABC):
    """A target's code generator, as the compiler driver calls it: every kernel on its own first
    (a kernel the target cannot compile fails only the function holding it), then all of the
    module's kernels packed into one executable."""

    @abstractmethod
    def compile_kernel(self, kernel: Kernel, profile: Any) -> Any:
        """`kernel` compiled for `profile` (None for a target without profiles); raises an
        `irtk.Error` (CompileError) naming what the target cannot do."""

    @abstractmethod
    def pack_executable(self, kernels: Sequence[Kernel], compiled: Sequence[Any],
                        profile: Any) -> tuple[bytes, list[Launch]]:
        """The executable of `kernels` (with what `compile_kernel` made of each), entry points
        in that order, and each kernel's launch."""

    def dump(self, folder: str, kernels: Sequence[Kernel], compiled: Sequence[Any]) -> None:
        """Write each kernel's generated code into `folder` for reading (`--dump-spirv`). A
        target whose executable has no per-kernel code of its own writes nothing."""
