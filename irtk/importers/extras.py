"""Optional dependencies, imported when an importer first needs them."""
from __future__ import annotations

import importlib
from types import ModuleType

from irtk.errors import DependencyError

# What each extra installs (pyproject.toml, [project.optional-dependencies]).
EXTRAS = {"torch": "torch and torch-mlir", "onnx": "onnx and torch-mlir"}


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """`module` imported, or a DependencyError that names the extra providing it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise DependencyError(
            f"{purpose} needs the '{extra}' extra ({EXTRAS[extra]}), which is not installed "
            f"({e}): pip install 'irtk[{extra}]'") from None
