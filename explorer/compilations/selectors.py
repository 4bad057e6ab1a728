"""Reads: what the API, the pages, the WebSocket consumer and exports show.

Every read of a compilation or a model goes through the selector of that entity that takes the
requester (`compilation_for`, `model_for`, `listed_compilations`; CONVENTIONS.md 16), so that
visibility (`visibility.py`) cannot be forgotten on a new path: something the requester may not
see is None here, exactly as something that does not exist. Reads never write.

Other apps do the same: downloads and exports take the compilation from `compilation_for(request.user,
id)` (None: answer 404) before reading its events or artifacts.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from django.db.models import F, Q

import compiler
from compiler import samples as compiler_samples
from explorer.compilations.models import (
    Compilation,
    CompilationEvent,
    ModelUpload,
    TuningRecord,
    UploadedModel,
)
from explorer.compilations.services.tuning_db import ranked
from explorer.compilations.visibility import Visibility, can_see, circle, signed_in, visible_q

EVENT_PAGE_MAX = 1000


def compilation_for(requester, compilation_id: str) -> Compilation | None:
    """The compilation `compilation_id` if `requester` (a user, anonymous or None) may see it,
    else None (the caller answers 404, as for an unknown id)."""
    comp = Compilation.objects.select_related("model", "owner").filter(pk=compilation_id).first()
    if comp is None or not can_see(requester, comp.owner_id, comp.visibility):
        return None
    return comp


def visible_upload(requester, model: UploadedModel) -> ModelUpload | None:
    """The requester's own upload of these bytes, else the first upload it may see, else None."""
    uploads = list(model.uploads.all())
    if signed_in(requester):
        own = [u for u in uploads if u.owner_id == requester.pk]
        if own:
            return own[0]
    return next((u for u in uploads if can_see(requester, u.owner_id, u.visibility)), None)


def model_for(requester, sha256: str) -> UploadedModel | None:
    """The model with this sha256 if one of its uploads is visible to `requester`, else None."""
    model = UploadedModel.objects.filter(sha256=str(sha256).lower()).prefetch_related("uploads").first()
    if model is None or visible_upload(requester, model) is None:
        return None
    return model


def listed_compilations(requester, also: Iterable[str] = (), limit: int = 50) -> list[Compilation]:
    """The listing (`GET /api/compilations`, the start page): public compilations, the requester's
    own, and `also` (ids this browser session submitted anonymously) where visible; newest first."""

    listed = Q(visibility=Visibility.PUBLIC) | Q(pk__in=list(also)[-limit:])
    if signed_in(requester):
        listed |= Q(owner_id=requester.pk)
    rows = (Compilation.objects.select_related("model", "owner").filter(listed).filter(visible_q(requester))
            .prefetch_related("model__uploads").order_by("-created_at")[:limit])
    return list(rows)


def events_after(comp: Compilation, after: int = -1, limit: int = EVENT_PAGE_MAX) -> list[dict]:
    """Stored events of a compilation (from `compilation_for`) with `seq > after`, in seq order,
    at most `limit` of them."""
    rows = CompilationEvent.objects.filter(compilation_id=comp.pk, seq__gt=after).order_by("seq")
    return [e.as_event() for e in rows[:limit]]


def events_of_types(comp: Compilation, types: Iterable[str]) -> list[dict]:
    """Every stored event of these types of a compilation (from `compilation_for`), in seq order."""
    rows = CompilationEvent.objects.filter(compilation_id=comp.pk, type__in=list(types)).order_by("seq")
    return [e.as_event() for e in rows]


def last_event(comp: Compilation) -> dict | None:
    row = CompilationEvent.objects.filter(compilation_id=comp.pk).order_by("-seq").first()
    return row.as_event() if row else None


def verification(compilation_id: str) -> tuple[bool | None, str | None]:
    """`(verified, verification)` of a compilation from its `model.verified` event: `(True, "outputs
    match ONNX Runtime ...")` when compared and within tolerance, `(False, "outputs differ ...")` when
    compared and not, `(None, "not verified: <why>")` when ONNX Runtime could not be compared with,
    `(None, None)` before (or without) a verification."""
    row = CompilationEvent.objects.filter(compilation_id=compilation_id, type="model.verified").order_by("-seq").first()
    if row is None:
        return None, None
    v = row.payload
    if v.get("verified") is False or v.get("passed") is None:
        return None, str(v.get("message") or "not verified")
    errors = f"max abs error {v.get('max_abs_error'):.3g}, max rel error {v.get('max_rel_error'):.3g}"
    if v.get("passed"):
        return True, f"outputs match ONNX Runtime ({errors})"
    return False, f"outputs differ from ONNX Runtime ({errors}; rtol {v.get('rtol')}, atol {v.get('atol')})"


def event_count(compilation_id: str) -> int:
    return CompilationEvent.objects.filter(compilation_id=compilation_id).count()


def user_dict(user) -> dict | None:
    """`{"username"}` of a user, or None (anonymous)."""
    return None if user is None else {"username": user.get_username()}


