"""PyTorch import: the small models' exports (fixtures/, made by scripts/export_models.py with
torch-mlir's FX importer, unchanged) compile for vulkan-spirv,cpu and match torch's outputs on
every device. Where torch is installed, the models are also exported here, ResNet-18 and
MobileNet-V2 among them, and run on fresh inputs against torch."""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

import irtk
from tests.conftest import all_device_uris

FIXTURES = Path(__file__).with_name("fixtures")
SMALL = ("mlp", "lenet", "encoder", "basic_block", "depthwise", "head", "pools", "tokens")


@functools.cache
def _fixture_module(name: str) -> bytes:
    return irtk.compile_file(str(FIXTURES / f"{name}.mlir"), target="vulkan-spirv,cpu")


def _close(got: object, expected: list[np.ndarray]) -> None:
    """Results (one array or a tuple) as torch's; integer results (argmax) exactly."""
    results = [np.asarray(g) for g in (got if isinstance(got, tuple) else (got,))]
    assert len(results) == len(expected)
    for g, e in zip(results, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        if e.dtype.kind in "iu":
            np.testing.assert_array_equal(g, e)
        else:
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=2e-5 * np.abs(e).max())


def _outputs(saved: np.lib.npyio.NpzFile) -> list[np.ndarray]:
    return [saved[f"y{i}"] for i in range(len(saved.files) - 1)]


@pytest.mark.parametrize("uri", all_device_uris())
@pytest.mark.parametrize("name", SMALL)
def test_an_exported_model_matches_torch(name: str, uri: str) -> None:
    saved = np.load(FIXTURES / f"{name}.npz")
    _close(irtk.load(_fixture_module(name), device=uri).main(saved["x"]), _outputs(saved))


@pytest.mark.parametrize("uri", all_device_uris())
def test_a_token_out_of_range_fails_the_call(uri: str) -> None:
    saved = np.load(FIXTURES / "tokens.npz")
    tokens = saved["x"].copy()
    tokens[1, 3] = 20   # the vocabulary has 20 entries
    m = irtk.load(_fixture_module("tokens"), device=uri)
    with pytest.raises(irtk.RuntimeFailure, match="assertion failed: index must be smaller "
                                                  "than dim size"):
        m.main(tokens)
    _close(m.main(saved["x"]), _outputs(saved))


def test_the_exports_are_as_torch_mlir_writes_them() -> None:
    # What makes them real exports: weights as dense_resource blobs, f64 and asserts in
    # BatchNorm, f64 statistics in LayerNorm.
    text = {n: (FIXTURES / f"{n}.mlir").read_text() for n in SMALL}
    assert all("dense_resource<torch_tensor_" in t and "dialect_resources" in t
               for n, t in text.items() if n != "pools")   # pools has no weights
    assert "math.fpowi" in text["head"] and "math.erf" in text["head"]
    assert "linalg.pooling_nchw_max" in text["pools"] and "tensor.pad" in text["basic_block"]
    assert "cf.assert" in text["basic_block"] and "f64" in text["basic_block"]
    assert "f64" in text["encoder"]


def test_batchnorm_weight_math_does_not_run_per_call() -> None:
    seen: list[str] = []
    irtk.compile_file(str(FIXTURES / "basic_block.mlir"), target="cpu",
                      dump_after="import,dispatch", dump=seen.append)
    imported, dispatched = seen
    assert "math.sqrt" in imported or "math.rsqrt" in imported
    assert "math.sqrt" not in dispatched and "math.rsqrt" not in dispatched


torch = pytest.importorskip("torch", reason="torch (scripts/setup.sh installs its CPU build)")
from irtk.importers import export  # noqa: E402
from tests.importers.torch_models import make  # noqa: E402


def _export_and_check(name: str) -> None:
    model, x = make(name)
    module = export(model, x).compile("vulkan-spirv,cpu")
    fresh = torch.randn(x.shape)
    with torch.no_grad():
        y = model(fresh)
    expected = [r.numpy() for r in (y if isinstance(y, tuple) else (y,))]
    for uri in all_device_uris():
        _close(irtk.load(module, device=uri).main(fresh.numpy()), expected)


@pytest.mark.parametrize("name", SMALL)
def test_the_fixtures_are_what_the_models_give(name: str) -> None:
    model, x = make(name)
    saved = np.load(FIXTURES / f"{name}.npz")
    with torch.no_grad():
        y = model(x)
    np.testing.assert_array_equal(x.numpy(), saved["x"])
    for r, s in zip(y if isinstance(y, tuple) else (y,), _outputs(saved), strict=True):
        np.testing.assert_allclose(r.numpy(), s, rtol=1e-6, atol=1e-6)


def test_a_model_exported_here_runs_on_fresh_inputs() -> None:
    _export_and_check("depthwise")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_a_full_size_model_matches_torch_on_every_device(name: str) -> None:
    _export_and_check(name)


def test_export_refuses_what_is_not_a_module() -> None:
    with pytest.raises(irtk.InputError, match="export takes a torch.nn.Module, not function"):
        export(lambda t: t, torch.ones(2))


def test_an_untraceable_model_is_a_compile_error() -> None:
    class DataDependent(torch.nn.Module):
        def forward(self, t: torch.Tensor) -> torch.Tensor:
            return t if float(t.sum()) > 0 else -t   # control flow on a value
    with pytest.raises(irtk.CompileError, match="DataDependent: error: torch-mlir cannot "
                                                "export it to linalg"):
        export(DataDependent(), torch.ones(2))
