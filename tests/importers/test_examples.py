"""examples/pytorch_model.py and examples/onnx_model.py run as their docstrings say: every device,
compared with torch and onnxruntime (each script asserts the match)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(script: str, cwd: Path) -> str:
    p = subprocess.run([sys.executable, str(EXAMPLES / script)], cwd=cwd, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def _rows(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines()[1:]]


def test_the_onnx_example_runs_on_every_device(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    from tests.conftest import all_device_uris
    out = _run("onnx_model.py", tmp_path)
    assert _rows(out) == all_device_uris() and "n/a" not in out
    # The committed model is what the script makes.
    shutil.copy(EXAMPLES / "onnx_model.py", tmp_path)
    _run(str(tmp_path / "onnx_model.py"), tmp_path)
    assert (tmp_path / "tiny_cnn.onnx").read_bytes() == (EXAMPLES / "tiny_cnn.onnx").read_bytes()


def test_the_pytorch_example_runs_on_every_device(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from tests.conftest import all_device_uris
    assert _rows(_run("pytorch_model.py", tmp_path)) == all_device_uris()
