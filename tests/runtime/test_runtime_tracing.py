"""Traces (`irtk.tracing`) on every driver: VM calls, hal calls, submissions, transfers and
each dispatch with its device time, written as Chrome trace JSON; the statistics over them;
benchmark's device time per dispatch."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import irtk
from irtk import tracing
from tests.conftest import all_device_uris, target_for

# Two dispatches (the reduction cannot fuse with the elementwise producer's consumer here):
# a row sum and an elementwise scale.
PROGRAM = """func.func @main(%a: tensor<64x32xf32>, %b: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %s = arith.addf %a, %b : tensor<64x32xf32>
  %e = math.exp %s : tensor<64x32xf32>
  return %e : tensor<64x32xf32>
}
func.func @pair(%a: tensor<64xf32>) -> (tensor<64xf32>, tensor<f32>) {
  %d = arith.mulf %a, %a : tensor<64xf32>
  %init = tensor.empty() : tensor<f32>
  %zero = arith.constant 0.0 : f32
  %z = linalg.fill ins(%zero : f32) outs(%init : tensor<f32>) -> tensor<f32>
  %r = linalg.reduce ins(%a : tensor<64xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%x: f32, %acc: f32) {
      %t = arith.addf %x, %acc : f32
      linalg.yield %t : f32
    }
  return %d, %r : tensor<64xf32>, tensor<f32>
}
"""


@pytest.fixture(scope="module", params=all_device_uris())
def module(request):
    uri = request.param
    return irtk.load(irtk.compile_str(PROGRAM, target=target_for(uri)), device=uri)


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((64, 32)).astype(np.float32) for _ in range(2)]


def test_a_trace_holds_calls_hal_calls_submissions_transfers_and_dispatch_times(module, tmp_path):
    a, b = _inputs(1)
    x = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    path = tmp_path / "trace.json"
    with tracing.tracing(path) as tracer:
        for _ in range(3):
            np.testing.assert_allclose(module.main(a, b), np.exp(a.astype(np.float64) + b),
                                       rtol=2e-6)
        d, r = module.pair(x)
    np.testing.assert_allclose(d, x.astype(np.float64) ** 2, rtol=1e-6)
    np.testing.assert_allclose(r, x.astype(np.float64).sum(), rtol=1e-5, atol=1e-5)
    assert tracing.active is None
    events = tracer.events
    calls = [e for e in events if e.category == "call"]
    assert [e.name for e in calls] == ["call main"] * 3 + ["call pair"]
    assert any(e.category == "hal" and e.name == "hal.fence.await" for e in events)
    submits = [e for e in events if e.category == "submit"]
    assert len(submits) >= 4 and all(e.args["device"] == module.device.info.name
                                     for e in submits)
    dispatches = [e for e in events if e.category == "dispatch"]
    # Every dispatch of every call has a device time, on the device's own track, inside its
    # call (software drivers stamp with the host clock; other clocks are aligned to submits).
    per_call = [[d for d in dispatches if c.start_ns <= d.start_ns <= c.start_ns + c.duration_ns]
                for c in calls]
    assert len(per_call[0]) >= 1 and all(len(p) == len(per_call[0]) for p in per_call[:3])
    assert sum(len(p) for p in per_call) == len(dispatches)
    assert all(d.track == module.device.info.name and d.duration_ns >= 0 for d in dispatches)
    assert all(len(d.args["workgroups"]) == 3 for d in dispatches)
    uploads = [e for e in events if e.category == "transfer" and e.args["direction"] == "upload"]
    downloads = [e for e in events if e.category == "transfer"
                 and e.args["direction"] == "download"]
    assert sum(e.args["bytes"] for e in uploads) == 3 * 2 * a.nbytes + x.nbytes
    assert sum(e.args["bytes"] for e in downloads) == 3 * a.nbytes + x.nbytes + 4

    stats = tracer.statistics()
    assert stats.calls == 4 and stats.submissions == len(submits)
    assert stats.dispatch_count == len(dispatches)
    assert stats.bytes_uploaded == 3 * 2 * a.nbytes + x.nbytes
    table = stats.table()
    assert "calls: 4" in table and f"dispatches: {len(dispatches)}" in table

    # The file is Chrome trace-event JSON: metadata names the tracks, complete events in µs.
    data = json.loads(path.read_text())
    names = {e["args"]["name"] for e in data["traceEvents"] if e["ph"] == "M"}
    assert "irtk host" in names and f"device: {module.device.info.name}" in names
    complete = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(events)
    assert all({"name", "cat", "ts", "dur", "pid", "tid"} <= set(e) for e in complete)
    device_pid = {e["pid"] for e in complete if e["cat"] == "dispatch"}
    assert len(device_pid) == 1 and device_pid != {1}


def test_results_are_the_same_traced_and_not(module):
    """Recordings made while tracing time their dispatches; calls before, during and after
    a trace share the command buffers and must all compute the same."""
    a, b = _inputs(3)
    expected = module.main(a, b)
    with tracing.tracing():
        for _ in range(4):
            np.testing.assert_array_equal(module.main(a, b), expected)
    np.testing.assert_array_equal(module.main(a, b), expected)


def test_calls_from_threads_are_traced_on_their_own_tracks(module):
    a, b = _inputs(4)
    expected = module.main(a, b)
    errors: list[BaseException] = []
    together = threading.Barrier(3)   # all alive at once, so their thread ids differ

    def work() -> None:
        try:
            together.wait()
            for _ in range(3):
                np.testing.assert_array_equal(module.main(a, b), expected)
            together.wait()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    with tracing.tracing() as tracer:
        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    calls = [e for e in tracer.events if e.category == "call"]
    assert len(calls) == 9 and len({e.thread for e in calls}) == 3
    per_call = len([e for e in tracer.events if e.category == "dispatch"]) / 9
    assert per_call >= 1 and per_call == int(per_call)


def test_benchmark_reports_the_device_time_of_each_dispatch(module):
    a, b = _inputs(5)
    result = module.main.benchmark(a, b, repetitions=2, min_time=0.0, warmup=1)
    assert result.dispatches and all(d["count"] == 2 and d["median_ms"] >= 0
                                     for d in result.dispatches)
    assert all(d["device"] == module.device.info.name for d in result.dispatches)
    assert result.to_dict()["dispatches"] == result.dispatches
    assert "device time per dispatch" in result.table()
    assert result.dispatches[0]["name"] in result.table()
    assert not module.main.benchmark(a, b, repetitions=1, min_time=0.0,
                                     device_times=False).dispatches
    assert tracing.active is None


def test_benchmark_inside_a_trace_adds_to_it():
    m = irtk.load(irtk.compile_str(PROGRAM, target="cpu"), device="local-sync")
    a, b = _inputs(6)
    with tracing.tracing() as tracer:
        result = m.main.benchmark(a, b, repetitions=3, min_time=0.0, warmup=0)
        assert tracing.active is tracer
    assert result.dispatches[0]["count"] == 3
    dispatches = [e for e in tracer.events if e.category == "dispatch"]
    assert len(dispatches) >= 6 * len(result.dispatches)   # timed calls and traced calls


def test_one_trace_at_a_time():
    with tracing.tracing():
        with pytest.raises(RuntimeError, match="already being recorded"):
            tracing.start()
    with pytest.raises(RuntimeError, match="no trace is being recorded"):
        tracing.stop()


def test_a_trace_is_written_whole_or_not_at_all(tmp_path):
    tracer = tracing.Tracer()
    with pytest.raises(OSError):
        tracer.save(tmp_path / "missing" / "trace.json")
    assert not list(tmp_path.rglob("*"))
    tracer.save(tmp_path / "t.json")
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"][0]["ph"] == "M"
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]


def test_device_timestamps_are_mapped_onto_the_host_clock():
    # The host's own clock (software drivers): kept as it is.
    assert tracing.device_time_base(1_000_000_000, 1_000_500_000, 1_002_000_000) == 0
    # Another clock: the first dispatch starts at the submit.
    assert tracing.device_time_base(1_000_000_000, 5, 1_002_000_000) == 1_000_000_000 - 5
    assert tracing.device_time_base(1_000_000_000, 9_000_000_000, 1_002_000_000) == \
        1_000_000_000 - 9_000_000_000
