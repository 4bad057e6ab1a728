"""The tuning database on the explorer's tables (issue 16): round trip in the compiler's record
format, the best record per workload and machine kind (target triple, CPU, features), provenance
(the compilation and user that found it), bad records refused naming the field, and the result
cache made stale by a record newer than a stored result for one of its workloads."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from review_fixtures import compilation
from tuning_models import gemm_model, runtime_if_model

from compiler.tune.database import make_record
from compiler.tune.tasks import compile_graph, extract_tasks
from explorer.compilations.models import Compilation, TuningRecord
from explorer.compilations.services import submission, uploads
from explorer.compilations.services.runs import run_compilation
from explorer.compilations.services.tuning_db import DjangoTuningDatabase, InvalidRecord

HOST = {"triple": "x86_64-unknown-linux-gnu", "cpu": "znver5", "features": "+avx512f,+fma"}


class Machine:
    """What `best` reads of a `compiler.targets.Target`: its triple, CPU and features."""

    def __init__(self, **fields: str) -> None:
        self.__dict__.update(fields)


def record(workload: str = "3f2a0000aaaa0001", median_us: float = 90.0, **fields) -> dict:
    """A record in the compiler's format (tune-api.md, `compiler.tune.database`)."""
    return {"version": 1, "workload": workload, "desc": {"ops": ["Conv"], "shapes": [[1, 64, 56, 56]]},
            "kernel": "fused_conv_3", "target": "host", **HOST, "trace": {"tile": "8x2", "block_tiles": 4},
            "median_us": median_us, "default_us": 120.0, "trials": 64, "threads": 2,
            "compiler_version": "0.1.0", "ts": 1.0, **fields}


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user("owner", password="owner-pw-123")


def test_database_round_trip_keeps_the_best_per_workload_and_machine(owner):
    finder = compilation(owner=owner, visibility="private")
    db = DjangoTuningDatabase(finder.id)
    db.add(record(median_us=90.0))
    db.add(record(median_us=95.0))  # slower: dropped
    db.add(record(median_us=80.5, trace={"tile": "4x4", "block_tiles": 2}))
    db.add(record(median_us=70.0, cpu="skylake-avx512"))  # another machine kind
    host, other = Machine(**HOST), Machine(**{**HOST, "cpu": "skylake-avx512"})
    best = DjangoTuningDatabase().best("3f2a0000aaaa0001", host)
    assert best["median_us"] == 80.5 and best["trace"] == {"tile": "4x4", "block_tiles": 2}
    assert best["compilation"] == finder.id and best["default_us"] == 120.0 and best["trials"] == 64
    assert DjangoTuningDatabase().best("3f2a0000aaaa0001", other)["median_us"] == 70.0
    assert DjangoTuningDatabase().best("3f2a0000aaaa0001", Machine(**{**HOST, "features": "+avx2"})) is None
    assert DjangoTuningDatabase().best("ffff", host) is None
    rows = TuningRecord.objects.filter(cpu="znver5").order_by("median_us")
    assert [r.median_us for r in rows] == [80.5, 90.0] and {r.found_by_id for r in rows} == {owner.pk}
    listed = list(db.records())
    assert len(listed) == 3 and all(set(record()) - {"ts"} <= set(r) for r in listed)
    assert {k: listed[0][k] for k in ("workload", "triple", "cpu", "features", "trace", "median_us")} == \
        {k: record(median_us=70.0, cpu="skylake-avx512")[k] for k in ("workload", "triple", "cpu", "features", "trace", "median_us")}


def test_records_rank_by_their_ratio_to_the_default_measured_with_them(owner):
    """A lower raw median measured at a quieter moment loses to a better ratio to the default timed in
    alternation with it (medians of a shared machine at different moments are not comparable)."""
    db = DjangoTuningDatabase(compilation(owner=owner, visibility="private").id)
    db.add(record(median_us=60.0, default_us=75.0, trace={"tile": "4x2"}))  # 0.8
    db.add(record(median_us=90.0, default_us=150.0, trace={"tile": "6x2"}))  # 0.6: better, kept
    db.add(record(median_us=50.0, default_us=60.0, trace={"tile": "2x2"}))  # 0.83: dropped
    best = DjangoTuningDatabase().best("3f2a0000aaaa0001", Machine(**HOST))
    assert best["trace"] == {"tile": "6x2"} and TuningRecord.objects.count() == 2


@pytest.mark.parametrize("bad, words", [
    ({"median_us": 0}, "median_us must be a positive number"),
    ({"median_us": float("nan")}, "median_us must be a positive number"),
    ({"median_us": None}, "missing median_us"),
    ({"default_us": -1.0}, "default_us must be a positive number"),
    ({"trace": "tile=8x2"}, "trace must be an object"),
    ({"workload": ""}, "missing workload"),
    ({"status": "mismatch"}, "status 'mismatch' is not stored"),
])
def test_a_bad_record_is_refused_naming_the_field(db, bad, words):
    with pytest.raises(InvalidRecord, match=words):
        DjangoTuningDatabase().add(record(**bad))
    assert not TuningRecord.objects.exists()


