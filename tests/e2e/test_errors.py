"""What a user sees when a call or a module does not fit the device or the function."""
from __future__ import annotations

import numpy as np
import pytest

import irtk
from tests.conftest import vulkan_device_uris

PROGRAM = """func.func @main(%a: tensor<4x2xf32>, %b: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %e = tensor.empty() : tensor<4x2xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x2xf32>, tensor<4x2xf32>) outs(%e : tensor<4x2xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<4x2xf32>
  return %r : tensor<4x2xf32>
}
"""


@pytest.fixture(scope="module")
def cpu_module() -> bytes:
    return irtk.compile_str(PROGRAM, target="cpu")


def test_wrong_argument_count(cpu_module):
    m = irtk.load(cpu_module, device="local-sync")
    with pytest.raises(irtk.InputError, match="main: expected 2 arguments, got 1"):
        m.main(np.zeros((4, 2), np.float32))


def test_wrong_argument_shape(cpu_module):
    m = irtk.load(cpu_module, device="local-sync")
    a = np.ones((4, 2), np.float32)
    with pytest.raises(irtk.InputError, match=r"argument 1: expected 4x2xf32, got 3x2xf32"):
        m.main(a, np.ones((3, 2), np.float32))


def test_wrong_argument_type(cpu_module):
    m = irtk.load(cpu_module, device="local-sync")
    a = np.ones((4, 2), np.float32)
    with pytest.raises(irtk.InputError, match=r"argument 0: expected 4x2xf32, got 4x2xi32"):
        m.main(np.ones((4, 2), np.int32), a)


def test_unknown_device_lists_the_devices(cpu_module):
    with pytest.raises(irtk.DeviceError) as e:
        irtk.load(cpu_module, device="metal")
    assert "unknown device 'metal'" in str(e.value)
    assert "local-sync" in str(e.value) and "local-task" in str(e.value)


def test_unknown_vulkan_device_name_lists_the_devices(cpu_module):
    if not vulkan_device_uris():
        pytest.skip("no Vulkan device")
    with pytest.raises(irtk.DeviceError) as e:
        irtk.load(cpu_module, device="vulkan://no-such-gpu")
    assert "no device matches 'vulkan://no-such-gpu'" in str(e.value)
    assert "vulkan://0" in str(e.value)


def test_module_without_executable_for_the_device_names_its_targets(cpu_module):
    if not vulkan_device_uris():
        pytest.skip("no Vulkan device")
    with pytest.raises(irtk.Error) as e:
        irtk.load(cpu_module, device="vulkan")
    assert "cpu (format cpu-kernel-fb)" in str(e.value)


def test_vulkan_module_on_cpu_device_names_its_targets():
    vmfb = irtk.compile_str(PROGRAM, target="vulkan-spirv")
    with pytest.raises(irtk.Error) as e:
        irtk.load(vmfb, device="local-task")
    assert "vulkan-spirv (format vulkan-spirv-fb)" in str(e.value)


def test_not_a_module():
    with pytest.raises(irtk.VerificationError):
        irtk.load(b"this is not a module", device="local-sync")
