"""The measuring child kept across batches (compiler.tune.persistent, compiler.tune.measure): one child
serves many requests; a candidate that crashes or hangs kills only that child, is discarded and
reported, and a new child measures the rest; no candidate starts past the request's time left."""

from __future__ import annotations

import time

import pytest

from compiler.tune.measure import LocalMeasurer, run_request
from tests.compiler.tune.models import measure_request


@pytest.fixture(scope="module")
def task(matmul_task):  # type: ignore[no-untyped-def]
    return matmul_task


_request = measure_request


def test_one_child_measures_batch_after_batch(task):  # type: ignore[no-untyped-def]
    with LocalMeasurer() as m:
        out = m.measure([_request(task, [{"tile": "4x2"}, {"tile": "2x2"}]), _request(task, [{"tile": "6x2"}])])
        assert m.children_started == 1
    pids = {r["child"] for res in out for r in res["results"]}
    assert len(pids) == 1 and all(r["status"] == "ok" for res in out for r in res["results"])
    assert all(res["default_us"] > 0 and "restarts" not in res for res in out)


def test_a_crashing_candidate_restarts_the_child_and_only_it_is_lost(task, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PRISM_TUNE_FAULT", "1:SIGSEGV")
    with LocalMeasurer() as m:
        first, second = m.measure([_request(task, [{"tile": "4x2"}, {"tile": "2x2"}, {"tile": "6x2"}]),
                                   _request(task, [{"tile": "3x1"}])])  # one candidate: index 1 never comes
        assert m.children_started == 2
    before, crashed, after = first["results"]
    assert crashed["status"] == "crashed" and "SIGSEGV" in crashed["message"] and crashed["median_us"] is None
    assert "started again" in crashed["message"]
    assert first["restarts"] == [{"index": 1, "status": "crashed", "message": first["restarts"][0]["message"]}]
    assert before["status"] == after["status"] == "ok" and before["child"] != after["child"]
    # the restarted child serves the next batch: the crash cost one child, not the run
    assert second["results"][0]["status"] == "ok" and second["results"][0]["child"] == after["child"]
    assert "restarts" not in second


def test_a_hanging_candidate_is_killed_with_its_child_and_the_batch_goes_on(task, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PRISM_TUNE_FAULT", "0:SIGSTOP")
    with LocalMeasurer() as m:
        (res,) = m.measure([_request(task, [{"tile": "4x2"}, {"tile": "6x2"}], timeout_s=5.0)])
        assert m.children_started == 2
    hung, rest = res["results"]
    assert hung["status"] == "timeout" and "5 s" in hung["message"] and rest["status"] == "ok"
    assert res["restarts"][0]["status"] == "timeout"


def test_a_child_that_exited_between_batches_is_started_again_without_a_report(task):  # type: ignore[no-untyped-def]
    with LocalMeasurer() as m:
        (a,) = m.measure([_request(task, [{"tile": "4x2"}])])
        m.child.close()  # as an idle or recycled child ends itself
        (b,) = m.measure([_request(task, [{"tile": "2x2"}])])
        assert m.children_started == 2
    assert a["results"][0]["status"] == b["results"][0]["status"] == "ok" and "restarts" not in b


def test_no_candidate_starts_once_the_time_left_is_spent(task):  # type: ignore[no-untyped-def]
    traces = [{"tile": t} for t in ("4x2", "2x2", "6x2", "3x1", "2x1", "1x2")]
    res = run_request(_request(task, traces, time_left_s=0.0))
    assert [r["status"] for r in res["results"]] == ["skipped"] * len(traces)
    assert "time was spent" in res["results"][0]["message"]
    with LocalMeasurer() as m:  # warm: the default is built, so the time left is the candidates'
        m.measure([_request(task, [{"tile": "4x2"}])])
        t0 = time.monotonic()
        (res,) = m.measure([_request(task, traces, time_left_s=0.3)])
        took = time.monotonic() - t0
    ran = [r for r in res["results"] if r["status"] != "skipped"]
    assert [r["status"] for r in res["results"]] == ["ok"] * len(ran) + ["skipped"] * (len(traces) - len(ran))
    # no candidate starts after the deadline: the batch ends within one candidate's time of it
    assert took <= 0.3 + max(r["elapsed_s"] for r in ran) + 0.5 if ran else took <= 0.8


def test_a_default_that_cannot_be_built_fails_the_batch_and_not_the_child(task):  # type: ignore[no-untyped-def]
    bad = _request(task, [{"tile": "4x2"}])
    bad["source"] = {**bad["source"], "data": "AAAA"}  # not a kernel source
    with LocalMeasurer() as m:
        (res,) = m.measure([bad])
        (good,) = m.measure([_request(task, [{"tile": "4x2"}])])
        assert m.children_started == 1
    assert res["default_us"] is None and res["results"][0]["status"] == "error"
    assert "default schedule could not be measured" in res["error"]
    assert good["results"][0]["status"] == "ok"
