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


def test_devices_json_describes_every_device(tmp_path):
    import json
    p = irtk("devices", "--json")
    assert p.returncode == 0, p.stderr
    described = json.loads(p.stdout)
    assert [d["uri"] for d in described][:2] == ["local-sync", "local-task"]
    assert len([d for d in described if d["driver"] == "vulkan"]) == len(vulkan_device_uris())
    for d in described:
        assert set(d) >= {"uri", "name", "driver", "features", "limits", "vulkan_target"}
        assert d["limits"]["max_workgroup_invocations"] >= 1
        assert (d["vulkan_target"] is None) == (d["driver"] != "vulkan")
    text = irtk("devices").stdout
    for d in described:
        if d["vulkan_target"] is not None:
            assert f"{d['uri']:<12} {d['name']}" in text
            assert f"--vulkan-target={d['vulkan_target']}" in text


F64_CHECK = """func.func @add_f64() {
  %a = util.unfoldable_constant dense<[1.0, 2.0]> : tensor<2xf64>
  %b = util.unfoldable_constant dense<[0.5, 0.25]> : tensor<2xf64>
  %0 = tensor.empty() : tensor<2xf64>
  %r = linalg.add ins(%a, %b : tensor<2xf64>, tensor<2xf64>) outs(%0 : tensor<2xf64>) -> tensor<2xf64>
  check.expect_almost_eq_const(%r, dense<[1.5, 2.25]> : tensor<2xf64>) : tensor<2xf64>
  return
}
"""


def test_check_compiles_for_the_profile_of_its_device(tmp_path):
    llvmpipe = [d for d in vulkan_device_uris() if "llvmpipe" in irtk_device_name(d)]
    if not llvmpipe:
        pytest.skip("no lavapipe device (64-bit floats)")
    src = tmp_path / "f64.mlir"
    src.write_text(F64_CHECK)
    p = irtk("check", str(src), f"--device={llvmpipe[0]}", "--keep-f64")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[PASS] add_f64" in p.stdout
    p = irtk("check", str(src), f"--device={llvmpipe[0]}", "--vulkan-target=default",
             "--keep-f64")
    assert p.returncode == 1 and "target profile 'default' lacks it" in p.stdout
    # By default f64 is computed in f32 (as IREE), which the default profile runs.
    p = irtk("check", str(src), f"--device={llvmpipe[0]}", "--vulkan-target=default")
    assert p.returncode == 0 and "[PASS] add_f64" in p.stdout, p.stdout


def irtk_device_name(uri: str) -> str:
    from tests.conftest import device_info
    return device_info(uri).name


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


PARTIAL = ("func.func @good(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
           "  return %a : tensor<4xf32>\n}\n"
           "func.func @bad(%a: tensor<4xf32>, %b: tensor<2x3xi32>) -> tensor<4xf32> {\n"
           "  %r = bufferization.alloc_tensor() : tensor<4xf32>\n"
           "  return %r : tensor<4xf32>\n}\n")


def test_a_function_that_does_not_compile_fails_the_compile(tmp_path):
    src = tmp_path / "partial.mlir"
    src.write_text(PARTIAL)
    p = irtk("compile", str(src), "--target=cpu", "-o", str(tmp_path / "p.vmfb"))
    assert_user_error(p, f"{src}:5:3: error: unsupported op 'bufferization.alloc_tensor' "
                         "(in function 'bad')")
    assert list(tmp_path.iterdir()) == [src]


