"""ONNX import (onnx + torch-mlir, no PyTorch): models built with onnx.helper compile with
`irtk compile model.onnx` and match onnxruntime on every device; bad files are clear errors."""
from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import irtk
from tests.conftest import all_device_uris

onnx = pytest.importorskip("onnx", reason="the onnx extra (scripts/setup.sh installs it)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime (the dev extra) is the oracle")
from irtk.importers import import_onnx  # noqa: E402
from tests.importers.onnx_models import INPUT_SHAPES, MODELS  # noqa: E402


@functools.cache
def _model(name: str, folder: Path) -> tuple[Path, bytes]:
    """The model's file (fresh random weights) and its module for every device."""
    path = folder / f"{name}.onnx"
    onnx.save(MODELS[name](onnx, np.random.default_rng()), str(path))
    return path, irtk.compile_file(str(path), target="vulkan-spirv,cpu")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx")


@pytest.mark.parametrize("uri", all_device_uris())
@pytest.mark.parametrize("name", list(MODELS))
def test_a_model_matches_onnxruntime(name: str, uri: str, folder: Path) -> None:
    path, module = _model(name, folder)
    x = np.random.default_rng().standard_normal(INPUT_SHAPES[name]).astype(np.float32)
    expected = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    got = np.asarray(getattr(irtk.load(module, device=uri), name)(x))
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())


def test_a_batchnorm_runs_only_its_input_dependent_part(folder: Path) -> None:
    path, _ = _model("cnn", folder)
    seen: list[str] = []
    import_onnx(path).compile("cpu", dump_after="dispatch", dump=seen.append)
    assert "math.sqrt" not in seen[0] and "math.rsqrt" not in seen[0]


def irtk_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "irtk.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_the_cli_compiles_and_imports_an_onnx_file(folder: Path) -> None:
    path, _ = _model("mlp", folder)
    p = irtk_cli("compile", str(path), "--target=cpu", "-o", "mlp.vmfb", cwd=folder)
    assert p.returncode == 0, p.stderr
    p = irtk_cli("run", "mlp.vmfb", "--input=1x16xf32=0.5", cwd=folder)
    assert p.returncode == 0 and p.stdout.startswith("EXEC @mlp\n"), p.stderr
    assert "1x10xf32=" in p.stdout
    p = irtk_cli("import", str(path), "--function=main", "-o", "mlp.mlir", cwd=folder)
    assert p.returncode == 0, p.stderr
    text = (folder / "mlp.mlir").read_text()
    assert "func.func @main(%arg0: tensor<?x16xf32>) -> tensor<?x10xf32>" in text
    assert "linalg.matmul" in text


def _write(folder: Path, name: str, nodes: list) -> Path:
    from onnx import TensorProto, helper
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                          [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    path = folder / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_bad_files_are_clear_errors(folder: Path) -> None:
    from onnx import helper
    (folder / "junk.onnx").write_bytes(b"not a protobuf at all")
    unknown = _write(folder, "unknown.onnx", [helper.make_node("NotAnOp", ["x"], ["y"])])
    cases = {"junk.onnx": "junk.onnx: error: not a readable ONNX model",
             "missing.onnx": "cannot read 'missing.onnx': no such file",
             unknown.name: "unknown.onnx: error: torch-mlir has no conversion for the ONNX op "
                           "NotAnOp (opset ai.onnx 17)"}
    for name, message in cases.items():
        p = irtk_cli("compile", name, "-o", "out.vmfb", cwd=folder)
        assert p.returncode == 1 and message in p.stderr, p.stderr
        assert "Traceback" not in p.stderr
        assert not (folder / "out.vmfb").exists()
    with pytest.raises(irtk.CompileError, match="no conversion for the ONNX op NotAnOp"):
        import_onnx(unknown)
    with pytest.raises(irtk.InputError, match="takes a path, bytes or onnx.ModelProto"):
        import_onnx(3)


def test_the_onnx_path_does_not_need_pytorch(folder: Path) -> None:
    # irtk[onnx] installs no torch: importing and compiling must not import it.
    path, _ = _model("mlp", folder)
    code = ("import sys, irtk.importers as I\n"
            f"I.import_onnx({str(path)!r}).compile('cpu')\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
