"""Buffer-view element type codes (IREE's `iree_hal_element_types_t`) and what a view of each
type holds: byte lengths of packed types, contents read back as numpy, on every driver."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from irtk import hal
from irtk import types
from irtk.hal import numerics, registry
from irtk.modules.hal import HalModule
from irtk.errors import RuntimeFailure
from tests.conftest import all_device_uris

ET = hal.ElementType

# IREE's runtime/src/iree/hal/buffer_view.h: numerical type << 24 | bit count.
IREE_CODES = {
    "i1": (0x13, 8), "i2": (0x10, 2), "i4": (0x10, 4), "i8": (0x10, 8), "i16": (0x10, 16),
    "i32": (0x10, 32), "i64": (0x10, 64), "f16": (0x21, 16), "f32": (0x21, 32),
    "f64": (0x21, 64), "bf16": (0x22, 16), "f8E5M2": (0x24, 8), "f8E4M3FN": (0x25, 8),
    "f8E5M2FNUZ": (0x26, 8), "f8E4M3FNUZ": (0x27, 8), "f8E8M0FNU": (0x28, 8),
    "f4E2M1FN": (0x2B, 4),
}
NON_NUMPY = [ET.bf16, ET.i2, ET.i4, ET.f4E2M1FN, ET.f8E5M2, ET.f8E4M3FN, ET.f8E5M2FNUZ,
             ET.f8E4M3FNUZ, ET.f8E8M0FNU]


@pytest.mark.parametrize("name", list(IREE_CODES))
def test_codes_are_irees(name):
    numerical, bits = IREE_CODES[name]
    et = ET.from_name(name)
    assert int(et) == numerical << 24 | bits
    assert et.storage_bits == bits
    assert et.is_float == name.startswith(("f", "bf"))


def test_every_element_type_has_numerics():
    """Every code names a type the shared numerics can store (and the other way round, every
    type a kernel may store crosses the host boundary)."""
    assert {et.name for et in ET} == set(types.SCALAR_TYPES) - {"index"}


@pytest.mark.parametrize("et, count, length", [(ET.i2, 5, 2), (ET.i2, 8, 2), (ET.i4, 5, 3),
                                               (ET.f4E2M1FN, 1, 1), (ET.f8E4M3FN, 5, 5),
                                               (ET.i1, 3, 3), (ET.bf16, 3, 6)])
def test_storage_bytes_of_packed_and_byte_types(et, count, length):
    assert et.storage_bytes(count) == length
    assert et.is_packed == (et.storage_bits < 8)
    assert et.byte_size == max(1, et.storage_bits // 8)   # IREE's dense byte count


@pytest.mark.parametrize("et", NON_NUMPY)
def test_types_numpy_lacks_have_a_value_dtype_only(et):
    assert not et.has_numpy_dtype
    with pytest.raises(ValueError, match=f"{et.name} has no numpy dtype"):
        et.numpy_dtype()
    assert et.value_dtype() == (np.float32 if et.is_float else np.int8)


def _random_values(et: hal.ElementType, rng: np.random.Generator, count: int) -> np.ndarray:
    if et.is_float:
        return numerics.round_to(et.name, rng.standard_normal(count) * 3)
    half = 1 << (et.storage_bits - 1)
    return rng.integers(-half, half, count).astype(np.int8)


@pytest.mark.parametrize("device", all_device_uris())
@pytest.mark.parametrize("et", NON_NUMPY)
def test_views_of_types_numpy_lacks_read_back_decoded(device, et):
    rng = np.random.default_rng(zlib.crc32(f"view {device} {et.name}".encode()))
    dev = registry.get_device(device)
    shape = (3, 5)                                  # 15 elements: a partial last byte
    values = _random_values(et, rng, 15)
    data = numerics.encode(et.name, values)
    prefix = b"\xAA\x55\xAA"
    buffer = dev.allocator.allocate_with_data(prefix + data + b"\xFF" * 4)
    view = hal.BufferView(buffer, shape, et, byte_offset=len(prefix))
    assert view.byte_length == len(data) == et.storage_bytes(15)
    got = view.to_numpy()
    assert got.dtype == et.value_dtype() and got.shape == shape
    np.testing.assert_array_equal(got.reshape(-1), values)


@pytest.mark.parametrize("et, count", [(ET.i2, 13), (ET.i4, 7), (ET.f8E5M2, 5)])
def test_hal_module_creates_views_over_packed_byte_lengths(et, count):
    """`hal.buffer_view.create` accepts a byte length that holds the packed elements exactly,
    and refuses one byte less."""
    dev = registry.get_device("local-sync")
    hal_module = HalModule(dev)
    length = et.storage_bytes(count)
    buffer = dev.allocator.allocate_with_data(bytes(length))
    view = hal_module.buffer_view_create(buffer, 0, length, int(et), 1, [count])
    assert view.byte_length == length
    assert hal_module.buffer_view_byte_length(view) == length
    with pytest.raises(RuntimeFailure, match=f"{count}x{et.name} \\({length} bytes\\) does not fit"):
        hal_module.buffer_view_create(buffer, 0, length - 1, int(et), 1, [count])
