"""Reading a "vulkan-spirv-fb" executable: verify the FlatBuffer, then unpack it.

FlatBuffers' Python runtime trusts its input, and executables arrive inside module files that a
user may hand us, so the buffer is first walked with bounds checks (every table, vector and
string inside the data), then read with the generated object API, then checked for meaning
(SPIR-V magic, entry point indices, workgroup sizes). Any failure is a VerificationError naming
the field. Nothing here touches Vulkan.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from irtk.errors import VerificationError
from irtk.hal.capabilities import CAPABILITIES
from irtk.hal.executable import ExecutableRequirements
from schemas import VULKAN_EXECUTABLE_IDENTIFIER, object_api_name, vulkan_executable

SPIRV_MAGIC = 0x07230203
_BINDING_KINDS = (vulkan_executable.BindingKind.StorageBuffer,
                  vulkan_executable.BindingKind.UniformTexelBuffer)
MAX_PUSH_CONSTANT_WORDS = 64  # 256 bytes, the largest maxPushConstantsSize in practice
MAX_TEXEL_WINDOWS = 4096     # views per binding; devices allow far fewer texel descriptors
# Drivers size their set layouts by the largest binding number (SwiftShader crashes making a
# layout with binding 0xFFFFFFFF, even one the shader never uses); codegen numbers from 0.
MAX_BINDING_NUMBER = 1023

# The schema's shape, for the bounds-checking walk: field -> (vtable slot, kind).
# Kinds: a struct format for scalars, "string", "[u32]", a table name or "[Table]".
_SHAPE: dict[str, dict[str, tuple[int, str]]] = {
    "ExecutableDef": {"target_profile": (0, "string"), "shader_modules": (1, "[ShaderModuleDef]"),
                      "entry_points": (2, "[EntryPointDef]"),
                      "requirements": (3, "RequirementsDef")},
    "ShaderModuleDef": {"code": (0, "[u32]")},
    "EntryPointDef": {"name": (0, "string"), "shader_module": (1, "<I"),
                      "workgroup_size": (2, "[u32]"), "bindings": (3, "[BindingDef]"),
                      "push_constant_count": (4, "<I")},
    "BindingDef": {"binding": (0, "<I"), "read_only": (1, "<B"), "kind": (2, "<B"),
                   "window_count": (3, "<I"), "window_texels": (4, "<I")},
    "RequirementsDef": {name: (i, "<B" if i in (1, 2, 3, 4, 5, 11, 12, 13) else "<I")
                        for i, name in enumerate(
        ("subgroup_size", "float16", "float64", "int8", "int16", "int64",
         "max_workgroup_invocations", "shared_memory_bytes", "push_constant_bytes",
         "spirv_version", "vulkan_version", "storage_buffer_8bit", "storage_buffer_16bit",
         "texel_array_indexing"))},
}


@dataclass(frozen=True)
class BindingSpec:
    binding: int
    read_only: bool
    texel: bool = False     # a uniform texel buffer (R32G32B32A32_UINT), not a storage buffer
    # Texel buffers read through an array of `window_count` views (0: one view of the whole
    # binding), view k holding `window_texels` texels from texel k * window_texels / 2.
    window_count: int = 0
    window_texels: int = 0

    @property
    def descriptor_count(self) -> int:
        return self.window_count or 1


@dataclass(frozen=True)
class EntryPointSpec:
    name: str
    shader_module: int
    workgroup_size: tuple[int, int, int]
    bindings: tuple[BindingSpec, ...]
    push_constant_count: int


# What the device must offer: the HAL's own requirements record.
RequirementsSpec = ExecutableRequirements


@dataclass(frozen=True)
class ExecutableSpec:
    target_profile: str
    shader_modules: tuple[bytes, ...]
    entry_points: tuple[EntryPointSpec, ...]
    requirements: RequirementsSpec


def _fail(where: str, why: str) -> VerificationError:
    return VerificationError(f"vulkan-spirv-fb executable is malformed: {where}: {why}")


class _Walker:
    """Bounds checks for every object reachable from the root (a minimal FlatBuffers verifier)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    def _u32(self, pos: int, where: str) -> int:
        if pos < 0 or pos + 4 > self.size:
            raise _fail(where, f"offset {pos} is outside the {self.size}-byte buffer")
        return struct.unpack_from("<I", self.data, pos)[0]

    def table(self, pos: int, name: str, where: str) -> None:
        soffset = struct.unpack("<i", struct.pack("<I", self._u32(pos, where)))[0]
        vtable = pos - soffset
        if vtable < 0 or vtable + 4 > self.size or vtable % 2:
            raise _fail(where, "table has no valid vtable")
        vt_len, tbl_len = struct.unpack_from("<HH", self.data, vtable)
        if vt_len < 4 or vt_len % 2 or vtable + vt_len > self.size or pos + tbl_len > self.size \
                or tbl_len < 4:
            raise _fail(where, "table extends past the end of the data")
        for field, (slot, kind) in _SHAPE[name].items():
            here = f"{where}.{field}" if where else field
            vt_entry = 4 + 2 * slot
            if vt_entry + 2 > vt_len:
                continue
            offset = struct.unpack_from("<H", self.data, vtable + vt_entry)[0]
            if not offset:
                continue
            width = struct.calcsize(kind) if kind.startswith("<") else 4
            if offset + width > tbl_len:
                raise _fail(here, "field lies outside its table")
            if kind.startswith("<"):
                continue
            target = pos + offset + self._u32(pos + offset, here)
            if kind == "string":
                n = self._u32(target, here)
                if target + 4 + n + 1 > self.size:
                    raise _fail(here, "string runs past the end of the data")
            elif kind == "[u32]":
                n = self._u32(target, here)
                if target + 4 + 4 * n > self.size:
                    raise _fail(here, f"vector of {n} words runs past the end of the data")
            elif kind.startswith("["):
                n = self._u32(target, here)
                if target + 4 + 4 * n > self.size:
                    raise _fail(here, f"vector of {n} tables runs past the end of the data")
                for i in range(n):
                    elem = target + 4 + 4 * i
                    self.table(elem + self._u32(elem, here), kind[1:-1], f"{here}[{i}]")
            else:
                self.table(target, kind, here)