def model_dict(model: UploadedModel, requester) -> dict:
    """API form of an uploaded model as `requester` sees it (the file name and visibility of its
    own upload, else of the first upload it may see); `id` is its sha256."""
    upload = visible_upload(requester, model)
    return {
        "id": model.sha256,
        "sha256": model.sha256,
        "name": upload.name if upload else model.name,
        "visibility": upload.visibility if upload else Visibility.PRIVATE.value,
        "owner": user_dict(upload.owner) if upload else None,
        "graph_name": model.graph_name,
        "size": model.size,
        "opset": model.opset,
        "ir_version": model.ir_version,
        "producer": model.producer,
        "node_count": model.node_count,
        "inputs": model.inputs,
        "outputs": model.outputs,
        "default_input_shapes": model.default_input_shapes,
        "source": model.source,
        "created_at": model.created_at.isoformat(),
    }


def compilation_dict(comp: Compilation, requester, *, cached: bool | None = None) -> dict:
    """API form of a compilation (from `compilation_for`): identity, owner and visibility, request,
    status (with `verified`/`verification`: the verdict against ONNX Runtime, `verification`) and
    where to read its events and comments."""
    out = {
        "id": comp.id,
        "url": f"/c/{comp.id}",
        "api_url": f"/api/compilations/{comp.id}",
        "events_url": f"/api/compilations/{comp.id}/events",
        "ws_url": f"/ws/compilations/{comp.id}/",
        "comments_url": f"/api/compilations/{comp.id}/comments",
        "comments_ws_url": f"/ws/compilations/{comp.id}/comments/",
        "owner": user_dict(comp.owner),
        "visibility": comp.visibility,
        "can_edit": signed_in(requester) and comp.owner_id == requester.pk,
        "model": model_dict(comp.model, requester),
        "target": comp.target,
        "pipeline": comp.pipeline,
        "requested_pipeline": comp.requested_pipeline,
        "input_shapes": comp.input_shapes,
        "input_values": comp.options.get("input_values", {}),
        "dim_ranges": comp.options.get("dim_ranges", {}),
        "options": comp.options,
        "compiler_version": comp.compiler_version,
        "status": comp.status,
        "error": comp.error,
        "attempts": comp.attempts,
        "worker": comp.worker,
        "event_count": event_count(comp.id),
        **dict(zip(("verified", "verification"), verification(comp.id), strict=True)),
        "created_at": comp.created_at.isoformat(),
        "started_at": comp.started_at.isoformat() if comp.started_at else None,
        "finished_at": comp.finished_at.isoformat() if comp.finished_at else None,
    }
    if cached is not None:
        out["cached"] = cached
    return out


def can_manage(requester, comp: Compilation, session_ids: Iterable[str] = ()) -> bool:
    """True when `requester` may act on `comp` (stop its tuning): its owner or a member of the
    owner's teams; for an anonymous compilation, the browser session that submitted it
    (`session_ids`)."""
    if comp.owner_id is None:
        return comp.id in set(session_ids)
    return comp.owner_id in circle(requester)


def tuning_dict(comp: Compilation, requester, session_ids: Iterable[str] = ()) -> dict:
    """API form of a compilation's tuning (from `compilation_for`): budget, stop state, who measured,
    and the best record of each workload its kernels looked up, with where it came from: `this run`
    (found by this compilation's tuning) or `database` (found before), `found_in` the finder's id
    only when `requester` may see that compilation (a private one stays unnamed)."""
    # ranked as the compiler's look-up ranks them (tuning_db.ranked: median / default, then age), so the
    # record shown is the one a compilation takes (by median alone it could be another of the workload's)
    rows = (ranked(TuningRecord.objects.filter(workload_key__in=list(comp.tuning_workloads or [])))
            .select_related("compilation", "found_by")
            .order_by("workload_key", F("ratio").asc(nulls_last=True), "created_at"))
    records: dict[str, dict] = {}
    for r in rows:
        if r.workload_key in records:
            continue
        finder = r.compilation
        visible = finder is not None and can_see(requester, finder.owner_id, finder.visibility)
        records[r.workload_key] = {
            "kernel": r.kernel, "median_us": r.median_us, "default_us": r.default_us, "trials": r.trials,
            "threads": r.threads, "source": "this run" if r.compilation_id == comp.id else "database",
            "found_in": r.compilation_id if visible else None,
            "found_by": user_dict(r.found_by) if visible and r.found_by_id else None,
            "created_at": r.created_at.isoformat(),
        }
    stats = comp.tuning_stats or {}
    return {
        "id": comp.id, "budget_s": comp.options.get("tune_budget_s"), "status": comp.status,
        "stop_requested_at": comp.tune_stop_requested_at.isoformat() if comp.tune_stop_requested_at else None,
        "can_stop": bool(comp.options.get("tune_budget_s")) and can_manage(requester, comp, session_ids),
        "queue": stats.get("queue"), "workers": stats.get("workers", {}), "records": records,
    }


@lru_cache(maxsize=4)
def _catalog(version: str) -> dict:
    import compiler  # thread-safe: tests/compiler/test_api_threads.py

    return {
        "targets": compiler.list_targets(),
        "passes": compiler.list_passes(),
        "pipelines": compiler.list_pipelines(),
    }


def catalog(kind: str) -> list[dict]:
    """`targets`, `passes` or `pipelines` as the compiler lists them (cached per compiler version)."""
    return _catalog(str(compiler.__version__))[kind]


def samples() -> list[dict]:
    """The compiler's sample models: name, `available` (already on this server, no download
    needed), input shapes, source, and the URL that registers it as a model."""
    listed = compiler_samples.list_samples()
    return [
        {k: v for k, v in s.items() if k != "path"}
        | {"available": bool(s.get("available", s.get("cached", False))),
           "register_url": f"/api/samples/{s['name']}/model"}
        for s in listed
    ]
