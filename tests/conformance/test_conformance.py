"""IREE's end-to-end check tests on local-task, SwiftShader and lavapipe, held to the
expectations table: a test expected to pass must pass; one expected to fail (or skip) must
still fail (or skip) — a newly passing test fails here until the table is updated
(`python scripts/conformance_report.py --write`), so the table always tells the truth."""
from __future__ import annotations

import pytest

from irtk.check_runner import FAIL, PASS, SKIP
from tests.conformance import expectations, suite

_URIS = suite.device_uris()
_CASES = suite.cases()


def _params() -> list:
    params = []
    for device_key in suite.DEVICES:
        for case in _CASES:
            marks = [pytest.mark.conformance]
            if case.file in suite.SLOW_FILES:
                marks.append(pytest.mark.slow)
            if device_key not in _URIS:
                marks.append(pytest.mark.skip(reason=f"no {device_key} device on this machine"))
            params.append(pytest.param(case, device_key, marks=marks,
                                       id=f"{device_key}:{case.id}"))
    return params


@pytest.mark.parametrize(("case", "device_key"), _params())
def test_conformance(case: suite.Case, device_key: str) -> None:
    got = suite.result(case, device_key)
    want, reason = suite.expected(case.id, device_key)
    message = suite.normalize(got.message, case.file)
    if got.status == want:
        if want == FAIL:
            pytest.xfail(reason)
        if want == SKIP:
            pytest.skip(message)
        return
    if want == FAIL and reason.startswith("timed out") and got.status == PASS:
        # A timeout depends on the machine's speed and load: finishing in time on a faster
        # or idle machine is a correct pass, not a change the table must record.
        return
    fix = "; if this is progress, run: python scripts/conformance_report.py --write"
    if want == PASS:
        pytest.fail(f"{case.id} on {device_key}: expected to pass, got {got.status}: "
                    f"{got.message}", pytrace=False)
    pytest.fail(f"{case.id} on {device_key}: expected {want} ({reason}), got {got.status}"
                f"{': ' + message if message else ''}{fix}", pytrace=False)


def test_the_table_names_only_existing_tests_and_devices() -> None:
    ids = {c.id for c in _CASES}
    for case_id, by_device in expectations.EXPECTED.items():
        assert case_id in ids, f"expectations.py lists '{case_id}', which is not in the suite"
        for device, (status, reason) in by_device.items():
            assert device == suite.ALL_DEVICES or device in suite.DEVICES, device
            assert status in (FAIL, SKIP) and reason, (case_id, device)


def test_the_suite_is_complete() -> None:
    """The 41 files of the suite: 128 test functions and 8 that take arguments."""
    assert len(suite.suite_files()) == 41
    assert sum(not c.takes_args for c in _CASES) == 128
    assert sum(c.takes_args for c in _CASES) == 8
