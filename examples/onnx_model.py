"""An ONNX model end to end: compile the file for Vulkan and the CPU (`irtk compile model.onnx`
does the same), run it on every device and compare with onnxruntime when it is installed.

    pip install 'irtk[onnx]'      # onnx and torch-mlir; no PyTorch needed
    python examples/onnx_model.py               # examples/tiny_cnn.onnx (made here if missing)
    python examples/onnx_model.py model.onnx    # your model (one f32 input; `?` dims taken as 1)
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import irtk


def tiny_cnn(path: str) -> None:
    """Conv + BatchNormalization + Relu + GlobalAveragePool + Gemm + Softmax, random weights."""
    rng = np.random.default_rng(0)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "b", "mean", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["z"], transB=1),
             helper.make_node("Softmax", ["z"], ["y"], axis=1)]
    weights = {"k": w(8, 3, 3, 3), "g": w(8) + 1, "b": w(8), "mean": w(8),
               "var": rng.uniform(0.5, 2, 8).astype(np.float32), "fc": w(4, 8), "fcb": w(4)}
    graph = helper.make_graph(
        nodes, "tiny_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).with_name("tiny_cnn.onnx"))
    if len(sys.argv) == 1 and not Path(path).is_file():
        tiny_cnn(path)
    model = onnx.load(path)
    graph_input = model.graph.input[0]
    shape = [d.dim_value or 1 for d in graph_input.type.tensor_type.shape.dim]
    x = np.random.default_rng().standard_normal(shape).astype(np.float32)
    module = irtk.compile_file(path, target="vulkan-spirv,cpu")
    try:
        import onnxruntime
        expected = onnxruntime.InferenceSession(path).run(None, {graph_input.name: x})[0]
    except ImportError:
        expected = None
    print(f"{'device':<50} {'max |irtk - onnxruntime|':>26}")
    for device in irtk.devices():
        got = np.asarray(getattr(irtk.load(module, device=device.uri), model.graph.name)(x))
        error = "n/a" if expected is None else f"{float(np.abs(got - expected).max()):.2e}"
        print(f"{device.uri + ' (' + device.name + ')':<50} {error:>26}")
        assert expected is None or np.allclose(got, expected, rtol=1e-4, atol=1e-5), device.uri


if __name__ == "__main__":
    main()
