"""Chrome trace-event JSON (the "JSON Object Format" of the Trace Event Format that chrome://tracing
and ui.perfetto.dev open) of a compilation and of its timed model run, from its events.

Every event is a complete event (``"ph": "X"``, ``ts`` and ``dur`` in µs from the compilation's
start) or a metadata event naming a process or thread (``"ph": "M"``). Tracks (threads of process 1):

- ``stages and passes`` (tid 1): each compiler stage (import, passes, lowering, codegen, run,
  verify) and, nested in ``passes``, each pass from its ``pass.started`` to its ``pass.finished``.
  Stage boundaries are the events' own timestamps (a stage ends with its last event);
- ``codegen N`` (tid 10 + N): each kernel's code generation, ``compile_ms`` long. The events give each
  kernel's compile time but not its start, so the kernels are placed as the driver's thread pool
  runs them (``compiler.driver.lower.compile_all``: ``codegen_threads`` workers, 2 by default, kernels
  taken in order by the first free worker), ending where the codegen stage ends.

The run trace (:func:`run_trace`) lays each kernel's median time (``kernel.timed`` ``median_us``)
end to end in execution order on one track, with the whole model's median (``model.timed``
``prism_ms``) on another: one model run as the benchmark measured it, kernel by kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

STAGE_END_EVENTS = {"import": ("compile.started",), "passes": ("pass.finished", "graph.fused", "memory.planned",
                                                                "model.accuracy"),
                    "lowering": ("kernel.lowered",), "codegen": ("kernel.compiled",),
                    "run": ("kernel.timed", "model.timed"), "verify": ("model.verified",)}
STAGES = tuple(STAGE_END_EVENTS)
CODEGEN_THREADS = 2


def _meta(tid: int, name: str) -> dict[str, Any]:
    return {"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}


def _span(name: str, cat: str, start_s: float, dur_s: float, tid: int, t0: float, **args: Any) -> dict[str, Any]:
    return {"name": name, "cat": cat, "ph": "X", "pid": 1, "tid": tid, "ts": round((start_s - t0) * 1e6, 3),
            "dur": round(max(dur_s, 0.0) * 1e6, 3), "args": args}


def _start(events: Sequence[Mapping[str, Any]]) -> float:
    """The compilation's start (Unix s): ``compile.finished`` ts minus ``duration_ms``, else the first event."""
    fin = next((e for e in events if e["type"] == "compile.finished"), None)
    first = float(events[0]["ts"])
    if fin is not None and fin.get("duration_ms") is not None:
        return min(first, float(fin["ts"]) - float(fin["duration_ms"]) / 1e3)
    return first


def _stage_spans(events: Sequence[Mapping[str, Any]], t0: float) -> list[tuple[str, float, float]]:
    """``(stage, start, end)`` in Unix s for each stage that emitted an event (the failed one ends at
    ``compile.failed``)."""
    spans: list[tuple[str, float, float]] = []
    at = t0
    failed = next((e for e in events if e["type"] == "compile.failed"), None)
    fin = next((e for e in events if e["type"] == "compile.finished"), None)
    import_ms = float(((fin or {}).get("stage_ms") or {}).get("import") or 0.0)
    for stage in STAGES:
        ts = [float(e["ts"]) for e in events if e["type"] in STAGE_END_EVENTS[stage]]
        if stage == "import":  # compile.started opens it; the first pass (or its stage_ms) ends it
            starts = [float(e["ts"]) for e in events if e["type"] == "pass.started"]
            ts = [min(starts)] if starts else [t + import_ms / 1e3 for t in ts]
        if failed is not None and failed.get("stage") == stage:
            ts = [*ts, float(failed["ts"])]
        if not ts:
            continue
        end = max(ts)
        spans.append((stage, at, end))
        at = end
    return spans


