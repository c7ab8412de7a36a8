"""The irtk command line: the happy paths and every user error (message, exit 1, no traceback,
nothing half-written)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import all_device_uris, vulkan_device_uris

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "elementwise.mlir"


def irtk(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "irtk.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def assert_user_error(p: subprocess.CompletedProcess, fragment: str) -> None:
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert fragment in p.stderr, p.stderr


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "example.vmfb"
    p = irtk("compile", str(EXAMPLE), "--target=vulkan-spirv,cpu", "-o", str(out))
    assert p.returncode == 0, p.stderr
    return out


@pytest.mark.parametrize("device", all_device_uris())
def test_run_prints_results_iree_style(both, device):
    p = irtk("run", str(both), f"--device={device}", "--function=main",
             "--input=2x4xf32=1,-2,3,-4,0.5,0,-0.5,2", "--input=4xf32=1 1 1 1")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "EXEC @main"
    assert lines[1] == "result[0]: hal.buffer_view"
    assert lines[2].startswith("2x4xf32=[")
    assert lines[3] == "result[1]: hal.buffer_view"
    assert lines[4] == "4x2xi32=[1 0][-2 0][3 0][-4 2]"


def test_run_reads_and_writes_npy(both, tmp_path):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    w = rng.standard_normal(4).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    p = irtk("run", str(both), "--device=local-task", "--input=@x.npy", "--input=@w.npy",
             "--output=@y.npy", "--output=@t.npy", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    y = np.load(tmp_path / "y.npy")
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, np.exp(-x64 * x64) * w + np.maximum(x64, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.load(tmp_path / "t.npy"), np.trunc(x64).T.astype(np.int32))


def test_compile_each_target(tmp_path):
    for target in ("vulkan-spirv", "cpu"):
        out = tmp_path / f"{target}.vmfb"
        p = irtk("compile", str(EXAMPLE), f"--target={target}", "-o", str(out))
        assert p.returncode == 0, p.stderr
        assert out.read_bytes()[4:8] == b"IRTK"


def test_devices_lists_cpu_drivers_and_vulkan_devices():
    p = irtk("devices")
    assert p.returncode == 0, p.stderr
    assert "local-sync" in p.stdout
    assert "local-task" in p.stdout and "workers" in p.stdout
    if vulkan_device_uris():
        assert "vulkan://0" in p.stdout
        assert "subgroup size" in p.stdout and "max workgroup invocations" in p.stdout
        assert "shared memory" in p.stdout and "16-bit float" in p.stdout


def test_dump_shows_the_module(both):
    p = irtk("dump", str(both))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    for fragment in ("version", "hal.command_buffer.dispatch", "main", "__init",
                     "vulkan-spirv-fb", "cpu-kernel-fb", "entry point main_dispatch_0_elementwise"):
        assert fragment in out, fragment


def test_malformed_mlir_points_at_file_line_col(tmp_path):
    src = tmp_path / "bad.mlir"
    src.write_text("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a tensor<4xf32>\n}\n")
    out = tmp_path / "bad.vmfb"
    p = irtk("compile", str(src), "-o", str(out))
    assert_user_error(p, f"{src}:2:")
    assert ": error: " in p.stderr
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [src]


def test_unsupported_op_is_named(tmp_path):
    src = tmp_path / "op.mlir"
    src.write_text("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                   "  %r = bufferization.alloc_tensor() : tensor<4xf32>\n"
                   "  return %r : tensor<4xf32>\n}\n")
    p = irtk("compile", str(src), "-o", str(tmp_path / "op.vmfb"))
    assert_user_error(p, f"{src}:2:3: error: unsupported op 'bufferization.alloc_tensor'")


def test_missing_input_file(tmp_path):
    p = irtk("compile", str(tmp_path / "nope.mlir"), "-o", str(tmp_path / "x.vmfb"))
    assert_user_error(p, "cannot read")


def test_unknown_device_lists_devices(both):
    p = irtk("run", str(both), "--device=tpu://0")
    assert_user_error(p, "unknown device 'tpu://0'")
    assert "local-sync" in p.stderr


def test_wrong_inputs(both):
    p = irtk("run", str(both), "--device=local-sync", "--input=2x4xf32=1,2,3,4,5,6,7,8")
    assert_user_error(p, "main: expected 2 arguments, got 1")
    p = irtk("run", str(both), "--device=local-sync", "--input=2x4xf32=1,2,3,4,5,6,7,8",
             "--input=3xf32=1,2,3")
    assert_user_error(p, "argument 1: expected 4xf32, got 3xf32")
    p = irtk("run", str(both), "--device=local-sync", "--input=2x4xf32=1,2,3", "--input=4xf32=1")
    assert p.returncode == 1 and "Traceback" not in p.stderr


def test_module_without_executable_for_device(tmp_path):
    if not vulkan_device_uris():
        pytest.skip("no Vulkan device")
    out = tmp_path / "cpu.vmfb"
    assert irtk("compile", str(EXAMPLE), "--target=cpu", "-o", str(out)).returncode == 0
    p = irtk("run", str(out), "--device=vulkan", "--input=2x4xf32=0", "--input=4xf32=0")
    assert_user_error(p, "cpu (format cpu-kernel-fb)")


def test_not_a_module(tmp_path):
    bad = tmp_path / "bad.vmfb"
    bad.write_bytes(b"\x00" * 64)
    p = irtk("run", str(bad), "--device=local-sync")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    p = irtk("dump", str(bad))
    assert p.returncode == 1 and "Traceback" not in p.stderr


SPIN_ASM = """module @spin
export @main = @main {abi.args = "", abi.results = ""}
func @main "0v_v" {
    br ^spin
  ^spin:
    br ^spin
}
"""


def test_run_timeout_stops_an_endless_program(tmp_path):
    (tmp_path / "spin.vmasm").write_text(SPIN_ASM)
    p = irtk("vm-as", str(tmp_path / "spin.vmasm"), "-o", str(tmp_path / "spin.vmfb"))
    assert p.returncode == 0, p.stderr
    p = irtk("run", str(tmp_path / "spin.vmfb"), "--device=local-sync", "--timeout=0.3")
    assert_user_error(p, "time limit of 0.3 s exceeded (Limits.seconds)")
    p = irtk("run", str(tmp_path / "spin.vmfb"), "--device=local-sync", "--timeout=-1")
    assert p.returncode != 0 and "invalid number of seconds value: '-1'" in p.stderr


def test_run_inputs_too_large_or_broken_are_user_errors(both, tmp_path):
    p = irtk("run", str(both), "--device=local-sync", "--input=99999999999999999999xf32=1",
             "--input=4xf32=1")
    assert_user_error(p, "--input 0: 99999999999999999999xf32 has a dimension of")
    p = irtk("run", str(both), "--device=local-sync", "--input=2x4xf32=1",
             "--input=100000x100000x100xf32=1")
    assert_user_error(p, "--input 1: 100000x100000x100xf32 is 1,000,000,000,000 elements")
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f4',\n")
    p = irtk("run", str(both), "--device=local-sync", "--input=@bad.npy", "--input=4xf32=1",
             cwd=tmp_path)
    assert_user_error(p, "--input 0: input file 'bad.npy' is not a valid .npy file")
