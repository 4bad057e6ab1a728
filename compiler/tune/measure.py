"""Measuring candidate schedules: the request/result seam and the measurer that runs them here.

A measurement request is one batch of candidate traces of one kernel, a JSON-able dict (the
explorer sends it as a Celery task to the ``prism.tune.<target>`` queue; :func:`make_request` builds
it)::

    {"version": 1, "workload": "3f2a9c...", "kernel": "fused_conv2d_relu_3", "target": "host",
     "threads": 2, "source": {"format": "prism-kernel/1", ...}, "traces": [{...}, ...],
     "timeout_s": 30.0, "repeats": 30, "budget_ms": 200.0, "rtol": 1e-4, "atol": 1e-5,
     "flush_bytes": 67108864,   # caches flushed before each timed call (0: hot caches)
     "time_left_s": 41.5}       # optional: no candidate starts later than this after the request is taken

:func:`run_request` measures it on this machine (what a worker's task calls) and returns::

    {"version": 1, "workload": ..., "kernel": ..., "default_us": 123.4 | None,
     "results": [{"trace": {...}, "status": "ok" | "invalid" | "mismatch" | "crashed" | "timeout" | "error"
                                           | "skipped",
                  "median_us": float | None, "max_abs_error": float | None, "message": str,
                  "default_us": float, "ratio": float,   # "ok": timed in alternation with the default, same
                                                         # child (its median, and the median per-round ratio)
                  "elapsed_s": float}],                  # the candidate's build, check and timing (s)
     "restarts": [{"index": 2, "status": "crashed", "message": "..."}],   # the child killed and started again
     "worker": "host:pid", "elapsed_s": 3.2}

Isolation: candidates run in a measuring child (``python -m compiler.tune.child``: rlimits of
``compiler.runtime.limits``, dies with its parent), a :class:`MeasuringChild` that serves batch after
batch (an interpreter's start, the imports and the default schedule's build are paid once per run,
not once per batch: :class:`LocalMeasurer` keeps one for its life, a worker one per tuning job). A
candidate during which the child dies is ``crashed`` (the signal or exit status and the child's last
line of stderr), one that runs past ``timeout_s`` is ``timeout`` (the child is killed); either way
the child is started again for the rest of the batch, only that candidate is discarded, and the
result's ``restarts`` says so. A candidate whose outputs differ from the default schedule's beyond
``rtol``/``atol`` x max(1, max|output|) is ``mismatch`` and never timed or stored. ``skipped``: not
started, the request's ``time_left_s`` having run out (the tuning budget: a run ends at most one
candidate's time past it). ``default_us`` is the default schedule's time in the same child; when the
default itself cannot be measured, every candidate is ``error``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from typing import Any, Protocol

from .errors import TuneError
from .persistent import MeasuringChild

REQUEST_VERSION = 1
FLUSH_BYTES = 64 << 20  # read before each timed call: twice the L3 of this kind of machine (cold caches)
STATUSES = ("ok", "invalid", "mismatch", "crashed", "timeout", "error", "skipped")


class StopFlag(Protocol):
    """Anything with ``is_set() -> bool`` (``threading.Event`` is one): polled between batches."""

    def is_set(self) -> bool: ...


class Measurer(Protocol):
    """Runs measurement requests and returns their results, in request order (module docstring); when
    ``stop`` is set it may return early with the results of a prefix of the requests."""

    def measure(self, requests: Sequence[dict[str, Any]], stop: StopFlag | None = None) -> list[dict[str, Any]]: ...


def make_request(workload: str, kernel: str, target: str, source: dict[str, Any], traces: Sequence[dict[str, Any]],
                 *, threads: int = 1, timeout_s: float = 30.0, repeats: int = 12, budget_ms: float = 200.0,
                 rtol: float = 1e-4, atol: float = 1e-5, flush_bytes: int = FLUSH_BYTES,
                 time_left_s: float | None = None) -> dict[str, Any]:
    """A measurement request (module docstring)."""
    return {"version": REQUEST_VERSION, "workload": workload, "kernel": kernel, "target": target,
            "threads": int(threads), "source": source, "traces": [dict(t) for t in traces],
            "timeout_s": float(timeout_s), "repeats": int(repeats), "budget_ms": float(budget_ms),
            "rtol": float(rtol), "atol": float(atol), "flush_bytes": int(flush_bytes),
            **({"time_left_s": float(time_left_s)} if time_left_s is not None else {})}


def check_request(req: Any) -> None:
    """Raise TuneError naming the first field of ``req`` that is missing or of the wrong type."""
    if not isinstance(req, dict):
        raise TuneError(f"measurement request is {type(req).__name__}, not a JSON object")
    if req.get("version") != REQUEST_VERSION:
        raise TuneError(f"measurement request version {req.get('version')!r} is not {REQUEST_VERSION}")
    for name, typ in (("workload", str), ("kernel", str), ("target", str), ("source", dict), ("traces", list)):
        if not isinstance(req.get(name), typ):
            raise TuneError(f"measurement request field {name!r} is missing or not a {typ.__name__}")
    if not all(isinstance(t, dict) for t in req["traces"]):
        raise TuneError("measurement request field 'traces' must be a list of JSON objects")
    if float(req.get("timeout_s", 30.0)) <= 0:
        raise TuneError(f"measurement request timeout_s {req.get('timeout_s')} is not positive")
    left = req.get("time_left_s")
    if left is not None and (not isinstance(left, int | float) or isinstance(left, bool)):
        raise TuneError(f"measurement request field 'time_left_s' is {left!r}, not a number of seconds")


_OBJ_DIR: list[str] = []


def object_dir() -> str:
    """This process's folder of compiled candidate objects (``compiler.tune.child.compiled``), made on
    first use as ``prism-tuneobj-<pid>-*`` in the temporary directory and removed at exit (a folder left
    by a killed process is removed by ``compiler.runtime.process.remove_stale_run_dirs``)."""
    if not _OBJ_DIR:
        _OBJ_DIR.append(tempfile.mkdtemp(prefix=f"prism-tuneobj-{os.getpid()}-"))
        atexit.register(shutil.rmtree, _OBJ_DIR[0], True)
    return _OBJ_DIR[0]


def _result(trace: dict[str, Any], status: str, message: str, **kw: Any) -> dict[str, Any]:
    return {"trace": trace, "status": status, "median_us": None, "max_abs_error": None, "message": message, **kw}


def run_request(req: dict[str, Any], child: MeasuringChild | None = None) -> dict[str, Any]:
    """Measure one request on this machine (module docstring) in ``child`` (kept running for the next
    request; None: a child started for this request alone and ended after it). Raises TuneError only
    for a malformed request; every failure of a candidate or of the child is a result."""
    check_request(req)
    t0 = time.perf_counter()
    left = req.get("time_left_s")
    deadline = time.monotonic() + float(left) if left is not None else None
    traces = req["traces"]
    timeout_s = float(req.get("timeout_s", 30.0))
    results: list[dict[str, Any] | None] = [None] * len(traces)
    restarts: list[dict[str, Any]] = []
    default_us: float | None = None
    todo = list(range(len(traces)))
    fatal = ""
    own = child is None
    child = child or MeasuringChild(object_dir())
    try:
        while todo and not fatal:
            served = child.serve(req, todo, deadline, timeout_s)
            for rec in served.records:
                i = int(rec.pop("index"))
                if i == -1 and rec.get("status") != "ok":
                    fatal = f"the default schedule could not be measured: {rec.get('message', '')}"
                elif i == -1:
                    default_us = float(rec["median_us"]) if default_us is None else default_us
                elif 0 <= i < len(traces) and results[i] is None:
                    status, msg = str(rec.pop("status")), str(rec.pop("message", ""))
                    msg = "not started: the tuning run's time was spent" if status == "skipped" else msg
                    results[i] = _result(traces[i], status, msg, **rec)
            bad = served.in_flight
            if served.end != "done" and bad is not None and results[bad] is None:
                status = "timeout" if served.end == "timeout" else "crashed"
                msg = (f"no result within {timeout_s:g} s: the child was killed" if status == "timeout"
                       else f"the child {served.message or 'died'} while measuring this candidate")
                results[bad] = _result(traces[bad], status, msg + "; the measuring child is started again")
                restarts.append({"index": bad, "status": status, "message": msg})
            elif served.end != "done" and not fatal:
                what = "did not answer in time" if served.end == "timeout" else served.message or "died"
                fatal = (f"the default schedule could not be measured: the child {what}" if default_us is None
                         else f"the child {what} between candidates")
            todo = [i for i in todo if results[i] is None]
            if served.end == "done" and todo and not fatal:
                fatal = "the measuring child ended the batch without a result for every candidate"
    finally:
        if own:
            child.close()
    final = [r if r is not None else _result(traces[i], "error", fatal or "not measured") for i, r in enumerate(results)]
    return {"version": REQUEST_VERSION, "workload": req["workload"], "kernel": req["kernel"],
            "default_us": default_us, "results": final, "worker": f"{socket.gethostname()}:{os.getpid()}",
            "elapsed_s": round(time.perf_counter() - t0, 3), **({"restarts": restarts} if restarts else {}),
            **({"error": fatal} if fatal else {})}


class LocalMeasurer:
    """The default :class:`Measurer`: every request through :func:`run_request` here, one after the
    other (a child at a time: measurements on a shared machine must not overlap), in one
    :class:`~compiler.tune.persistent.MeasuringChild` kept until :meth:`close` (or the end of a
    ``with`` block): ``children_started`` counts it and its restarts."""

    def __init__(self) -> None:
        self.child = MeasuringChild(object_dir())

    @property
    def children_started(self) -> int:
        return self.child.started

    def measure(self, requests: Sequence[dict[str, Any]], stop: StopFlag | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for req in requests:
            if stop is not None and stop.is_set() and out:
                break
            out.append(run_request(req, self.child))
        return out

    def close(self) -> None:
        self.child.close()

    def __enter__(self) -> LocalMeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHARED: dict[str, MeasuringChild] = {}


def shared_child(key: str) -> MeasuringChild:
    """The measuring child this process keeps for ``key`` (a tuning job's id: a worker measures one
    job's batches in one child); the child kept for another key is closed first (a worker measures one
    job at a time). An idle child exits by itself (``compiler.tune.child.IDLE_EXIT_S``)."""
    for other in [k for k in _SHARED if k != key]:
        _SHARED.pop(other).close()
    if key not in _SHARED:
        _SHARED[key] = MeasuringChild(object_dir())
    return _SHARED[key]


def release_child(key: str) -> None:
    """End the measuring child this process keeps for ``key`` (:func:`shared_child`), if any."""
    child = _SHARED.pop(key, None)
    if child is not None:
        child.close()


__all__ = ["STATUSES", "LocalMeasurer", "Measurer", "StopFlag", "check_request", "make_request", "release_child",
           "run_request", "shared_child"]
