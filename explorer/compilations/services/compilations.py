"""Creating, running and reaping compilations.

Lifecycle: `queued` -> `running` -> `succeeded` | `failed`. The status follows the event log: it
becomes final in the same transaction that stores the terminal event (see `events.record_event`).

Lost workers. Tasks are acknowledged late and rejected (requeued) when their worker process dies,
and each running compilation has a heartbeat. A run that finds the compilation `running` with a
stale heartbeat (its predecessor died) or a reaper that finds such a compilation ends the log with
a `compile.failed` event (reason `worker_lost`, or `time_limit` when the hard limit had passed).
The log is never rewritten: clients that saw seq 0..k keep them, and the next event they get is that
`compile.failed`. A compilation is re-run automatically only when its lost run stored no event;
otherwise the user resubmits (a fresh compilation: the cache only serves succeeded ones).

Lost messages. A compilation is created only once its task message is sent (`QueueUnavailable`
otherwise: the API answers 503 and nothing is stored); a message lost later is sent again by the
reaper (`queue.requeue_lost_compilations`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from explorer.compilations.models import Compilation, UploadedModel
from explorer.compilations.services.events import (
    CompilationSuperseded,
    append_failure,
    record_event,
    stage_after,
)
from explorer.compilations.services.queue import (  # queue_for, QueueUnavailable: re-exported
    QueueUnavailable,
    publish,
    publish_on_commit,
    queue_for,  # noqa: F401
    requeue_lost_compilations,
)
from explorer.compilations.services.validation import (  # InvalidRequest: re-exported for callers
    InvalidRequest,
    expand_pipeline,
)

log = logging.getLogger(__name__)

OPTION_DEFAULTS = {"verify": True, "benchmark": True}
MAX_ATTEMPTS = 2


def cache_key(sha256: str, target: str, pipeline: str, input_shapes: dict, options: dict, version: str) -> str:
    """sha256 over the inputs that decide a compilation's result (DESIGN.md: same bytes, target,
    pipeline, options and compiler version give the same result)."""
    blob = json.dumps(
        [sha256, target, pipeline, input_shapes, options, version], sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def normalize_options(options: dict | None) -> dict:
    """`{"verify": bool, "benchmark": bool}` with defaults; raises InvalidRequest for others."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTION_DEFAULTS))
    if unknown:
        raise InvalidRequest(
            f"unknown option {unknown[0]!r}; valid options: {', '.join(sorted(OPTION_DEFAULTS))}"
        )
    out = dict(OPTION_DEFAULTS)
    for key, value in options.items():
        if not isinstance(value, bool):
            raise InvalidRequest(f"option {key!r} must be true or false, got {value!r}")
        out[key] = value
    return out


def create_compilation(
    model: UploadedModel,
    *,
    target: str,
    pipeline: str,
    input_shapes: dict | None,
    options: dict | None = None,
    use_cache: bool = True,
) -> tuple[Compilation, bool]:
    """Validate a request with the compiler and queue it, or return the cached result.

    Returns `(compilation, cached)`; `cached` is True when a succeeded compilation with the same
    cache key exists (it is returned as is, nothing is queued).
    Raises:
        QueueUnavailable: the job queue (Redis) could not take the task message; the compilation
            is deleted again, so nothing is left `queued` with nobody to run it. (Inside a
            transaction the message is sent at commit instead, and a failure is left to the
            requeue check.)
        InvalidRequest: a pipeline that is not text, an unknown target, pass or option, or an
            unbound symbolic dim (`validation.expand_pipeline`, then the compiler's one-line
            message, `compiler.validate_request`). `pipeline=""` is the empty pipeline (O0).
    """
    opts = normalize_options(options)
    expanded = expand_pipeline(pipeline)  # the same check as POST /api/pipelines/validate
    if input_shapes is None:
        input_shapes = model.default_input_shapes
    import compiler  # thread-safe: tests/compiler/test_api_threads.py

    try:
        req = compiler.validate_request(
            model.file.path, target=target, pipeline=expanded, input_shapes=input_shapes
        )
    except compiler.CompileError as exc:
        raise InvalidRequest(exc.message, exc.to_dict()) from exc
    version = str(compiler.__version__)
    key = cache_key(model.sha256, req["target"], req["pipeline"], req["input_shapes"], opts, version)
    if use_cache:
        hit = (
            Compilation.objects.filter(cache_key=key, status=Compilation.Status.SUCCEEDED)
            .order_by("created_at")
            .first()
        )
        if hit is not None:
            return hit, True
    comp = _create_with_unique_id(
        model=model,
        target=req["target"],
        pipeline=req["pipeline"],
        requested_pipeline=pipeline,
        input_shapes=req["input_shapes"],
        options=opts,
        compiler_version=version,
        cache_key=key,
        enqueued_at=timezone.now(),
    )
    if connection.in_atomic_block:
        publish_on_commit(comp.id, comp.target)
        return comp, False
    try:
        publish(comp.id, comp.target)
    except QueueUnavailable:
        comp.delete()  # nobody has seen its id yet; a message that did get out finds no row
        raise
    return comp, False


