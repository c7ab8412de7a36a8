"""Where irtk keeps what it compiles once per machine, and `irtk cache info|clear`.

The root is `$IRTK_CACHE_DIR`, else `$XDG_CACHE_HOME/irtk`, else `~/.cache/irtk`; each driver
keeps its files in a folder of its own (`vulkan/`: the Vulkan pipeline caches, one per device
and driver version, hal_vulkan/pipeline_cache.py; `cpu/`: the CPU drivers' machine code,
hal_cpu/llvm_jit.py). Every file there is a cache: removing it
costs only the time to rebuild it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# The folders irtk writes, and what each holds (for `irtk cache info`).
CACHE_KINDS: dict[str, str] = {
    "vulkan": "Vulkan pipeline caches: compiled shaders, one per device and driver version",
    "cpu": "native CPU kernels: object files LLVM built for this CPU, one per executable",
}


def cache_root() -> Path:
    override = os.environ.get("IRTK_CACHE_DIR")
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "irtk"


def cache_dir(kind: str) -> Path:
    """The folder of one kind of cache (a key of CACHE_KINDS)."""
    return cache_root() / kind


@dataclass(frozen=True)
class CacheUsage:
    kind: str
    path: Path
    description: str
    files: int
    bytes: int


def cache_usage() -> list[CacheUsage]:
    """Files and bytes of each kind of cache (zero where the folder does not exist)."""
    out = []
    for kind, description in CACHE_KINDS.items():
        folder = cache_dir(kind)
        files = [p for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
        out.append(CacheUsage(kind, folder, description, len(files),
                              sum(p.stat().st_size for p in files)))
    return out


def clear_cache() -> tuple[int, int]:
    """Remove every file of every kind of cache; (files, bytes) removed. Only the folders
    irtk writes are touched, and only the files in them."""
    removed = size = 0
    for kind in CACHE_KINDS:
        folder = cache_dir(kind)
        if not folder.is_dir():
            continue
        for p in folder.iterdir():
            if p.is_file() or p.is_symlink():
                size += p.lstat().st_size
                p.unlink(missing_ok=True)
                removed += 1
    return removed, size
