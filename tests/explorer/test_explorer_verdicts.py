"""The verdict against ONNX Runtime is visible in the API and the listing (`verified`,
`verification`), and a run that stopped after codegen is labelled stage `run` (issue 17 item 7)."""

from __future__ import annotations

from django.test import Client
from review_fixtures import compilation

from explorer.compilations.models import CompilationEvent
from explorer.compilations.services.events import append_failure, failure_stage


def _verified(comp, **payload) -> None:
    seq = CompilationEvent.objects.filter(compilation=comp).count()
    CompilationEvent.objects.create(compilation=comp, seq=seq, type="model.verified", ts=1.0, payload=payload)


def test_the_api_and_the_listing_show_the_verdict(db):
    ok = compilation(visibility="public", cache_key="a")
    _verified(ok, passed=True, verified=True, max_abs_error=3.9e-7, max_rel_error=1e-6, rtol=1e-3, atol=1e-4)
    bad = compilation(visibility="public", cache_key="b")
    _verified(bad, passed=False, verified=True, max_abs_error=0.5, max_rel_error=2.0, rtol=1e-3, atol=1e-4)
    ort = compilation(visibility="public", cache_key="c")
    _verified(ort, passed=None, verified=False, message="not verified: ONNX Runtime failed (killed by SIGFPE)",
              max_abs_error=None, max_rel_error=None, rtol=None, atol=None, outputs={})
    none = compilation(visibility="public", cache_key="d")
    c = Client()
    got = {x["id"]: (x["status"], x["verified"], x["verification"]) for x in c.get("/api/compilations").json()}
    assert got[ok.id] == ("succeeded", True, "outputs match ONNX Runtime (max abs error 3.9e-07, max rel error 1e-06)")
    assert got[bad.id] == ("succeeded", False, "outputs differ from ONNX Runtime (max abs error 0.5, max rel error "
                                               "2; rtol 0.001, atol 0.0001)")
    assert got[ort.id] == ("succeeded", None, "not verified: ONNX Runtime failed (killed by SIGFPE)")
    assert got[none.id] == ("succeeded", None, None)
    assert c.get(f"/api/compilations/{bad.id}").json()["verified"] is False


def _events(comp, types: list[str]) -> None:
    for seq, t in enumerate(types):
        CompilationEvent.objects.create(compilation=comp, seq=seq, type=t, ts=1.0 + seq, payload={})


def test_a_run_lost_after_its_last_kernel_compiled_failed_in_the_run_stage(make_compilation):
    done = make_compilation(status="running")
    _events(done, ["compile.started", "kernel.lowered", "kernel.lowered", "kernel.compiled", "kernel.compiled"])
    assert failure_stage(done) == "run"
    half = make_compilation(status="running", cache_key="h")
    _events(half, ["compile.started", "kernel.lowered", "kernel.lowered", "kernel.compiled"])
    assert failure_stage(half) == "codegen"
    assert append_failure(done.id, reason="worker_lost", message="lost\x1b[31m\nworker")
    last = CompilationEvent.objects.filter(compilation=done).order_by("-seq").first()
    assert last.type == "compile.failed" and last.payload["stage"] == "run" and last.payload["message"] == "lost worker"
