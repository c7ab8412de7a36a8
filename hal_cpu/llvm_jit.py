"""LLVM for the native CPU executor: the host target, optimization, and loading machine code.

The CPU drivers compile each kernel of a `cpu-kernel-fb` executable to machine code for the host
CPU (`hal_cpu.native_codegen` builds the LLVM IR with `llvmlite.ir` objects). This module owns
everything that touches LLVM itself: the target machine (the host's CPU name and features, as
LLVM reads them), the optimization pipeline (O3: loop vectorization for the host's vector
width), emitting an object file, and loading object files into an MCJIT engine whose functions
are called through ctypes, which releases the GIL for the call.

Object files are cached on disk (`$IRTK_CACHE_DIR/cpu`, `irtk.hal.cache`) under a SHA-256 of the
LLVM IR, the CPU name and features and the llvmlite version: a kernel's IR is a function of its
kernel program, so the key follows the kernel's bytes, and a new irtk whose code generation
changed writes new entries instead of reading stale ones. A file carries its own SHA-256; a
truncated or corrupt entry is ignored and rebuilt. Writes go through a temporary file and a
rename, so concurrent processes never read half a file.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import struct
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llvmlite
import llvmlite.binding as llvm

from irtk.hal import cache as hal_cache

MAGIC = b"IRTKCPUO"
_HEADER = struct.Struct("<8sQ32s")  # magic, payload length, sha256(payload)
# Signature of every kernel entry point: (operand pointers, i64 arguments, start, end).
ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                         ctypes.c_int64)

_lock = threading.Lock()
_target: _Target | None = None


@dataclass(frozen=True)
class _Target:
    machine: Any                 # llvm.TargetMachine
    cpu: str
    features: str
    triple: str

    @property
    def identity(self) -> str:
        return f"{self.triple}|{self.cpu}|{self.features}|llvmlite {llvmlite.__version__}"


def target() -> _Target:
    """The host target machine, made once per process (LLVM initialized on first use)."""
    global _target
    with _lock:
        if _target is None:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            cpu = llvm.get_host_cpu_name()
            features = llvm.get_host_cpu_features().flatten()
            if "+avx512f" in features.split(","):
                features += ",-prefer-256-bit"   # explicit wide vectors stay 512-bit
            triple = llvm.get_process_triple()
            _target = _Target(_machine(triple, cpu, features), cpu, features, triple)
        return _target


def _machine(triple: str, cpu: str, features: str) -> Any:
    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=3, reloc="default", codemodel="jitdefault")


def host_description() -> str:
    """The CPU the native code is built for, for messages and `bench/`."""
    t = target()
    wide = [f for f in ("avx512f", "avx2", "fma") if f"+{f}" in t.features.split(",")]
    return f"{t.cpu} ({', '.join(wide) or 'no AVX'})"


def cache_dir() -> Path:
    return hal_cache.cache_dir("cpu")


def cache_key(ir_text: str) -> str:
    digest = hashlib.sha256(target().identity.encode())
    digest.update(b"\0")
    digest.update(ir_text.encode())
    return digest.hexdigest()


def compile_object(ir_text: str) -> bytes:
    """Parse, verify, optimize (O3 for the host) and emit an object file."""
    t = target()
    module = llvm.parse_assembly(ir_text)
    module.triple = t.triple
    module.data_layout = str(t.machine.target_data)
    module.verify()
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    tuning.loop_unrolling = False
    builder = llvm.create_pass_builder(t.machine, tuning)
    builder.getModulePassManager().run(module, builder)
    with _lock:  # the target machine is shared; emitting is not documented as thread-safe
        return bytes(t.machine.emit_object(module))


def _read_cached(path: Path) -> bytes | None:
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    if len(blob) < _HEADER.size:
        return None
    magic, length, digest = _HEADER.unpack_from(blob, 0)
    payload = blob[_HEADER.size:]
    if magic != MAGIC or length != len(payload) or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def _write_cached(path: Path, payload: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(_HEADER.pack(MAGIC, len(payload), hashlib.sha256(payload).digest()))
            f.write(payload)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only costs the next process a compile


@dataclass
class CompileStats:
    """What native compilation cost this process (for `bench/`)."""

    compiled: int = 0
    from_cache: int = 0
    seconds: float = 0.0


STATS = CompileStats()


def object_for(ir_text: str) -> bytes:
    """The object file of a module: from the disk cache, else compiled (and stored)."""
    path = cache_dir() / f"{cache_key(ir_text)}.o"
    cached = _read_cached(path)
    if cached is not None:
        STATS.from_cache += 1
        return cached
    start = time.perf_counter()
    obj = compile_object(ir_text)
    STATS.seconds += time.perf_counter() - start
    STATS.compiled += 1
    _write_cached(path, obj)
    return obj


class UnresolvedSymbol(RuntimeError):
    """The object file calls a function this process does not have (LLVM lowered an operation
    to a runtime-library call): loading it would leave a call to address 0."""


_ELF64 = struct.Struct("<16sHHIQQQIHHHHHH")       # the ELF header
_SHDR = struct.Struct("<IIQQQQIIQQ")              # a section header
_SYM = struct.Struct("<IBBHQQ")                   # a symbol
_SHT_SYMTAB = 2


def undefined_symbols(obj: bytes) -> list[str]:
    """The names an ELF64 (little-endian) relocatable object needs from outside itself; empty
    for any other object format, whose loader then resolves as it does."""
    if obj[:6] != b"\x7fELF\x02\x01" or len(obj) < _ELF64.size:
        return []
    hdr = _ELF64.unpack_from(obj, 0)
    shoff, shentsize, shnum = hdr[6], hdr[11], hdr[12]
    sections = [_SHDR.unpack_from(obj, shoff + i * shentsize) for i in range(shnum)]
    names: list[str] = []
    for sh in sections:
        if sh[1] != _SHT_SYMTAB:
            continue
        strtab = sections[sh[6]]
        strings = obj[strtab[4]:strtab[4] + strtab[5]]
        for off in range(sh[4] + _SYM.size, sh[4] + sh[5], _SYM.size):  # entry 0 is null
            name_at, info, _other, shndx, _value, _size = _SYM.unpack_from(obj, off)
            if shndx == 0 and name_at and (info >> 4) in (1, 2):       # UNDEF, GLOBAL/WEAK
                names.append(strings[name_at:strings.index(b"\0", name_at)].decode())
    return names


_libraries: list[ctypes.CDLL] = []


def _bind_symbols(names: list[str]) -> None:
    """Give LLVM the address of every external function the code calls, looked up in this
    process and the C math library; any that is missing is an error before the code loads."""
    if not _libraries:
        _libraries.append(ctypes.CDLL(None))
        libm = ctypes.util.find_library("m")
        if libm:
            _libraries.append(ctypes.CDLL(libm))
    missing = []
    for name in names:
        for lib in _libraries:
            try:
                address = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
            except AttributeError:
                continue
            if address:
                llvm.add_symbol(name, address)
                break
        else:
            missing.append(name)
    if missing:
        raise UnresolvedSymbol(f"native code calls {', '.join(missing)}, which this process "
                               "does not have")


class LoadedCode:
    """Machine code loaded into its own MCJIT engine; entry points by name. The engine (and so
    the code) lives as long as this object."""

    def __init__(self, obj: bytes) -> None:
        t = target()
        with _lock:
            _bind_symbols(undefined_symbols(obj))
            # The engine takes ownership of its target machine: each gets its own.
            machine = _machine(t.triple, t.cpu, t.features)
            self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self._engine.finalize_object()

    def entry(self, name: str) -> Any:
        address = self._engine.get_function_address(name)
        if not address:
            raise KeyError(name)
        return ENTRY(address)


def load(ir_text: str) -> LoadedCode:
    """Machine code for a module's IR text; a cached object that LLVM cannot load is rebuilt."""
    obj = object_for(ir_text)
    try:
        return LoadedCode(obj)
    except UnresolvedSymbol:
        raise                             # a rebuilt object would call the same function
    except Exception:
        path = cache_dir() / f"{cache_key(ir_text)}.o"
        path.unlink(missing_ok=True)
        obj = compile_object(ir_text)
        _write_cached(path, obj)
        return LoadedCode(obj)
