"""Tell the suite which conformance tests pytest selected, so its workers run only those."""
from __future__ import annotations

from tests.conformance import suite


def pytest_collection_finish(session) -> None:
    wanted = set()
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        case = callspec.params.get("case") if callspec is not None else None
        if isinstance(case, suite.Case):
            wanted.add((case.id, callspec.params["device_key"]))
    if wanted:
        suite.select(wanted)
