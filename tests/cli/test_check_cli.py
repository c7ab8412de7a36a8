"""`irtk check`: one line per function, the summary line, and exit codes (0 all passed or
skipped, 1 something failed, 2 the file as a whole could not be checked)."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from irtk.cli import main
from tests.conftest import all_device_uris
from tests.modules.check_programs import checks_module, passing_module
from tests.modules.test_check_runner import BROKEN, IOTA, SCALE


def irtk_process(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "irtk.cli", *args], capture_output=True,
                          text=True, timeout=300)


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def irtk(capsys):
    """Run the command in this process (starting Python per call is slow): exit code and
    output, as a subprocess would give them."""
    def run(*args: str) -> Outcome:
        try:
            code = main(list(args))
        except SystemExit as e:   # argparse's usage errors
            code = e.code
        out, err = capsys.readouterr()
        return Outcome(code, out, err)
    return run


@pytest.fixture
def checks_vmfb(tmp_path) -> Path:
    path = tmp_path / "checks.vmfb"
    path.write_bytes(checks_module())
    return path


@pytest.mark.parametrize("device", all_device_uris())
def test_passing_program_on_every_device(irtk, tmp_path, device):
    path = tmp_path / "prog.mlir"
    path.write_text(IOTA + SCALE)
    p = irtk("check", str(path), f"--device={device}", "--all", "--seed=5")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["[PASS] iota", "[PASS] scale",
                                     "2 passed, 0 failed, 0 skipped"]


def test_the_installed_command(tmp_path):
    path = tmp_path / "prog.mlir"
    path.write_text(IOTA + SCALE)
    p = irtk_process("check", str(path))
    assert (p.returncode, p.stdout) == (0, "[PASS] iota\n1 passed, 0 failed, 0 skipped\n")
    p = irtk_process("check", str(tmp_path / "missing.mlir"))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip() == f"irtk: error: cannot read '{tmp_path}/missing.mlir': " \
        "No such file or directory"


def test_explicit_target(irtk, tmp_path):
    path = tmp_path / "prog.mlir"
    path.write_text(IOTA)
    p = irtk("check", str(path), "--device=local-sync", "--target=cpu")
    assert (p.returncode, p.stdout) == (0, "[PASS] iota\n1 passed, 0 failed, 0 skipped\n")
    p = irtk("check", str(path), "--device=local-sync", "--target=vulkan-spirv")
    assert p.returncode == 1
    assert p.stdout.startswith("[FAIL] iota: does not load: ")


def test_failed_checks_and_runtime_errors_are_reported_and_others_run(irtk, checks_vmfb):
    p = irtk("check", str(checks_vmfb), "--device=local-task")
    assert p.returncode == 1, p.stderr
    lines = p.stdout.splitlines()
    assert lines[:4] == ["[PASS] all_pass",
                         "[FAIL] one_fails: Expected true but got 0 (false)",
                         "[FAIL] two_fail_then_return: Expected true but got 0 (false)",
                         "    Expected false but got 5 (true)"]
    assert lines[4].startswith("[FAIL] raises: RuntimeFailure: hal.buffer.length: ")
    assert lines[5:] == ["1 passed, 3 failed, 0 skipped"]
    assert "Traceback" not in p.stderr


def test_all_and_function_filters(irtk, checks_vmfb):
    p = irtk("check", str(checks_vmfb), "--function=compare_eq", "--function=all_pass",
             "--seed=1")
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    assert lines[0] == "[PASS] all_pass"
    assert lines[1].startswith("[FAIL] compare_eq: Expected equality of these values. "
                               "Contents does not match. The first failure occurs at index 0")
    assert lines[-1] == "1 passed, 1 failed, 0 skipped"
    p = irtk("check", str(checks_vmfb), "--all", "--seed=2")
    assert [line.split(":")[0] for line in p.stdout.splitlines() if line.startswith("[")] == [
        "[PASS] all_pass", "[FAIL] one_fails", "[FAIL] two_fail_then_return", "[FAIL] raises",
        "[FAIL] compare_eq", "[FAIL] compare_near"]


def test_all_checks_passing_exits_zero(irtk, tmp_path):
    path = tmp_path / "ok.vmfb"
    path.write_bytes(passing_module())
    p = irtk("check", str(path))
    assert (p.returncode, p.stdout) == (0, "[PASS] fine\n1 passed, 0 failed, 0 skipped\n")


def test_a_function_that_does_not_compile_fails_alone(irtk, tmp_path):
    path = tmp_path / "mixed.mlir"
    path.write_text(IOTA + BROKEN)
    p = irtk("check", str(path), "--device=local-sync")
    assert p.returncode == 1, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "[PASS] iota"
    assert lines[1].startswith(f"[FAIL] broken: does not compile: {path}:")
    assert lines[-1] == "1 passed, 1 failed, 0 skipped"


@pytest.mark.parametrize(("args", "fragment"), [
    (["{dir}/missing.mlir"], "cannot read '{dir}/missing.mlir'"),
    (["{dir}/garbage.mlir"], "garbage.mlir:1:1: error:"),
    (["{dir}/ok.mlir", "--device=nosuch"], "unknown device 'nosuch'"),
    (["{dir}/ok.mlir", "--function=nope"], "has no test function 'nope'; functions: iota"),
    (["{dir}/ok.mlir", "--target=tpu"], "tpu"),
])
def test_whole_file_problems_exit_2_with_one_message(irtk, tmp_path, args, fragment):
    (tmp_path / "garbage.mlir").write_text("this is not MLIR\n" + IOTA)
    (tmp_path / "ok.mlir").write_text(IOTA)
    p = irtk("check", *[a.format(dir=tmp_path) for a in args])
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stdout == ""
    assert fragment.format(dir=tmp_path) in p.stderr
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()   # one message; a located one quotes its source line
    assert len(lines) == 1 or (len(lines) == 3 and lines[2].strip() == "^"), lines


def test_usage_errors_exit_2(irtk):
    p = irtk("check")
    assert p.returncode == 2 and "usage:" in p.stderr
