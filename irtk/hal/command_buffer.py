"""Command buffers: a recorded sequence of dispatches, transfers and barriers.

Recorded once and executed by `Device.queue_execute`. A binding is either a buffer (direct) or a
slot in the binding table supplied at submit, so one recording serves many calls.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

from irtk.hal.binding import BindingRef
from irtk.hal.executable import Executable

__all__ = ["BindingRef", "CommandBuffer"]


class CommandBuffer(ABC):
    def __init__(self, binding_capacity: int = 0) -> None:
        self.binding_capacity = binding_capacity
        self.finalized = False

    @abstractmethod
    def dispatch(self, executable: Executable, ordinal: int, workgroups: tuple[int, int, int],
                 constants: list[int], bindings: list[BindingRef]) -> None:
        """Record a dispatch of export `ordinal` over a grid of workgroups; constants are u32."""

    @abstractmethod
    def execution_barrier(self) -> None:
        """Everything recorded before completes (and its writes are visible) before what follows."""

    @abstractmethod
    def fill_buffer(self, target: BindingRef, pattern: bytes) -> None:
        """Fill the range with a 1-, 2- or 4-byte pattern."""

    @abstractmethod
    def copy_buffer(self, source: BindingRef, target: BindingRef) -> None:
        """Copy `source.length` bytes."""

    @abstractmethod
    def update_buffer(self, data: bytes, target: BindingRef) -> None:
        """Copy host bytes (captured at record time) into the target range."""

    def finalize(self) -> None:
        """End recording; the command buffer may then be executed, any number of times."""
        self.finalized = True

    def release(self) -> None:
        """Destroy device objects now; idempotent."""
