"""The search (compiler.tune.tune_model, compiler.tune.evolve): proposals are valid and unmeasured and
deterministic; a short tuning run emits its events, stores only candidates faster than the default and
never a miscompiled one; a second run skips stored workloads; a compilation with the database does no
trials; stop keeps what was found; bad budgets are errors."""

from __future__ import annotations

import random
import threading
from types import SimpleNamespace

import pytest

import compiler
from compiler.targets import get_target
from compiler.tune import JsonlDatabase, TuneError, make_record, tune_model
from compiler.tune.cost_model import CostModel
from compiler.tune.evolve import TaskState, propose, trace_key
from compiler.tune.search import PRIOR_S, pick_tasks
from compiler.tune.tasks import compile_graph, extract_tasks
from tests.compiler.tune.models import conv_tail, matmul_relu


@pytest.fixture(scope="module")
def tasks():  # type: ignore[no-untyped-def]
    g, target = compile_graph(conv_tail())
    return extract_tasks(g, target)[0], target


def test_proposals_are_valid_unmeasured_and_deterministic(tasks):  # type: ignore[no-untyped-def]
    ts, target = tasks
    conv = ts[0]
    a = propose(TaskState(conv), CostModel(), target, 6, random.Random(1))
    b = propose(TaskState(conv), CostModel(), target, 6, random.Random(1))
    assert a == b and len(a) == 6 and len({trace_key(t) for t in a}) == 6
    state = TaskState(conv)
    for t in a:
        state.record(t, 10.0)
    c = propose(state, CostModel(), target, 6, random.Random(1))
    assert not {trace_key(t) for t in c} & {trace_key(t) for t in a}
    assert all(set(t) == {k.name for k in conv.knobs} for t in c)


def test_a_small_space_is_enumerated_until_exhausted(tasks):  # type: ignore[no-untyped-def]
    ts, target = tasks
    tail = ts[1]
    assert tail.space_size <= 256
    state, seen = TaskState(tail), set()
    for _ in range(10):
        batch = propose(state, CostModel(), target, 8, random.Random(0))
        for t in batch:
            seen.add(trace_key(t))
            state.record(t, 1.0)
        if not batch:
            break
    assert state.exhausted and len(seen) + state.invalid == tail.space_size


def test_a_short_run_stores_only_faster_valid_candidates_and_a_rerun_skips_them(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PRISM_TUNE_FAULT", "1:corrupt")  # the second candidate of every batch miscompiles
    db = tmp_path / "t.jsonl"
    events: list = []
    r = tune_model(matmul_relu(), budget_s=40, database=str(db), threads=1, batch_size=4, on_event=events.append)
    types = [e["type"] for e in events]
    assert types[0] == "tune.started" and types[-1] == "tune.finished" and "tune.progress" in types
    prog = [e for e in events if e["type"] == "tune.progress" and "measuring" not in e]  # the measured batches
    assert all(p["mismatched"] >= 1 and any(m.startswith("mismatch") for m in p["messages"]) for p in prog)
    assert r.trials == sum(p["batch_trials"] for p in prog) > 0
    records = list(JsonlDatabase(db).records())
    assert all(rec["median_us"] < rec["default_us"] for rec in records)
    discarded = {k for s in r.states for k, us in s.measured.items() if us is None}  # never the miscompiled ones
    assert not {trace_key(rec["trace"]) for rec in records} & discarded
    if not records:  # nothing beat the default on this machine this time: store the best found anyway
        s = r.states[0]
        JsonlDatabase(db).add(make_record(s.task.workload, s.task.desc, get_target("host"), s.best_trace or {},
                                          s.best_us or 1.0, s.default_us or 1.0, trials=s.trials, threads=1))
    again = tune_model(matmul_relu(), budget_s=5, database=str(db), threads=1)  # the workload is stored:
    assert again.skipped == 1 and again.trials == 0  # zero trials
    c = compiler.compile(matmul_relu(), tuning_db=str(db), verify=True, benchmark=False, threads=1)
    assert c.ok and not [e for e in c.events if e["type"] == "tune.progress"]
    assert [e for e in c.events if e["type"] == "tune.applied"][0]["tuned"] == 1
    assert [e for e in c.events if e["type"] == "model.verified"][0]["passed"] is True  # vs ONNX Runtime


def test_stop_ends_the_run_and_keeps_what_was_found(tmp_path):  # type: ignore[no-untyped-def]
    stop = threading.Event()
    stop.set()
    r = tune_model(matmul_relu(), budget_s=60, database=str(tmp_path / "a.jsonl"), stop=stop, threads=1)
    assert r.stopped and r.trials == 0 and r.events[-1]["stopped"] is True

    later = threading.Event()
    r2 = tune_model(matmul_relu(), budget_s=120, database=str(tmp_path / "b.jsonl"), threads=1, batch_size=3,
                    stop=later, on_event=lambda e: later.set() if e["type"] == "tune.progress" and "measuring" not in e
                    else None)
    assert r2.stopped and r2.trials == 3 and r2.duration_s < 120
    assert r2.tuned[0]["trials"] == 3


@pytest.mark.parametrize("budget", [0, -5, float("nan"), "soon"])
def test_a_budget_that_is_not_positive_is_an_error(tmp_path, budget):  # type: ignore[no-untyped-def]
    with pytest.raises(TuneError, match="budget"):
        tune_model(matmul_relu(), budget_s=budget, database=str(tmp_path / "t.jsonl"))


def test_measuring_time_goes_to_tasks_by_weight_and_a_small_task_waits():  # type: ignore[no-untyped-def]
    """A task of 1% of the model's estimated time is not measured in the first round: it waits until
    the large one has had about 100 x PRIOR_S seconds of measuring."""
    big, small = (TaskState(SimpleNamespace(estimated_us=us)) for us in (1000.0, 10.0))  # type: ignore[arg-type]
    assert pick_tasks([small, big], 1) == [big]
    big.spent_s = 98 * PRIOR_S
    assert pick_tasks([small, big], 1) == [big] and pick_tasks([small, big], 2) == [big, small]
    big.spent_s = 100 * PRIOR_S
    assert pick_tasks([small, big], 1) == [small]
