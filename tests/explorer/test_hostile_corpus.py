"""The hostile corpus (hostile_corpus.py, issue 17 item 8) through the API against a real stack:
daphne, a Celery prefork worker (2 processes), Redis and the compiler, under the corpus' limits.
Every model is uploaded and compiled at once (one module fixture); each test then asserts one case's
exact outcome. Also through the real server: a cross-site upload is refused."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from hostile_corpus import STACK_LIMITS, Case, cases, relu
from prism_stack import Stack

pytestmark = [pytest.mark.timeout(900)]

CASES = cases()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with Stack.running(tmp_path_factory.mktemp("hostile"), concurrency=2, **STACK_LIMITS) as s:
        yield s


def _run(stack: Stack, case: Case) -> dict:
    """Upload and (unless refused) submit one case: `{"upload": response, "request": response, "id"}`."""
    with stack.http() as c:
        up = c.post("/api/models", files={"model": (f"{case.name}.onnx", case.data, "application/octet-stream")})
        out: dict = {"upload": up}
        if up.status_code not in (200, 201):
            return out
        body = {"model": up.json()["id"], "pipeline": "O1", "options": {"benchmark": False}, "cache": False,
                **case.fields}
        req = c.post("/api/compilations", json=body)
        out["request"] = req
        if req.status_code in (200, 201):
            out["id"] = req.json()["id"]
    return out


@pytest.fixture(scope="module")
def outcomes(stack) -> dict[str, dict]:
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        results = dict(zip([c.name for c in CASES], pool.map(lambda c: _run(stack, c), CASES), strict=True))
    for r in results.values():
        if "id" in r:
            r["final"] = stack.wait_finished(r["id"], timeout=600)
    compiled = sum("final" in r for r in results.values())
    print(f"\n{len(CASES)} cases, {compiled} compiled, in {time.monotonic() - started:.1f} s")
    return results


def test_the_corpus_is_big_enough_and_names_are_unique():
    assert len(CASES) >= 40 and len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case: Case, outcomes):
    got = outcomes[case.name]
    up = got["upload"]
    if case.upload is not None:
        status, text = case.upload
        assert up.status_code == status, up.text
        assert text in up.json()["error"], up.json()
        return
    assert up.status_code in (200, 201), up.text
    req = got["request"]
    if case.request is not None:
        status, text = case.request
        assert req.status_code == status and text in req.json()["error"], req.text
        return
    assert req.status_code == 201, req.text
    final = got["final"]
    if case.stage is not None:
        assert final["status"] == "failed", final
        err = final["error"]
        assert err["stage"] == case.stage, err
        assert (err["message"] == case.message) if case.exact else err["message"].startswith(case.message or ""), err
        assert not any(ord(ch) < 32 for ch in err["message"]), err
        return
    assert final["status"] == "succeeded", final["error"]
    assert final["verified"] is case.verified, final
    assert (final["verification"] or "").startswith(case.says), final


def test_a_cross_site_upload_is_refused_by_the_real_server(stack):
    r = httpx.post(f"{stack.url}/api/models", files={"model": ("m.onnx", relu())},
                   headers={"Origin": "http://evil.example"}, timeout=60)
    assert r.status_code == 403 and r.json()["error"].startswith("cross-site request refused")
    r = httpx.post(f"{stack.url}/api/compilations", json={"model": "0" * 64},
                   headers={"Sec-Fetch-Site": "cross-site"}, timeout=60)
    assert r.status_code == 403


def test_the_worker_survived_the_corpus(stack, outcomes):
    """After every hostile model, a plain one still compiles on the same worker."""
    with stack.http() as c:
        m = c.post("/api/models", files={"model": ("ok.onnx", relu((8,)))}).json()
    comp = stack.compile(m["id"], pipeline="O1", options={"benchmark": False}, cache=False)
    final = stack.wait_finished(comp["id"], timeout=300)
    assert final["status"] == "succeeded" and final["verified"] is True, final
