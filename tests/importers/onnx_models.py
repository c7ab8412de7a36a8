"""Small ONNX models built with onnx.helper (no PyTorch): what the ONNX tests and the example
import. Each has fresh random weights from `rng`; every graph input is f32."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

OPSET = 17


def _model(onnx: Any, name: str, nodes: list, inputs: dict[str, list], outputs: dict[str, list],
           weights: dict[str, np.ndarray]) -> Any:
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in inputs.items()],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in outputs.items()],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _w(rng: np.random.Generator, *shape: int, scale: float = 0.5) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def mlp(onnx: Any, rng: np.random.Generator) -> Any:
    """Gemm (transposed weight) + Relu + MatMul + Add + Softmax, with a dynamic batch."""
    from onnx import helper
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["m"]),
             helper.make_node("Add", ["m", "b2"], ["z"]),
             helper.make_node("Softmax", ["z"], ["y"], axis=-1)]
    return _model(onnx, "mlp", nodes, {"x": ["batch", 16]}, {"y": ["batch", 10]},
                  {"w1": _w(rng, 32, 16), "b1": _w(rng, 32), "w2": _w(rng, 32, 10),
                   "b2": _w(rng, 10)})


def cnn(onnx: Any, rng: np.random.Generator) -> Any:
    """Conv + BatchNormalization + Relu + MaxPool, a depthwise (grouped) Conv + Clip (relu6),
    GlobalAveragePool, Flatten and Gemm: the pieces of a MobileNet."""
    from onnx import helper
    c = 8
    nodes = [helper.make_node("Conv", ["x", "k1", "kb1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c1", "g", "b", "mean", "var"], ["n1"],
                              epsilon=1e-5),
             helper.make_node("Relu", ["n1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "dw"], ["c2"], group=c, pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["gp"]),
             helper.make_node("Flatten", ["gp"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1)]
    var = rng.uniform(0.5, 2.0, c).astype(np.float32)
    return _model(onnx, "cnn", nodes, {"x": [1, 3, 12, 12]}, {"y": [1, 5]},
                  {"k1": _w(rng, c, 3, 3, 3), "kb1": _w(rng, c), "g": _w(rng, c) + 1,
                   "b": _w(rng, c), "mean": _w(rng, c), "var": var, "dw": _w(rng, c, 1, 3, 3),
                   "lo": np.array(0, np.float32), "hi": np.array(6, np.float32),
                   "fc": _w(rng, 5, c), "fcb": _w(rng, 5)})


def attention(onnx: Any, rng: np.random.Generator) -> Any:
    """Self-attention with LayerNormalization and a GELU written with Erf: MatMul, Reshape,
    Transpose, Softmax, Div, Mul."""
    from onnx import helper
    d, heads, s = 16, 2, 6
    hd = d // heads
    shape = np.array([1, s, heads, hd], np.int64)
    back = np.array([1, s, d], np.int64)
    nodes = [helper.make_node("LayerNormalization", ["x", "ln_g", "ln_b"], ["n"], axis=-1,
                              epsilon=1e-5)]
    for p in "qkv":
        nodes += [helper.make_node("MatMul", ["n", f"w{p}"], [f"{p}0"]),
                  helper.make_node("Reshape", [f"{p}0", "shape"], [f"{p}1"]),
                  helper.make_node("Transpose", [f"{p}1"], [f"{p}"],
                                   perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [helper.make_node("MatMul", ["q", "k"], ["qk"]),
              helper.make_node("Div", ["qk", "scale"], ["qks"]),
              helper.make_node("Softmax", ["qks"], ["a"], axis=-1),
              helper.make_node("MatMul", ["a", "v"], ["o0"]),
              helper.make_node("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["o1", "back"], ["o"]),
              helper.make_node("Add", ["o", "x"], ["h"]),
              # GELU: h * (1 + erf(h / sqrt 2)) / 2
              helper.make_node("Div", ["h", "sqrt2"], ["hs"]),
              helper.make_node("Erf", ["hs"], ["e"]),
              helper.make_node("Add", ["e", "one"], ["e1"]),
              helper.make_node("Mul", ["h", "e1"], ["he"]),
              helper.make_node("Mul", ["he", "half"], ["y"])]
    weights = {"ln_g": _w(rng, d) + 1, "ln_b": _w(rng, d), "shape": shape, "back": back,
               "scale": np.array(np.sqrt(hd), np.float32),
               "sqrt2": np.array(np.sqrt(2), np.float32), "one": np.array(1, np.float32),
               "half": np.array(0.5, np.float32)}
    weights.update({f"w{p}": _w(rng, d, d) for p in "qkv"})
    return _model(onnx, "attention", nodes, {"x": [1, s, d]}, {"y": [1, s, d]}, weights)


MODELS: dict[str, Callable[[Any, np.random.Generator], Any]] = {
    "mlp": mlp, "cnn": cnn, "attention": attention}
# Example inputs' shapes (the MLP's batch is dynamic: 3 here).
INPUT_SHAPES = {"mlp": (3, 16), "cnn": (1, 3, 12, 12), "attention": (1, 6, 16)}
