"""Auto-tuning on a real stack (issue 16): daphne, one compile worker and two measurement workers
serving `prism.tune.host`, the real Redis and SQLite.

- A tuning compilation (`tune_budget_s`) searches, fanning its measurement batches out to both
  measurement workers (each one's log shows it received `prism.tune.measure` tasks, and the job's
  stats name both), then compiles with what it found: one log, gapless, search events first. A
  worker of another stack on the same Redis and queue name takes none of them.
- A later compilation of the same model by someone else, without tuning, takes the stored schedules
  from the database (zero trials, `schedule_source: tuned`), and its outputs match ONNX Runtime.
- Stopping a tuning compilation (POST .../tuning/stop) ends the search long before its budget,
  keeping what it found, and the compilation still finishes.
Trials per second with one and two measurement workers: scripts/tune_throughput.py (printed, not asserted).
"""

from __future__ import annotations

import time

import pytest
from prism_stack import Stack
from tuning_models import conv_stack_model

pytestmark = [pytest.mark.timeout(900)]
TUNE_QUEUE = "prism.tune.host"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with Stack.running(tmp_path_factory.mktemp("tuning-stack"), workers=("w1",)) as s:
        s.start_worker("t1", queues=TUNE_QUEUE)
        s.start_worker("t2", queues=TUNE_QUEUE)
        yield s


@pytest.fixture(scope="module")
def intruder(tmp_path_factory):
    """Another Prism stack on the same Redis database with a measurement worker on the same queue
    name: it must never take (or be counted for) the first stack's batches (PRISM_STACK prefixes)."""
    other = Stack(tmp_path_factory.mktemp("intruder-stack"))
    try:
        other.start_worker("intruder", queues=TUNE_QUEUE)
        yield other
    finally:
        other.close()


@pytest.fixture(scope="module")
def model(stack, tmp_path_factory):
    return stack.upload(conv_stack_model(tmp_path_factory.mktemp("models") / "convs.onnx"))


def tuning(stack: Stack, cid: str) -> dict:
    with stack.http() as c:
        r = c.get(f"/api/compilations/{cid}/tuning")
    assert r.status_code == 200, r.text
    return r.json()


def test_tuning_measures_on_both_workers_and_a_later_compilation_uses_the_database(stack, intruder, model):
    # 60 s: the budget includes the graph passes and each worker's measuring child's start, and no batch
    # runs past it (rounds are sized to the time left), so on a loaded machine 25 s gave one small round
    comp = stack.compile(model["id"], pipeline="O2", tune_budget_s=60, options={"threads": 1})
    events = stack.ws_events(comp["id"], timeout=600)
    assert [e["seq"] for e in events] == list(range(len(events)))
    types = [e["type"] for e in events]
    assert types[0] == "tune.started" and types[-1] == "compile.finished", types
    assert types.index("tune.finished") < types.index("compile.started")
    progress = [e for e in events if e["type"] == "tune.progress"]
    assert len(progress) >= 2 and progress[-1]["trials_total"] >= 8
    finished = next(e for e in events if e["type"] == "tune.finished")
    assert finished["stopped"] is False and finished["reason"] in ("budget", "exhausted")
    assert finished["duration_s"] <= 60 + 30  # one candidate's time past it at most (30 s: its timeout)
    job = tuning(stack, comp["id"])
    assert job["queue"] == TUNE_QUEUE and len(job["workers"]) == 2, job
    assert all(w["batches"] >= 1 and w["candidates"] >= 1 for w in job["workers"].values()), job
    for name in ("t1", "t2"):
        assert "Task prism.tune.measure[" in stack.log(name) and " succeeded in " in stack.log(name), name
    assert "prism.tune.measure[" not in stack.log("w1")  # the compile worker coordinated, it did not measure
    assert intruder.env["REDIS_URL"] == stack.env["REDIS_URL"] and intruder.name != stack.name
    assert "prism.tune.measure[" not in intruder.log("intruder")  # the other stack took none of them
    stored = {k["kernel"]: k for k in finished["tuned"] if k["stored"]}
    assert stored, f"no candidate beat its default schedule: {finished['tuned']}"
    assert {r["source"] for r in job["records"].values()} == {"this run"}
    # Someone else, later, without tuning: the stored schedules from the database, outputs as ORT's.
    with stack.http() as other:  # a fresh client: another (anonymous) user, no session shared
        r = other.post("/api/compilations", json={"model": model["id"], "pipeline": "O2", "options": {"threads": 1}})
    assert r.status_code == 201, r.text  # the earlier result is stale (newer records), so not served from the cache
    later = stack.ws_events(r.json()["id"], timeout=600)
    assert not [e for e in later if e["type"].startswith("tune.") and e["type"] != "tune.applied"]
    applied = next(e for e in later if e["type"] == "tune.applied")
    tuned = {e["kernel"]: e for e in later if e["type"] == "kernel.lowered" and e.get("schedule_source") == "tuned"}
    assert applied["tuned"] == len(tuned) >= len(stored)
    for kernel, k in stored.items():  # each takes the database's best record of its workload
        best = job["records"][k["workload"]]
        assert tuned[kernel]["tuned"]["workload"] == k["workload"], kernel
        assert tuned[kernel]["tuned"]["median_us"] == pytest.approx(best["median_us"]), kernel
    verified = next(e for e in later if e["type"] == "model.verified")
    assert verified["passed"] is True
    assert {r["source"] for r in tuning(stack, r.json()["id"])["records"].values()} == {"database"}


def test_stopping_keeps_what_was_found_and_the_compilation_finishes(stack, model):
    with stack.http() as browser:  # one session: an anonymous compilation is stopped by the session that made it
        r = browser.post("/api/compilations", json={"model": model["id"], "pipeline": "O1", "tune_budget_s": 600,
                                                    "options": {"threads": 1}})
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        first = stack.ws_events(cid, timeout=300, stop_after=0)
        assert first[0]["type"] == "tune.started"
        stack.wait_for(cid, lambda c: tuning(stack, c["id"])["workers"], 300, "a measured batch")
        with stack.http() as outsider:
            assert outsider.post(f"/api/compilations/{cid}/tuning/stop").status_code == 403
        asked = time.monotonic()
        r = browser.post(f"/api/compilations/{cid}/tuning/stop")
        assert r.status_code == 202 and r.json()["stop_requested_at"], r.text
        events = stack.ws_events(cid, timeout=600)
        finished = next(e for e in events if e["type"] == "tune.finished")
        assert finished["stopped"] is True and finished["reason"] == "stopped" and finished["duration_s"] < 600
        assert time.monotonic() - asked < 120  # ended after the batch in flight, not at the budget
        assert events[-1]["type"] == "compile.finished" and stack.get(cid)["status"] == "succeeded"
        again = browser.post(f"/api/compilations/{cid}/tuning/stop")
        assert again.status_code == 409 and "is over" in again.json()["error"], again.text
