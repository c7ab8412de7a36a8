"""A model's weights: stored once in the module, uploaded once when it loads (on the CPU
drivers, read in place from the mapped file), shared by every call; loading prints nothing."""
from __future__ import annotations

import numpy as np
import pytest

import irtk
from irtk import tracing
from tests.conftest import all_device_uris


def weights_program(w: np.ndarray) -> str:
    """y = x @ w with `w` as torch-mlir writes a weight: a dense_resource blob."""
    k, n = w.shape
    blob = "0x04000000" + w.astype("<f4").tobytes().hex().upper()
    return f"""func.func @main(%x: tensor<2x{k}xf32>) -> tensor<2x{n}xf32> {{
  %w = arith.constant dense_resource<w0> : tensor<{k}x{n}xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x{n}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x{n}xf32>) -> tensor<2x{n}xf32>
  %r = linalg.matmul ins(%x, %w : tensor<2x{k}xf32>, tensor<{k}x{n}xf32>)
                     outs(%f : tensor<2x{n}xf32>) -> tensor<2x{n}xf32>
  return %r : tensor<2x{n}xf32>
}}
{{-# dialect_resources: {{ builtin: {{ w0: "{blob}" }} }} #-}}
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, np.ndarray]:
    w = np.random.default_rng().standard_normal((512, 1024)).astype(np.float32)   # 2 MiB
    path = tmp_path_factory.mktemp("weights") / "model.vmfb"
    path.write_bytes(irtk.compile_str(weights_program(w), target="vulkan-spirv,cpu"))
    return str(path), w


@pytest.mark.parametrize("uri", all_device_uris())
def test_weights_load_silently_once_and_serve_every_call(model, uri, capfd):
    path, w = model
    m = irtk.load(path, device=uri)
    assert capfd.readouterr() == ("", "")
    rng = np.random.default_rng()
    for _ in range(3):
        x = rng.standard_normal((2, w.shape[0])).astype(np.float32)
        with tracing.tracing() as tracer:
            y = m.main(x)
        np.testing.assert_allclose(y, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-3)
        assert tracer.statistics().bytes_uploaded == x.nbytes   # the input, not the weights
    assert capfd.readouterr() == ("", "")


def test_the_module_holds_each_weight_once(model):
    path, w = model
    data = open(path, "rb").read()
    assert data.count(w.tobytes()[:4096]) == 1
    assert len(data) < w.nbytes + 64 * 1024
