"""The `check` module on element types numpy lacks (f8, f4, bf16, i4, i2): equality compares
the stored bits (NaN equal to NaN), near equality the decoded values (IREE compares f8 in
f32), on every device; messages print values in the type."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from irtk import hal
from irtk.hal import numerics, registry
from irtk.modules.check import CheckModule, read_elements
from tests.conftest import all_device_uris

ET = hal.ElementType
SMALL_FLOATS = [ET.f8E5M2, ET.f8E4M3FN, ET.f8E5M2FNUZ, ET.f8E4M3FNUZ, ET.f8E8M0FNU,
                ET.f4E2M1FN]
SUB_BYTE_INTS = [ET.i4, ET.i2]


@pytest.fixture(scope="module", params=all_device_uris())
def device(request) -> hal.Device:
    return registry.get_device(request.param)


@pytest.fixture
def rng(request) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


def view(device: hal.Device, et: hal.ElementType, values: np.ndarray,
         prefix: bytes = b"") -> hal.BufferView:
    data = prefix + numerics.encode(et.name, values)
    return hal.BufferView(device.allocator.allocate_with_data(data), values.shape, et,
                          len(prefix))


def random_values(et: hal.ElementType, rng: np.random.Generator, count: int) -> np.ndarray:
    """Values of the type: every finite code is equally likely for the small floats."""
    if et.is_float:
        codes = np.arange(1 << et.storage_bits, dtype=np.uint8)
        finite = codes[np.isfinite(numerics.from_bits(et.name, codes))]
        return numerics.from_bits(et.name, rng.choice(finite, count))
    half = 1 << (et.storage_bits - 1)
    return rng.integers(-half, half, count).astype(np.int8)


@pytest.mark.parametrize("et", SMALL_FLOATS + SUB_BYTE_INTS, ids=lambda e: e.name)
def test_contents_decode_per_type(device, et, rng):
    values = random_values(et, rng, 13)
    elements = read_elements(view(device, et, values, prefix=b"\x5a" * 3))
    np.testing.assert_array_equal(elements.values, values.astype(elements.values.dtype))
    np.testing.assert_array_equal(elements.bits, numerics.to_bits(et.name, values))


@pytest.mark.parametrize("et", SMALL_FLOATS + SUB_BYTE_INTS, ids=lambda e: e.name)
def test_expect_eq_passes_on_equal_and_names_the_first_difference(device, et, rng):
    check = CheckModule()
    values = random_values(et, rng, 9)
    check.expect_eq(device, view(device, et, values), view(device, et, values.copy()))
    assert check.take_failures() == []
    other = values.copy()
    pool = random_values(et, rng, 64)
    other[5] = next(v for v in pool if numerics.to_bits(et.name, v) !=
                    numerics.to_bits(et.name, values[5]))
    check.expect_eq(device, view(device, et, values), view(device, et, other))
    (message,) = check.take_failures()
    assert message.startswith("Expected equality of these values. Contents does not match. "
                              "The first failure occurs at index 5")
    assert f"9x{et.name}=" in message


def test_expect_eq_treats_nan_codes_as_equal_and_signed_zeros_as_different(local=None):
    dev = registry.get_device("local-sync")
    check = CheckModule()
    nan = np.float32([np.nan, 1.0])
    for et in (ET.f8E5M2, ET.f8E4M3FN, ET.f8E5M2FNUZ, ET.f8E4M3FNUZ):
        check.expect_eq(dev, view(dev, et, nan), view(dev, et, nan))
    assert check.take_failures() == []
    # f8E5M2 has several NaN codes: 0x7D and 0xFF still compare equal.
    a = hal.BufferView(dev.allocator.allocate_with_data(bytes([0x7D, 0x3C])), (2,), ET.f8E5M2)
    b = hal.BufferView(dev.allocator.allocate_with_data(bytes([0xFF, 0x3C])), (2,), ET.f8E5M2)
    check.expect_eq(dev, a, b)
    assert check.take_failures() == []
    zeros = np.float32([0.0, 1.0])
    check.expect_eq(dev, view(dev, ET.f8E4M3FN, zeros), view(dev, ET.f8E4M3FN, -zeros))
    assert "index 0: 0 vs -0" in check.take_failures()[0]


@pytest.mark.parametrize("et", SMALL_FLOATS, ids=lambda e: e.name)
def test_expect_almost_eq_compares_decoded_values(device, et, rng):
    check = CheckModule()
    values = random_values(et, rng, 10)
    check.expect_almost_eq(device, view(device, et, values), view(device, et, values), 0.0, 0.0)
    assert check.take_failures() == []
    # The next larger value of the type differs by one step: near with a tolerance that
    # covers the step, not near with one that does not.
    codes = np.arange(1 << et.storage_bits, dtype=np.uint8)
    all_values = np.unique(numerics.from_bits(et.name, codes))
    finite = all_values[np.isfinite(all_values)]
    i = int(rng.integers(1, finite.size - 1))
    lo, hi = finite[i], finite[i + 1]
    step = float(hi) - float(lo)
    lhs, rhs = values.copy(), values.copy()
    lhs[4], rhs[4] = lo, hi
    check.expect_almost_eq(device, view(device, et, lhs), view(device, et, rhs), step, 0.0)
    assert check.take_failures() == []
    check.expect_almost_eq(device, view(device, et, lhs), view(device, et, rhs), step / 2, 0.0)
    (message,) = check.take_failures()
    assert "The first failure occurs at index 4 as the lhs value" in message
    assert f"10x{et.name}=" in message


def test_expect_almost_eq_on_special_values():
    """NaN is near only NaN, an infinity only itself (f8E5M2 has infinities)."""
    dev = registry.get_device("local-sync")
    check = CheckModule()
    a = np.float32([np.nan, np.inf, -np.inf, 2.0])
    check.expect_almost_eq(dev, view(dev, ET.f8E5M2, a), view(dev, ET.f8E5M2, a), 1e-4, 0.0)
    assert check.take_failures() == []
    b = np.float32([1.0, 57344.0, -np.inf, 2.0])
    check.expect_almost_eq(dev, view(dev, ET.f8E5M2, a), view(dev, ET.f8E5M2, b), 1e9, 0.0)
    (message,) = check.take_failures()
    assert "2 of 4 elements differ: index 0: nan vs 1; index 1: inf vs 57344" in message


def test_type_mismatch_between_small_floats_is_a_failed_check():
    dev = registry.get_device("local-sync")
    check = CheckModule()
    ones = np.float32([1.0, 2.0])
    check.expect_almost_eq(dev, view(dev, ET.f8E4M3FN, ones), view(dev, ET.f8E4M3FNUZ, ones),
                           1e-4, 0.0)
    (message,) = check.take_failures()
    assert "Element types do not match." in message
    assert "2xf8E4M3FN=1 2" in message and "2xf8E4M3FNUZ=1 2" in message
