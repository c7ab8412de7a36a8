"""Opens a module file (mmap, read-only) or bytes, reads the FlatBuffer and verifies it.

Every read of the FlatBuffer happens here, under one handler that turns any failure into a
VerificationError: a mangled file must never raise anything but an `irtk.Error`. Vector lengths
are charged against a budget proportional to the file size, so a corrupt length cannot make the
loader loop for long.
"""
from __future__ import annotations

import mmap
import os
from typing import Any

import numpy as np

from irtk.errors import VerificationError
from irtk.vm import isa
from irtk.vm.module import (BytecodeModule, ExportDef, FunctionDef, ImportDef, RodataSegment)
from irtk.vm.verifier import verify_module
from schemas import BYTECODE_MODULE_IDENTIFIER
from schemas import bytecode_module_generated as fb

ModuleSource = bytes | bytearray | memoryview | str | os.PathLike


def load_module(source: ModuleSource) -> BytecodeModule:
    """Read and verify a module (a path is mapped, not copied); raises VerificationError."""
    backing, view = open_source(source)
    module = parse_module(view, backing)
    verify_module(module)
    return module


def open_source(source: ModuleSource) -> tuple[Any, memoryview]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source) if not isinstance(source, bytes) else source
        return data, memoryview(data)
    path = os.fspath(source)
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise VerificationError(f"module file '{path}' is empty")
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise VerificationError(f"cannot read module file '{path}': {e.strerror or e}") from None
    return mapped, memoryview(mapped)


class _Budget:
    """Total vector elements the loader may visit; an honest file never exceeds size / 4."""

    def __init__(self, size: int) -> None:
        self.left = size // 4 + 64

    def take(self, count: int, what: str) -> int:
        if count < 0 or count > self.left:
            raise VerificationError(f"malformed module file: {what} claims {count} entries")
        self.left -= count
        return count


def _text(value: bytes | None) -> str:
    return value.decode("utf-8") if value is not None else ""


def _bytes(array: Any) -> memoryview:
    """The zero-copy view behind a generated `...AsNumpy()` (0 when the vector is absent)."""
    if isinstance(array, np.ndarray):
        return array.data
    return memoryview(b"")


def _not_a_module(view: memoryview) -> str:
    """What a file that is not an irtk module seems to be, and what to do with it."""
    head = bytes(view[:4096])
    if head[4:8] == b"IREE" or head[:4] == b"PK\x03\x04":
        return ("this is an IREE module (.vmfb): irtk reads its own module format, not IREE's; "
                "compile the MLIR source with `irtk compile`")
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    first_line = text.lstrip().split("\n", 1)[0]
    mlir = any(word in text for word in ("func.func", "linalg.", "arith.", "tensor<"))
    if not mlir and first_line.startswith("module @") and "{" not in first_line:
        return "this is VM assembly text, not a module: assemble it first (`irtk vm-as`)"
    if mlir or first_line.startswith(("module", "//", "#", "func")):
        return ("this is MLIR text, not a module: compile it first "
                "(`irtk compile FILE.mlir -o FILE.vmfb`, then run the .vmfb)")
    found = head[4:8] if len(head) >= 8 else b""
    return (f"not an irtk module: file identifier {found!r}, expected "
            f"{BYTECODE_MODULE_IDENTIFIER!r}")


def parse_module(view: memoryview, backing: Any = None) -> BytecodeModule:
    """Read a ModuleDef into a BytecodeModule (not yet verified)."""
    if len(view) < 8 or bytes(view[4:8]) != BYTECODE_MODULE_IDENTIFIER:
        raise VerificationError(_not_a_module(view))
    try:
        return _read(fb.ModuleDef.GetRootAs(view, 0), _Budget(len(view)), backing)
    except VerificationError:
        raise
    except Exception as e:  # any failure to read a corrupt FlatBuffer
        raise VerificationError(f"malformed module file: {type(e).__name__}: {e}") from None


