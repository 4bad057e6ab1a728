"""Reads: what the API, the pages and the WebSocket consumer show."""

from __future__ import annotations

from functools import lru_cache

from explorer.compilations.models import Compilation, CompilationEvent, UploadedModel

EVENT_PAGE_MAX = 1000


def get_compilation(compilation_id: str) -> Compilation | None:
    return Compilation.objects.select_related("model").filter(pk=compilation_id).first()


def get_model(sha256: str) -> UploadedModel | None:
    return UploadedModel.objects.filter(sha256=sha256.lower()).first()


def events_after(compilation_id: str, after: int = -1, limit: int = EVENT_PAGE_MAX) -> list[dict]:
    """Stored events with `seq > after`, in seq order, at most `limit` of them."""
    rows = CompilationEvent.objects.filter(compilation_id=compilation_id, seq__gt=after).order_by("seq")
    return [e.as_event() for e in rows[:limit]]


def last_event(compilation_id: str) -> dict | None:
    row = CompilationEvent.objects.filter(compilation_id=compilation_id).order_by("-seq").first()
    return row.as_event() if row else None


def event_count(compilation_id: str) -> int:
    return CompilationEvent.objects.filter(compilation_id=compilation_id).count()


def model_dict(model: UploadedModel) -> dict:
    """API form of an uploaded model; `id` is its sha256."""
    return {
        "id": model.sha256,
        "sha256": model.sha256,
        "name": model.name,
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


def compilation_dict(comp: Compilation, *, cached: bool | None = None) -> dict:
    """API form of a compilation: identity, request, status and where to read its events."""
    out = {
        "id": comp.id,
        "url": f"/c/{comp.id}",
        "api_url": f"/api/compilations/{comp.id}",
        "events_url": f"/api/compilations/{comp.id}/events",
        "ws_url": f"/ws/compilations/{comp.id}/",
        "model": model_dict(comp.model),
        "target": comp.target,
        "pipeline": comp.pipeline,
        "requested_pipeline": comp.requested_pipeline,
        "input_shapes": comp.input_shapes,
        "options": comp.options,
        "compiler_version": comp.compiler_version,
        "status": comp.status,
        "error": comp.error,
        "attempts": comp.attempts,
        "worker": comp.worker,
        "event_count": event_count(comp.id),
        "created_at": comp.created_at.isoformat(),
        "started_at": comp.started_at.isoformat() if comp.started_at else None,
        "finished_at": comp.finished_at.isoformat() if comp.finished_at else None,
    }
    if cached is not None:
        out["cached"] = cached
    return out


def recent_compilations(limit: int = 50) -> list[Compilation]:
    return list(Compilation.objects.select_related("model").order_by("-created_at")[:limit])


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
    import compiler

    return _catalog(str(compiler.__version__))[kind]


def samples() -> list[dict]:
    """The compiler's sample models: name, `available` (already on this server, no download
    needed), input shapes, source, and the URL that registers it as a model."""
    from compiler import samples as compiler_samples

    listed = compiler_samples.list_samples()
    return [
        {k: v for k, v in s.items() if k != "path"}
        | {"available": bool(s.get("available", s.get("cached", False))),
           "register_url": f"/api/samples/{s['name']}/model"}
        for s in listed
    ]
