"""Native (Python) VM modules: a table of exports that bytecode modules import by name.

A native module is a class with a sorted `EXPORTS` table of (name, calling convention); the
implementing method is the name with dots as underscores (`buffer_view.create` ->
`buffer_view_create`). Linking compares each import's calling convention with the table's, so a
module compiled against a different runtime fails at load with both signatures in the message.
The ref types of the objects a module hands to bytecode are in its `REF_TYPES`, registered with
the VM (`irtk.vm.ref_types`) when the class is defined, as IREE's modules register theirs.

Argument passing: each argument is a Python value (int, float, a ref object or None). A variadic
segment arrives as one list: of values when its tuple has one element ("CiD"), else of tuples
("CirIID"). Results: return None for "v", the value for one result, a tuple for several. A
function marked `yieldable` may instead return an `irtk.vm.yielding.Wait`: the calling
invocation is suspended until the wait is over, then gets the wait's results.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

from irtk.errors import VerificationError
from irtk.vm import calling_convention, ref_types
from irtk.vm.module import BytecodeModule


@dataclass(frozen=True)
class NativeFunction:
    name: str                    # within the module, e.g. "buffer.length"
    calling_convention: str
    yieldable: bool = False      # may return an `irtk.vm.yielding.Wait` to suspend the caller

    @property
    def method_name(self) -> str:
        return self.name.replace(".", "_")


class NativeModule:
    """Base of native modules; subclasses set `name` and `EXPORTS` and define the methods;
    `REF_TYPES` lists the ref types of the objects they hand to bytecode."""

    name: ClassVar[str] = ""
    EXPORTS: ClassVar[tuple[NativeFunction, ...]] = ()
    REF_TYPES: ClassVar[tuple[ref_types.RefType, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = [f.name for f in cls.EXPORTS]
        if names != sorted(names) or len(set(names)) != len(names):
            raise TypeError(f"{cls.__name__}.EXPORTS must be sorted by name without duplicates")
        for f in cls.EXPORTS:
            calling_convention.parse(f.calling_convention)
            if not callable(getattr(cls, f.method_name, None)):
                raise TypeError(f"{cls.__name__} lacks method {f.method_name} for '{f.name}'")
        for ref_type in cls.REF_TYPES:
            ref_types.register(ref_type)

    def lookup(self, function_name: str) -> tuple[NativeFunction, Callable[..., Any]] | None:
        for f in self.EXPORTS:
            if f.name == function_name:
                return f, getattr(self, f.method_name)
        return None


@dataclass(frozen=True)
class LinkedImport:
    full_name: str
    function: NativeFunction
    target: Callable[..., Any]


def link_imports(module: BytecodeModule,
                 native_modules: Sequence[NativeModule]) -> list[LinkedImport]:
    """Resolve every import of `module` against the native modules; VerificationError if not."""
    by_name = {m.name: m for m in native_modules}
    linked = []
    for imp in module.imports:
        module_name, _, function_name = imp.full_name.partition(".")
        native = by_name.get(module_name)
        if native is None:
            available = ", ".join(sorted(by_name)) or "none"
            raise VerificationError(f"import '{imp.full_name}': no native module "
                                    f"'{module_name}' is linked (modules: {available})")
        found = native.lookup(function_name)
        if found is None:
            raise VerificationError(
                f"import '{imp.full_name}' is not provided by module '{module_name}'")
        function, target = found
        if function.calling_convention != imp.calling_convention:
            raise VerificationError(f"{imp.full_name}: module expects {imp.calling_convention}, "
                                    f"runtime provides {function.calling_convention}")
        linked.append(LinkedImport(imp.full_name, function, target))
    return linked