def _create_with_unique_id(**fields) -> Compilation:
    from django.db import IntegrityError

    for _ in range(5):
        try:
            with transaction.atomic():
                return Compilation.objects.create(**fields)
        except IntegrityError:  # public id collision (about 1 in 1e12): draw again
            continue
    raise RuntimeError("could not allocate a compilation id")


def enqueue(compilation_id: str) -> None:
    """Queue the Celery task on its target's queue once the current transaction (if any) commits
    (`queue.publish_on_commit`), stamping `enqueued_at` for the requeue check."""
    target = Compilation.objects.filter(pk=compilation_id).values_list("target", flat=True).first()
    Compilation.objects.filter(pk=compilation_id).update(enqueued_at=timezone.now())
    publish_on_commit(compilation_id, target or "")


def worker_name() -> str:
    """`<hostname> pid <pid>` of this process, stored on the compilation it runs."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def run_is_gone(comp: Compilation, now) -> bool:
    """True when the run that owns a `running` compilation is certainly or probably dead: its
    heartbeat is older than `PRISM_STALE_AFTER_S`, or its process was on this host and is gone."""
    if comp.heartbeat_at is None or now - comp.heartbeat_at >= stale_after():
        return True
    host, _, pid = comp.worker.partition(" pid ")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def claim(compilation_id: str) -> int | None:
    """Mark a compilation `running` for this process; return the attempt number, or None when
    there is nothing to run (finished, missing, or running with a live heartbeat elsewhere).

    A compilation found `running` with a stale heartbeat was left by a lost worker: if that run
    stored events its log is ended with `compile.failed` (see the module docstring), else it runs
    again, at most `MAX_ATTEMPTS` times in all.
    """
    now = timezone.now()
    with transaction.atomic():
        comp = Compilation.objects.select_for_update().filter(pk=compilation_id).first()
        if comp is None or comp.status in (Compilation.Status.SUCCEEDED, Compilation.Status.FAILED):
            return None
        lost = comp.status == Compilation.Status.RUNNING
        if lost and not run_is_gone(comp, now):
            return None  # a live run owns it (duplicate delivery)
        if lost and comp.events.exists():
            fail_lost = True
        elif comp.attempts >= MAX_ATTEMPTS:
            fail_lost = True
        else:
            fail_lost = False
            comp.status = Compilation.Status.RUNNING
            comp.attempts += 1
            comp.started_at = comp.heartbeat_at = now
            comp.worker = worker_name()
            comp.time_limit_s = int(settings.PRISM_COMPILE_TIME_LIMIT_S)
            comp.save(update_fields=["status", "attempts", "started_at", "heartbeat_at", "worker",
                                     "time_limit_s"])
            return comp.attempts
    if fail_lost:
        reason, message = lost_reason(comp, now)
        append_failure(compilation_id, reason=reason, message=message)
    return None


def lost_reason(comp: Compilation, now) -> tuple[str, str]:
    """`(reason, one-line message)` for a `running` compilation whose run is gone: `time_limit`
    when the run's hard time limit had passed (Celery killed it), else `worker_lost`."""
    limit = comp.time_limit_s or settings.PRISM_COMPILE_TIME_LIMIT_S
    if comp.started_at and (now - comp.started_at).total_seconds() >= limit - 0.5:
        return "time_limit", f"compilation exceeded the time limit of {limit} s; its worker process was stopped"
    where = f" ({comp.worker})" if comp.worker else ""
    return "worker_lost", (
        f"the worker running this compilation{where} was lost (killed or crashed) after "
        f"{comp.attempts} attempt(s); submit it again to retry"
    )


class CompilationTimeLimit(BaseException):  # noqa: N818
    """Raised from the event callback once the soft time limit has passed. A BaseException, so
    that no `except Exception` inside the compiler swallows it (Celery's SoftTimeLimitExceeded
    is an Exception and can be swallowed by a fallback path)."""