def _check_windows(where: str, texel: bool, count: int, texels: int) -> None:
    """Texel windows: both fields or neither, on a texel buffer, of a power-of-two size."""
    if not count and not texels:
        return
    if not texel:
        raise _fail(where, "only a texel buffer binding can have texel windows")
    if not count or texels < 2 or texels & (texels - 1):
        raise _fail(where, f"texel windows need a count and a power-of-two size of at least 2 "
                           f"texels, found {count} window(s) of {texels} texel(s)")
    if count > MAX_TEXEL_WINDOWS:
        raise _fail(where, f"{count} texel windows is more than any device allows")


def parse_executable(data: bytes | memoryview) -> ExecutableSpec:
    """Verify and unpack a "vulkan-spirv-fb" executable; raises VerificationError."""
    data = bytes(data)
    if len(data) < 8:
        raise _fail("header", f"{len(data)} bytes is too short for a FlatBuffer")
    if data[4:8] != VULKAN_EXECUTABLE_IDENTIFIER:
        raise _fail("file_identifier", f"expected {VULKAN_EXECUTABLE_IDENTIFIER!r}, "
                                       f"found {data[4:8]!r}")
    walker = _Walker(data)
    walker.table(walker._u32(0, "root"), "ExecutableDef", "")
    try:
        root = vulkan_executable.ExecutableDefT.InitFromPackedBuf(data, 0)
    except Exception as e:  # the walk should have caught it; never let garbage escape
        raise _fail("root", f"cannot be read ({type(e).__name__}: {e})") from None
    return _check_meaning(root)