def _read(root: fb.ModuleDef, budget: _Budget, backing: Any) -> BytecodeModule:
    version = root.Version()
    if version != isa.BYTECODE_VERSION:
        raise VerificationError(
            f"module format version {version}, this runtime reads {isa.BYTECODE_VERSION}")
    requirements = [_text(root.Requirements(i))
                    for i in range(budget.take(root.RequirementsLength(), "requirements"))]
    types = [_text(root.Types(i)) for i in range(budget.take(root.TypesLength(), "types"))]
    imports = []
    for i in range(budget.take(root.ImportedFunctionsLength(), "imports")):
        imp = root.ImportedFunctions(i)
        sig = imp.Signature()
        imports.append(ImportDef(_text(imp.FullName()),
                                 _text(sig.CallingConvention()) if sig is not None else ""))
    exports = []
    for i in range(budget.take(root.ExportedFunctionsLength(), "exports")):
        exp = root.ExportedFunctions(i)
        reflection = {}
        for j in range(budget.take(exp.ReflectionLength(), "reflection attributes")):
            attr = exp.Reflection(j)
            reflection[_text(attr.Key())] = _text(attr.Value())
        exports.append(ExportDef(_text(exp.LocalName()), exp.InternalOrdinal(), reflection))

    debug = root.DebugDatabase()
    names: list[str] = []
    locations: dict[tuple[int, int], str] = {}
    if debug is not None:
        names = [_text(debug.FunctionNames(i))
                 for i in range(budget.take(debug.FunctionNamesLength(), "function names"))]
        for i in range(budget.take(debug.LocationsLength(), "locations")):
            loc = debug.Locations(i)
            locations[(loc.Function(), loc.BytecodeOffset())] = _text(loc.Location())

    bytecode = _bytes(root.BytecodeDataAsNumpy())
    count = budget.take(root.FunctionDescriptorsLength(), "function descriptors")
    if root.FunctionSignaturesLength() != count:
        raise VerificationError(f"module has {count} function descriptors but "
                                f"{root.FunctionSignaturesLength()} function signatures")
    functions = []
    for i in range(count):
        desc = root.FunctionDescriptors(i)
        sig = root.FunctionSignatures(i)
        name = names[i] if i < len(names) and names[i] else f"function_{i}"
        start, length = desc.BytecodeOffset(), desc.BytecodeLength()
        if start + length > len(bytecode):
            raise VerificationError(
                f"function '{name}': bytecode [{start}, {start + length}) is outside the "
                f"module's {len(bytecode)} bytes of bytecode")
        counts = {"i32": desc.I32RegisterCount(), "i64": desc.I64RegisterCount(),
                  "f32": desc.F32RegisterCount(), "f64": desc.F64RegisterCount(),
                  "ref": desc.RefRegisterCount()}
        functions.append(FunctionDef(name, _text(sig.CallingConvention()), start,
                                     bytecode[start:start + length], counts))

    rodata = []
    for i in range(budget.take(root.RodataSegmentsLength(), "rodata segments")):
        seg = root.RodataSegments(i)
        rodata.append(RodataSegment(_text(seg.Name()), _text(seg.MimeType()),
                                    _bytes(seg.DataAsNumpy())))
    state = root.GlobalState()
    global_counts = {bank: 0 for bank in isa.BANKS}
    if state is not None:
        global_counts = {"i32": state.I32Count(), "i64": state.I64Count(),
                         "f32": state.F32Count(), "f64": state.F64Count(),
                         "ref": state.RefCount()}
    metadata = {}
    for i in range(budget.take(root.MetadataLength(), "metadata attributes")):
        attr = root.Metadata(i)
        metadata[_text(attr.Key())] = _text(attr.Value())
    return BytecodeModule(
        name=_text(root.Name()), version=version, metadata=metadata, requirements=requirements, types=types,
        imports=imports, exports=exports, functions=functions, rodata=rodata,
        global_counts=global_counts, init_function=root.InitFunction(), locations=locations,
        backing=backing)
