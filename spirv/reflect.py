"""Reflect a compute shader's interface from its binary: what a driver must agree with.

A Vulkan driver trusts that the pipeline layout it is given matches the shader: a descriptor the
shader reads but the layout lacks, a texel buffer bound where the shader expects a storage
buffer, a push-constant block larger than the range, a LocalSize past the device's limits —
each is undefined behaviour, and software drivers answer it with a crash or silently wrong
values. A loader that takes executables from untrusted files therefore reads what each entry
point really uses and compares it with what the executable declares. This module is the reading
half: entry points (name, model, workgroup size), every resource an entry point statically uses
(set, binding, kind, array size, whether it is written), its push-constant block size, its
Workgroup memory, and the module's capabilities.

Operands are decoded with the grammar tables (`reader.decoded`), so a literal is never taken for
an id. Run it on modules that passed spirv-val: it assumes a valid module and reports what it
cannot read as SpirvParseError rather than guessing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from .binary import Binary, to_words, words_to_bytes
from .errors import SpirvParseError
from .reader import Decoded, Instruction, decoded, parse
from .tables import BuiltIn, Capability, Decoration, Dim, ExecutionMode, ExecutionModel, Op
from .tables import StorageClass

# Resource kinds, named after the Vulkan descriptor types they need.
STORAGE_BUFFER = "storage buffer"
UNIFORM_BUFFER = "uniform buffer"
UNIFORM_TEXEL_BUFFER = "uniform texel buffer"
STORAGE_TEXEL_BUFFER = "storage texel buffer"
SAMPLED_IMAGE = "sampled image"
STORAGE_IMAGE = "storage image"
SAMPLER = "sampler"
COMBINED_IMAGE_SAMPLER = "combined image sampler"
ACCELERATION_STRUCTURE = "acceleration structure"
OTHER = "other"


@dataclass(frozen=True)
class Resource:
    """A descriptor-backed variable an entry point uses."""

    set: int | None        # None: the variable has no DescriptorSet decoration
    binding: int | None    # None: no Binding decoration
    kind: str              # one of the kinds above
    count: int             # descriptors: 1 for a plain variable, the array length, 0: runtime-sized
    writable: bool         # a buffer or image the shader may write (no NonWritable on it)
    variable: int          # the OpVariable's id, for messages


@dataclass(frozen=True)
class EntryPointInterface:
    name: str
    execution_model: int
    # LocalSize (or LocalSizeId of constants, or a WorkgroupSize built-in constant); None: not
    # declared or not a constant
    local_size: tuple[int, int, int] | None
    resources: tuple[Resource, ...]
    # bytes of push constants it reads: from the block's start to the end of the last member
    # used (0: none); the pipeline layout's range must cover them
    push_constant_bytes: int
    push_constant_blocks: int    # how many push-constant variables it uses (Vulkan allows one)
    workgroup_memory_bytes: int  # Workgroup variables it uses, at their natural sizes


@dataclass(frozen=True)
class ShaderInterface:
    capabilities: frozenset[int]
    extensions: tuple[str, ...]
    addressing_model: int
    entry_points: tuple[EntryPointInterface, ...]

    def entry_point(self, name: str) -> EntryPointInterface | None:
        """The GLCompute entry point called `name`, if the module has one."""
        for e in self.entry_points:
            if e.name == name and e.execution_model == ExecutionModel.GLCompute:
                return e
        return None

    def capability_names(self) -> list[str]:
        return sorted(capability_name(c) for c in self.capabilities)


def capability_name(value: int) -> str:
    try:
        return Capability(value).name
    except ValueError:
        return f"<capability {value}>"


def reflect(binary: Binary) -> ShaderInterface:
    """The interface of every entry point in `binary` (cached by the module's bytes)."""
    return _reflect(words_to_bytes(to_words(binary)))


@lru_cache(maxsize=512)
def _reflect(code: bytes) -> ShaderInterface:
    return _Reflector(code).run()


class _Reflector:
    def __init__(self, code: bytes) -> None:
        self.module = parse(code)
        self.types: dict[int, tuple[int, list[Decoded]]] = {}   # type id -> (opcode, operands)
        self.constants: dict[int, int] = {}                     # scalar (spec) constant values
        self.composites: dict[int, list[int]] = {}              # constant composite parts
        self.decorations: dict[int, dict[int, list[int]]] = {}  # id -> decoration -> literals
        self.member_decorations: dict[tuple[int, int], dict[int, list[int]]] = {}
        self.variables: dict[int, tuple[int, int]] = {}         # global var -> (type, class)
        self.functions: dict[int, set[int]] = {}                # function -> ids it references
        self.calls: dict[int, set[int]] = {}                    # function -> functions it calls
        # function -> (variable, first access-chain index or None: the whole variable)
        self.accesses: dict[int, set[tuple[int, int | None]]] = {}
        self.capabilities: set[int] = set()
        self.extensions: list[str] = []
        self.addressing_model = 0
        self.entries: list[tuple[int, int, str]] = []           # (model, function, name)
        self.modes: dict[int, list[tuple[int, list[int]]]] = {}

    def run(self) -> ShaderInterface:
        function: int | None = None
        for inst, ops in decoded(self.module):
            if function is not None:
                if inst.opcode == Op.FunctionEnd:
                    function = None
                    continue
                ids = _ids(ops)
                self.functions[function].update(ids)
                if inst.opcode == Op.FunctionCall:
                    self.calls[function].add(_id(ops, 2, inst))
                self._access(function, inst, ops, ids)
                continue
            if inst.opcode == Op.Function:
                function = _id(ops, 1, inst)
                self.functions.setdefault(function, set())
                self.calls.setdefault(function, set())
                self.accesses.setdefault(function, set())
                continue
            self._global(inst, ops)
        return ShaderInterface(frozenset(self.capabilities), tuple(self.extensions),
                               self.addressing_model,
                               tuple(self._entry(*e) for e in self.entries))

    def _access(self, function: int, inst: Instruction, ops: list[Decoded],
                ids: list[int]) -> None:
        """Remember which member of a push-constant block an instruction reaches: a chain
        `OpAccessChain %p %block %const ...` reaches one member, any other use all of it."""
        chain = inst.opcode in (Op.AccessChain, Op.InBoundsAccessChain)
        for position, (tag, value) in enumerate(ops):
            if tag != "id" or not isinstance(value, int) or value not in self.variables \
                    or self.variables[value][1] != StorageClass.PushConstant:
                continue
            member = None
            if chain and position == 2 and len(ops) > 3:
                index = ops[3][1]
                member = self.constants.get(index) if isinstance(index, int) else None
            self.accesses[function].add((value, member))

    def _global(self, inst: Instruction, ops: list[Decoded]) -> None:
        op = inst.opcode
        if op == Op.Capability:
            self.capabilities.add(_enum(ops, 0, inst))
        elif op == Op.Extension:
            self.extensions.append(str(ops[0][1]))
        elif op == Op.MemoryModel:
            self.addressing_model = _enum(ops, 0, inst)
        elif op == Op.EntryPoint:
            self.entries.append((_enum(ops, 0, inst), _id(ops, 1, inst), str(ops[2][1])))
        elif op in (Op.ExecutionMode, Op.ExecutionModeId):
            self.modes.setdefault(_id(ops, 0, inst), []).append(
                (_enum(ops, 1, inst), [int(v) for _, v in ops[2:] if isinstance(v, int)]))
        elif op == Op.Decorate:
            target, decoration = _id(ops, 0, inst), _enum(ops, 1, inst)
            self.decorations.setdefault(target, {})[decoration] = _literals(ops[2:])
        elif op == Op.MemberDecorate:
            key = (_id(ops, 0, inst), _int(ops, 1, inst))
            self.member_decorations.setdefault(key, {})[_enum(ops, 2, inst)] = \
                _literals(ops[3:])
        elif op == Op.Variable:
            self.variables[_id(ops, 1, inst)] = (_id(ops, 0, inst), _enum(ops, 2, inst))
        elif op in (Op.Constant, Op.SpecConstant):
            value = ops[2][1] if len(ops) > 2 else None
            if isinstance(value, int):
                self.constants[_id(ops, 1, inst)] = value
        elif op in (Op.ConstantComposite, Op.SpecConstantComposite):
            self.composites[_id(ops, 1, inst)] = _ids(ops[2:])
        elif inst.name.startswith("OpType"):
            self.types[_id(ops, 0, inst)] = (op, ops)

    # -- one entry point ----------------------------------------------------------------------
    def _entry(self, model: int, function: int, name: str) -> EntryPointInterface:
        functions = self._reachable(function)
        used = set().union(*(self.functions[f] for f in functions))
        accesses = set().union(*(self.accesses[f] for f in functions))
        resources: list[Resource] = []
        push_bytes, push_blocks, workgroup = 0, 0, 0
        for var in sorted(used & self.variables.keys()):
            type_id, storage = self.variables[var]
            pointee = self._pointee(type_id)
            if storage == StorageClass.PushConstant:
                push_blocks += 1
                members = {m for v, m in accesses if v == var}
                push_bytes = max(push_bytes, self._extent(pointee, members))
            elif storage == StorageClass.Workgroup:
                workgroup += self._size(pointee, explicit=False)
            elif storage in (StorageClass.StorageBuffer, StorageClass.Uniform,
                             StorageClass.UniformConstant):
                resources.append(self._resource(var, pointee, storage))
        resources.sort(key=lambda r: (r.set or 0, r.binding or 0))
        return EntryPointInterface(name, model, self._local_size(function), tuple(resources),
                                   push_bytes, push_blocks, workgroup)

    def _reachable(self, function: int) -> set[int]:
        """The functions an entry point runs: itself and every function it may call."""
        seen: set[int] = set()
        todo = [function]
        while todo:
            f = todo.pop()
            if f in seen or f not in self.functions:
                continue
            seen.add(f)
            todo.extend(self.calls[f])
        return seen

    def _extent(self, block: int, members: set[int | None]) -> int:
        """Bytes from the start of a push-constant block to the end of the last member used
        (the range a pipeline layout must cover); the whole block when used as a whole."""
        op, ops = self._type(block)
        if op != Op.TypeStruct or None in members:
            return self._size(block, explicit=True)
        types = _ids(ops[1:])
        end = 0
        for m in members:
            if m is None or not 0 <= m < len(types):
                return self._size(block, explicit=True)
            offset = self.member_decorations.get((block, m), {}).get(Decoration.Offset)
            end = max(end, (offset[0] if offset else 0) + self._size(types[m], explicit=True))
        return end

    def _local_size(self, function: int) -> tuple[int, int, int] | None:
        for var, decorations in self.decorations.items():  # a WorkgroupSize constant wins
            if decorations.get(Decoration.BuiltIn) == [BuiltIn.WorkgroupSize] \
                    and var in self.composites:
                return self._three(self.composites[var])
        size = None
        for mode, args in self.modes.get(function, []):
            if mode == ExecutionMode.LocalSize and len(args) == 3:
                size = (args[0], args[1], args[2])
            elif mode == ExecutionMode.LocalSizeId and len(args) == 3:
                size = self._three(args)
        return size

    def _three(self, ids: list[int]) -> tuple[int, int, int] | None:
        values = [self.constants.get(i) for i in ids]
        if len(values) != 3 or any(v is None for v in values):
            return None
        return (int(values[0] or 0), int(values[1] or 0), int(values[2] or 0))

    def _resource(self, var: int, pointee: int, storage: int) -> Resource:
        count, inner = 1, pointee
        op, ops = self._type(inner)
        if op == Op.TypeArray:
            count, inner = self._length(ops), _id(ops, 1)
        elif op == Op.TypeRuntimeArray:
            count, inner = 0, _id(ops, 1)
        op, ops = self._type(inner)
        own = self.decorations.get(var, {})
        writable = Decoration.NonWritable not in own
        kind = OTHER
        if op == Op.TypeStruct:
            block = self.decorations.get(inner, {})
            if storage == StorageClass.StorageBuffer or Decoration.BufferBlock in block:
                kind = STORAGE_BUFFER
                members = len(ops) - 1
                writable = writable and not all(
                    Decoration.NonWritable in self.member_decorations.get((inner, m), {})
                    for m in range(members))
            else:
                kind, writable = UNIFORM_BUFFER, False
        elif op == Op.TypeImage and storage == StorageClass.UniformConstant:
            dim, sampled = _enum(ops, 2), _int(ops, 6)
            if dim == Dim.Buffer:
                kind = UNIFORM_TEXEL_BUFFER if sampled == 1 else STORAGE_TEXEL_BUFFER
            else:
                kind = SAMPLED_IMAGE if sampled == 1 else STORAGE_IMAGE
            writable = writable and sampled != 1
        elif op == Op.TypeSampler:
            kind, writable = SAMPLER, False
        elif op == Op.TypeSampledImage:
            kind, writable = COMBINED_IMAGE_SAMPLER, False
        elif op == Op.TypeAccelerationStructureKHR:
            kind, writable = ACCELERATION_STRUCTURE, False
        descriptor_set = own.get(Decoration.DescriptorSet)
        binding = own.get(Decoration.Binding)
        return Resource(descriptor_set[0] if descriptor_set else None,
                        binding[0] if binding else None, kind, count, writable, var)

    # -- types --------------------------------------------------------------------------------
    def _type(self, type_id: int) -> tuple[int, list[Decoded]]:
        found = self.types.get(type_id)
        if found is None:
            raise SpirvParseError(f"%{type_id} is used as a type but is not one", 0)
        return found

    def _pointee(self, pointer: int) -> int:
        op, ops = self._type(pointer)
        if op != Op.TypePointer:
            raise SpirvParseError(f"variable type %{pointer} is not a pointer", 0)
        return _id(ops, 2)

    def _length(self, ops: list[Decoded]) -> int:
        length = self.constants.get(_id(ops, 2))
        if length is None:
            raise SpirvParseError(f"array length %{_id(ops, 2)} is not a constant", 0)
        return length

    def _size(self, type_id: int, explicit: bool) -> int:
        """Bytes a type occupies: by its Offset/ArrayStride decorations when `explicit`."""
        op, ops = self._type(type_id)
        if op in (Op.TypeInt, Op.TypeFloat):
            return _int(ops, 1) // 8
        if op == Op.TypeBool:
            return 4
        if op in (Op.TypeVector, Op.TypeMatrix):
            return _int(ops, 2) * self._size(_id(ops, 1), explicit)
        if op in (Op.TypeArray, Op.TypeRuntimeArray):
            stride = self.decorations.get(type_id, {}).get(Decoration.ArrayStride)
            each = stride[0] if explicit and stride else self._size(_id(ops, 1), explicit)
            return (self._length(ops) if op == Op.TypeArray else 0) * each
        if op == Op.TypeStruct:
            end = 0
            for m, member in enumerate(_ids(ops[1:])):
                size = self._size(member, explicit)
                offset = self.member_decorations.get((type_id, m), {}).get(Decoration.Offset)
                start = offset[0] if explicit and offset else end
                end = max(end, start + size)
            return end
        if op == Op.TypePointer:
            return 8
        raise SpirvParseError(f"type %{type_id} ({_OPNAMES.get(op, op)}) has no size here", 0)


_OPNAMES = {int(o): o.name for o in Op}


def _ids(ops: Iterable[Decoded]) -> list[int]:
    return [int(v) for tag, v in ops if tag == "id" and isinstance(v, int)]


def _literals(ops: Iterable[Decoded]) -> list[int]:
    return [int(v) if isinstance(v, int) else int(v[1]) for tag, v in ops
            if tag in ("int", "enum") and not isinstance(v, str | float)]


def _operand(ops: list[Decoded], index: int, inst: Instruction | None) -> Decoded:
    if index >= len(ops):
        where = inst.offset if inst else 0
        raise SpirvParseError(f"{inst.name if inst else 'a type'} lacks operand {index}", where)
    return ops[index]


def _id(ops: list[Decoded], index: int, inst: Instruction | None = None) -> int:
    tag, value = _operand(ops, index, inst)
    if tag != "id" or not isinstance(value, int):
        raise SpirvParseError(f"operand {index} is not an id", inst.offset if inst else 0)
    return value


def _int(ops: list[Decoded], index: int, inst: Instruction | None = None) -> int:
    tag, value = _operand(ops, index, inst)
    if not isinstance(value, int):
        raise SpirvParseError(f"operand {index} is not a number", inst.offset if inst else 0)
    return value


def _enum(ops: list[Decoded], index: int, inst: Instruction | None = None) -> int:
    tag, value = _operand(ops, index, inst)
    if tag != "enum" or not isinstance(value, tuple):
        raise SpirvParseError(f"operand {index} is not an enumerant", inst.offset if inst else 0)
    return int(value[1])