def compilation_trace(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The trace of a compilation (its events in seq order): ``{"traceEvents": [...],
    "displayTimeUnit": "ms", "otherData": {...}}``; see the module docstring for the tracks."""
    if not events:
        return {"traceEvents": [], "displayTimeUnit": "ms", "otherData": {}}
    t0 = _start(events)
    fin = next((e for e in events if e["type"] == "compile.finished"), None)
    stage_ms = dict(fin.get("stage_ms") or {}) if fin else {}
    out: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "prism compile"}},
                                 _meta(1, "stages and passes")]
    spans = _stage_spans(events, t0)
    for stage, start, end in spans:
        out.append(_span(stage, "stage", start, end - start, 1, t0, stage_ms=stage_ms.get(stage)))
    started = {int(e["index"]): float(e["ts"]) for e in events if e["type"] == "pass.started"}
    for e in events:
        if e["type"] == "pass.finished" and int(e["index"]) in started:
            begin = started[int(e["index"])]
            out.append(_span(str(e["name"]), "pass", begin, float(e["ts"]) - begin, 1, t0, index=e["index"],
                             pass_ms=e.get("duration_ms"), changed=e.get("changed"), remarks=len(e.get("remarks") or [])))
    codegen = next((s for s in spans if s[0] == "codegen"), None)
    kernels = [e for e in events if e["type"] == "kernel.compiled"]
    if codegen is not None and kernels:
        out += _codegen_lanes(kernels, codegen[1], codegen[2], t0)
    model = next((e.get("model") for e in events if e["type"] == "compile.started"), None) or {}
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "otherData": {"model": model.get("name"), "stage_ms": stage_ms,
                          "note": "codegen spans are each kernel's compile_ms, placed as the driver's pool of "
                                  f"{CODEGEN_THREADS} workers runs them in order (the events give durations, not starts)"}}


def _codegen_lanes(kernels: Sequence[Mapping[str, Any]], start: float, end: float, t0: float) -> list[dict[str, Any]]:
    """Each kernel's ``compile_ms`` on the first free of ``CODEGEN_THREADS`` lanes, in order; the
    lanes shifted so that the last kernel ends where the codegen stage ends."""
    free = [0.0] * CODEGEN_THREADS
    placed: list[tuple[int, float, float, Mapping[str, Any]]] = []
    for k in kernels:
        lane = min(range(CODEGEN_THREADS), key=lambda i: free[i])
        dur = float(k.get("compile_ms") or 0.0) / 1e3
        placed.append((lane, free[lane], dur, k))
        free[lane] += dur
    shift = max(start, end - max(free))
    out = [_meta(10 + i, f"codegen {i + 1}") for i in range(CODEGEN_THREADS)]
    for lane, at, dur, k in placed:
        out.append(_span(str(k["kernel"]), "codegen", shift + at, dur, 10 + lane, t0,
                         compile_ms=k.get("compile_ms"), cached=bool(k.get("cached"))))
    return out


def run_trace(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One timed model run: each kernel's median (``kernel.timed`` ``median_us``) in execution order,
    end to end, on the ``kernels`` track (tid 1); the model's median ``prism_ms`` on ``model`` (tid 2).
    ``ts`` in µs from the run's start. Empty ``traceEvents`` when nothing was timed."""
    timed = [e for e in events if e["type"] == "kernel.timed"]
    model = next((e for e in events if e["type"] == "model.timed"), None)
    out: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "prism run"}},
                                 _meta(1, "kernels (median each, in execution order)"), _meta(2, "model (median)")]
    at = 0.0
    for i, e in enumerate(timed):
        us = float(e.get("median_us") or 0.0)
        out.append({"name": str(e["kernel"]), "cat": "kernel", "ph": "X", "pid": 1, "tid": 1, "ts": round(at, 3),
                    "dur": round(us, 3), "args": {"order": i, "median_us": us, "flops": e.get("flops"),
                                                  "bytes": e.get("bytes"), "gflops": e.get("gflops"),
                                                  "gbps": e.get("gbps")}})
        at += us
    if model is not None and model.get("prism_ms") is not None:
        out.append({"name": "model", "cat": "model", "ph": "X", "pid": 1, "tid": 2, "ts": 0.0,
                    "dur": round(float(model["prism_ms"]) * 1e3, 3),
                    "args": {"prism_ms": model["prism_ms"], "onnxruntime_ms": model.get("onnxruntime_ms"),
                             "repeats": model.get("repeats")}})
    return {"traceEvents": out if timed else [], "displayTimeUnit": "ms",
            "otherData": {"kernels_sum_us": round(at, 3), "note": "each kernel's span is its median time over the "
                          "benchmark's repeats (kernel.timed), laid end to end in execution order"}}
