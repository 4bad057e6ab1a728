"""Two stacks on one Redis database never take each other's work (issue 17, item 4).

Two real stacks (daphne + a Celery prefork worker each, their own SQLite database and var dir) share
Redis DB 15 with every name left at its default: the same queue name `prism.compile`, the stack
prefix derived from each database. Both finish their compilations, each worker runs only its own
stack's tasks, and a message naming a compilation the database does not hold is dead-lettered with
a log line, not acknowledged as done.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx
import pytest
import redis
from onnx import TensorProto, helper, numpy_helper
from prism_stack import Stack

pytestmark = [pytest.mark.timeout(600)]


def small_model(path) -> None:
    """Y = Relu(X @ W + B), X float32 [4, 16]: compiles in about a second."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "B")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["XW"], name="mm"),
         helper.make_node("Add", ["XW", "B"], ["XWB"], name="add"),
         helper.make_node("Relu", ["XWB"], ["Y"], name="relu")],
        "small", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4, 8])], initializer=[w, b])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.fixture(scope="module")
def stacks(tmp_path_factory):
    """Two stacks with default names: PRISM_STACK and PRISM_COMPILE_QUEUE empty, as in `make run`."""
    made: list[Stack] = []
    try:
        for label in ("a", "b"):
            s = Stack(tmp_path_factory.mktemp(f"stack-{label}"), PRISM_STACK="", PRISM_COMPILE_QUEUE="")
            made.append(s)
            s.start_web()
            s.start_worker("w1")
        yield made
    finally:
        for s in made:
            s.close()


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "small.onnx"
    small_model(path)
    return path


def test_two_stacks_on_one_redis_database_each_finish_their_own_compilations(stacks, model_path):
    a, b = stacks
    assert a.queue == b.queue == "prism.compile"
    assert a.name != b.name and a.name.startswith("prism-") and b.name.startswith("prism-")
    jobs = [(s, s.upload(model_path)["id"]) for s in (a, b) for _ in range(3)]
    with ThreadPoolExecutor(6) as pool:  # both stacks' messages are in Redis at the same time
        comps = list(pool.map(lambda job: (job[0], job[0].compile(
            job[1], pipeline="O1", options={"benchmark": False}, cache=False)["id"]), jobs))
    for s, cid in comps:
        final = s.wait_finished(cid, timeout=300)
        assert final["status"] == "succeeded", final["error"]
    for s in (a, b):
        log = s.log("w1")
        for owner, cid in comps:
            ran_here = f"prism-compile-{cid}-" in log
            assert ran_here == (owner is s), (cid, s.name, log[-2000:])
        assert "no such compilation" not in log


def test_a_message_for_an_unknown_compilation_is_dead_lettered_not_acknowledged(stacks):
    a, b = stacks
    client = redis.Redis.from_url(a.env["REDIS_URL"])
    dead = a.broker_key("dead-letter")
    before = client.llen(dead)
    sender = a.sender()
    task_id = f"prism-compile-nosuch{int(time.time())}-000000000000"
    sender.send_task("prism.run_compilation", ("nosuch00",), queue=a.queue, task_id=task_id)
    sender.close()
    deadline = time.monotonic() + 60
    while client.llen(dead) == before:
        assert time.monotonic() < deadline, a.log("w1")[-3000:]
        time.sleep(0.2)
    record = json.loads(client.lindex(dead, 0))
    assert record["compilation"] == "nosuch00" and record["task_id"] == task_id
    assert record["stack"] == a.name and record["queue"] == a.queue
    log = a.log("w1")
    assert (f"task {task_id} for compilation nosuch00 on queue prism.compile: no such compilation "
            f"in the database of stack {a.name}") in log
    assert f"Task prism.run_compilation[{task_id}] succeeded" not in log
    assert task_id not in b.log("w1")
    assert client.llen(a.broker_key(a.queue)) == 0 and client.hlen(a.broker_key("unacked")) == 0
