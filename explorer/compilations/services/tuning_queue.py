"""Measuring tuning candidates on the workers (issue 16): one Celery queue per target, batches fanned
out to every worker serving it, results gathered as they arrive.

The search (`compiler.tune.search.tune_model`, run by the compilation's own task) hands the
`Measurer` seam a list of measurement requests, each one batch of candidate schedule traces of one
kernel (format: `compiler.tune.measure`, tune-api.md), as many at once as there are workers serving
the target's queue (`CeleryMeasurer.concurrency`; the queue is `tune_queue`:
`<PRISM_TUNE_QUEUE_PREFIX>.<target>`, e.g. `prism.tune.host`). `CeleryMeasurer.measure` splits each
request's traces into parts so that every worker gets at least one, at most `PRISM_TUNE_MAX_BATCH`
candidates each, and sends every part as a `prism.tune.measure` task. A worker runs its part with
`compiler.tune.measure.run_request` in the measuring child it keeps for the job
(`compiler.tune.measure.shared_child`: started on the job's first part, serving its later ones; a
candidate that crashes or times out kills only that child and is discarded, never the worker), which
compares each candidate's outputs with the default schedule's; the worker pushes the result onto the job's reply list in Redis
(`reply_key`), and `measure` pops the replies as they come (BLPOP), merging the parts back into
one result per request. A part not back within `PRISM_TUNE_BATCH_TIMEOUT_S` counts as a `timeout`
for each of its candidates; a reply that turns up later is ignored (its part id is no longer
awaited).

Stacks sharing Redis never see each other's work: the queue, the reply lists and the broadcast
that counts the workers all live under the stack's key prefix (`PRISM_STACK`, `queue.broker_key`),
as the compile queue does. With no worker serving the queue the batches are measured by the
compiling worker itself, in an isolated child kept for the job (`run_request`), with a warning: a single
worker deployment tunes too, just not in parallel.

Which worker measured what is kept per job (`Compilation.tuning_stats["workers"]`: batches,
candidates and busy seconds per worker), shown by GET /api/compilations/<id>/tuning.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from redis import Redis
from redis.exceptions import RedisError

from compiler.tune.measure import release_child, run_request, shared_child
from explorer.celery import app as celery_app
from explorer.compilations.models import Compilation
from explorer.compilations.services.queue import broker_key

log = logging.getLogger(__name__)

TUNE_TASK_NAME = "prism.tune.measure"  # tasks.measure_batch_task
REPLY_TTL_S = 3600
WORKER_COUNT_TTL_S = 30.0


def tune_queue(target: str) -> str:
    """The Celery queue measuring candidates for `target`: `<PRISM_TUNE_QUEUE_PREFIX>.<target>`."""
    return f"{settings.PRISM_TUNE_QUEUE_PREFIX}.{target}"


def reply_key(job_id: str) -> str:
    """The Redis list a job's measurement replies are pushed onto (under the stack's prefix)."""
    return broker_key(f"tune-replies.{job_id}")


def _redis() -> Redis:
    return Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=30, socket_connect_timeout=5)


def workers_serving(queue: str, own_node: str = "", timeout: float = 1.0) -> list[str]:
    """The names of the workers consuming `queue` now (Celery's `inspect().active_queues()`
    broadcast, under this stack's prefix); empty when none answers within `timeout` seconds.
    `own_node` (the worker running the search) is left out when its pool has one process: that
    process is busy searching, so a batch sent to it would wait until the search gives up on it."""
    try:
        inspect = celery_app.control.inspect(timeout=timeout)
        replies = inspect.active_queues() or {}
        names = sorted(n for n, queues in replies.items() if any(q.get("name") == queue for q in queues or []))
        if own_node in names:
            pool = ((inspect.stats() or {}).get(own_node) or {}).get("pool") or {}
            if int(pool.get("max-concurrency") or 1) <= 1:
                names.remove(own_node)
    except (OSError, RedisError):
        log.warning("could not ask the workers which queues they serve", exc_info=True)
        return []
    return names


def split_traces(traces: list, parts: int, most: int) -> list[list]:
    """`traces` in contiguous chunks: at least `parts` of them (fewer when there are fewer traces),
    none longer than `most`, sizes within one of each other."""
    if not traces:
        return []
    n = max(1, min(len(traces), max(parts, -(-len(traces) // max(1, most)))))
    size, extra = divmod(len(traces), n)
    out, at = [], 0
    for i in range(n):
        step = size + (1 if i < extra else 0)
        out.append(traces[at:at + step])
        at += step
    return out


def merge_parts(request: dict, replies: list[dict | None], parts: list[list], timeout_s: float) -> dict:
    """One result for `request` from the replies of its parts (in part order; None: not back in
    time). Candidates keep their request order; `default_us` is the median of the parts' default
    times (each part timed the default schedule in its own child); `workers` lists who measured."""
    results: list[dict] = []
    defaults: list[float] = []
    workers: list[str] = []
    for reply, traces in zip(replies, parts, strict=True):
        if reply is None:
            results += [{"trace": t, "status": "timeout", "median_us": None, "max_abs_error": None,
                         "message": f"measurement batch not back from the workers within {timeout_s:g} s"}
                        for t in traces]
            continue
        results += list(reply.get("results") or [])
        if isinstance(reply.get("default_us"), (int, float)):
            defaults.append(float(reply["default_us"]))
        workers.append(str(reply.get("worker") or "?"))
    defaults.sort()
    default_us = None if not defaults else (
        defaults[len(defaults) // 2] if len(defaults) % 2 else (defaults[len(defaults) // 2 - 1] + defaults[len(defaults) // 2]) / 2)
    return {"version": 1, "workload": request.get("workload"), "kernel": request.get("kernel"),
            "default_us": default_us, "results": results, "worker": ",".join(sorted(set(workers))),
            "workers": workers}


class StopRequested:
    """The search's stop flag (`.is_set()`) for one compilation: set once its owner asked to stop
    tuning (POST /api/compilations/<id>/tuning/stop sets `tune_stop_requested_at`). Reads the row
    at most once a second."""

    def __init__(self, compilation_id: str, min_interval_s: float = 1.0) -> None:
        self.compilation_id, self.min_interval_s = compilation_id, min_interval_s
        self._checked = 0.0
        self._set = False

    def is_set(self) -> bool:
        if not self._set and time.monotonic() - self._checked >= self.min_interval_s:
            self._checked = time.monotonic()
            self._set = Compilation.objects.filter(pk=self.compilation_id, tune_stop_requested_at__isnull=False).exists()
        return self._set


class CeleryMeasurer:
    """`compiler.tune.measure.Measurer` on Celery: see the module docstring.

    Args:
        job_id: the tuning compilation's public id (names its reply list and its stats).
        target: the target name whose queue measures (`tune_queue`).
        own_node: the Celery node name of the worker running the search (`workers_serving`).
    """

    def __init__(self, job_id: str, target: str, own_node: str = "") -> None:
        self.job_id, self.target, self.own_node = job_id, target, own_node
        self.queue = tune_queue(target)
        self._workers: list[str] = []
        self._workers_at = -1e9
        self.stats: dict[str, dict[str, float]] = {}

    @property
    def concurrency(self) -> int:
        """How many requests the search should hand `measure` at once (`tune_model` reads it): one
        per worker serving the queue (at least 1)."""
        return max(1, len(self.workers()))

    def workers(self) -> list[str]:
        """The workers serving this target's queue (asked again every 30 s)."""
        if time.monotonic() - self._workers_at > WORKER_COUNT_TTL_S:
            self._workers, self._workers_at = workers_serving(self.queue, self.own_node), time.monotonic()
        return self._workers

    def measure(self, requests: list[dict], stop: Any = None) -> list[dict]:
        """Results of `requests`, in their order (format: `compiler.tune.measure`). Never raises for a
        lost batch (its candidates are `timeout`); raises `compiler.tune.measure`'s TuneError for a
        malformed request only when measured locally (no worker serves the queue)."""
        if not requests:
            return []
        workers = self.workers()
        if not workers:
            return self._measure_here(requests)
        most = max(1, int(settings.PRISM_TUNE_MAX_BATCH))
        per = -(-len(workers) // len(requests))  # parts per request: every worker gets one
        plan = [split_traces(list(r.get("traces") or []), per, most) for r in requests]
        pending: dict[str, tuple[int, int]] = {}
        client = _redis()
        for i, (request, parts) in enumerate(zip(requests, plan, strict=True)):
            for j, traces in enumerate(parts):
                part_id = f"{i}.{j}.{uuid.uuid4().hex[:8]}"
                pending[part_id] = (i, j)
                celery_app.send_task(TUNE_TASK_NAME, (self.job_id, part_id, {**request, "traces": traces}),
                                     queue=self.queue, task_id=f"prism-tune-{self.job_id}-{part_id}")
        replies: list[list[dict | None]] = [[None] * len(parts) for parts in plan]
        self._gather(client, pending, replies)
        timeout_s = float(settings.PRISM_TUNE_BATCH_TIMEOUT_S)
        out = [merge_parts(r, rep, parts, timeout_s) if parts else self._empty(r)
               for r, rep, parts in zip(requests, replies, plan, strict=True)]
        self._save_stats()
        return out

    def _gather(self, client: Redis, pending: dict[str, tuple[int, int]], replies: list[list[dict | None]]) -> None:
        deadline = time.monotonic() + float(settings.PRISM_TUNE_BATCH_TIMEOUT_S)
        key = reply_key(self.job_id)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning("tuning %s: %d measurement batch(es) not back within %g s; their candidates count "
                            "as timed out", self.job_id, len(pending), settings.PRISM_TUNE_BATCH_TIMEOUT_S)
                return
            try:
                popped = client.blpop([key], timeout=max(1, min(5, int(left))))
            except (RedisError, OSError):
                log.warning("tuning %s: reading measurement replies failed; retrying", self.job_id, exc_info=True)
                time.sleep(1)
                continue
            if popped is None:
                continue
            message = json.loads(popped[1])
            where = pending.pop(str(message.get("part")), None)
            if where is None:
                continue  # a late reply of a batch given up on, or a duplicate delivery
            reply = message.get("result") or {}
            replies[where[0]][where[1]] = reply
            self._count(reply, len(reply.get("results") or []))

    def _measure_here(self, requests: list[dict]) -> list[dict]:

        log.warning("tuning %s: no worker serves %s; measuring on this worker", self.job_id, self.queue)
        out = []
        for request in requests:
            reply = run_request(request, shared_child(self.job_id))
            self._count(reply, len(reply.get("results") or []))
            out.append(reply)
        self._save_stats()
        return out

    @staticmethod
    def _empty(request: dict) -> dict:
        return {"version": 1, "workload": request.get("workload"), "kernel": request.get("kernel"),
                "default_us": None, "results": [], "worker": "", "workers": []}

    def _count(self, reply: dict, candidates: int) -> None:
        s = self.stats.setdefault(str(reply.get("worker") or "?"), {"batches": 0, "candidates": 0, "busy_s": 0.0})
        s["batches"] += 1
        s["candidates"] += candidates
        s["busy_s"] = round(s["busy_s"] + float(reply.get("elapsed_s") or 0.0), 3)

    def _save_stats(self) -> None:
        with transaction.atomic():
            comp = Compilation.objects.select_for_update().filter(pk=self.job_id).first()
            if comp is None:
                return
            stats = dict(comp.tuning_stats or {})
            stats.update(queue=self.queue, workers=self.stats, updated_at=timezone.now().isoformat())
            Compilation.objects.filter(pk=self.job_id).update(tuning_stats=stats)

    def close(self) -> None:
        """Drop the job's reply list (late replies of batches given up on) and end the measuring child this
        process kept for the job (the workers' children end on their next job or when idle)."""
        release_child(self.job_id)
        try:
            _redis().delete(reply_key(self.job_id))
        except (RedisError, OSError):
            log.warning("could not delete the reply list of %s", self.job_id, exc_info=True)


def measure_and_reply(job_id: str, part_id: str, request: dict, worker: str) -> None:
    """A worker's part of a job: measure `request` (`compiler.tune.measure.run_request`: candidates in
    the isolated child this worker process keeps for the job) and push `{"part", "result"}` onto the job's reply list. A malformed request
    (TuneError) is answered with every candidate `error`, so the job does not wait for it."""
    from compiler.tune.measure import (  # deferred: compiler.tune loads xgboost on import
        TuneError,
    )

    started = time.monotonic()
    try:
        result = run_request(request, shared_child(job_id))
    except TuneError as exc:
        log.warning("tuning %s part %s: malformed measurement request: %s", job_id, part_id, exc)
        result = {"version": 1, "workload": request.get("workload"), "kernel": request.get("kernel"),
                  "default_us": None, "results": [{"trace": t, "status": "error", "median_us": None,
                                                   "max_abs_error": None, "message": str(exc)}
                                                  for t in request.get("traces") or []]}
    result = {**result, "worker": worker, "elapsed_s": round(time.monotonic() - started, 3)}
    client = _redis()
    with client.pipeline() as pipe:
        pipe.rpush(reply_key(job_id), json.dumps({"part": part_id, "result": result}))
        pipe.expire(reply_key(job_id), REPLY_TTL_S)
        pipe.execute()
