"""Why a tuning run ends (tune.finished's reason: budget, stopped, exhausted, error), the first round
sized to the time left, and a real run's end within one candidate's time of its budget
(compiler.tune.search). Scripted measurers (the Measurer seam) give known times; the last test
measures on this machine."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from compiler.events import check_payload
from compiler.tune import JsonlDatabase, LocalMeasurer, tune_model
from compiler.tune.search import PRIOR_CANDIDATE_S, PRIOR_START_S, REASONS
from tests.compiler.tune.models import matmul_relu, norm_softmax
from tests.compiler.tune.test_search_progress import Clocked, Scripted


def _finished(r: Any) -> dict[str, Any]:
    fin = r.events[-1]
    assert fin["type"] == "tune.finished" and fin["reason"] == r.reason and fin["reason"] in REASONS
    check_payload("tune.finished", {k: v for k, v in fin.items() if k not in ("seq", "type", "ts")})
    return fin


def test_a_run_that_measures_every_schedule_ends_exhausted(tmp_path):  # type: ignore[no-untyped-def]
    r = tune_model(norm_softmax(), budget_s=3600, database=str(tmp_path / "t.jsonl"), threads=1, batch_size=8,
                   measurer=Scripted([1.1] * 10_000, threading.Event()))
    fin = _finished(r)
    assert fin["reason"] == "exhausted" and not fin["stopped"] and r.trials > 0
    assert all(s.exhausted for s in r.states)


def test_a_stopped_run_says_stopped(tmp_path):  # type: ignore[no-untyped-def]
    stop = threading.Event()
    r = tune_model(matmul_relu(), budget_s=3600, database=str(tmp_path / "t.jsonl"), threads=1, batch_size=4,
                   measurer=Scripted([1.1, 1.1], stop), stop=stop)
    assert _finished(r)["reason"] == "stopped" and r.stopped and r.trials == 8


class Failing(Scripted):
    """As Scripted, but the measurer itself fails (a lost broker) at batch ``fail_at``."""

    def __init__(self, ratios: list[float], fail_at: int) -> None:
        super().__init__(ratios, threading.Event())
        self.fail_at = fail_at

    def measure(self, requests: list[dict[str, Any]], stop: Any = None) -> list[dict[str, Any]]:
        if self.batches == self.fail_at and requests[0]["repeats"] != 24:
            raise OSError("the broker went away")
        return super().measure(requests, stop)


def test_a_measurer_failure_ends_the_run_with_error_and_keeps_what_was_stored(tmp_path):  # type: ignore[no-untyped-def]
    db = tmp_path / "t.jsonl"
    r = tune_model(matmul_relu(), budget_s=3600, database=str(db), threads=1, batch_size=4,
                   measurer=Failing([0.8] * 10, fail_at=1))
    fin = _finished(r)
    assert fin["reason"] == "error" and "OSError: the broker went away" in fin["error"] and r.error == fin["error"]
    assert len(list(JsonlDatabase(db).records())) == 1 and fin["tuned"][0]["stored"]  # the first batch's winner


class NoDefault(Scripted):
    """Every batch's default schedule fails to build on the worker (so no candidate can be compared)."""

    def measure(self, requests: list[dict[str, Any]], stop: Any = None) -> list[dict[str, Any]]:
        self.batches += 1
        return [{"version": 1, "workload": q["workload"], "kernel": q["kernel"], "default_us": None,
                 "error": "the default schedule could not be measured: no LLVM",
                 "results": [{"trace": t, "status": "error", "median_us": None, "max_abs_error": None,
                              "message": "no LLVM"} for t in q["traces"]]} for q in requests]


def test_a_run_whose_defaults_cannot_be_measured_ends_with_error_after_one_batch_each(tmp_path):  # type: ignore[no-untyped-def]
    m = NoDefault([], threading.Event())
    r = tune_model(matmul_relu(), budget_s=3600, database=str(tmp_path / "t.jsonl"), threads=1, measurer=m)
    fin = _finished(r)
    assert fin["reason"] == "error" and "no LLVM" in fin["error"] and m.batches == len(r.states)


@pytest.mark.parametrize("budget", [PRIOR_START_S + 3 * PRIOR_CANDIDATE_S + 0.5, PRIOR_START_S + 1 * PRIOR_CANDIDATE_S + 0.5])
def test_the_first_round_is_sized_to_the_time_left(tmp_path, monkeypatch, budget):  # type: ignore[no-untyped-def]
    import compiler.tune.search as search

    clock = [0.0]
    monkeypatch.setattr(search.time, "perf_counter", lambda: clock[0])
    stop = threading.Event()
    fake = Clocked([1.1] * 50, stop, clock, 4 * PRIOR_CANDIDATE_S, [])
    r = tune_model(matmul_relu(), budget_s=budget, database=str(tmp_path / "t.jsonl"), threads=1, batch_size=8,
                   measurer=fake, stop=stop)
    room = int((budget - PRIOR_START_S) / PRIOR_CANDIDATE_S)  # a child's start, then candidates at the prior,
    # one of them kept for the batch's confirmation
    sizes = [len(q["traces"]) for q in getattr(fake, "requests", [])]
    assert sizes[:1] == ([room - 1] if room >= 2 else [])  # then sized from the first round's time per candidate
    assert _finished(r)["reason"] == "budget" and r.duration_s <= budget


class Recording(LocalMeasurer):
    """LocalMeasurer that keeps every result (the candidates' own times, ``elapsed_s``)."""

    def __init__(self) -> None:
        super().__init__()
        self.results: list[dict[str, Any]] = []

    def measure(self, requests: Any, stop: Any = None) -> list[dict[str, Any]]:
        out = super().measure(requests, stop)
        self.results += out
        return out


def test_a_real_run_ends_within_one_candidates_time_of_its_budget(tmp_path):  # type: ignore[no-untyped-def]
    budget = 15.0
    with Recording() as m:
        r = tune_model(matmul_relu(), budget_s=budget, database=str(tmp_path / "t.jsonl"), threads=1, batch_size=8,
                       measurer=m)
    took = [c["elapsed_s"] for res in m.results for c in res["results"] if c.get("elapsed_s") is not None]
    assert _finished(r)["reason"] == "budget"
    # one candidate's time past the budget at most (plus the bookkeeping after it: events, the cost model);
    # on a very busy machine no candidate may fit after the child's start and the default's build, which
    # then count as the one (a batch's whole time: every candidate of it skipped)
    one = max(took, default=max((res["elapsed_s"] for res in m.results), default=0.0))
    assert r.duration_s <= budget + one + 1.0, (r.duration_s, took, [res["elapsed_s"] for res in m.results])
