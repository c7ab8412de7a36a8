"""Contractions whose A or B is larger than one texel view, on SwiftShader's profile: read through
texel windows (docs/codegen_spirv.md, "Contractions"), A's window picked once per workgroup and
B's once per chunk of k values. Run with small windows, so that small problems cross many; the
result is still the sequential float32 one, bit for bit."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from irtk.compiler.codegen.spirv import compile_kernel
from irtk.compiler.codegen.spirv.matmul import matmul_tiling
from irtk.compiler.targets import VULKAN_PROFILES

from .conftest import VulkanRunner, _runner
from .test_strategies import matmul


def test_a_large_swiftshader_matmul_reads_both_operands_through_windows():
    """1024^3 f32: A and B are 4 MiB each (four times a 1 MiB view): 8 views each, A's window
    picked once, B's every 128 k values (128 rows of 1024 words: half a window); lavapipe reads
    whole texel buffers and has no windows."""
    profile = VULKAN_PROFILES["swiftshader"]
    kernel = matmul(1024, 1024, 1024)
    t = matmul_tiling(kernel, profile)
    assert t is not None and t.broadcast and t.texel_windows == ((0, 8), (1, 8))
    assert t.b_chunk == 128 and t.a_wide and t.b_wide
    compiled = compile_kernel(kernel, profile)
    assert compiled.texel_windows == {0: 8, 1: 8} and compiled.texel_bindings == (0, 1)
    assert compiled.requirements["texel_array_indexing"]
    assert matmul_tiling(matmul(512, 512, 512), profile).texel_windows == ()  # one view each
    assert compile_kernel(kernel, VULKAN_PROFILES["llvmpipe"]).texel_windows == {}


def _sequential(a: np.ndarray, b: np.ndarray, init: np.ndarray) -> np.ndarray:
    acc = init.copy()
    for kk in range(a.shape[1]):
        acc = (acc + (a[:, kk:kk + 1] * b[kk:kk + 1, :]).astype(np.float32)).astype(np.float32)
    return acc


@pytest.mark.parametrize("window, m, n, k, windows, chunk, wide", [
    # 1024-texel windows (a view every 8 KiB; half a window: 2045 words wherever the first
    # falls): A's 16 rows of 120 words fit; B's 16 columns, 8 rows of 264 words at a time
    # (7 * 264 + 16 words; 12 rows would not fit)
    (1024, 520, 264, 120, ((0, 31), (1, 16)), 8, False),
    # N not a multiple of the tile: partial tiles; K leaves a tail after the last chunk
    (1024, 200, 250, 123, ((0, 13), (1, 16)), 8, False),
    # the large blocks (16 x 8, wide loads): 4096-texel windows (8189 words), A's 16 rows of
    # 500 words (8000); B 24 rows at a time (a multiple of the 8 k values of a block: 2 per
    # lane), 28 where K is odd (no wide loads of A: 4 k values per block)
    (4096, 520, 264, 500, ((0, 32), (1, 17)), 24, True),
    (4096, 520, 264, 501, ((0, 32), (1, 17)), 28, True),
])
def test_windowed_matmuls_match_the_sequential_result(rng, window, m, n, k, windows, chunk,
                                                     wide):
    shared = _runner("swiftshader")
    profile = dataclasses.replace(VULKAN_PROFILES["swiftshader"], texel_window=window)
    runner = VulkanRunner("swiftshader", shared.device, profile)
    kernel = matmul(m, n, k)
    t = matmul_tiling(kernel, profile)
    assert t is not None and t.broadcast and (t.rn == 8) == wide
    assert t.texel_windows == windows and t.b_chunk == chunk
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    init = rng.standard_normal((m, n)).astype(np.float32)
    got = runner.run(kernel, [a, b], initial=[init])[0].astype(np.float32)
    np.testing.assert_array_equal(got, _sequential(a, b, init))


@pytest.mark.parametrize("m", [1, 520])
def test_a_b_too_wide_for_a_block_per_window_keeps_narrow_loads(m):
    """B of 20000 columns: half a window holds 4 of its rows (a block's k values without A's
    wide loads) but not 8 (a block's with them). A's wide loads are decided first, so B keeps a
    storage buffer and narrow loads: no 64-bit loads, which SwiftShader lacks (before, B's wide
    loads were chosen for windows it then did not get, and the kernel asked for int64)."""
    profile = VULKAN_PROFILES["swiftshader"]
    kernel = matmul(m, 20000, 200)
    t = matmul_tiling(kernel, profile)
    assert t is not None and t.a_wide and not t.b_wide and t.b_chunk == 0
    assert 1 not in dict(t.texel_windows)
    assert "int64" not in compile_kernel(kernel, profile).requirements
