"""Running a compilation on a worker: claiming it, its heartbeat, and the run itself.

Lifecycle: `queued` -> `running` -> `succeeded` | `failed`. The status follows the event log: it
becomes final in the same transaction that stores the terminal event (see `events.record_event`).

Lost workers. Tasks are acknowledged late and rejected (requeued) when their worker process dies,
and each running compilation has a heartbeat (`Heartbeat`). A run that finds the compilation
`running` with its previous run gone (`run_is_gone`) ends the log with a `compile.failed` event
(reason `worker_lost`, or `time_limit` when the hard limit had passed: `lost_reason`); the reaper
(`reaper.py`) does the same for runs that no message brings back. The log is never rewritten:
clients that saw seq 0..k keep them, and the next event they get is that `compile.failed`. A
compilation is re-run automatically only when its lost run stored no event; otherwise the user
resubmits (a fresh compilation: the cache only serves succeeded ones).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

import compiler
from compiler import isolated_compile
from compiler.events import TERMINAL_EVENT_TYPES
from explorer.compilations.models import Compilation
from explorer.compilations.services import fault_log, memory_cap
from explorer.compilations.services.events import (
    CompilationSuperseded,
    append_failure,
    record_event,
)
from explorer.compilations.services.submission import calibration_path
from explorer.compilations.services.tuning_db import DjangoTuningDatabase
from explorer.compilations.services.tuning_run import extra_time_s, tune

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 2


def worker_name() -> str:
    """`<hostname> pid <pid>` of this process, stored on the compilation it runs."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def stale_after() -> timedelta:
    return timedelta(seconds=float(settings.PRISM_STALE_AFTER_S))


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


def lost_reason(comp: Compilation, now) -> tuple[str, str]:
    """`(reason, one-line message)` for a `running` compilation whose run is gone: `time_limit`
    when the run's hard time limit had passed (Celery killed it), else `worker_lost` (with how the
    process died, when it left a report: `fault_log.last_words`)."""
    limit = comp.time_limit_s or settings.PRISM_COMPILE_TIME_LIMIT_S
    if comp.started_at and (now - comp.started_at).total_seconds() >= limit - 0.5:
        return "time_limit", f"compilation exceeded the time limit of {limit} s; its worker process was stopped"
    where = f" ({comp.worker})" if comp.worker else ""
    words = fault_log.last_words(comp.worker) if comp.worker else None
    return "worker_lost", (
        f"the worker running this compilation{where} was lost (killed or crashed"
        f"{': ' + words if words else ''}) after {comp.attempts} attempt(s); submit it again to retry"
    )


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
            comp.time_limit_s = int(settings.PRISM_COMPILE_TIME_LIMIT_S) + extra_time_s(comp.options)
            comp.save(update_fields=["status", "attempts", "started_at", "heartbeat_at", "worker",
                                     "time_limit_s"])
            return comp.attempts
    if fail_lost:
        reason, message = lost_reason(comp, now)
        append_failure(compilation_id, reason=reason, message=message)
    return None


class CompilationTimeLimit(BaseException):  # noqa: N818
    """Raised from the event callback once the soft time limit has passed. A BaseException, so
    that no `except Exception` inside the compiler swallows it (Celery's SoftTimeLimitExceeded
    is an Exception and can be swallowed by a fallback path)."""


