"""The aggregate memory cap of one worker (services/memory_cap.py) against a real stack: one Celery
worker with two pool processes under a cap that holds one compilation's estimate but not two.

- A model whose estimate alone is over the cap fails at once in stage request, reason `memory_cap`,
  the message naming its estimate and the cap with its setting.
- Two compilations sent together both succeed, one after the other: the second's compiler starts only
  once the first has finished (its `compile.started` after the other's `compile.finished`)."""

from __future__ import annotations

import numpy as np
import pytest
from hostile_corpus import F, const, model, node, relu, vi
from prism_stack import Stack

pytestmark = [pytest.mark.timeout(600)]

MIB = 1 << 20
CAP, BASE, PER_BYTE = 1000 * MIB, 600 * MIB, 1000


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with Stack.running(tmp_path_factory.mktemp("memcap"), workers=()) as s:
        s.start_worker("w1", concurrency=2, PRISM_WORKER_MEMORY_CAP_BYTES=str(CAP), PRISM_COMPILE_BASE_BYTES=str(BASE),
                       PRISM_COMPILE_BYTES_PER_MODEL_BYTE=str(PER_BYTE), PRISM_WORKER_MEMORY_WAIT_S="240")
        yield s


def upload(stack: Stack, name: str, data: bytes) -> dict:
    path = stack.tmp / f"{name}.onnx"
    path.write_bytes(data)
    return stack.upload(path)


def events(stack: Stack, cid: str) -> list[dict]:
    with stack.http() as c:
        return c.get(f"/api/compilations/{cid}/events").json()["events"]


def test_a_compilation_over_the_cap_alone_is_refused_naming_both_sizes(stack):
    n = 1 << 17  # 512 KiB of weights: an estimate of 600 MiB + 1000 x the file, over 1000 MiB
    m = upload(stack, "weights", model([node("Add", ["x", "w"], ["y"])], [vi("x", F, [n])], [vi("y", F, [n])],
                                       [const("w", np.ones(n, np.float32))]))
    comp = stack.compile(m["id"], pipeline="O1", options={"benchmark": False}, cache=False)
    final = stack.wait_finished(comp["id"], timeout=120)
    assert final["status"] == "failed", final
    need = int(BASE + PER_BYTE * m["size"])
    assert final["error"] == {"stage": "request", "reason": "memory_cap", "message": (
        f"this compilation needs an estimated {need} bytes of memory, over the worker's memory cap of {CAP} bytes "
        "(PRISM_WORKER_MEMORY_CAP_BYTES)")}, final["error"]
    assert [e["type"] for e in events(stack, comp["id"])] == ["compile.failed"]


def test_two_that_do_not_fit_together_run_one_after_the_other(stack):
    m = upload(stack, "relu", relu((8,)))
    comps = [stack.compile(m["id"], pipeline="O1", options={"benchmark": False}, cache=False) for _ in range(2)]
    finals = [stack.wait_finished(c["id"], timeout=400) for c in comps]
    assert all(f["status"] == "succeeded" for f in finals), finals
    assert len({f["worker"] for f in finals}) == 2, "both pool processes took one"
    spans = []
    for c in comps:
        evs = events(stack, c["id"])
        spans.append((evs[0]["ts"], evs[-1]["ts"]))
        assert evs[0]["type"] == "compile.started" and evs[-1]["type"] == "compile.finished"
    (s1, e1), (s2, e2) = sorted(spans)
    assert s2 >= e1, f"the second compiler started at {s2}, before the first finished at {e1}"
    print(f"\nserialized under the cap: first {e1 - s1:.1f} s, the second started {s2 - e1:.2f} s after it ended")
