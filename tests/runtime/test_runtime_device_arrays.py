"""Results left on the device (`device_results=True`) and passed on without a copy, on every
driver; `async_call` futures awaited from asyncio."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

import irtk
from irtk.runtime import DeviceArray
from tests.conftest import all_device_uris, target_for

DOUBLE = """func.func @main(%a: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %r = arith.addf %a, %a : tensor<?x3xf32>
  return %r : tensor<?x3xf32>
}
"""


@pytest.fixture(scope="module", params=all_device_uris())
def module(request):
    uri = request.param
    return irtk.load(irtk.compile_str(DOUBLE, target=target_for(uri)), device=uri)


def test_results_stay_on_the_device_and_pass_on_without_a_copy(module):
    x = np.random.default_rng(7).standard_normal((5, 3)).astype(np.float32)
    y = module.main(x, device_results=True)
    assert isinstance(y, DeviceArray) and y.device is module.device
    assert y.shape == (5, 3) and y.dtype == np.float32 and y.element_type == "f32"
    (passed,) = module.main.prepare([y])
    assert passed is y.buffer_view                      # handed over as it is
    z = module.main(y, device_results=True)
    np.testing.assert_array_equal(z.to_numpy(), 4 * x)
    np.testing.assert_array_equal(np.asarray(y), 2 * x)
    np.testing.assert_array_equal(module.main(z), 8 * x)   # numpy results by default
    with pytest.raises(irtk.InputError, match=r"argument 0: expected \?x3xf32, got 5x4xf32"):
        module.main(np.ones((5, 4), np.float32))


def test_a_device_array_of_another_device_is_copied(module):
    other = irtk.load(irtk.compile_str(DOUBLE, target="cpu"), device="local-sync")
    x = np.random.default_rng(8).standard_normal((2, 3)).astype(np.float32)
    y = other.main(x, device_results=True)
    if module.device is other.device:
        assert module.main.prepare([y])[0] is y.buffer_view
    else:
        assert module.main.prepare([y])[0] is not y.buffer_view
    np.testing.assert_array_equal(module.main(y), 4 * x)


def test_async_calls_are_awaitable(module):
    rng = np.random.default_rng(9)
    xs = [rng.standard_normal((k + 1, 3)).astype(np.float32) for k in range(4)]

    async def run() -> list:
        pending = [module.main.async_call(x) for x in xs]
        on_device = await module.main.async_call(xs[0], device_results=True)
        return await asyncio.gather(*pending) + [on_device]
    *results, on_device = asyncio.run(run())
    for x, y in zip(xs, results):
        np.testing.assert_array_equal(y, 2 * x)
    assert isinstance(on_device, DeviceArray)
    np.testing.assert_array_equal(on_device.to_numpy(), 2 * xs[0])