def run_compilation(
    compilation_id: str,
    *,
    soft_limit_s: float | None = None,
    node: str = "",
) -> None:
    """Run one compilation with `compiler.compile`, storing and announcing every event.

    Args:
        compilation_id: the public id.
        soft_limit_s: the soft time limit in seconds. The first event after it stops the
            compilation (unless it is the compiler's own `compile.failed`), and the log ends with a
            `compile.failed` saying `compilation exceeded the time limit of N s` (reason
            `time_limit`). Celery's hard limit stays the backstop for a stage that emits nothing;
            its SystemExit, arriving after the soft limit, ends the log the same way. A tuning
            compilation's limit is longer by its budget (`tuning_run.extra_time_s`).

    Every compilation compiles with the tuning database (`tuning_db.DjangoTuningDatabase`); one
    with `tune_budget_s` searches first (`tuning_run.tune`), its events first in the log; `node`
    is the Celery node running it (its measurements go to other workers when it has one process).
    """
    attempt = claim(compilation_id)
    if attempt is None:
        return
    comp = Compilation.objects.select_related("model").get(pk=compilation_id)
    if soft_limit_s is not None:
        soft_limit_s += extra_time_s(comp.options)
    started = time.monotonic()
    limit_message = f"compilation exceeded the time limit of {soft_limit_s:g} s" if soft_limit_s else ""

    def over_limit() -> bool:
        return soft_limit_s is not None and time.monotonic() - started >= soft_limit_s

    offset = 0  # the compile's events follow the search's in the one log
    db = DjangoTuningDatabase(compilation_id)

    def on_event(event: dict) -> None:
        if over_limit():
            if event.get("type") != "compile.failed":
                raise CompilationTimeLimit(compilation_id)
            event = {**event, "message": limit_message, "reason": "time_limit"}
        if event.get("type") in TERMINAL_EVENT_TYPES:
            db.flush()  # the workloads looked up are readable (GET .../tuning) once the log ends
        record_event(compilation_id, {**event, "seq": int(event.get("seq", 0)) + offset}, attempt=attempt)

    beat = Heartbeat(compilation_id, attempt)
    beat.start()
    try:
        with memory_cap.reserve(node or worker_name(), compilation_id,
                                memory_cap.estimate_bytes(comp.model.size)) as reservation:
            if comp.options.get("tune_budget_s"):
                offset = tune(comp, db, on_event, own_node=node)

            def on_compile_event(event: dict) -> None:
                if event.get("type") == "memory.planned":  # the measuring child will allocate this arena
                    reservation.grow(reservation.bytes + int(event.get("arena_bytes") or 0))
                on_event(event)

            compile_with_database(comp, on_compile_event, db)
    except memory_cap.MemoryRefused as exc:
        append_failure(compilation_id, reason="memory_cap", stage="request", message=exc.message)
    except CompilationSuperseded:
        log.warning("compilation %s was reaped while running; stopped", compilation_id)
    except BaseException as exc:
        timed_out = isinstance(exc, CompilationTimeLimit) or over_limit()
        # the stage comes from the log (events.failure_stage)
        if timed_out:
            append_failure(compilation_id, reason="time_limit", message=limit_message)
        else:
            log.exception("compilation %s crashed the service", compilation_id)
            append_failure(compilation_id, reason="internal", message=f"internal error: {type(exc).__name__}: {exc}")
        if not isinstance(exc, (Exception, CompilationTimeLimit)):
            raise  # SystemExit (Celery's hard limit), KeyboardInterrupt: after the log is ended
    finally:
        beat.stop()
        db.flush()
    # The compiler promises a terminal event; if it broke that promise, end the log ourselves.
    append_failure(compilation_id, reason="internal",
                   message="the compiler returned without a compile.finished or compile.failed event")



def compile_with_database(comp: Compilation, on_event, db: DjangoTuningDatabase) -> None:
    """`compiler.compile` of a compilation's stored request, its events to `on_event`, with the
    tuning database (every kernel with a record takes its best schedule). With `PRISM_COMPILE_IN_CHILD`
    (the default) in a child process under its own limits (`compiler.isolated_compile`): the events
    arrive as the child emits them, the database's look-ups are answered from here, and a child that
    dies (a crash in LLVM, an rlimit, the OOM killer) ends the log with a `compile.failed` naming how."""
    run = partial(isolated_compile.compile_isolated, comp.model.file.path) if settings.PRISM_COMPILE_IN_CHILD \
        else partial(compiler.compile, comp.model.file.path)
    run(
        target=comp.target,
        pipeline=comp.pipeline,
        input_shapes=comp.input_shapes or None,
        input_values=comp.options.get("input_values") or None,
        dim_ranges={k: tuple(v) for k, v in (comp.options.get("dim_ranges") or {}).items()} or None,
        on_event=on_event,
        verify=bool(comp.options.get("verify", True)),
        benchmark=bool(comp.options.get("benchmark", True)),
        calibration_data=calibration_path(comp.options),
        threads=comp.options.get("threads"),
        tuning_db=db,
    )


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
