"""What lowering one function asks of the VM module it goes into.

Host lowering (host.py and the host_*.py modules) emits one function's code; the module being
generated (vm_codegen.ModuleGen) owns what functions share: imports with their calling
conventions, rodata (strings, blobs), globals (the device, allocator and executable that
`__init` creates, constants uploaded once, `util.global`s, command buffers recorded once,
static workgroup counts) and the ordinals of functions and kernels. The host lowering sees it
only through this protocol, so it never depends on the generator that drives it.
"""
from __future__ import annotations

from typing import Protocol

from irtk.compiler import kernel as K
from irtk.compiler import tir

# How many workgroups a dispatch launches on one target: a static count, or a grid rule the
# host evaluates once the extents are known.
Launch = tuple[int, int, int] | K.Grid


class ModuleContext(Protocol):
    # Globals `__init` sets: the device, its allocator, the executable it created, and which
    # executable variant that is (an index into the module's targets).
    device_global: int
    allocator_global: int
    executable_global: int
    variant_global: int

    def import_(self, name: str) -> int:
        """The ordinal of an imported hal.* or check.* function (its native module declares
        its calling convention)."""
        ...

    def string(self, text: str) -> int:
        """The rodata segment holding `text`."""
        ...

    def blob(self, name: str, data: bytes) -> int:
        """A rodata segment holding `data`, one per distinct content."""
        ...

    def constant_global(self, op: tir.Op) -> int:
        """The global holding the buffer of tensor constant `op`, uploaded by `__init`."""
        ...

    def constant_rodata(self, op: tir.Op) -> tuple[int, int]:
        """(rodata segment, byte length) of tensor constant `op`'s bytes: the segment its
        upload in `__init` reads too."""
        ...

    def global_(self, name: str, op: tir.Op) -> int:
        """The global of `util.global` `name` (CompileError, located at `op`, if none)."""
        ...

    def function_ordinal(self, name: str, op: tir.Op) -> int:
        """The ordinal of function `name` (CompileError, located at `op`, if none)."""
        ...

    def record_segment(self, commands: list[tuple], slots: int) -> int:
        """The global holding a command buffer that `__init` records once: barriers, static
        dispatches, fills and copies whose buffers come from `slots` binding-table slots or
        from constants' globals (each buffer a ("slot", i) or a ("global", g))."""
        ...

    def kernel_ordinal(self, kernel: K.Kernel) -> int:
        """The executable entry point of `kernel` (the same in every variant)."""
        ...

    def workgroup_globals(self, ordinal: int) -> tuple[int, int, int] | None:
        """The globals holding the workgroup count of a static dispatch, which `__init` sets
        for the variant it chose; None for a dispatch with dynamic extents."""
        ...

    def launches(self, ordinal: int) -> list[Launch]:
        """The launch of entry point `ordinal` in each executable variant, in variant order."""
        ...
