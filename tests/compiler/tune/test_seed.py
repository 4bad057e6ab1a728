"""Seeding a task's search from the database's records of similar workloads (compiler.tune.seed): the
same ops at other shapes on the same target seed it, nearest first; other ops, another target and the
workload itself do not; a seed is projected onto the task's knobs; the first batch starts with it, and
a record stored during a run seeds a similar workload's first batch in the same run."""

from __future__ import annotations

import dataclasses
import random
import threading

import pytest

from compiler.tune import JsonlDatabase, make_record, tune_model
from compiler.tune.cost_model import CostModel
from compiler.tune.evolve import TaskState, propose
from compiler.tune.seed import project, similar_traces
from compiler.tune.tasks import compile_graph, extract_tasks
from tests.compiler.tune.models import conv_tail, matmul_relu, two_matmuls
from tests.compiler.tune.test_search_progress import Clocked


def _task(model):  # type: ignore[no-untyped-def]
    g, target = compile_graph(model)
    return extract_tasks(g, target)[0][0], target


@pytest.fixture(scope="module")
def tasks():  # type: ignore[no-untyped-def]
    return _task(matmul_relu(48, 96, 80)), _task(matmul_relu(64, 96, 80)), _task(matmul_relu(48, 96, 160)), \
        _task(conv_tail())


def _other(task, target, nth=0):  # type: ignore[no-untyped-def]
    """A valid trace of ``task`` other than its default (the search's own proposal: it passed the validity
    check), as a record of that workload would hold."""
    return propose(TaskState(task), CostModel(), target, nth + 1, random.Random(7))[nth]


def test_records_of_the_same_ops_at_other_shapes_seed_a_task_nearest_first(tmp_path, tasks):  # type: ignore[no-untyped-def]
    (near, target), (new, _), (far, _), (conv, _) = tasks
    db = JsonlDatabase(tmp_path / "t.jsonl")
    t_near, t_far = _other(near, target), _other(far, target, 1)
    db.add(make_record(far.workload, far.desc, target, t_far, 80.0, 100.0, trials=8, threads=1))
    db.add(make_record(near.workload, near.desc, target, t_near, 90.0, 100.0, trials=8, threads=1))
    db.add(make_record(conv.workload, conv.desc, target, _other(conv, target), 50.0, 100.0, trials=8, threads=1))
    seeds = similar_traces(db, new, target)
    expected = [t for t in (project(t_near, new), project(t_far, new)) if t is not None]
    assert expected and seeds == [t for i, t in enumerate(expected) if t not in expected[:i]]
    # M 48 vs 64 is nearer than N 80 vs 160, though the far record is faster; the Conv's is not there
    assert all(set(s) == {k.name for k in new.knobs} for s in seeds)  # only this task's knobs
    assert similar_traces(db, near, target) == ([project(t_far, near)] if project(t_far, near) else [])  # not itself
    assert _other(conv, target) not in seeds  # a Conv is not a MatMul


def test_records_for_another_target_do_not_seed(tmp_path, tasks):  # type: ignore[no-untyped-def]
    (near, target), (new, _), _, _ = tasks
    other = dataclasses.replace(target, cpu="cortex-a72", triple="aarch64-unknown-linux-gnu", features="+neon")
    db = JsonlDatabase(tmp_path / "t.jsonl")
    db.add(make_record(near.workload, near.desc, other, _other(near, target), 90.0, 100.0, trials=8, threads=1))
    assert similar_traces(db, new, target) == []


def test_a_projection_onto_the_default_is_no_seed(tasks):  # type: ignore[no-untyped-def]
    _, (new, _), _, _ = tasks
    assert project({"no_such_knob": 3}, new) is None
    assert project({new.knobs[0].name: "not a choice"}, new) is None


def test_the_first_batch_starts_with_the_seeds(tasks):  # type: ignore[no-untyped-def]
    (near, target), (new, _), _, _ = tasks
    seed = project(_other(near, target), new)
    assert seed is not None
    batch = propose(TaskState(new, seeds=[seed]), CostModel(), target, 4, random.Random(0))
    assert batch[0] == seed and len(batch) == 4 and batch.count(seed) == 1


def test_a_record_stored_by_this_run_seeds_a_similar_workload_of_the_same_run(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    import compiler.tune.search as search

    clock = [0.0]  # each batch takes measuring time (a fake clock), so the smaller task gets its turn
    monkeypatch.setattr(search.time, "perf_counter", lambda: clock[0])
    stop = threading.Event()
    m = Clocked([0.8] * 12, stop, clock, 2.0, [])  # every candidate 0.8 x the default: each batch's best stored
    db = tmp_path / "t.jsonl"
    r = tune_model(two_matmuls(), budget_s=3600, database=str(db), threads=1, batch_size=3, measurer=m, stop=stop)
    batches = [q for q in m.requests if q["repeats"] != 24]
    first = batches[0]["workload"]
    later = next(q for q in batches if q["workload"] != first)  # the other task's first batch
    task = next(s.task for s in r.states if s.task.workload == later["workload"])
    stored = [project(x["trace"], task) for x in JsonlDatabase(db).records() if x["workload"] == first]
    assert len(r.states) == 2 and stored
    assert later["traces"][0] in stored  # its first candidate: a best trace its neighbour stored in this run
