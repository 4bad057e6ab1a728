"""What tune.progress and tune.finished say a task's best is (issue 16's tuning pane): the schedule the
compilation would take, so never slower than the default (the default schedule is a point of the
space). The measurements come from a scripted Measurer (the seam the explorer's Celery fan-out
implements) so that the candidates' times relative to the default are known: a batch whose candidates
are all slower keeps the default; a faster, confirmed one is stored and becomes the best."""

from __future__ import annotations

import threading
from typing import Any

from compiler.tune import JsonlDatabase, tune_model
from tests.compiler.tune.models import matmul_relu

DEFAULT_US = 100.0


class Scripted:
    """Answers batch ``i`` with every candidate at ``ratios[i]`` x the default (a confirmation, one trace
    at 24 repeats, with the ratio that trace was first measured at); sets ``stop`` after the last."""

    def __init__(self, ratios: list[float], stop: threading.Event) -> None:
        self.ratios, self.stop, self.batches = ratios, stop, 0
        self.seen: dict[str, float] = {}

    def measure(self, requests: list[dict[str, Any]], stop: Any = None) -> list[dict[str, Any]]:
        out = []
        for req in requests:
            confirm = req["repeats"] == 24
            if not confirm:
                ratio = self.ratios[self.batches]
                self.batches += 1
                if self.batches == len(self.ratios):
                    self.stop.set()
            results = []
            for t in req["traces"]:
                key = repr(sorted(t.items()))
                r = self.seen[key] if confirm else self.seen.setdefault(key, ratio)
                results.append({"trace": t, "status": "ok", "median_us": r * DEFAULT_US, "default_us": DEFAULT_US,
                                "ratio": r, "max_abs_error": 0.0})
            out.append({"version": 1, "workload": req["workload"], "kernel": req["kernel"], "default_us": DEFAULT_US,
                        "results": results, "worker": "scripted", "elapsed_s": 0.0})
        return out


def _tune(tmp_path, ratios):  # type: ignore[no-untyped-def]
    stop = threading.Event()
    db = tmp_path / "t.jsonl"
    r = tune_model(matmul_relu(), budget_s=300, database=str(db), threads=1, batch_size=4,
                   measurer=Scripted(ratios, stop), stop=stop)
    prog = [e for e in r.events if e["type"] == "tune.progress" and "measuring" not in e]  # the measured batches
    return r, prog, list(JsonlDatabase(db).records())


def test_a_search_whose_candidates_are_all_slower_keeps_the_default_as_its_best(tmp_path):  # type: ignore[no-untyped-def]
    r, prog, records = _tune(tmp_path, [1.12, 1.05])
    assert len(prog) == 2 and not records
    for p in prog:  # the legend's "349.8 µs → 391.7 µs" was best_us = the best candidate
        assert p["best_us"] == p["default_us"] == DEFAULT_US and p["stored"] is False
    assert prog[0]["candidate_us"] > DEFAULT_US and prog[1]["candidate_us"] < prog[0]["candidate_us"]
    (k,) = r.tuned
    assert (k["best_us"], k["trace"], k["stored"]) == (DEFAULT_US, {}, False) and k["candidate_us"] > DEFAULT_US


def test_a_faster_confirmed_candidate_becomes_the_best_at_its_batch(tmp_path):  # type: ignore[no-untyped-def]
    r, prog, records = _tune(tmp_path, [1.12, 0.97, 0.8])
    assert [p["best_us"] for p in prog] == [DEFAULT_US, DEFAULT_US, 0.8 * DEFAULT_US]  # 0.97: within the noise margin
    assert [p["stored"] for p in prog] == [False, False, True]
    assert [p["trials"] for p in prog] == [4, 8, 12] and [p["trials_total"] for p in prog] == [4, 8, 12]
    assert prog[1]["candidate_us"] == 0.97 * DEFAULT_US
    (k,) = r.tuned
    (rec,) = records
    assert k["stored"] and k["best_us"] == 0.8 * DEFAULT_US and k["trace"] == rec["trace"]
    assert rec["found_by"] == {"model": "matmul_relu", "host": "scripted"}  # the run and the measuring worker


