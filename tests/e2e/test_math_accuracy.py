"""The math accuracy contract (docs/codegen_spirv.md, "Math accuracy"): every float math op the
compilers emit is within 4 ULP of the exact result on every device and float type, over tiny,
subnormal (flushing allowed), normal and huge inputs, and exact on +-0, +-inf and NaN.

Vulkan devices run the code of the default profile and of their own (llvmpipe: native f16
rounding, f64). f64 is measured where a device has the op on it (Vulkan: sqrt and rsqrt on
lavapipe; the transcendentals are refused at compile time), against a float64 reference that
is itself within an ULP."""
from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

import irtk
from tests.conftest import all_device_uris, device_info, target_for
from tests.e2e.math_accuracy import (CONTRACT_ULP, FLOAT_TYPES, OPS, RANGES, measure, program,
                                     ulp_errors)


def _own_profile(uri: str) -> str:
    name = device_info(uri).name.lower()
    return next((p for p in ("llvmpipe", "swiftshader") if p in name), "default")


RUNS = [(uri, "default") for uri in all_device_uris()]
RUNS += [(uri, _own_profile(uri)) for uri, _ in RUNS
         if target_for(uri) == "vulkan-spirv" and _own_profile(uri) != "default"]
_compiled: dict[tuple[str, str, int], bytes] = {}


@pytest.mark.parametrize("device,profile", RUNS, ids=[f"{d}-{p}" for d, p in RUNS])
@pytest.mark.parametrize("kind", FLOAT_TYPES)
@pytest.mark.parametrize("name", sorted(OPS))
def test_math_op_meets_the_accuracy_contract(name: str, kind: str, device: str,
                                             profile: str) -> None:
    seed = zlib.crc32(f"{name}{kind}{device}{profile}".encode())
    try:
        errors = measure(OPS[name], kind, device, seed, compiled=_compiled,
                         target=target_for(device), vulkan_target=profile)
    except irtk.Error as e:   # f64 without shaderFloat64, or an f64 transcendental on Vulkan
        if kind != "f64":
            raise
        pytest.skip(f"{name} on f64 is not available on {device} ({profile}): {e}")
    failing = {r: (errors[r], errors.get(f"{r}_worst")) for r in RANGES
               if not errors[r] <= CONTRACT_ULP}
    assert not failing, f"{name} on {kind} at {device}: (max ULP, worst input) {failing}"


# Issue 17's reports, by value: what the drivers' built-ins gave (in the comments).
_REPORTED = [("tanh", 1e-7, math.tanh(1e-7)),           # 1.1920929e-07 on both drivers
             ("erf", 1e-20, math.erf(1e-20)),            # 0 (everything lost near 0)
             ("exp", -57.0, math.exp(-57.0)),            # 55 ULP off
             ("log", 1.5, math.log(1.5))]                # 5 ULP off on SwiftShader


@pytest.mark.parametrize("device", all_device_uris())
@pytest.mark.parametrize("name,x,exact", _REPORTED, ids=[r[0] for r in _REPORTED])
def test_reported_inaccuracies_are_gone(name: str, x: float, exact: float, device: str) -> None:
    vmfb = irtk.compile_str(program(OPS[name], "f32", 1), target=target_for(device))
    got = irtk.load(vmfb, device=device).main(np.array([x], np.float32))
    assert ulp_errors("f32", got, np.array([exact]))[0] <= 1.0, (name, x, got)
