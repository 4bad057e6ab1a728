"""The event log and the lost-worker rules (services.events, services.runs, services.reaper,
services.submission, services.queue)."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from explorer.compilations.models import Compilation
from explorer.compilations.services import queue, reaper, runs, submission
from explorer.compilations.services.events import (
    CompilationSuperseded,
    append_failure,
    jsonable,
    record_event,
)


def ev(seq: int, type: str = "pass.started", **payload) -> dict:
    return {"seq": seq, "type": type, "ts": 1.5 + seq, **payload}


def test_jsonable_makes_plain_json():
    assert jsonable({"a": np.float32(1.5), "b": (np.int64(2), float("nan")), 3: np.arange(2)}) == {
        "a": 1.5, "b": [2, None], "3": [0, 1]
    }


def test_events_are_stored_in_seq_order_and_the_terminal_one_sets_the_status(make_compilation):
    comp = make_compilation(status=Compilation.Status.RUNNING, attempts=1)
    record_event(comp.id, ev(0, "compile.started", target="host"), attempt=1)
    record_event(comp.id, ev(2, "compile.finished", duration_ms=3.0), attempt=1)  # seq 1 was lost
    comp.refresh_from_db()
    assert comp.status == "succeeded" and comp.finished_at and comp.error is None
    assert [e.as_event() for e in comp.events.all()] == [
        {"seq": 0, "type": "compile.started", "ts": 1.5, "target": "host"},
        {"seq": 1, "type": "compile.finished", "ts": 3.5, "duration_ms": 3.0},
    ]
    assert append_failure(comp.id, reason="internal", message="x") is False  # log already ended


def test_a_superseded_run_cannot_write(make_compilation):
    comp = make_compilation(status=Compilation.Status.FAILED, attempts=1)
    with pytest.raises(CompilationSuperseded):
        record_event(comp.id, ev(0), attempt=1)
    running = make_compilation(status=Compilation.Status.RUNNING, attempts=2)
    with pytest.raises(CompilationSuperseded):
        record_event(running.id, ev(0), attempt=1)


def test_failure_appended_by_the_service_continues_the_seq(make_compilation):
    comp = make_compilation(status=Compilation.Status.RUNNING, attempts=1)
    record_event(comp.id, ev(0, "compile.started"), attempt=1)
    record_event(comp.id, ev(1, "kernel.lowered", kernel="k0"), attempt=1)
    record_event(comp.id, ev(2, "kernel.lowered", kernel="k1"), attempt=1)
    record_event(comp.id, ev(3, "kernel.compiled", kernel="k0"), attempt=1)  # k1 still compiling
    assert append_failure(comp.id, reason="worker_lost", message="lost\nit")
    comp.refresh_from_db()
    last = comp.events.last()
    assert (last.seq, last.type) == (4, "compile.failed")
    assert last.payload == {"stage": "codegen", "message": "lost it", "reason": "worker_lost"}
    assert comp.status == "failed" and comp.error == last.payload


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_reaper_fails_a_run_whose_process_is_gone(make_compilation, monkeypatch):
    now = timezone.now()
    dead = make_compilation(status=Compilation.Status.RUNNING, attempts=1, started_at=now,
                            heartbeat_at=now, worker=f"{runs.socket.gethostname()} pid {_dead_pid()}")
    record_event(dead.id, ev(0, "compile.started"), attempt=1)
    alive = make_compilation(status=Compilation.Status.RUNNING, attempts=1, started_at=now,
                             heartbeat_at=now, worker=runs.worker_name())
    stale = make_compilation(status=Compilation.Status.RUNNING, attempts=1, started_at=now,
                             heartbeat_at=now - timedelta(hours=1), worker="elsewhere pid 1")
    record_event(stale.id, ev(0, "compile.started"), attempt=1)  # (an event is a heartbeat too)
    Compilation.objects.filter(pk=stale.id).update(heartbeat_at=now - timedelta(hours=1))
    assert sorted(reaper.reap_stale_compilations()) == sorted([dead.id, stale.id])
    for c in (dead, stale):
        c.refresh_from_db()
        assert c.status == "failed" and c.error["reason"] == "worker_lost"
        assert "was lost" in c.error["message"]
    alive.refresh_from_db()
    assert alive.status == "running"


def test_reaper_requeues_a_run_lost_before_its_first_event(make_compilation, monkeypatch):
    queued = []
    monkeypatch.setattr(reaper, "enqueue", queued.append)
    old = timezone.now() - timedelta(hours=1)
    comp = make_compilation(status=Compilation.Status.RUNNING, attempts=1, started_at=old,
                            heartbeat_at=old, worker="elsewhere pid 1")
    assert reaper.reap_stale_compilations() == [comp.id]
    comp.refresh_from_db()
    assert comp.status == "queued" and queued == [comp.id] and not comp.events.exists()


def test_claim_runs_once_and_fails_a_redelivered_lost_run(make_compilation):
    comp = make_compilation()
    assert runs.claim(comp.id) == 1
    assert runs.claim(comp.id) is None  # duplicate delivery while the first run is alive
    record_event(comp.id, ev(0, "compile.started"), attempt=1)
    Compilation.objects.filter(pk=comp.id).update(worker=f"{runs.socket.gethostname()} pid {_dead_pid()}")
    assert runs.claim(comp.id) is None  # redelivered after its worker died: ends the log
    comp.refresh_from_db()
    assert comp.status == "failed" and comp.events.last().payload["reason"] == "worker_lost"


def test_cache_key_depends_on_every_input():
    base = dict(sha256="a", target="host", pipeline="p", input_shapes={"x": [1]}, options={}, version="1")
    key = submission.cache_key(**base)
    for field, other in [("sha256", "b"), ("target", "x86-64-v3"), ("pipeline", "q"),
                         ("input_shapes", {"x": [2]}), ("options", {"verify": False}), ("version", "2")]:
        assert submission.cache_key(**{**base, field: other}) != key


def test_options_are_checked():
    assert submission.normalize_options({"benchmark": False}) == {"verify": True, "benchmark": False}
    with pytest.raises(submission.InvalidRequest, match="unknown option 'fast'"):
        submission.normalize_options({"fast": True})


def test_a_run_killed_by_the_hard_time_limit_is_reaped_saying_so(make_compilation):
    now = timezone.now()
    comp = make_compilation(status=Compilation.Status.RUNNING, attempts=1, time_limit_s=3,
                            started_at=now - timedelta(seconds=4), heartbeat_at=now,
                            worker=f"{runs.socket.gethostname()} pid {_dead_pid()}")
    record_event(comp.id, ev(0, "compile.started"), attempt=1)
    assert reaper.reap_stale_compilations() == [comp.id]
    comp.refresh_from_db()
    assert comp.error["reason"] == "time_limit"
    assert comp.error["message"].startswith("compilation exceeded the time limit of 3 s")


def test_targets_can_have_their_own_queues(settings):
    settings.PRISM_TARGET_QUEUES = {"aarch64": "prism.compile.aarch64"}
    assert queue.queue_for("aarch64") == "prism.compile.aarch64"
    assert queue.queue_for("host") == settings.PRISM_COMPILE_QUEUE


def test_reads_never_write_and_the_reaper_ends_a_stale_run(client, make_compilation):
    """GET /api/compilations/<id>, its events and the list only read, even for a compilation whose
    worker is gone; the workers' reaper is what ends its log with compile.failed (worker_lost)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    old = timezone.now() - timedelta(hours=1)
    comp = make_compilation(status=Compilation.Status.RUNNING, attempts=1, started_at=timezone.now(),
                            heartbeat_at=old, worker="elsewhere pid 1")
    record_event(comp.id, ev(0, "compile.started"), attempt=1)
    Compilation.objects.filter(pk=comp.id).update(heartbeat_at=old)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(f"/api/compilations/{comp.id}").json()["status"] == "running"
        assert client.get(f"/api/compilations/{comp.id}/events").json()["complete"] is False
        assert client.get("/api/compilations").status_code == 200
    writes = [q["sql"] for q in queries if q["sql"].split()[0].upper() in ("INSERT", "UPDATE", "DELETE")]
    assert writes == []
    assert reaper.reap_stale_compilations() == [comp.id]
    detail = client.get(f"/api/compilations/{comp.id}").json()
    assert detail["status"] == "failed" and detail["error"]["reason"] == "worker_lost"
