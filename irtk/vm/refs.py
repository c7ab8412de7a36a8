"""The VM's own ref types, `!vm.buffer` and `!vm.list`, registered with `ref_types`.

Refs are plain Python objects held in ref registers (None is null). Their reference count is
CPython's: a frame's registers are one list that is dropped when the function returns, so a
register never keeps an object alive past its frame; `discard.refs` drops one earlier. Native
modules' objects that own device memory free it when the last reference goes (or on `release()`).
"""
from __future__ import annotations

from typing import Any

from irtk.vm import limits
from irtk.vm.ref_types import RefType, register

MAX_BUFFER_BYTES = 1 << 31   # one `buffer.alloc` refuses more (a mangled length must not OOM us)
MAX_LIST_SIZE = 1 << 24      # one list's slots; what many together hold is `limits.Limits`'s


class Trap(Exception):
    """A VM-level fault inside an op (bad index, null ref); the interpreter adds where it was."""


class VMBuffer:
    """`!vm.buffer`: host bytes; rodata refs are read-only views of the mapped module file."""

    __slots__ = ("data", "readonly", "__weakref__")

    def __init__(self, data: memoryview | bytearray | bytes, readonly: bool | None = None) -> None:
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self.data = view
        self.readonly = view.readonly if readonly is None else (readonly or view.readonly)

    @classmethod
    def allocate(cls, length: int) -> "VMBuffer":
        if not 0 <= length <= MAX_BUFFER_BYTES:
            raise Trap(f"buffer.alloc of {length} bytes (limit {MAX_BUFFER_BYTES})")
        return limits.heap_allocation(length, f"buffer.alloc of {length} bytes",
                                      lambda: cls(bytearray(length), readonly=False))

    @classmethod
    def copy_of(cls, data: memoryview, what: str) -> "VMBuffer":
        """A new writable buffer holding a copy of `data` (charged as `what`)."""
        return limits.heap_allocation(len(data), what,
                                      lambda: cls(bytearray(data), readonly=False))

    @classmethod
    def from_text(cls, text: str) -> "VMBuffer":
        return cls(text.encode("utf-8"), readonly=True)

    def __len__(self) -> int:
        return len(self.data)

    def tobytes(self) -> bytes:
        return self.data.tobytes()

    def text(self) -> str:
        """The bytes as UTF-8 text (strings in the VM are buffers over rodata)."""
        try:
            return self.data.tobytes().decode("utf-8")
        except UnicodeDecodeError:
            raise Trap("string buffer is not valid UTF-8") from None

    def check_range(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > len(self.data):
            raise Trap(f"range [{offset}, {offset + length}) is outside the buffer of "
                       f"{len(self.data)} bytes")

    def __repr__(self) -> str:
        return f"VMBuffer({len(self.data)} bytes{', read-only' if self.readonly else ''})"


class VMList:
    """`!vm.list`: a growable list of values of any bank (unset slots read as zero or null)."""

    __slots__ = ("items", "charged", "__weakref__")

    def __init__(self, items: list[Any] | None = None) -> None:
        self.items: list[Any] = items if items is not None else []
        self.charged = 0   # slots charged to the VM heap so far (the list's high-water mark)

    def resize(self, size: int) -> None:
        if not 0 <= size <= MAX_LIST_SIZE:
            raise Trap(f"list.resize to {size} elements (limit {MAX_LIST_SIZE})")
        if size > self.charged:
            limits.heap_allocation((size - self.charged) * limits.LIST_SLOT_BYTES,
                                   f"list.resize to {size} elements", lambda: self)
            self.charged = size
        if size < len(self.items):
            del self.items[size:]
        else:
            self.items.extend([None] * (size - len(self.items)))

    def check_index(self, index: int) -> None:
        if not 0 <= index < len(self.items):
            raise Trap(f"list index {index} out of range ({len(self.items)} elements)")

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"VMList({self.items!r})"


VM_BUFFER = register(RefType("!vm.buffer", (VMBuffer,)))
VM_LIST = register(RefType("!vm.list", (VMList,)))
VM_TYPES = (VM_BUFFER, VM_LIST)
