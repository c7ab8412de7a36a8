"""Write binary SPIR-V modules directly, without going through GLSL or text.

Code generators call the builder in whatever order is convenient; it keeps one
word list per section of the spec's logical layout (2.4) and concatenates them
in the right order at the end. Types and constants are deduplicated because the
spec forbids two identical non-aggregate, non-pointer type declarations, and it keeps
generators from having to remember what they already declared.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from .binary import encode_string, words_to_bytes
from .errors import SpirvBuildError
from .tables import INSTRUCTION_CLASSES, INSTRUCTIONS, MAGIC, Decoration, FunctionControl, Op, StorageClass

Operand = int | str | Sequence["Operand"]
"""An instruction operand: an id or literal word, a literal string, or a list of those."""

# The logical layout of a module (SPIR-V spec 2.4), in order.
_SECTIONS = (
    "capabilities",
    "extensions",
    "imports",
    "memory_model",
    "entry_points",
    "execution_modes",
    "debug_source",
    "debug_names",
    "debug_processed",
    "annotations",
    "globals",
    "functions",
)

# Module-level instructions go to their own section even when emitted mid-function.
_MODULE_LEVEL: dict[int, str] = {
    Op.Capability: "capabilities",
    Op.Extension: "extensions",
    Op.ExtInstImport: "imports",
    Op.MemoryModel: "memory_model",
    Op.EntryPoint: "entry_points",
    Op.ExecutionMode: "execution_modes",
    Op.ExecutionModeId: "execution_modes",
    Op.String: "debug_source",
    Op.Source: "debug_source",
    Op.SourceExtension: "debug_source",
    Op.SourceContinued: "debug_source",
    Op.Name: "debug_names",
    Op.MemberName: "debug_names",
    Op.ModuleProcessed: "debug_processed",
    Op.Decorate: "annotations",
    Op.MemberDecorate: "annotations",
    Op.DecorateId: "annotations",
    Op.DecorateString: "annotations",
    Op.MemberDecorateString: "annotations",
    Op.DecorationGroup: "annotations",
    Op.GroupDecorate: "annotations",
    Op.GroupMemberDecorate: "annotations",
}

# Instruction classes that only exist at module scope: emitted there even mid-function.
_GLOBAL_CLASSES = frozenset({"Type-Declaration", "Constant-Creation"})

# Instructions that end a block (SPIR-V spec 2.2.4, "Termination Instruction" and branches).
_TERMINATORS = frozenset(
    {
        Op.Branch,
        Op.BranchConditional,
        Op.Switch,
        Op.Return,
        Op.ReturnValue,
        Op.Kill,
        Op.Unreachable,
        Op.TerminateInvocation,
        Op.IgnoreIntersectionKHR,
        Op.TerminateRayKHR,
        Op.EmitMeshTasksEXT,
    }
)


def _operand_words(values: Sequence[Operand], what: str) -> list[int]:
    out: list[int] = []
    for v in values:
        if isinstance(v, bool):
            raise SpirvBuildError(f"{what}: bool operand {v!r}; use constant_bool() for a boolean value")
        if isinstance(v, int):
            if not 0 <= v <= 0xFFFFFFFF:
                raise SpirvBuildError(f"{what}: operand {v} does not fit in an unsigned 32-bit word")
            out.append(int(v))
        elif isinstance(v, str):
            out += encode_string(v)
        elif isinstance(v, float):
            raise SpirvBuildError(f"{what}: float operand {v!r}; make float values with constant()")
        elif isinstance(v, Sequence):
            out += _operand_words(v, what)
        else:
            raise SpirvBuildError(f"{what}: unsupported operand {v!r} of type {type(v).__name__}")
    return out


def _int_words(type_id: int, width: int, signed: bool, value: int | float | bool) -> list[int]:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpirvBuildError(f"integer constant of type %{type_id} needs an int, got {value!r}")
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    if not lo <= value <= hi:
        raise SpirvBuildError(f"{value} is out of range [{lo}, {hi}] for int{width} %{type_id}")
    if width <= 32:  # narrower signed values are sign-extended to the word
        return [value & 0xFFFFFFFF]
    bits = value & ((1 << width) - 1)
    return [(bits >> (32 * i)) & 0xFFFFFFFF for i in range(width // 32)]


def _float_words(type_id: int, width: int, value: int | float | bool) -> list[int]:
    fmt = {16: "<e", 32: "<f", 64: "<d"}.get(width)
    if fmt is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpirvBuildError(f"cannot encode {value!r} as float{width} %{type_id}")
    try:
        data = struct.pack(fmt, value).ljust(4, b"\0")
    except (OverflowError, struct.error) as exc:
        raise SpirvBuildError(f"{value!r} does not fit float{width}: {exc}") from None
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def _instruction(opcode: int, words: list[int]) -> list[int]:
    count = len(words) + 1
    if count > 0xFFFF:
        raise SpirvBuildError(f"{_opname(opcode)} has {count} words, more than the 65535 allowed")
    return [(count << 16) | int(opcode), *words]


def _opname(opcode: int) -> str:
    info = INSTRUCTIONS.get(int(opcode))
    return info[0] if info else f"opcode {int(opcode)}"


def _has_type_and_result(opcode: int) -> tuple[bool, bool]:
    info = INSTRUCTIONS.get(int(opcode))
    if info is None:
        raise SpirvBuildError(f"unknown opcode {int(opcode)}")
    kinds = [kind for kind, _ in info[1]]
    return "IdResultType" in kinds, "IdResult" in kinds


@dataclass
class _Function:
    """A function under construction; locals are hoisted into its first block."""

    id: int
    head: list[int] = field(default_factory=list)
    first_label: list[int] = field(default_factory=list)
    locals: list[int] = field(default_factory=list)
    body: list[int] = field(default_factory=list)
    labelled: bool = False
    block_open: bool = False


class ModuleBuilder:
    """Builds one SPIR-V module; every value-producing method returns the new result id.

    ``type_runtime_array(elem, stride)`` and ``type_array(elem, length, stride)``
    are deduplicated per (element, stride): pass ``stride`` and the builder emits
    the ArrayStride decoration once for that type. Without ``stride`` the type is
    shared and undecorated; decorating it yourself is fine because identical
    decorations are emitted only once. Structs are never deduplicated since each
    one carries its own member decorations.
    """

    def __init__(self, version: tuple[int, int] = (1, 3), generator: int = 0) -> None:
        self.version = version
        self.generator = generator
        self._next_id = 1
        self._sections: dict[str, list[int]] = {s: [] for s in _SECTIONS}
        self._cache: dict[tuple[object, ...], int] = {}
        self._type_info: dict[int, tuple[object, ...]] = {}
        self._constants: dict[int, int | float | bool] = {}  # scalar constant id -> its value
        self._capabilities: set[int] = set()
        self._extensions: set[str] = set()
        self._annotations: set[tuple[int, ...]] = set()
        self._function: _Function | None = None

    # --- ids and raw emission ---------------------------------------------

    @property
    def bound(self) -> int:
        """One more than the largest id handed out; goes in the header."""
        return self._next_id

    @property
    def in_function(self) -> bool:
        return self._function is not None

    def new_id(self) -> int:
        """Reserve an id now and define it later, e.g. a forward branch target."""
        result = self._next_id
        self._next_id += 1
        return result

    def _result_id(self, reserved: int | None) -> int:
        if reserved is None:
            return self.new_id()
        if not 0 < reserved < self._next_id:
            raise SpirvBuildError(f"id {reserved} was not reserved with new_id() (bound is {self._next_id})")
        return reserved

    def _emit(self, opcode: int, words: list[int]) -> None:
        inst = _instruction(opcode, words)
        section = _MODULE_LEVEL.get(int(opcode))
        if section is None and INSTRUCTION_CLASSES.get(int(opcode)) in _GLOBAL_CLASSES:
            section = "globals"
        fn = self._function
        if opcode == Op.Variable and len(words) > 2 and words[2] != StorageClass.Function:
            section = "globals"
        if section == "memory_model":  # there is exactly one; the latest call wins
            self._sections[section] = inst
            return
        if section is not None or fn is None:
            self._sections[section or "globals"] += inst
            return
        if opcode == Op.Variable:  # the spec wants all locals at the top of the first block
            fn.locals += inst
            return
        if not fn.block_open:
            where = "after a block terminator" if fn.labelled else "before the first label()"
            raise SpirvBuildError(
                f"{_opname(opcode)} emitted {where} in function %{fn.id}; call label() first"
            )
        fn.body += inst
        if opcode in _TERMINATORS:
            fn.block_open = False

    def op(
        self, opcode: int, result_type: int | None, *operands: Operand, result_id: int | None = None
    ) -> int:
        """Emit any instruction that has a result id and return that id.

        ``result_type`` must be None exactly for instructions without an
        IdResultType (types, OpLabel, OpString, ...). Pass ``result_id`` to
        define an id reserved earlier with new_id() (e.g. for OpPhi operands).
        """
        has_type, has_result = _has_type_and_result(opcode)
        name = _opname(opcode)
        if not has_result:
            raise SpirvBuildError(f"{name} has no result id; use op_void()")
        if has_type and result_type is None:
            raise SpirvBuildError(f"{name} needs a result type")
        if not has_type and result_type is not None:
            raise SpirvBuildError(f"{name} takes no result type; pass None")
        if opcode == Op.Label:
            return self.label(result_id)
        rid = self._result_id(result_id)
        head = [result_type, rid] if has_type else [rid]
        self._emit(opcode, _operand_words([*head, *operands], name))
        return rid

    def op_void(self, opcode: int, *operands: Operand) -> None:
        """Emit an instruction without a result id (OpStore, OpBranch, OpDecorate, ...)."""
        _, has_result = _has_type_and_result(opcode)
        if has_result:
            raise SpirvBuildError(f"{_opname(opcode)} has a result id; use op()")
        self._emit(opcode, _operand_words(operands, _opname(opcode)))

    def ext_inst(self, result_type: int, set_id: int, instruction: int, *operands: Operand) -> int:
        """Call an extended instruction, e.g. ``ext_inst(f32, glsl, GLSLstd450.Exp, x)``."""
        return self.op(Op.ExtInst, result_type, set_id, int(instruction), *operands)

    # --- module-level declarations ------------------------------------------

    def capability(self, cap: int) -> None:
        if int(cap) not in self._capabilities:
            self._capabilities.add(int(cap))
            self.op_void(Op.Capability, cap)

    def extension(self, name: str) -> None:
        if name not in self._extensions:
            self._extensions.add(name)
            self.op_void(Op.Extension, name)

    def ext_inst_import(self, name: str) -> int:
        """Import an extended instruction set such as "GLSL.std.450"; one id per name."""
        key = ("import", name)
        if key not in self._cache:
            self._cache[key] = self.op(Op.ExtInstImport, None, name)
        return self._cache[key]

    def memory_model(self, addressing: int, memory: int) -> None:
        """Set the single OpMemoryModel; a later call replaces an earlier one."""
        self.op_void(Op.MemoryModel, addressing, memory)

    def entry_point(self, model: int, fn_id: int, name: str, interface_ids: Sequence[int] = ()) -> None:
        self.op_void(Op.EntryPoint, model, fn_id, name, list(interface_ids))

    def execution_mode(self, fn_id: int, mode: int, *literals: Operand) -> None:
        self.op_void(Op.ExecutionMode, fn_id, mode, *literals)

    def name(self, target: int, text: str) -> None:
        self.op_void(Op.Name, target, text)

    def member_name(self, struct_id: int, member: int, text: str) -> None:
        self.op_void(Op.MemberName, struct_id, member, text)

    def _annotate(self, opcode: int, operands: Sequence[Operand]) -> None:
        words = _operand_words(operands, _opname(opcode))
        key = (int(opcode), *words)
        if key not in self._annotations:
            self._annotations.add(key)
            self._sections["annotations"] += _instruction(opcode, words)

    def decorate(self, target: int, decoration: int, *literals: Operand) -> None:
        """Decorate an id; identical repeated decorations are emitted once."""
        self._annotate(Op.Decorate, [target, decoration, *literals])

    def member_decorate(self, struct_id: int, member: int, decoration: int, *literals: Operand) -> None:
        self._annotate(Op.MemberDecorate, [struct_id, member, decoration, *literals])

    # --- types ----------------------------------------------------------------

    def _type(self, key: tuple[object, ...], opcode: int, *operands: Operand, dedupe: bool = True) -> int:
        if dedupe and key in self._cache:
            return self._cache[key]
        tid = self.op(opcode, None, *operands)
        self._type_info[tid] = key
        if dedupe:
            self._cache[key] = tid
        return tid

    def type_void(self) -> int:
        return self._type(("void",), Op.TypeVoid)

    def type_bool(self) -> int:
        return self._type(("bool",), Op.TypeBool)

    def type_int(self, width: int, signed: bool) -> int:
        return self._type(("int", width, bool(signed)), Op.TypeInt, width, int(bool(signed)))

    def type_float(self, width: int) -> int:
        return self._type(("float", width), Op.TypeFloat, width)

    def type_vector(self, elem: int, n: int) -> int:
        return self._type(("vector", elem, n), Op.TypeVector, elem, n)

    def type_matrix(self, column_type: int, columns: int) -> int:
        return self._type(("matrix", column_type, columns), Op.TypeMatrix, column_type, columns)

    def type_array(self, elem: int, length: int, stride: int | None = None) -> int:
        """Fixed-size array; ``length`` is a Python int turned into a u32 constant."""
        if length < 1:
            raise SpirvBuildError(f"array length must be at least 1, got {length}")
        key = ("array", elem, length, stride)
        if key in self._cache:
            return self._cache[key]
        length_id = self.constant(self.type_int(32, False), length)
        tid = self._type(key, Op.TypeArray, elem, length_id)
        if stride is not None:
            self.decorate(tid, Decoration.ArrayStride, stride)
        return tid

    def type_runtime_array(self, elem: int, stride: int | None = None) -> int:
        """Runtime array, shared per (elem, stride); see the class docstring."""
        key = ("runtime_array", elem, stride)
        if key in self._cache:
            return self._cache[key]
        tid = self._type(key, Op.TypeRuntimeArray, elem)
        if stride is not None:
            self.decorate(tid, Decoration.ArrayStride, stride)
        return tid

    def type_image(self, sampled_type: int, dim: int, sampled: int, image_format: int) -> int:
        """A non-depth, non-arrayed, single-sampled image type (`sampled` 1: used with a
        sampler or fetched, 2: a storage image)."""
        key = ("image", sampled_type, int(dim), sampled, int(image_format))
        return self._type(key, Op.TypeImage, sampled_type, dim, 0, 0, 0, sampled, image_format)

    def type_struct(self, members: Sequence[int]) -> int:
        """A new struct every call, so each can get its own Block/Offset decorations."""
        return self._type(("struct", tuple(members)), Op.TypeStruct, list(members), dedupe=False)

    def type_pointer(self, storage_class: int, pointee: int) -> int:
        return self._type(("pointer", int(storage_class), pointee), Op.TypePointer, storage_class, pointee)

    def type_function(self, ret: int, params: Sequence[int] = ()) -> int:
        return self._type(("function", ret, tuple(params)), Op.TypeFunction, ret, list(params))

    # --- constants --------------------------------------------------------

    def _scalar_words(self, type_id: int, value: int | float | bool) -> list[int]:
        match self._type_info.get(type_id):
            case ("int", int() as width, bool() as signed):
                return _int_words(type_id, width, signed, value)
            case ("float", int() as width):
                return _float_words(type_id, width, value)
        raise SpirvBuildError(f"%{type_id} is not an int or float type made by this builder")

    def constant(self, type_id: int, value: int | float | bool) -> int:
        """A scalar constant encoded per the type's width and signedness (deduplicated)."""
        if self._type_info.get(type_id) == ("bool",):
            if not isinstance(value, bool):
                raise SpirvBuildError(f"bool constant needs a bool, got {value!r}")
            return self.constant_bool(value)
        words = self._scalar_words(type_id, value)
        key = ("constant", type_id, *words)
        if key not in self._cache:
            self._cache[key] = self.op(Op.Constant, type_id, words)
            self._constants[self._cache[key]] = value
        return self._cache[key]

    def constant_bool(self, value: bool) -> int:
        key = ("constant_bool", bool(value))
        if key not in self._cache:
            self._cache[key] = self.op(Op.ConstantTrue if value else Op.ConstantFalse, self.type_bool())
            self._constants[self._cache[key]] = bool(value)
        return self._cache[key]

    def constant_value(self, rid: int) -> int | float | bool | None:
        """The value of scalar constant `rid` as it was asked for (None for any other id), so
        code generators can pick cheaper instructions for operations on known values."""
        return self._constants.get(rid)

    def constant_composite(self, type_id: int, ids: Sequence[int]) -> int:
        key = ("composite", type_id, *ids)
        if key not in self._cache:
            self._cache[key] = self.op(Op.ConstantComposite, type_id, list(ids))
        return self._cache[key]

    def constant_null(self, type_id: int) -> int:
        key = ("null", type_id)
        if key not in self._cache:
            self._cache[key] = self.op(Op.ConstantNull, type_id)
        return self._cache[key]

    def spec_constant(self, type_id: int, value: int | float | bool, spec_id: int | None = None) -> int:
        """A specialization constant (never shared); ``spec_id`` adds the SpecId decoration."""
        if self._type_info.get(type_id) == ("bool",):
            rid = self.op(Op.SpecConstantTrue if value else Op.SpecConstantFalse, type_id)
        else:
            rid = self.op(Op.SpecConstant, type_id, self._scalar_words(type_id, value))
        if spec_id is not None:
            self.decorate(rid, Decoration.SpecId, spec_id)
        return rid

    # --- variables and functions -----------------------------------------

    def variable(self, ptr_type: int, storage_class: int, initializer: int | None = None) -> int:
        """A variable; Function-class ones are locals of the open function, others globals.

        Locals go to the top of the function's first block, as the spec requires,
        whichever block is open; globals may be declared mid-function too.
        """
        info = self._type_info.get(ptr_type)
        if info is not None and (info[0] != "pointer" or info[1] != int(storage_class)):
            raise SpirvBuildError(
                f"variable type %{ptr_type} is not a pointer to storage class {storage_class!r}"
            )
        extra = [] if initializer is None else [initializer]
        if int(storage_class) == StorageClass.Function and self._function is None:
            raise SpirvBuildError("a Function storage class variable must be created inside a function")
        return self.op(Op.Variable, ptr_type, storage_class, *extra)

    def begin_function(
        self,
        ret_type: int,
        fn_type: int,
        control: int = FunctionControl.None_,
        *,
        fn_id: int | None = None,
    ) -> int:
        """Open a function; pass ``fn_id`` to define an id reserved for an earlier call site."""
        if self._function is not None:
            raise SpirvBuildError(f"begin_function() while function %{self._function.id} is still open")
        rid = self._result_id(fn_id)
        head = _instruction(Op.Function, [ret_type, rid, int(control), fn_type])
        self._function = _Function(rid, head=head)
        return rid

    def _open_function(self, what: str) -> _Function:
        if self._function is None:
            raise SpirvBuildError(f"{what} needs an open function; call begin_function() first")
        return self._function

    def function_parameter(self, type_id: int) -> int:
        fn = self._open_function("function_parameter()")
        if fn.labelled:
            raise SpirvBuildError(f"function_parameter() after the first label() of function %{fn.id}")
        rid = self.new_id()
        fn.head += _instruction(Op.FunctionParameter, [type_id, rid])
        return rid

    def label(self, label_id: int | None = None) -> int:
        """Start a new block; pass an id from new_id() if branches already target it."""
        fn = self._open_function("label()")
        if fn.block_open:
            raise SpirvBuildError(f"label() while the previous block of function %{fn.id} has no terminator")
        rid = self._result_id(label_id)
        inst = _instruction(Op.Label, [rid])
        if fn.labelled:
            fn.body += inst
        else:
            fn.first_label = inst
            fn.labelled = True
        fn.block_open = True
        return rid

    def end_function(self) -> None:
        fn = self._open_function("end_function()")
        if fn.block_open:
            raise SpirvBuildError(f"function %{fn.id} ends with a block that has no terminator")
        if fn.locals and not fn.labelled:
            raise SpirvBuildError(f"function %{fn.id} has local variables but no blocks")
        self._sections["functions"] += fn.head + fn.first_label + fn.locals + fn.body
        self._sections["functions"] += _instruction(Op.FunctionEnd, [])
        self._function = None

    # --- output -------------------------------------------------------------

    def to_words(self) -> list[int]:
        """The module with its header: magic, version, generator, bound, schema 0."""
        if self._function is not None:
            raise SpirvBuildError(f"function %{self._function.id} was never ended")
        if not self._sections["memory_model"]:
            raise SpirvBuildError("memory_model() was never called; every module needs one")
        major, minor = self.version
        words = [MAGIC, (major << 16) | (minor << 8), self.generator, self._next_id, 0]
        for section in _SECTIONS:
            words += self._sections[section]
        return words

    def to_bytes(self) -> bytes:
        """The module as little-endian bytes, ready for a file or vkCreateShaderModule."""
        return words_to_bytes(self.to_words())


__all__ = ["ModuleBuilder", "Operand"]