class Disagreeing(Scripted):
    """As Scripted, but a confirmation's medians say the candidate is slower (1.2 x the default) while its
    per-round ratio says 0.8: what bursty load produced in a 15-minute run."""

    def measure(self, requests: list[dict[str, Any]], stop: Any = None) -> list[dict[str, Any]]:
        out = super().measure(requests, stop)
        for req, res in zip(requests, out, strict=True):
            if req["repeats"] == 24:
                for r in res["results"]:
                    r["median_us"] = 1.2 * DEFAULT_US
        return out


def test_a_confirmation_whose_medians_disagree_with_its_ratio_is_not_stored(tmp_path):  # type: ignore[no-untyped-def]
    stop = threading.Event()
    db = tmp_path / "t.jsonl"
    r = tune_model(matmul_relu(), budget_s=300, database=str(db), threads=1, batch_size=4,
                   measurer=Disagreeing([0.8], stop), stop=stop)
    assert not list(JsonlDatabase(db).records()) and not r.tuned[0]["stored"]


class Clocked(Scripted):
    """As Scripted, but every batch takes ``seconds`` of a fake clock (``time.perf_counter`` patched in
    compiler.tune.search), so the budget is spent by the measurer alone, deterministically: no timing
    of the real machine. Records the fake time each batch was submitted at and the events seen before it."""

    def __init__(self, ratios: list[float], stop: threading.Event, clock: list[float], seconds: float,
                 events: list[dict[str, Any]]) -> None:
        super().__init__(ratios, stop)
        self.clock, self.seconds, self.events = clock, seconds, events
        self.submitted: list[float] = []
        self.seen_before: list[list[str]] = []

    def measure(self, requests: list[dict[str, Any]], stop: Any = None) -> list[dict[str, Any]]:
        self.requests = [*getattr(self, "requests", []), *requests]
        self.submitted.append(self.clock[0])
        self.seen_before.append([e["type"] for e in self.events])
        self.clock[0] += self.seconds * sum(len(r["traces"]) for r in requests) / 4
        return super().measure(requests, stop)


def test_the_search_never_starts_a_batch_that_cannot_end_within_the_budget(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    import compiler.tune.search as search

    clock = [1000.0]
    monkeypatch.setattr(search.time, "perf_counter", lambda: clock[0])
    events: list[dict[str, Any]] = []
    stop = threading.Event()
    fake = Clocked([1.1] * 50, stop, clock, 6.0, events)  # a batch of 4 candidates takes 6 s
    r = tune_model(matmul_relu(), budget_s=20, database=str(tmp_path / "t.jsonl"), threads=1, batch_size=4,
                   measurer=fake, stop=stop, on_event=events.append)
    # batches at 0, 6 and 12 s end at 6, 12 and 18 s; one of 4 at 18 s would end at 24 s > 20 s, and the
    # 2 s left (1.5 s a candidate) hold no candidate and its confirmation: not started
    assert [t - 1000.0 for t in fake.submitted] == [0.0, 6.0, 12.0]
    assert r.trials == 12 and not r.stopped and r.duration_s <= 20 and r.reason == "budget"
    assert r.events[-1]["type"] == "tune.finished" and r.events[-1]["duration_s"] == 18.0
    assert r.events[-1]["reason"] == "budget"
    assert all(req["time_left_s"] <= 20 for req in fake.requests)  # the measurer is told the time left


def test_progress_is_reported_when_a_batch_is_submitted_before_its_result(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    import compiler.tune.search as search

    clock = [0.0]
    monkeypatch.setattr(search.time, "perf_counter", lambda: clock[0])
    events: list[dict[str, Any]] = []
    stop = threading.Event()
    fake = Clocked([1.1, 0.8], stop, clock, 5.0, events)
    tune_model(matmul_relu(), budget_s=300, database=str(tmp_path / "t.jsonl"), threads=1, batch_size=4,
               measurer=fake, stop=stop, on_event=events.append)
    first = events[[e["type"] for e in events].index("tune.progress")]
    assert fake.seen_before[0] == ["tune.started", "tune.progress"]  # before the first batch has a result
    assert first["measuring"] == 4 and first["batch_trials"] == 0 and first["trials_total"] == 0
    prog = [e for e in events if e["type"] == "tune.progress"]
    assert first["kernel"] == prog[1]["kernel"]  # the task then measured
    # each batch: submitted (measuring), then measured; the second batch is submitted 5 s in
    assert ["measuring" in e for e in prog] == [True, False, True, False]
    assert prog[2]["elapsed_s"] == 5.0 and prog[2]["trials_total"] == 4
