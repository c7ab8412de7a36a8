"""Model importers: PyTorch modules and ONNX files to linalg-on-tensors MLIR, through
torch-mlir's importers (its FX importer and its ONNX importer), as IREE's users bring models in.

They are optional extras (`pip install 'irtk[torch]'`, `'irtk[onnx]'`); irtk works without
them, and an importer whose extra is missing says which to install (`extras.require`).
"""
from __future__ import annotations

from irtk.importers.imported import ImportedModel
from irtk.importers.onnx_model import import_onnx
from irtk.importers.torch_module import export

__all__ = ["ImportedModel", "export", "import_onnx"]
