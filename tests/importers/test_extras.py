"""Without an importer's extra installed, irtk works and says which extra to install."""
from __future__ import annotations

import importlib

import pytest

import irtk
import irtk.cli
import irtk.importers
from irtk.importers import extras


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch):
    """Make importing the named top-level packages fail, as when they are not installed."""
    missing: set[str] = set()
    real = importlib.import_module

    def fake(name: str, *args, **kwargs):
        if name.split(".")[0] in missing:
            raise ModuleNotFoundError(f"No module named '{name.split('.')[0]}'")
        return real(name, *args, **kwargs)
    monkeypatch.setattr(extras.importlib, "import_module", fake)
    return missing


def test_onnx_import_names_the_onnx_extra(without, tmp_path, capsys) -> None:
    without.add("onnx")
    with pytest.raises(irtk.DependencyError, match=r"importing an ONNX model needs the 'onnx' "
                                                   r"extra .*pip install 'irtk\[onnx\]'"):
        irtk.importers.import_onnx(tmp_path / "m.onnx")
    (tmp_path / "m.onnx").write_bytes(b"")
    assert irtk.cli.main(["compile", str(tmp_path / "m.onnx"), "-o",
                          str(tmp_path / "m.vmfb")]) == 1
    assert "pip install 'irtk[onnx]'" in capsys.readouterr().err
    assert not (tmp_path / "m.vmfb").exists()


def test_torch_export_names_the_torch_extra(without) -> None:
    without.update({"torch", "torch_mlir"})
    with pytest.raises(irtk.DependencyError, match=r"exporting a PyTorch model needs the "
                                                   r"'torch' extra \(torch and torch-mlir\)"):
        irtk.importers.export(object())


def test_torch_mlir_alone_missing_is_named_too(without, tmp_path) -> None:
    without.add("torch_mlir")
    with pytest.raises(irtk.DependencyError, match=r"No module named 'torch_mlir'.*irtk\[onnx\]"):
        irtk.importers.import_onnx(tmp_path / "m.onnx")