def test_partial_keeps_the_stub_with_its_real_signature(tmp_path):
    src, out = tmp_path / "partial.mlir", tmp_path / "p.vmfb"
    src.write_text(PARTIAL)
    p = irtk("compile", str(src), "--target=cpu", "--partial", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "(in function 'bad')" in p.stderr and "--partial" in p.stderr
    p = irtk("run", str(out), "--device=local-sync", "--function=good", "--input=4xf32=1 2 3 4")
    assert p.returncode == 0 and "4xf32=1 2 3 4" in p.stdout, p.stderr
    p = irtk("run", str(out), "--device=local-sync", "--function=bad", "--input=4xf32=1")
    assert_user_error(p, "expected 2 arguments, got 1")
    p = irtk("run", str(out), "--device=local-sync", "--function=bad", "--input=4xf32=1",
             "--input=2x3xi32=0")
    assert_user_error(p, f"{src}:5:3: error: unsupported op 'bufferization.alloc_tensor'")


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


SCALARS = """
func.func @scale(%x: f32, %n: i32, %t: tensor<4xf32>) -> (f32, i32, tensor<4xf32>) {
  %y = arith.mulf %x, %x : f32
  %m = arith.addi %n, %n : i32
  return %y, %m, %t : f32, i32, tensor<4xf32>
}
"""


@pytest.fixture(scope="module")
def scalars(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("scalars")
    (folder / "scale.mlir").write_text(SCALARS)
    p = irtk("compile", str(folder / "scale.mlir"), "--target=cpu", "-o",
             str(folder / "scale.vmfb"))
    assert p.returncode == 0, p.stderr
    return folder / "scale.vmfb"


def test_run_takes_scalars_and_prints_them_as_iree_does(scalars):
    p = irtk("run", f"--module={scalars}", "--input=1.5", "--input=5", "--input=4xf32=1,2,3,4")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["EXEC @scale", "result[0]: f32=2.25", "result[1]: i32=10",
                                     "result[2]: hal.buffer_view", "4xf32=1 2 3 4"]


def test_run_outputs_raw_npy_append_and_print_as_iree_does(scalars, tmp_path):
    args = ["run", str(scalars), "--input=1.5", "--input=-3", "--input=4xf32=1,2,3,4"]
    p = irtk(*args, "--output=@s.bin", "--output=-", "--output=@t.npy", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["EXEC @scale", "result[1]: i32=-6"]
    assert np.fromfile(tmp_path / "s.bin", np.float32).tolist() == [2.25]
    np.testing.assert_array_equal(np.load(tmp_path / "t.npy"), [1, 2, 3, 4])
    for _ in range(2):
        p = irtk(*args, "--output=+s.bin", "--output=+n.npy", "--output=@t.bin", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
    assert np.fromfile(tmp_path / "s.bin", np.float32).tolist() == [2.25, 2.25, 2.25]
    with open(tmp_path / "n.npy", "rb") as f:
        assert [int(np.load(f)), int(np.load(f))] == [-6, -6]
    assert (tmp_path / "t.bin").read_bytes() == np.arange(1, 5, dtype=np.float32).tobytes()


def test_run_checks_output_arguments_before_running(scalars, tmp_path):
    args = ["run", str(scalars), "--input=1.5", "--input=5", "--input=4xf32=1,2,3,4"]
    assert_user_error(irtk(*args, "--output=@a.npy", cwd=tmp_path),
                      "1 --output given for the 3 results of 'scale'")
    assert_user_error(irtk(*args, "--output=a.npy", "--output=-", "--output=-", cwd=tmp_path),
                      "--output 'a.npy': expected '-' (print), '@FILE.npy'")
    assert_user_error(irtk(*args, "--output=@no/such/a.npy", "--output=-", "--output=-",
                           cwd=tmp_path), "no folder 'no/such'")
    assert not list(tmp_path.iterdir())


def test_run_cuts_large_results_at_print_max_element_count(both):
    p = irtk("run", str(both), "--device=local-sync", "--input=2x4xf32=1", "--input=4xf32=1",
             "--print_max_element_count=3")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[2] == "2x4xf32=[1.36788 1.36788 1.36788]..."


def test_run_picks_the_device_and_function_from_the_module(tmp_path):
    vmfb = tmp_path / "v.vmfb"
    assert irtk("compile", str(EXAMPLE), "-o", str(vmfb)).returncode == 0   # vulkan-spirv
    p = irtk("run", str(vmfb), "--input=2x4xf32=1", "--input=4xf32=1")
    if vulkan_device_uris():
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith("EXEC @main\n")
    else:
        assert_user_error(p, "vulkan")


def test_run_asks_for_a_function_when_there_are_several(tmp_path):
    (tmp_path / "two.mlir").write_text(SCALARS + SCALARS.replace("@scale", "@other"))
    assert irtk("compile", "two.mlir", "--target=cpu", "-o", "two.vmfb",
                cwd=tmp_path).returncode == 0
    assert_user_error(irtk("run", "two.vmfb", cwd=tmp_path),
                      "the module exports 2 functions; choose one with --function=NAME: "
                      "scale, other")


@pytest.mark.parametrize("content, message", [
    (EXAMPLE.read_bytes(), "this is MLIR text, not a module: compile it first"),
    (b"\x18\x00\x00\x00IREE\x00\x00\x00\x00" + bytes(64),
     "this is an IREE module (.vmfb): irtk reads its own module format"),
    (b"module @m\nfunc @main \"0v_v\" {\n    return ()\n}\n",
     "this is VM assembly text, not a module: assemble it first"),
])
def test_run_names_files_that_are_not_irtk_modules(tmp_path, content, message):
    (tmp_path / "thing").write_bytes(content)
    assert_user_error(irtk("run", "thing", cwd=tmp_path), f"thing: {message}")


def test_version_names_irtk_its_module_format_xdsl_and_the_vulkan_loader():
    p = irtk("--version")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("irtk ") and lines[1].startswith("module format: irtk bytecode")
    assert lines[2].startswith("xDSL: ") and lines[3].startswith("Vulkan loader: ")


def test_compile_writes_the_module_to_standard_output_with_dash(tmp_path):
    p = subprocess.run([sys.executable, "-m", "irtk.cli", "compile", str(EXAMPLE),
                        "--target=cpu", "-o", "-"], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout[4:8] == b"IRTK"
    (tmp_path / "m.vmfb").write_bytes(p.stdout)
    assert irtk("run", str(tmp_path / "m.vmfb"), "--input=2x4xf32=1",
                "--input=4xf32=1").returncode == 0


def test_benchmark_prints_a_table_or_json(both):
    import json
    inputs = ["--input=2x4xf32=1,-2,3,-4,0.5,0,-0.5,2", "--input=4xf32=1 1 1 1"]
    p = irtk("benchmark", str(both), "--device=local-sync", "--benchmark_repetitions=3",
             "--benchmark_min_time=0.01s", "--json", *inputs)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["repetitions"] == 3 and len(result["times_ms"]) == 3
    assert all(n >= 1 for n in result["iterations"])
    assert 0 < result["min_ms"] <= result["median_ms"] <= result["max_ms"]
    p = irtk("benchmark", f"--module={both}", *inputs, "--benchmark_repetitions=2",
             "--benchmark_min_time=0.01")
    assert p.returncode == 0, p.stderr
    assert "BENCHMARK @main" in p.stdout and "BM_main/repetition:2" in p.stdout
    assert "BM_main_median" in p.stdout
    assert_user_error(irtk("benchmark", str(both), inputs[0]), "expected 2 arguments, got 1")
    assert_user_error(irtk("benchmark", str(both), *inputs, "--benchmark_repetitions=0"),
                      "repetitions must be at least 1")


@pytest.mark.parametrize("device", ["local-task"] + vulkan_device_uris())
def test_run_and_benchmark_write_a_trace_and_print_statistics(both, device, tmp_path):
    import json
    inputs = ["--input=2x4xf32=1,-2,3,-4,0.5,0,-0.5,2", "--input=4xf32=1 1 1 1"]
    trace = tmp_path / "run.json"
    p = irtk("run", str(both), f"--device={device}", *inputs, f"--trace={trace}",
             "--print_statistics")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("EXEC @main\n")   # results alone on standard output
    assert "calls: 2" in p.stderr               # __init and main
    assert "dispatches: 2" in p.stderr and "bytes uploaded: 48" in p.stderr
    assert "bytes downloaded: 64" in p.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert {"call __init", "call main", "queue_execute", "hal.executable.create"} <= \
        {e["name"] for e in complete}
    assert len([e for e in complete if e["cat"] == "dispatch"]) == 2
    trace = tmp_path / "bench.json"
    p = irtk("benchmark", str(both), f"--device={device}", *inputs, f"--trace={trace}",
             "--benchmark_repetitions=2", "--benchmark_min_time=0.01", "--json")
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert [d["count"] for d in result["dispatches"]] == [2, 2]
    assert len([e for e in json.loads(trace.read_text())["traceEvents"]
                if e.get("cat") == "dispatch"]) >= 2 * (1 + 2 + 2)


def test_trace_into_a_missing_folder_is_refused_before_anything_runs(both, tmp_path):
    p = irtk("run", str(both), "--device=local-sync", "--input=2x4xf32=1", "--input=4xf32=1",
             f"--trace={tmp_path / 'no' / 't.json'}")
    assert_user_error(p, "folder")
    assert "EXEC" not in p.stdout and not (tmp_path / "no").exists()


def test_dump_metadata_summarizes_what_built_the_module(both):
    p = irtk("dump", "--metadata", str(both))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "module @elementwise (irtk module format 2)"
    assert lines[1].startswith("built by: irtk ") and "targets vulkan-spirv,cpu" in lines[1]
    assert "from elementwise.mlir" in lines[1]
    assert "  main(2x4xf32, 4xf32) -> (2x4xf32, 4x2xi32)" in lines
    assert any("(vulkan-spirv-fb, profile default," in line for line in lines)
    assert any("(cpu-kernel-fb," in line for line in lines)
    text = irtk("vm-dis", str(both)).stdout
    assert 'metadata "producer" "irtk ' in text       # and it assembles back (test_vm_tools)


def test_cache_info_and_clear(tmp_path, monkeypatch, both):
    monkeypatch.setenv("IRTK_CACHE_DIR", str(tmp_path / "cache"))
    p = irtk("cache", "info")
    assert p.returncode == 0, p.stderr
    assert f"cache: {tmp_path / 'cache'}" in p.stdout and "vulkan: 0 files, 0 bytes" in p.stdout
    vulkan = vulkan_device_uris()
    if vulkan:   # a run fills the pipeline cache of its device
        assert irtk("run", str(both), f"--device={vulkan[0]}", "--input=2x4xf32=1",
                    "--input=4xf32=1").returncode == 0
    else:
        (tmp_path / "cache" / "vulkan").mkdir(parents=True)
        (tmp_path / "cache" / "vulkan" / "x.bin").write_bytes(b"\0" * 10)
    (tmp_path / "cache" / "other.txt").write_text("not irtk's")
    p = irtk("cache", "info")
    assert "vulkan: 1 file, " in p.stdout, p.stdout
    p = irtk("cache", "clear")
    assert p.returncode == 0 and p.stdout.startswith("removed 1 file ("), p.stdout
    assert "vulkan: 0 files" in irtk("cache", "info").stdout
    assert (tmp_path / "cache" / "other.txt").exists()      # only irtk's folders are touched
    assert irtk("cache", "purge").returncode == 2


def test_verbose_logs_the_phases_and_progress_is_reported(tmp_path):
    p = irtk("-v", "compile", str(EXAMPLE), "--target=cpu", "-o", str(tmp_path / "e.vmfb"))
    assert p.returncode == 0, p.stderr
    for phase in ("parse and import", "dispatch formation", "kernel code generation",
                  "host code generation"):
        assert f"irtk.compiler: {phase}" in p.stderr
    p = irtk("-v", "run", str(tmp_path / "e.vmfb"), "--device=local-sync",
             "--input=2x4xf32=1", "--input=4xf32=1")
    assert p.returncode == 0 and "irtk.runtime: loaded module 'elementwise'" in p.stderr
    assert "irtk.compiler" not in irtk("compile", str(EXAMPLE), "--target=cpu", "-o",
                                       str(tmp_path / "f.vmfb")).stderr
    import irtk as api
    seen: list[str] = []
    api.compile_file(str(EXAMPLE), target="cpu", progress=seen.append)
    assert seen[0].startswith("parse and import") and "host code generation" in seen


def _on_a_terminal(*args: str) -> tuple[int, str, str]:
    """Run the CLI with standard error on a pseudo-terminal (progress lines show there at once:
    IRTK_PROGRESS_AFTER=0): exit code, standard output, what the terminal got."""
    import os
    import pty
    main_fd, child_fd = pty.openpty()
    env = {**os.environ, "IRTK_PROGRESS_AFTER": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "irtk.cli", *args], stdout=subprocess.PIPE,
                            stderr=child_fd, env=env)
    os.close(child_fd)
    chunks = []
    while True:
        try:
            data = os.read(main_fd, 65536)
        except OSError:   # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out, _ = proc.communicate(timeout=300)
    os.close(main_fd)
    return proc.returncode, out.decode(), b"".join(chunks).decode(errors="replace")


def test_progress_lines_on_a_terminal_are_cleared_before_an_error(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text(EXAMPLE.read_text() + "\nfunc.func @g() {\n  %x = arith.addf %y, %y : f32\n"
                   "  return\n}\n")
    code, _, terminal = _on_a_terminal("compile", str(bad), "-o", str(tmp_path / "b.vmfb"))
    assert code == 1
    assert "compiling: parse and import" in terminal
    # The error starts on a cleared line, not after the progress text.
    last = terminal.rsplit("\x1b[K", 1)[-1]
    assert last.lstrip("\r\n").startswith(str(bad)), repr(terminal)
    assert "Traceback" not in terminal


def test_check_shows_which_function_runs_on_a_terminal(tmp_path):
    checks = tmp_path / "checks.mlir"
    checks.write_text("""func.func @first() {
  %a = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  check.expect_almost_eq_const(%a, dense<[1.0, 2.0]> : tensor<2xf32>) : tensor<2xf32>
  return
}
func.func @second() {
  %a = arith.constant dense<[3, 4]> : tensor<2xi32>
  check.expect_eq_const(%a, dense<[3, 4]> : tensor<2xi32>) : tensor<2xi32>
  return
}
""")
    code, out, terminal = _on_a_terminal("check", str(checks), "--device=local-sync")
    assert code == 0, out + terminal
    assert "checking: first (1/2)" in terminal and "checking: second (2/2)" in terminal
    assert terminal.endswith("\x1b[K"), repr(terminal)   # nothing left on the terminal
    assert out.splitlines() == ["[PASS] first", "[PASS] second",
                                "2 passed, 0 failed, 0 skipped"]
