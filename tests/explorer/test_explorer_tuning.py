"""The explorer's side of auto-tuning (issue 16) without workers (the database itself:
test_explorer_tuning_db.py): `tune_budget_s` checked as a clear 400 naming the field,
and the tuning job's reads and stop honouring the compilation's visibility (an outsider gets 404,
one who sees it but may not manage it 403). The distributed path with real workers:
test_stack_tuning.py."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from api_client import post_compilation, upload_model
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from review_fixtures import compilation, model
from test_explorer_tuning_db import record

from explorer.accounts.models import Membership, Team
from explorer.compilations.models import Compilation
from explorer.compilations.services import submission
from explorer.compilations.services.tuning_db import DjangoTuningDatabase
from explorer.compilations.services.tuning_queue import StopRequested, merge_parts, split_traces

SQUEEZENET = Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"


@pytest.fixture
def users(db):
    made = {n: get_user_model().objects.create_user(n, password=f"{n}-pw-123") for n in ("owner", "teammate", "outsider")}
    team = Team.objects.create(slug="tuners", name="Tuners")
    Membership.objects.create(team=team, user=made["owner"], role="admin")
    Membership.objects.create(team=team, user=made["teammate"])
    return made


def running(**fields) -> Compilation:
    """A compilation (review_fixtures' log) whose status is `running`."""
    comp = compilation(**fields)
    Compilation.objects.filter(pk=comp.pk).update(status="running")
    comp.status = "running"
    return comp


def client_of(user) -> Client:
    c = Client()
    if user is not None:
        c.force_login(user)
    return c


@pytest.mark.parametrize("budget, words", [
    (0, "must be a positive number of seconds"),
    (-5, "must be a positive number of seconds"),
    ("60", "a number of seconds"),
    (True, "a number of seconds"),
    (10 ** 7, "must be at most"),
])
def test_tune_budget_is_a_clear_400_naming_the_field(db, budget, words):
    c = Client()
    mid = upload_model(c, "squeezenet.onnx", onnx.load(str(SQUEEZENET)))
    r = post_compilation(c, mid, tune_budget_s=budget)
    assert r.status_code == 400, r.content
    assert r.json()["error"].startswith("tune_budget_s: ") and words in r.json()["error"], r.json()
    assert not Compilation.objects.exists()


def test_a_tuning_request_is_stored_with_its_budget_and_never_served_from_the_cache(db):
    c = Client()
    mid = upload_model(c, "squeezenet.onnx", onnx.load(str(SQUEEZENET)))
    first = post_compilation(c, mid, tune_budget_s=30)
    assert first.status_code == 201, first.content
    assert first.json()["options"]["tune_budget_s"] == 30
    Compilation.objects.filter(pk=first.json()["id"]).update(status="succeeded", finished_at=timezone.now())
    again = post_compilation(c, mid, tune_budget_s=30)
    assert again.status_code == 201 and again.json()["id"] != first.json()["id"]
    comp = Compilation.objects.get(pk=again.json()["id"])
    assert submission.extra_time(comp.options) == 30


def test_tuning_reads_and_stop_honour_the_compilation_visibility(users):
    private = running(owner=users["owner"], visibility="private",
                      options={"verify": True, "benchmark": True, "tune_budget_s": 60})
    unlisted = running(owner=users["owner"], visibility="unlisted", options={"tune_budget_s": 60},
                       the_model=model(sha="77" * 32))
    plain = running(owner=users["owner"], visibility="unlisted", the_model=model(sha="78" * 32))
    clients = {n: client_of(u) for n, u in users.items()} | {"anonymous": client_of(None)}
    for who in ("outsider", "anonymous"):
        for path in (f"/api/compilations/{private.id}/tuning", f"/api/compilations/{private.id}/events",
                     f"/c/{private.id}"):
            assert clients[who].get(path).status_code == 404, (who, path)
        r = clients[who].post(f"/api/compilations/{private.id}/tuning/stop")
        assert r.status_code == 404 and r.json() == {"error": f"no compilation with id {private.id}"}, who
    assert clients["outsider"].post(f"/api/compilations/{unlisted.id}/tuning/stop").status_code == 403
    assert clients["outsider"].get(f"/api/compilations/{unlisted.id}/tuning").json()["can_stop"] is False
    assert Compilation.objects.get(pk=private.id).tune_stop_requested_at is None
    seen = clients["teammate"].get(f"/api/compilations/{private.id}/tuning").json()
    assert seen["budget_s"] == 60 and seen["can_stop"] is True and seen["stop_requested_at"] is None
    flag = StopRequested(private.id, min_interval_s=0)
    assert not flag.is_set()
    r = clients["teammate"].post(f"/api/compilations/{private.id}/tuning/stop")
    assert r.status_code == 202 and r.json()["stop_requested_at"], r.content
    assert flag.is_set()
    assert clients["owner"].post(f"/api/compilations/{private.id}/tuning/stop").status_code == 202  # idempotent
    r = clients["owner"].post(f"/api/compilations/{plain.id}/tuning/stop")
    assert r.status_code == 409 and "not tuning" in r.json()["error"]
    Compilation.objects.filter(pk=unlisted.id).update(status="succeeded")
    r = clients["owner"].post(f"/api/compilations/{unlisted.id}/tuning/stop")
    assert r.status_code == 409 and "is over" in r.json()["error"]


def test_a_record_names_its_finder_only_to_who_may_see_it(users):
    secret = compilation(owner=users["owner"], visibility="private")
    DjangoTuningDatabase(secret.id).add(record())
    mine = compilation(owner=users["outsider"], visibility="unlisted", the_model=model(sha="79" * 32),
                       tuning_workloads=["3f2a0000aaaa0001"])
    as_outsider = client_of(users["outsider"]).get(f"/api/compilations/{mine.id}/tuning").json()["records"]
    as_teammate = client_of(users["teammate"]).get(f"/api/compilations/{mine.id}/tuning").json()["records"]
    assert as_outsider["3f2a0000aaaa0001"]["source"] == "database"
    assert as_outsider["3f2a0000aaaa0001"]["found_in"] is None and as_outsider["3f2a0000aaaa0001"]["found_by"] is None
    assert as_teammate["3f2a0000aaaa0001"]["found_in"] == secret.id
    assert as_teammate["3f2a0000aaaa0001"]["found_by"] == {"username": "owner"}
    own = client_of(users["owner"]).get(f"/api/compilations/{secret.id}/tuning").json()["records"]
    assert own == {}  # the finder's own run looked nothing up here (tuning_workloads empty)


def test_batches_split_over_the_workers_and_merge_back_in_order():
    traces = [{"tile": f"{i}x1"} for i in range(10)]
    parts = split_traces(traces, parts=2, most=16)
    assert [len(p) for p in parts] == [5, 5] and sum(parts, []) == traces
    assert [len(p) for p in split_traces(traces, parts=2, most=3)] == [3, 3, 2, 2]
    assert [len(p) for p in split_traces(traces[:1], parts=4, most=16)] == [1]
    assert split_traces([], parts=2, most=16) == []
    reply = {"default_us": 100.0, "worker": "w1@h", "results": [
        {"trace": t, "status": "ok", "median_us": 90.0 + i, "max_abs_error": 0.0} for i, t in enumerate(parts[0])]}
    merged = merge_parts({"workload": "k", "kernel": "fused_conv_3"}, [reply, None], parts, timeout_s=5)
    assert [r["trace"] for r in merged["results"]] == traces
    assert [r["status"] for r in merged["results"]] == ["ok"] * 5 + ["timeout"] * 5
    assert "within 5 s" in merged["results"][-1]["message"] and merged["default_us"] == 100.0
    assert merged["workers"] == ["w1@h"]


def test_the_searching_worker_is_no_measurer_when_its_only_process_is_busy_searching(monkeypatch):
    """`workers_serving` (unit, Celery's inspect replies faked): the worker running the search is
    counted only when its pool has another process; otherwise a batch sent to it would wait for the
    search that waits for the batch."""
    from explorer.compilations.services import tuning_queue

    queues = {"a@h": [{"name": "prism.tune.host"}, {"name": "prism.compile"}], "b@h": [{"name": "prism.tune.host"}],
              "c@h": [{"name": "prism.compile"}]}
    pools = {"a@h": 1}

    class Inspect:
        def active_queues(self):
            return queues

        def stats(self):
            return {n: {"pool": {"max-concurrency": c}} for n, c in pools.items()}

    monkeypatch.setattr(tuning_queue.celery_app.control, "inspect", lambda timeout: Inspect())
    assert tuning_queue.workers_serving("prism.tune.host") == ["a@h", "b@h"]
    assert tuning_queue.workers_serving("prism.tune.host", own_node="a@h") == ["b@h"]
    pools["a@h"] = 2
    assert tuning_queue.workers_serving("prism.tune.host", own_node="a@h") == ["a@h", "b@h"]
    assert tuning_queue.workers_serving("prism.tune.aarch64") == []
