"""No compilation is lost between its submission and a worker (services.queue).

In process, against the real Redis broker of the tests (DB 14): a waiting message is found and
left alone, a lost one is sent again, and after `MAX_REQUEUES` the log ends with `queue_lost`.
End to end (a real stack, Redis DB 15): a purged message is sent again and the compilation runs and
streams; a compilation delivered twice runs once; a web server whose Redis is down answers 503 and
stores nothing.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from datetime import timedelta
from pathlib import Path

import httpx
import onnx
import pytest
import redis
from django.conf import settings
from django.utils import timezone
from prism_stack import TERMINAL, Stack, Switch

from explorer.compilations.models import Compilation
from explorer.compilations.services import queue as q

SQUEEZENET = Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"
CLOSED = "redis://127.0.0.1:1/0"  # nothing listens on port 1: "Redis is down"
QUEUE_KEY = q.broker_key(settings.PRISM_COMPILE_QUEUE)  # the queue's list in Redis


@pytest.fixture
def broker():
    """The tests' Redis broker (DB 14), with this process's compile queue emptied before and after."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete(QUEUE_KEY)
    yield client
    client.delete(QUEUE_KEY)


def overdue(comp: Compilation) -> None:
    Compilation.objects.filter(pk=comp.id).update(
        enqueued_at=timezone.now() - q.requeue_after() - timedelta(seconds=1))


def test_a_waiting_message_is_left_alone_and_a_lost_one_is_sent_again(
        make_compilation, broker, django_capture_on_commit_callbacks):
    comp = make_compilation()
    q.publish(comp.id, comp.target)
    overdue(comp)
    assert broker.llen(QUEUE_KEY) == 1
    assert q.requeue_lost_compilations() == []  # its message waits behind others: not lost
    broker.delete(QUEUE_KEY)  # purged (or Redis restarted without persistence)
    with django_capture_on_commit_callbacks(execute=True):
        assert q.requeue_lost_compilations() == [comp.id]
    comp.refresh_from_db()
    assert comp.status == "queued" and comp.requeues == 1
    assert timezone.now() - comp.enqueued_at < timedelta(seconds=30)
    raw = broker.lrange(QUEUE_KEY, 0, -1)
    assert len(raw) == 1 and q.has_message(comp.id, [raw[0].decode()])
    assert not q.has_message("other123", [raw[0].decode()])
    assert q.requeue_lost_compilations() == []  # just sent: not overdue


def test_a_message_sent_with_celery_s_own_task_id_is_found_too(make_compilation, broker):
    from explorer.compilations.tasks import run_compilation_task

    comp = make_compilation()  # queued by an older version: a uuid task id, found by its argsrepr
    run_compilation_task.apply_async((comp.id,), queue=settings.PRISM_COMPILE_QUEUE)
    overdue(comp)
    assert q.requeue_lost_compilations() == []
    comp.refresh_from_db()
    assert comp.requeues == 0 and broker.llen(QUEUE_KEY) == 1


def test_a_compilation_not_yet_overdue_is_not_requeued(make_compilation, broker):
    comp = make_compilation(enqueued_at=timezone.now())
    assert q.requeue_lost_compilations() == []
    comp.refresh_from_db()
    assert comp.requeues == 0 and broker.llen(QUEUE_KEY) == 0


def test_after_max_requeues_the_log_ends_with_queue_lost(make_compilation, broker):
    comp = make_compilation(requeues=q.MAX_REQUEUES)
    overdue(comp)
    assert q.requeue_lost_compilations() == [comp.id]
    comp.refresh_from_db()
    assert comp.status == "failed" and comp.error["reason"] == "queue_lost"
    assert f"lost this compilation's task message {q.MAX_REQUEUES + 1} times" in comp.error["message"]
    assert [e.type for e in comp.events.all()] == ["compile.failed"]
    assert broker.llen(QUEUE_KEY) == 0


