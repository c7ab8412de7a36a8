"""A program's target profile decides which device features its executables need: f16 code
compiled for `llvmpipe` (which has shaderFloat16) rounds with native conversions, runs on
lavapipe and is refused by name on SwiftShader; compiled for the default profile the same
program emulates f16 in 32-bit code and runs on both. Both give the f16 results of numpy."""
from __future__ import annotations

import numpy as np
import pytest

import irtk
from irtk.errors import DeviceError
from tests.conftest import vulkan_device_uris

PROGRAM = """
func.func @main(%a: tensor<64xf16>, %b: tensor<64xf16>) -> tensor<64xf16> {
  %e = tensor.empty() : tensor<64xf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
                                        affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      ins(%a, %b : tensor<64xf16>, tensor<64xf16>) outs(%e : tensor<64xf16>) {
  ^bb0(%x: f16, %y: f16, %o: f16):
    %p = arith.mulf %x, %y : f16
    %s = arith.addf %p, %x : f16
    linalg.yield %s : f16
  } -> tensor<64xf16>
  return %r : tensor<64xf16>
}
"""


def _devices() -> dict[str, str]:
    """{"swiftshader": uri, "llvmpipe": uri} for the software devices found."""
    from irtk.hal import registry
    found = {}
    for uri in vulkan_device_uris():
        name = registry.get_device(uri).info.name.lower()
        for key in ("swiftshader", "llvmpipe"):
            if key in name:
                found[key] = uri
    return found


DEVICES = _devices()


def _expected(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each op rounded to f16, as the program's f16 arithmetic is."""
    p = (a.astype(np.float32) * b.astype(np.float32)).astype(np.float16)
    return (p.astype(np.float32) + a.astype(np.float32)).astype(np.float16)


@pytest.fixture
def inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng()
    return (rng.uniform(-200, 200, 64).astype(np.float16),
            rng.uniform(-200, 200, 64).astype(np.float16))


@pytest.mark.parametrize("profile", ["default", "llvmpipe"])
@pytest.mark.parametrize("device", sorted(DEVICES))
def test_f16_program_runs_or_is_refused_by_feature(device, profile, inputs):
    vmfb = irtk.compile_str(PROGRAM, target="vulkan-spirv", vulkan_target=profile)
    if profile == "llvmpipe" and device == "swiftshader":
        with pytest.raises(DeviceError, match=r"executable needs shaderFloat16; device "
                                              r"'SwiftShader[^']*' has no 16-bit float support"):
            irtk.load(vmfb, device=DEVICES[device])
        return
    m = irtk.load(vmfb, device=DEVICES[device])
    got = np.asarray(m.main(*inputs))
    np.testing.assert_array_equal(got.view(np.uint16), _expected(*inputs).view(np.uint16))
