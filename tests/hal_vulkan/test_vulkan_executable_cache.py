"""Executables from the same bytes share pipelines, kept a while after the last one goes, so
loading a module again neither compiles again nor grows the process."""
from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import vulkan_device_uris
from tests.hal_vulkan.kernels import mul_add_executable

ROOT = Path(__file__).resolve().parents[2]


def pipelines(device) -> int:
    return device.tracker.live().get("VkPipeline", 0)


def test_executables_of_the_same_bytes_share_pipelines(fresh_device):
    data = mul_add_executable()
    a = fresh_device.create_executable("vulkan-spirv-fb", data)
    count = pipelines(fresh_device)
    b = fresh_device.create_executable("vulkan-spirv-fb", data)
    assert pipelines(fresh_device) == count
    assert b.entry_point(0).pipeline == a.entry_point(0).pipeline
    other = fresh_device.create_executable("vulkan-spirv-fb", mul_add_executable(32))
    assert pipelines(fresh_device) == 2 * count   # one pipeline per entry point
    for exe in (a, b, other):
        exe.release()


def test_a_released_executable_is_found_again_until_trimmed(fresh_device):
    data = mul_add_executable()
    exe = fresh_device.create_executable("vulkan-spirv-fb", data)
    pipeline = exe.entry_point(0).pipeline
    exe.release()
    assert exe.released
    fresh_device.collect()
    count = pipelines(fresh_device)
    assert count >= 1   # kept, idle
    again = fresh_device.create_executable("vulkan-spirv-fb", data)
    assert again.entry_point(0).pipeline == pipeline and pipelines(fresh_device) == count
    del again
    gc.collect()
    fresh_device.trim()
    assert pipelines(fresh_device) == 0


def test_the_idle_executables_kept_are_bounded(fresh_device):
    capacity = fresh_device.executables.capacity
    per_executable = len(fresh_device.create_executable(
        "vulkan-spirv-fb", mul_add_executable(1)).entry_points)
    for size in range(1, capacity + 6):
        fresh_device.create_executable("vulkan-spirv-fb", mul_add_executable(size)).release()
    fresh_device.collect()
    assert fresh_device.executables.idle_count() == capacity
    assert pipelines(fresh_device) == capacity * per_executable


def test_an_executable_in_flight_keeps_its_pipelines_past_a_trim(fresh_device):
    from tests.hal_vulkan.test_vulkan_lifetimes import one_round
    data = mul_add_executable()
    one_round(fresh_device, data, release=True)
    fresh_device.trim()
    assert pipelines(fresh_device) == 0
    one_round(fresh_device, data, release=False)
    gc.collect()
    fresh_device.wait_idle(timeout=30)
    fresh_device.trim()
    assert pipelines(fresh_device) == 0


GROWTH_SCRIPT = textwrap.dedent("""
    import gc, sys
    import numpy as np
    import irtk
    vmfb = irtk.compile_file(sys.argv[1], target="vulkan-spirv")
    x, w = np.ones((2, 4), np.float32), np.ones(4, np.float32)
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    def rounds(n):
        for i in range(n):
            m = irtk.load(vmfb, device=sys.argv[2])
            if i % 2:
                m.main(x, w)
            del m
            gc.collect()
    rounds(20)
    before = rss()
    rounds(100)
    print(rss() - before)
""")


@pytest.mark.parametrize("uri", vulkan_device_uris())
def test_loading_and_dropping_a_module_keeps_the_process_flat(uri, tmp_path):
    """Before the cache: +6 MB per 100 loads on SwiftShader, +27 MB on lavapipe."""
    script = tmp_path / "loads.py"
    script.write_text(GROWTH_SCRIPT)
    p = subprocess.run([sys.executable, str(script), str(ROOT / "examples" / "elementwise.mlir"),
                        uri], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    growth = int(p.stdout.split()[-1])
    assert growth < 2 << 20, f"100 loads grew the process by {growth / 1e6:.1f} MB"