def test_a_compilation_queued_before_enqueued_at_existed_counts_from_its_creation(
        make_compilation, broker, django_capture_on_commit_callbacks):
    comp = make_compilation(enqueued_at=None)
    assert q.requeue_lost_compilations() == []  # created just now
    Compilation.objects.filter(pk=comp.id).update(created_at=timezone.now() - timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert q.requeue_lost_compilations() == [comp.id]
    assert broker.llen(QUEUE_KEY) == 1


def test_only_queued_compilations_are_requeued(make_compilation, broker):
    for status in ("running", "succeeded", "failed"):
        overdue(make_compilation(status=status, heartbeat_at=timezone.now()))
    assert q.requeue_lost_compilations() == []


# --- end to end -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with Stack.running(tmp_path_factory.mktemp("requeue"), workers=(), PRISM_REQUEUE_AFTER_S="3") as s:
        yield s


@pytest.fixture(scope="module")
def model(stack) -> dict:
    return stack.upload(SQUEEZENET)


def stack_redis(stack: Stack) -> redis.Redis:
    return redis.Redis.from_url(stack.env["REDIS_URL"])


def succeeded_tasks(log: str, task_ids: list[str]) -> int:
    return sum(bool(re.search(rf"Task prism\.run_compilation\[{re.escape(t)}\] succeeded", log))
               for t in task_ids)


@pytest.mark.timeout(600)
def test_a_purged_message_is_sent_again_and_the_compilation_runs_and_streams(stack, model):
    queue = stack.broker_key(stack.queue)
    comp = stack.compile(model["id"], pipeline="O2", cache=False)  # no worker yet
    assert comp["status"] == "queued"
    r = stack_redis(stack)
    assert r.llen(queue) == 1
    assert r.delete(queue) == 1  # the message is lost
    streamed: list[dict] = []
    watcher = threading.Thread(target=lambda: streamed.extend(stack.ws_events(comp["id"])))
    watcher.start()  # a browser watching the queued compilation
    time.sleep(3.5)  # PRISM_REQUEUE_AFTER_S
    assert stack.get(comp["id"])["status"] == "queued"  # nobody to requeue it without a worker
    stack.start_worker("w1")
    try:
        final = stack.wait_finished(comp["id"], timeout=300)
        watcher.join(timeout=120)
    finally:
        stack.stop("w1")
    assert final["status"] == "succeeded" and final["attempts"] == 1, final
    assert f"compilation {comp['id']}: its task message was lost" in stack.log("w1")
    assert "queued again (1 of 3)" in stack.log("w1")
    seqs = [e["seq"] for e in streamed]
    assert seqs == list(range(final["event_count"])), seqs
    assert streamed[0]["type"] == "compile.started" and streamed[-1]["type"] == "compile.finished"


def messages_for(raw: list[bytes], compilation_id: str) -> list[bytes]:
    """The Celery messages (kombu's JSON envelope; its body ``[args, kwargs, embed]``, base64 as
    ``properties.body_encoding`` says) whose task
    arguments name ``compilation_id``."""
    out = []
    for m in raw:
        env = json.loads(m)
        body = env["body"]
        if env.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        if compilation_id in args:
            out.append(m)
    return out


@pytest.mark.timeout(600)
def test_a_compilation_delivered_twice_runs_once(stack, model):
    queue = stack.broker_key(stack.queue)
    comp = stack.compile(model["id"], pipeline="O2", cache=False)  # no worker yet
    r = stack_redis(stack)
    # This compilation's messages only: an earlier test's stopped worker may have handed an unacknowledged
    # message of its own (already finished) compilation back to the queue (kombu restores them on shutdown).
    original = messages_for(r.lrange(queue, 0, -1), comp["id"])
    assert len(original) == 1
    first_id = re.search(r'"id": "([^"]+)"', original[0].decode()).group(1)
    sender = stack.sender()  # a second message, as a requeue would send
    duplicate_id = f"duplicate-{comp['id']}"
    sender.send_task("prism.run_compilation", (comp["id"],), queue=stack.queue, task_id=duplicate_id)
    sender.close()
    assert len(messages_for(r.lrange(queue, 0, -1), comp["id"])) == 2
    stack.start_worker("w2", concurrency=2)  # both messages may run at the same time
    try:
        final = stack.wait_finished(comp["id"], timeout=300)
        deadline = time.monotonic() + 120
        while succeeded_tasks(stack.log("w2"), [first_id, duplicate_id]) < 2:
            assert time.monotonic() < deadline, stack.log("w2")[-3000:]
            time.sleep(0.3)
    finally:
        stack.stop("w2")
    again = stack.get(comp["id"])
    assert final["status"] == again["status"] == "succeeded", again
    assert again["attempts"] == 1 and again["event_count"] == final["event_count"]
    with stack.http() as c:
        events = c.get(f"/api/compilations/{comp['id']}/events").json()["events"]
    assert [e["type"] for e in events].count("compile.started") == 1
    assert sum(e["type"] in TERMINAL for e in events) == 1


@pytest.mark.timeout(300)
def test_a_submission_while_redis_is_down_is_503_and_stores_nothing(stack, model):
    url = stack.start_web("web-down", REDIS_URL=CLOSED, CELERY_BROKER_URL=CLOSED)
    try:
        with stack.http() as c:
            before = [x["id"] for x in c.get("/api/compilations").json()]
        with httpx.Client(base_url=url, timeout=60) as c:
            t0 = time.monotonic()
            r = c.post("/api/compilations", json={"model": model["id"], "pipeline": "O1", "cache": False})
            took = time.monotonic() - t0
        assert r.status_code == 503, r.text
        assert r.headers["content-type"].startswith("application/json") and r.headers["retry-after"]
        assert r.json()["error"].startswith("the job queue is unreachable (Error 111 connecting")
        assert "the compilation was not created: submit it again in a moment" in r.json()["error"]
        assert took < 30, took
        with stack.http() as c:
            assert [x["id"] for x in c.get("/api/compilations").json()] == before
    finally:
        stack.stop("web-down")


@pytest.mark.timeout(300)
def test_submissions_fail_while_redis_is_down_and_are_queued_again_once_it_is_back(stack, model):
    queue = stack.broker_key(stack.queue)
    real = redis.Redis.from_url(stack.env["REDIS_URL"])
    host = real.connection_pool.connection_kwargs
    switch = Switch((host["host"], host["port"]))
    via = f"redis://127.0.0.1:{switch.port}/{host['db']}"
    url = stack.start_web("web-switch", REDIS_URL=via, CELERY_BROKER_URL=via)
    body = {"model": model["id"], "pipeline": "O1", "cache": False}
    try:
        with httpx.Client(base_url=url, timeout=60) as c:
            waiting = real.llen(queue)
            assert c.post("/api/compilations", json=body).status_code == 201
            assert real.llen(queue) == waiting + 1
            switch.down()
            before = [x["id"] for x in c.get("/api/compilations").json()]
            r = c.post("/api/compilations", json=body)
            assert r.status_code == 503 and "the job queue is unreachable" in r.json()["error"], r.text
            assert [x["id"] for x in c.get("/api/compilations").json()] == before
            switch.up()
            r = c.post("/api/compilations", json=body)
            assert r.status_code == 201, r.text
            assert r.json()["status"] == "queued" and real.llen(queue) == waiting + 2
    finally:
        switch.down()
        stack.stop("web-switch")
