"""The math accuracy contract (docs/codegen_spirv.md, "Math accuracy"): every float math op the
compilers emit is within 4 ULP of the exact result on every device and float type, over tiny,
subnormal (flushing allowed), normal and huge inputs, and exact on +-0, +-inf and NaN."""
from __future__ import annotations

import zlib

import pytest

from tests.conftest import all_device_uris
from tests.e2e.math_accuracy import CONTRACT_ULP, FLOAT_TYPES, OPS, RANGES, measure

DEVICES = all_device_uris()
_compiled: dict[tuple[str, str, int], bytes] = {}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", FLOAT_TYPES)
@pytest.mark.parametrize("name", sorted(OPS))
def test_math_op_meets_the_accuracy_contract(name: str, kind: str, device: str) -> None:
    seed = zlib.crc32(f"{name}{kind}{device}".encode())
    errors = measure(OPS[name], kind, device, seed, compiled=_compiled)
    failing = {r: (errors[r], errors.get(f"{r}_worst")) for r in RANGES
               if not errors[r] <= CONTRACT_ULP}
    assert not failing, f"{name} on {kind} at {device}: (max ULP, worst input) {failing}"
