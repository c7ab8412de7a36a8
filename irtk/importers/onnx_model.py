"""ONNX files to linalg-on-tensors MLIR with torch-mlir's ONNX importer (no PyTorch needed).

torch-mlir reads the protobuf into its `torch` dialect (`onnx_importer`), then two of its pass
pipelines lower that to linalg-on-tensors: `torch-onnx-to-torch-backend-pipeline` (ONNX ops to
torch ops) and `torch-backend-to-linalg-on-tensors-backend-pipeline`, as IREE's
`iree-import-onnx` does. Shapes are inferred first (with data propagation) because the lowering
needs them.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from irtk.errors import CompileError, InputError
from irtk.importers.extras import require
from irtk.importers.imported import ImportedModel

PIPELINES = ("builtin.module(torch-onnx-to-torch-backend-pipeline)",
             "builtin.module(torch-backend-to-linalg-on-tensors-backend-pipeline)")
# How an op without a conversion prints after the first pipeline.
_UNCONVERTED = re.compile(r'torch\.operator "onnx\.([A-Za-z0-9_]+)"')


def import_onnx(model: str | Path | bytes | Any, func_name: str | None = None) -> ImportedModel:
    """An ONNX model (a file path, its bytes, or an `onnx.ModelProto`) as linalg MLIR; its main
    graph becomes the function `func_name` (default: the graph's name)."""
    onnx = require("onnx", "onnx", "importing an ONNX model")
    require("torch_mlir", "onnx", "importing an ONNX model")
    name = Path(model).name if isinstance(model, (str, Path)) else "onnx model"
    proto = _load(onnx, model, name)
    try:
        proto = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    except Exception as e:   # onnx raises several types (InferenceError, ValidationError, ...)
        raise CompileError(f"{name}: error: ONNX shape inference failed: {_one_line(e)}") from None
    if func_name is not None:
        proto.graph.name = func_name
    return ImportedModel(_to_linalg(proto, name), name)


def _load(onnx: Any, model: str | Path | bytes | Any, name: str) -> Any:
    if isinstance(model, (str, Path)):
        if not Path(model).is_file():
            raise InputError(f"cannot read '{model}': no such file")
        try:
            return onnx.load(str(model))
        except Exception as e:   # protobuf's DecodeError, or a missing external data file
            raise InputError(f"{name}: error: not a readable ONNX model: "
                             f"{_one_line(e)}") from None
    if isinstance(model, bytes):
        try:
            return onnx.load_from_string(model)
        except Exception as e:
            raise InputError(f"{name}: error: not an ONNX model: {_one_line(e)}") from None
    if not isinstance(model, onnx.ModelProto):
        raise InputError(f"import_onnx takes a path, bytes or onnx.ModelProto, not "
                         f"{type(model).__name__}")
    return model


def _to_linalg(proto: Any, name: str) -> str:
    from torch_mlir.dialects import torch as torch_d
    from torch_mlir.extras import onnx_importer
    from torch_mlir.ir import Context
    from torch_mlir.passmanager import PassManager

    context = Context()
    torch_d.register_dialect(context)
    try:
        info = onnx_importer.ModelInfo(proto, config=onnx_importer.Config())
        module = info.create_module(context=context).operation
        onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
    except onnx_importer.OnnxImportError as e:
        raise CompileError(f"{name}: error: the ONNX importer cannot read it: "
                           f"{_one_line(e)}") from None
    with context:
        for i, pipeline in enumerate(PIPELINES):
            try:
                PassManager.parse(pipeline).run(module)
            except Exception as e:   # torch-mlir's MLIRError carries the op's diagnostics
                raise CompileError(f"{name}: error: torch-mlir cannot lower it to linalg "
                                   f"({pipeline}): {_one_line(e)}") from None
            if i == 0:
                _refuse_unconverted(str(module), proto, name)
    return str(module)


def _refuse_unconverted(text: str, proto: Any, name: str) -> None:
    """ONNX ops that torch-mlir left as `torch.operator` (it has no conversion for them), named
    with the opset, rather than the lowering's generic 'failed to legalize'."""
    ops = sorted(set(_UNCONVERTED.findall(text)))
    if ops:
        opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in proto.opset_import)
        raise CompileError(f"{name}: error: torch-mlir has no conversion for the ONNX op"
                           f"{'s' if len(ops) > 1 else ''} {', '.join(ops)} (opset {opsets})")


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 2000 else text[:2000] + " ..."
