"""Measuring candidates in isolated children (compiler.tune.measure): statuses, crash and timeout
isolation (a candidate whose child dies or hangs is discarded; the rest of the batch is measured),
and malformed requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler.tune.errors import TuneError
from compiler.tune.measure import LocalMeasurer, object_dir, run_request
from tests.compiler.tune.models import measure_request


@pytest.fixture(scope="module")
def task(matmul_task):  # type: ignore[no-untyped-def]
    return matmul_task


_request = measure_request


def test_a_batch_reports_each_candidate_and_the_default(task):  # type: ignore[no-untyped-def]
    res = run_request(_request(task, [{"tile": "4x2"}, {"tile": "2x2", "block_tiles": 1}, {"tile": "99x1"}]))
    json.dumps(res)
    assert res["default_us"] > 0 and res["workload"] == task.workload
    ok1, ok2, bad = res["results"]
    assert ok1["status"] == ok2["status"] == "ok" and ok1["median_us"] > 0 and ok2["median_us"] > 0
    assert ok1["max_abs_error"] <= 1e-4 and ok2["trace"] == {"tile": "2x2", "block_tiles": 1}
    assert ok1["default_us"] > 0 and ok1["ratio"] > 0  # timed in alternation with the default, same child
    assert bad["status"] == "invalid" and "knob tile: value '99x1'" in bad["message"] and bad["median_us"] is None


def test_a_candidate_whose_child_dies_is_discarded_and_the_rest_measured(task, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PRISM_TUNE_FAULT", "1:SIGSEGV")
    res = run_request(_request(task, [{"tile": "4x2"}, {"tile": "2x2"}, {"tile": "6x2"}]))
    first, crashed, last = res["results"]
    assert crashed["status"] == "crashed" and "SIGSEGV" in crashed["message"] and crashed["median_us"] is None
    assert first["status"] == "ok" and last["status"] == "ok" and res["default_us"] > 0


def test_a_candidate_that_hangs_times_out_and_the_rest_is_measured(task, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PRISM_TUNE_FAULT", "0:SIGSTOP")
    res = run_request(_request(task, [{"tile": "4x2"}, {"tile": "6x2"}], timeout_s=15.0))
    hung, rest = res["results"]
    assert hung["status"] == "timeout" and "15 s" in hung["message"]
    assert rest["status"] == "ok"


def test_the_local_measurer_keeps_request_order_and_malformed_requests_are_errors(task):  # type: ignore[no-untyped-def]
    reqs = [_request(task, [{"tile": "2x1"}]), _request(task, [{"tile": "3x1"}])]
    out = LocalMeasurer().measure(reqs)
    assert [r["results"][0]["trace"]["tile"] for r in out] == ["2x1", "3x1"]
    with pytest.raises(TuneError, match="field 'traces'"):
        run_request({**reqs[0], "traces": None})
    with pytest.raises(TuneError, match="version"):
        run_request({**reqs[0], "version": 7})


def test_compiled_candidates_are_reused_by_the_next_child(task):  # type: ignore[no-untyped-def]
    """The measuring process's object folder holds the default's and each candidate's object (named by
    the kernel's cache key); a second batch of the same traces (a confirmation) reads them instead of
    compiling again and measures the same statuses."""
    traces = [{"tile": "4x2"}, {"tile": "2x2", "block_tiles": 1}]
    first = run_request(_request(task, traces))
    objs = sorted(p.name for p in Path(object_dir()).glob("*.o"))
    assert len(objs) >= 3  # the default and the two candidates
    again = run_request(_request(task, traces))
    assert sorted(p.name for p in Path(object_dir()).glob("*.o")) == objs
    assert [r["status"] for r in again["results"]] == [r["status"] for r in first["results"]] == ["ok", "ok"]
