"""The registry of ref types: which VM type name (`!hal.buffer`) which Python objects carry.

Modelled on IREE's `iree_vm_ref_register_type`: the VM knows no ref type but its own
(`!vm.buffer`, `!vm.list`, registered by `refs.py`); each native module declares the types of the
objects it hands to bytecode in `NativeModule.REF_TYPES`, registered when its class is defined, so
importing a native module is enough to make its types known. A `Context` resolves a module's
`types` table here when it links the module, so a name nobody registered is refused before
anything runs; `cmp.type.ref` and error messages ask the registry what a value is.

Registration is process-wide (IREE keeps it per VM instance; irtk has one instance) and may come
from several threads loading modules at once: writers take a lock and publish fresh tables,
readers never lock.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Sequence

from irtk.errors import VerificationError

_NAME = re.compile(r"![A-Za-z_]\w*(\.\w+)+")


@dataclass(frozen=True)
class RefType:
    """A ref type: its VM name and the Python classes whose instances (and their subclasses')
    carry it, e.g. `RefType("!hal.buffer", (hal.Buffer,))`."""

    name: str
    classes: tuple[type, ...]

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"ref type name '{self.name}' is not '!module.type'")
        if not self.classes or not all(isinstance(c, type) for c in self.classes):
            raise ValueError(f"ref type '{self.name}' needs one or more classes, "
                             f"got {self.classes!r}")
        if object in self.classes or type(None) in self.classes:
            raise ValueError(f"ref type '{self.name}' cannot be carried by every object or None")


def qualified_name(cls: type) -> str:
    """`module.Class`, as messages and docs name a class that carries a ref type."""
    return f"{cls.__module__}.{cls.__qualname__}"


def _class_names(ref_type: RefType) -> str:
    return ", ".join(qualified_name(c) for c in ref_type.classes)


class RefTypeRegistry:
    """Ref types by name and by class. `irtk.vm.ref_types.REGISTRY` is the VM's; tests may
    make their own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, RefType] = {}
        self._by_class: dict[type, RefType] = {}

    def register(self, ref_type: RefType) -> RefType:
        """Add `ref_type` and return it. Registering an equal type again does nothing (imports
        may repeat); a name or a class already registered for another type is a ValueError."""
        with self._lock:
            known = self._by_name.get(ref_type.name)
            if known == ref_type:
                return known
            if known is not None:
                raise ValueError(f"ref type '{ref_type.name}' is already registered for "
                                 f"{_class_names(known)}, not {_class_names(ref_type)}")
            for cls in ref_type.classes:
                other = self._by_class.get(cls)
                if other is not None:
                    raise ValueError(f"{qualified_name(cls)} already carries ref type "
                                     f"'{other.name}', not '{ref_type.name}'")
            # Readers look without the lock: publish new tables instead of changing these.
            self._by_class = {**self._by_class, **dict.fromkeys(ref_type.classes, ref_type)}
            self._by_name = {**self._by_name, ref_type.name: ref_type}
        return ref_type

    def lookup(self, name: str) -> RefType | None:
        """The type registered as `name`, or None."""
        return self._by_name.get(name)

    def type_of(self, value: Any) -> RefType | None:
        """The type `value` carries: that of the nearest class in its MRO that one names."""
        by_class = self._by_class
        for cls in type(value).__mro__:
            found = by_class.get(cls)
            if found is not None:
                return found
        return None

    def name_of(self, value: Any) -> str:
        """A ref value's type name for messages: "!hal.buffer", "null", or "!py.<class>" for
        an object of no registered type."""
        if value is None:
            return "null"
        found = self.type_of(value)
        return found.name if found is not None else f"!py.{type(value).__name__}"

    def names(self) -> list[str]:
        """Every registered type name, sorted."""
        return sorted(self._by_name)

    def resolve(self, names: Sequence[str]) -> list[RefType]:
        """The registered type of each name of a module's `types` table, in order;
        VerificationError naming the first one nobody registered, and its ordinal."""
        resolved = []
        for index, name in enumerate(names):
            found = self._by_name.get(name)
            if found is None:
                raise VerificationError(
                    f"type {index} '{name}' is not a registered ref type (registered: "
                    f"{', '.join(self.names())}; a native module registers its types when it "
                    "is imported)")
            resolved.append(found)
        return resolved


REGISTRY = RefTypeRegistry()


def register(ref_type: RefType) -> RefType:
    """Register `ref_type` with the VM (see `RefTypeRegistry.register`)."""
    return REGISTRY.register(ref_type)


def ref_type_name(value: Any) -> str:
    """The VM type name of a ref value, e.g. "!hal.buffer" (or "null")."""
    return REGISTRY.name_of(value)