def run_compilation(
    compilation_id: str,
    *,
    soft_limit_s: float | None = None,
) -> None:
    """Run one compilation with `compiler.compile`, storing and announcing every event.

    Args:
        compilation_id: the public id.
        soft_limit_s: the soft time limit in seconds. The first event after it stops the
            compilation (unless it is the compiler's own `compile.failed`), and the log ends with a
            `compile.failed` saying `compilation exceeded the time limit of N s` (reason
            `time_limit`). Celery's hard limit stays the backstop for a stage that emits nothing;
            its SystemExit, arriving after the soft limit, ends the log the same way.
    """
    attempt = claim(compilation_id)
    if attempt is None:
        return
    import compiler

    comp = Compilation.objects.select_related("model").get(pk=compilation_id)
    last_type: list[str | None] = [None]
    started = time.monotonic()
    limit_message = f"compilation exceeded the time limit of {soft_limit_s:g} s" if soft_limit_s else ""

    def over_limit() -> bool:
        return soft_limit_s is not None and time.monotonic() - started >= soft_limit_s

    def on_event(event: dict) -> None:
        if over_limit():
            if event.get("type") != "compile.failed":
                raise CompilationTimeLimit(compilation_id)
            event = {**event, "message": limit_message, "reason": "time_limit"}
        record_event(compilation_id, event, attempt=attempt)
        last_type[0] = event.get("type")

    beat = Heartbeat(compilation_id, attempt)
    beat.start()
    try:
        compiler.compile(
            comp.model.file.path,
            target=comp.target,
            pipeline=comp.pipeline,
            input_shapes=comp.input_shapes or None,
            on_event=on_event,
            verify=bool(comp.options.get("verify", True)),
            benchmark=bool(comp.options.get("benchmark", True)),
        )
    except CompilationSuperseded:
        log.warning("compilation %s was reaped while running; stopped", compilation_id)
    except BaseException as exc:
        timed_out = isinstance(exc, CompilationTimeLimit) or over_limit()
        stage = stage_after(last_type[0])
        if timed_out:
            append_failure(compilation_id, reason="time_limit", stage=stage, message=limit_message)
        else:
            log.exception("compilation %s crashed the service", compilation_id)
            append_failure(compilation_id, reason="internal", stage=stage,
                           message=f"internal error: {type(exc).__name__}: {exc}")
        if not isinstance(exc, (Exception, CompilationTimeLimit)):
            raise  # SystemExit (Celery's hard limit), KeyboardInterrupt: after the log is ended
    finally:
        beat.stop()
    # The compiler promises a terminal event; if it broke that promise, end the log ourselves.
    append_failure(compilation_id, reason="internal", stage=stage_after(last_type[0]),
                   message="the compiler returned without a compile.finished or compile.failed event")


def stale_after() -> timedelta:
    return timedelta(seconds=float(settings.PRISM_STALE_AFTER_S))


class Heartbeat:
    """A daemon thread that stamps `heartbeat_at` of a running compilation every
    `PRISM_HEARTBEAT_S` seconds, so that reapers can tell a live run from a lost one."""

    def __init__(self, compilation_id: str, attempt: int) -> None:
        self._id, self._attempt = compilation_id, attempt
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{compilation_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        interval = float(settings.PRISM_HEARTBEAT_S)
        try:
            while not self._stop.wait(interval):
                Compilation.objects.filter(
                    pk=self._id, status=Compilation.Status.RUNNING, attempts=self._attempt
                ).update(heartbeat_at=timezone.now())
        except Exception:  # noqa: BLE001 - a missed beat only risks an early reap; log it
            log.warning("heartbeat of %s failed", self._id, exc_info=True)
        finally:
            connection.close()


def reap_stale_compilations() -> list[str]:
    """End the log of every `running` compilation whose run is gone (`run_is_gone`: its worker
    was lost), and queue again the `queued` ones whose task message was lost
    (`queue.requeue_lost_compilations`, which logs each); returns the ids of the reaped ones."""
    close_old_connections()
    now = timezone.now()
    reaped = []
    for comp in Compilation.objects.filter(status=Compilation.Status.RUNNING):
        if run_is_gone(comp, now) and reap_if_stale(comp.id):
            reaped.append(comp.id)
    requeue_lost_compilations()
    return reaped


def reap_if_stale(compilation_id: str) -> bool:
    """Fail one compilation if it is `running` and its run is gone (or queue it again when that run
    stored no event); True if it did either."""
    now = timezone.now()
    with transaction.atomic():
        comp = Compilation.objects.select_for_update().filter(pk=compilation_id).first()
        if comp is None or comp.status != Compilation.Status.RUNNING:
            return False
        if not run_is_gone(comp, now):
            return False
        if not comp.events.exists() and comp.attempts < MAX_ATTEMPTS:
            # Lost before its first event: nobody saw anything, so run it again.
            comp.status = Compilation.Status.QUEUED
            comp.save(update_fields=["status"])
            enqueue(comp.id)
            log.warning("requeued compilation %s: its worker was lost before any event", comp.id)
            return True
    log.warning("reaping compilation %s: no heartbeat since %s", compilation_id, comp.heartbeat_at)
    reason, message = lost_reason(comp, now)
    return append_failure(compilation_id, reason=reason, message=message)
