"""End to end: compile elementwise programs for vulkan-spirv and cpu in one module, run them on
every device (local-sync, local-task, SwiftShader, lavapipe) with fresh random inputs and
compare with numpy in float64 (integers exactly)."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import irtk
from tests.conftest import all_device_uris
from tests.e2e.programs import CASES, Case, generic_program, random_input

DEVICES = all_device_uris()
SHAPES = [(3, 5), (67, 129)]
_compiled: dict[tuple[str, tuple[int, ...]], bytes] = {}


def compiled(case: Case, shape: tuple[int, ...]) -> bytes:
    key = (case.name, shape)
    if key not in _compiled:
        _compiled[key] = irtk.compile_str(generic_program(case, shape), target="vulkan-spirv,cpu")
    return _compiled[key]


def check_close(actual: np.ndarray, expected: np.ndarray, result_type: str, name: str) -> None:
    if result_type == "i32":
        assert actual.dtype == np.int32
        np.testing.assert_array_equal(actual, expected.astype(np.int32), err_msg=name)
    else:
        assert actual.dtype == np.float32
        np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=2e-6 * 8,
                                   atol=1e-6, err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
def test_elementwise_matches_numpy(case: Case, shape, device: str):
    rng = np.random.default_rng(zlib.crc32(f"{case.name}{shape}{device}".encode()))
    args = [random_input(rng, et, shape, case.domain) for et in case.arg_types]
    module = irtk.load(compiled(case, shape), device=device)
    result = module.main(*args)
    check_close(result, case.reference(*args), case.result_type, case.name)