def _text(value: bytes | str | None, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail(where, "is not valid UTF-8") from None


def _check_meaning(root: vulkan_executable.ExecutableDefT) -> ExecutableSpec:
    modules: list[bytes] = []
    for i, module in enumerate(root.shaderModules or []):
        where = f"shader_modules[{i}].code"
        code = np.asarray(module.code if module.code is not None else [], dtype="<u4")
        if code.size < 5:
            raise _fail(where, f"{code.size} words is too short for a SPIR-V module")
        if int(code[0]) != SPIRV_MAGIC:
            raise _fail(where, f"is not SPIR-V (first word 0x{int(code[0]):08x}, "
                               f"expected 0x{SPIRV_MAGIC:08x})")
        modules.append(code.tobytes())
    if not modules:
        raise _fail("shader_modules", "there are none")
    entries: list[EntryPointSpec] = []
    names: set[str] = set()
    for i, entry in enumerate(root.entryPoints or []):
        where = f"entry_points[{i}]"
        name = _text(entry.name, f"{where}.name")
        if not name:
            raise _fail(f"{where}.name", "is empty")
        if name in names:
            raise _fail(f"{where}.name", f"'{name}' appears twice")
        names.add(name)
        if entry.shaderModule >= len(modules):
            raise _fail(f"{where}.shader_module",
                        f"index {entry.shaderModule} but there are {len(modules)} module(s)")
        size = [int(x) for x in (entry.workgroupSize if entry.workgroupSize is not None else [])]
        if len(size) != 3 or min(size) < 1:
            raise _fail(f"{where}.workgroup_size", f"expected 3 positive sizes, found {size}")
        bindings = []
        for j, b in enumerate(entry.bindings or []):
            kind = int(b.kind)
            if kind not in _BINDING_KINDS:
                raise _fail(f"{where}.bindings[{j}].kind", f"unknown binding kind {kind}")
            texel = kind == vulkan_executable.BindingKind.UniformTexelBuffer
            if texel and not b.readOnly:
                raise _fail(f"{where}.bindings[{j}]", "a texel buffer binding must be read-only")
            if b.binding > MAX_BINDING_NUMBER:
                raise _fail(f"{where}.bindings[{j}].binding",
                            f"{b.binding} is above the largest binding number allowed "
                            f"({MAX_BINDING_NUMBER})")
            count, texels = int(b.windowCount), int(b.windowTexels)
            _check_windows(f"{where}.bindings[{j}]", texel, count, texels)
            bindings.append(BindingSpec(int(b.binding), bool(b.readOnly), texel, count, texels))
        numbers = [b.binding for b in bindings]
        if len(set(numbers)) != len(numbers):
            raise _fail(f"{where}.bindings", f"binding numbers repeat: {numbers}")
        if entry.pushConstantCount > MAX_PUSH_CONSTANT_WORDS:
            raise _fail(f"{where}.push_constant_count",
                        f"{entry.pushConstantCount} words is more than any device allows")
        entries.append(EntryPointSpec(name, int(entry.shaderModule), (size[0], size[1], size[2]),
                                      tuple(bindings), int(entry.pushConstantCount)))
    if not entries:
        raise _fail("entry_points", "there are none")
    req = root.requirements
    if any(b.window_count for e in entries for b in e.bindings) and \
            (req is None or not req.texelArrayIndexing):
        raise _fail("requirements.texel_array_indexing",
                    "is not set, but a binding is read through texel windows")
    requirements = RequirementsSpec() if req is None else RequirementsSpec(
        subgroup_size=int(req.subgroupSize),
        max_workgroup_invocations=int(req.maxWorkgroupInvocations),
        shared_memory_bytes=int(req.sharedMemoryBytes),
        push_constant_bytes=int(req.pushConstantBytes), spirv_version=int(req.spirvVersion),
        vulkan_version=int(req.vulkanVersion),
        **{c.name: bool(getattr(req, object_api_name(c.name))) for c in CAPABILITIES})
    return ExecutableSpec(_text(root.targetProfile, "target_profile"), tuple(modules),
                          tuple(entries), requirements)
