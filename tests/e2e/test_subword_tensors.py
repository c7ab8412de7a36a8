"""Tensors of i8/i16 whose byte length is not a whole number of 32-bit words, end to end on
every device. Shaders address storage in words, so such a buffer must be bound (and
allocated) up to the word that holds its last elements: bound to the exact byte length,
robust buffer access hid those elements (a 1xi8 + 1xi8 concat gave 0 0)."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import irtk
from tests.conftest import all_device_uris, target_for

DEVICES = all_device_uris()

CONCAT = """
func.func @main(%a: tensor<1xi8>, %b: tensor<{n}xi8>, %c: tensor<3xi16>) -> (tensor<{m}xi8>, tensor<5xi16>) {{
  %k = arith.constant dense<[7, -9]> : tensor<2xi16>
  %x = tensor.concat dim(0) %a, %b : (tensor<1xi8>, tensor<{n}xi8>) -> tensor<{m}xi8>
  %y = tensor.concat dim(0) %c, %k : (tensor<3xi16>, tensor<2xi16>) -> tensor<5xi16>
  return %x, %y : tensor<{m}xi8>, tensor<5xi16>
}}
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1, 6])
def test_odd_length_narrow_tensors(device: str, n: int) -> None:
    rng = np.random.default_rng(zlib.crc32(f"subword {device} {n}".encode()))
    text = CONCAT.format(n=n, m=n + 1)
    vmfb = irtk.compile_str(text, target=target_for(device))
    m = irtk.load(vmfb, device=device)
    a = rng.integers(-128, 128, 1).astype(np.int8)
    b = rng.integers(-128, 128, n).astype(np.int8)
    c = rng.integers(-32768, 32768, 3).astype(np.int16)
    x, y = m.main(a, b, c)
    np.testing.assert_array_equal(x, np.concatenate([a, b]))
    np.testing.assert_array_equal(y, np.concatenate([c, np.array([7, -9], np.int16)]))