def test_lookups_are_saved_and_a_newer_record_makes_the_cached_result_stale(db):
    old = compilation(cache_key="same-request", finished_at=timezone.now() - timedelta(minutes=5))
    db_ = DjangoTuningDatabase(old.id)
    assert db_.best("3f2a0000aaaa0001", Machine(**HOST)) is None
    db_.flush()
    old.refresh_from_db()
    assert old.tuning_workloads == ["3f2a0000aaaa0001"]
    assert submission._cache_hit("same-request", None, "unlisted") == old  # no record yet: served
    DjangoTuningDatabase().add(record())
    assert submission._cache_hit("same-request", None, "unlisted") is None  # compiled again now, it would differ
    fresh = compilation(cache_key="same-request", finished_at=timezone.now() + timedelta(seconds=1),
                        tuning_workloads=["3f2a0000aaaa0001"])
    assert submission._cache_hit("same-request", None, "unlisted") == fresh


def _run(path, owner) -> Compilation:
    data = path.read_bytes()
    m, _ = uploads.register_upload([data], name=path.name, size=len(data), owner=owner, visibility="unlisted")
    comp = Compilation.objects.create(model=m, target="host", pipeline="O2", compiler_version="t", cache_key="gemm",
                                      owner=owner, options={"verify": True, "benchmark": False})
    run_compilation(comp.id)
    comp.refresh_from_db()
    return comp


def test_a_record_found_by_one_user_schedules_another_users_compilation(db, settings, tmp_path, owner):
    """The seam end to end, in process: a record for the model's GEMM workload with a non-default trace
    (found by `owner`'s compilation) is used by another user's compilation of the model: its kernel is
    lowered with that trace (`schedule_source` tuned), tune.applied counts it, and its outputs still
    match ONNX Runtime (model.verified, the oracle)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    path = gemm_model(tmp_path / "gemm.onnx")
    graph, target = compile_graph(str(path))
    tasks, _ = extract_tasks(graph, target)
    assert tasks, "the GEMM kernel has tunable knobs"
    task = tasks[0]
    trace = {k.name: next(c for c in k.choices if c != k.default) for k in task.knobs}
    finder = compilation(owner=owner, visibility="private")
    DjangoTuningDatabase(finder.id).add(make_record(task.workload, task.desc, target, trace, 5.0, 9.0, trials=8, threads=1))
    other = get_user_model().objects.create_user("other", password="other-pw-123")
    comp = _run(path, other)
    events = {e.type: e.payload for e in comp.events.all()}
    assert comp.status == "succeeded", comp.error
    lowered = [e.payload for e in comp.events.filter(type="kernel.lowered")]
    tuned = [k for k in lowered if k.get("schedule_source") == "tuned"]
    assert [k["kernel"] for k in tuned] == [task.kernel] and tuned[0]["tuned"]["trace"] == trace
    assert events["tune.applied"]["tuned"] == 1 and events["tune.applied"]["this_run"] == 0  # found by `owner`'s
    assert events["tune.applied"]["message"] == "1 of 1 kernels on tuned schedules from this server's tuning database"
    assert DjangoTuningDatabase(finder.id).best(task.workload, target)["this_run"] is True  # the finder's "this run"
    assert DjangoTuningDatabase(comp.id).best(task.workload, target)["this_run"] is False
    assert events["model.verified"]["passed"] is True  # the tuned schedule computes what ORT computes
    assert comp.tuning_workloads and task.workload in comp.tuning_workloads


def test_a_search_that_cannot_run_says_why_and_the_compilation_goes_on(db, settings, tmp_path, owner):
    """A tuning compilation of a model compiled in parts (a run-time If): tune_model refuses it, the
    service ends the search in the log with tune.finished carrying `error`, then compiles as usual."""
    settings.MEDIA_ROOT = tmp_path / "media"
    path = runtime_if_model(tmp_path / "branchy.onnx")
    data = path.read_bytes()
    m, _ = uploads.register_upload([data], name=path.name, size=len(data), owner=owner, visibility="unlisted")
    comp = Compilation.objects.create(model=m, target="host", pipeline="O2", compiler_version="t", cache_key="if",
                                      owner=owner, options={"verify": True, "benchmark": False, "tune_budget_s": 5})
    run_compilation(comp.id)
    comp.refresh_from_db()
    events = list(comp.events.order_by("seq"))
    assert [e.seq for e in events] == list(range(len(events)))
    assert events[0].type == "tune.finished" and events[0].payload["trials"] == 0
    assert events[0].payload["error"].startswith("the search could not run: ")
    assert comp.status == "succeeded" and events[-1].type == "compile.finished", comp.error
