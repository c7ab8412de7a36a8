"""PyTorch modules to linalg-on-tensors MLIR with torch-mlir's FX importer, in the manner of
iree-turbine's `aot.export`: the module is traced by `torch.export` on example inputs, and its
weights become `dense_resource` constants."""
from __future__ import annotations

import warnings
from typing import Any

from irtk.errors import CompileError, InputError
from irtk.importers.extras import require
from irtk.importers.imported import ImportedModel


def export(model: Any, *example_args: Any, func_name: str = "main") -> ImportedModel:
    """`model` (an `nn.Module`, run as it is: call `model.eval()` first for inference)
    exported on `example_args` (tensors with the shapes and types of a call) as the function
    `func_name`. Gradients are off while tracing."""
    torch = require("torch", "torch", "exporting a PyTorch model")
    fx = require("torch_mlir.fx", "torch", "exporting a PyTorch model")
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"export takes a torch.nn.Module, not {type(model).__name__}")
    name = type(model).__name__
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # torch.export's own deprecation notices, which a user cannot act on.
            warnings.filterwarnings("ignore", category=FutureWarning, module="torch")
            warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
            module = fx.export_and_import(model, *example_args,
                                          output_type="linalg-on-tensors", func_name=func_name)
    except Exception as e:   # torch.export's and torch-mlir's many error types
        text = " ".join(str(e).split())
        raise CompileError(f"{name}: error: torch-mlir cannot export it to linalg "
                           f"({type(e).__name__}): {text[:2000]}") from None
    return ImportedModel(str(module), name)
