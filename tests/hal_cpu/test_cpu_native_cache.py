"""The native executor's disk cache: object files keyed by the IR, the CPU and llvmlite; a
corrupt or truncated entry is ignored and rebuilt, never loaded."""
from __future__ import annotations

import numpy as np

from hal_cpu import llvm_jit
from tests.hal_cpu.cpu_kernel_builder import op, elementwise, run, workgroups_for


def _exe(scale: float) -> bytes:
    return elementwise("scale", [100], ["f32"], ["f32"],
                       [op("arith.constant", result_type="f32", float_value=scale),
                        op("arith.mulf", 0, 2, result_type="f32")], [3])


def _check(device, data: bytes, scale: float, rng) -> None:
    x = rng.standard_normal(100).astype(np.float32)
    (out,) = run(device, data, [x], [((100,), "f32")], workgroups_for(100, 64))
    np.testing.assert_array_equal(out, x * np.float32(scale))


def test_a_second_load_reads_the_cache_and_a_corrupt_entry_is_rebuilt(device, rng, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv("IRTK_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("IRTK_CPU_EXECUTOR", "native")
    data = _exe(2.5)
    compiled, cached = llvm_jit.STATS.compiled, llvm_jit.STATS.from_cache
    _check(device, data, 2.5, rng)
    assert llvm_jit.STATS.compiled == compiled + 1
    (entry,) = (tmp_path / "cpu").glob("*.o")
    _check(device, data, 2.5, rng)
    assert llvm_jit.STATS.from_cache == cached + 1
    for damage in (lambda b: b[:len(b) // 2], lambda b: b[:-1] + bytes([b[-1] ^ 1]),
                   lambda b: b"not an object file"):
        entry.write_bytes(damage(entry.read_bytes()))
        before = llvm_jit.STATS.compiled
        _check(device, data, 2.5, rng)
        assert llvm_jit.STATS.compiled == before + 1      # ignored and rebuilt
        assert llvm_jit._read_cached(entry) is not None   # and written back whole


def test_different_kernels_get_different_entries(device, rng, tmp_path, monkeypatch):
    monkeypatch.setenv("IRTK_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("IRTK_CPU_EXECUTOR", "native")
    _check(device, _exe(2.5), 2.5, rng)
    _check(device, _exe(-3.0), -3.0, rng)
    assert len(list((tmp_path / "cpu").glob("*.o"))) == 2
