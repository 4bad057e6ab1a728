"""Sending compilations to the job queue, and queueing again those whose message was lost.

A `queued` compilation has exactly one job: its Celery task message, in Redis. That message can
be lost while the row stays `queued` (Redis restarted without persistence, the queue was purged).
The reaper of every worker (`signals.py`, through `reap_stale_compilations`) therefore also looks
for compilations `queued` for more than `PRISM_REQUEUE_AFTER_S` since their last message was sent,
asks the broker whether a message for them is still waiting (in the queue, or reserved by a worker
but not started), and when none is, sends a new one (`requeues` + 1, a log line). After
`MAX_REQUEUES` lost messages the log is ended with `compile.failed` (reason `queue_lost`).

Running twice is impossible by construction: a run starts only through `claim`, which moves the
row from `queued` to `running` under a row lock; a second message for the same compilation
(the original one turning up after all) finds it running or finished and does nothing.

Semantics of the broker check: kombu's Redis transport keeps a queue as a list per priority
(`<queue>`, `<queue>\\x06\\x16<pri>`) and reserved messages in the `unacked` hash; both hold the
message's JSON, whose headers carry our task id (`prism-compile-<id>-<random>`) and Celery's
`argsrepr` (`('<id>',)`). With another broker the check cannot be made and every overdue
compilation is queued again (harmless: see above).
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import Q
from django.utils import timezone

from explorer.compilations.models import Compilation
from explorer.compilations.services.events import append_failure

log = logging.getLogger(__name__)

MAX_REQUEUES = 3
TASK_ID_PREFIX = "prism-compile-"


class QueueUnavailable(Exception):
    """The job queue (the Celery broker, Redis) could not be reached to send a task message."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"the job queue is unreachable ({' '.join(detail.split())})")


def queue_for(target: str) -> str:
    """The Celery queue of a target: `PRISM_TARGET_QUEUES[target]`, else `PRISM_COMPILE_QUEUE`."""
    return settings.PRISM_TARGET_QUEUES.get(target, settings.PRISM_COMPILE_QUEUE)


def publish(compilation_id: str, target: str) -> None:
    """Send one task message for a compilation to its target's queue, now.

    The message carries no time limits, so the worker that runs it applies its own
    (`PRISM_COMPILE_TIME_LIMIT_S` of the worker's environment), not the sender's.
    Raises:
        QueueUnavailable: the broker refused or did not answer (kombu's OperationalError after
            Celery's publish retries, about 1 s for a refused connection).
    """
    from kombu.exceptions import OperationalError

    from explorer.compilations.tasks import run_compilation_task

    try:
        run_compilation_task.apply_async(
            (compilation_id,), queue=queue_for(target), time_limit=None, soft_time_limit=None,
            task_id=f"{TASK_ID_PREFIX}{compilation_id}-{uuid.uuid4().hex[:12]}",
        )
    except (OperationalError, OSError) as exc:
        raise QueueUnavailable(str(exc)) from exc


def publish_on_commit(compilation_id: str, target: str) -> None:
    """`publish` once the current transaction commits (at once outside one). A failure there is
    logged, not raised: `enqueued_at` is set, so the requeue check sends the message later."""

    def send() -> None:
        try:
            publish(compilation_id, target)
        except QueueUnavailable as exc:
            log.warning("compilation %s not queued yet: %s", compilation_id, exc)

    transaction.on_commit(send)


def enqueue(compilation_id: str) -> None:
    """Queue the Celery task on its target's queue once the current transaction (if any) commits
    (`publish_on_commit`), stamping `enqueued_at` for the requeue check."""
    target = Compilation.objects.filter(pk=compilation_id).values_list("target", flat=True).first()
    Compilation.objects.filter(pk=compilation_id).update(enqueued_at=timezone.now())
    publish_on_commit(compilation_id, target or "")


def requeue_after() -> timedelta:
    return timedelta(seconds=float(settings.PRISM_REQUEUE_AFTER_S))


def waiting_messages(queues: set[str]) -> list[str] | None:
    """The raw JSON of every message waiting in these queues or reserved by a worker, or None
    when the broker cannot be inspected (not kombu's Redis transport).
    Raises:
        QueueUnavailable: the broker did not answer.
    """
    from kombu.exceptions import OperationalError
    from redis.exceptions import RedisError

    from explorer.celery import app as celery_app

    try:
        with celery_app.connection_for_read() as conn:
            channel = conn.default_channel
            client = getattr(channel, "client", None)
            if client is None or not hasattr(channel, "_q_for_pri"):
                return None
            keys = {channel._q_for_pri(q, pri) for q in queues for pri in channel.priority_steps}
            raw: list = []
            for key in sorted(keys):
                raw.extend(client.lrange(key, 0, -1))
            raw.extend(client.hvals(channel.unacked_key))
    except (OperationalError, RedisError, OSError) as exc:
        raise QueueUnavailable(str(exc)) from exc
    return [r.decode(errors="replace") if isinstance(r, bytes) else str(r) for r in raw]


def has_message(compilation_id: str, messages: list[str]) -> bool:
    """True when one of these raw messages is a task message for this compilation."""
    markers = (f"{TASK_ID_PREFIX}{compilation_id}-", f"('{compilation_id}',)")
    return any(m in raw for raw in messages for m in markers)


def requeue_lost_compilations() -> list[str]:
    """Queue again every compilation `queued` for longer than `PRISM_REQUEUE_AFTER_S` whose task
    message is gone from the broker, or fail it (reason `queue_lost`) once that happened
    `MAX_REQUEUES` times; returns their ids. Does nothing while the broker is unreachable."""
    close_old_connections()
    due = timezone.now() - requeue_after()
    overdue = list(
        Compilation.objects.filter(status=Compilation.Status.QUEUED)
        .filter(Q(enqueued_at__lte=due) | Q(enqueued_at__isnull=True, created_at__lte=due))  # older rows
        .values_list("id", "target")
    )
    if not overdue:
        return []
    try:
        messages = waiting_messages({queue_for(target) for _, target in overdue})
    except QueueUnavailable as exc:
        log.warning("requeue check skipped: %s", exc)
        return []
    handled = []
    for compilation_id, _ in overdue:
        if messages is not None and has_message(compilation_id, messages):
            continue  # waiting behind others: not lost
        if requeue_if_lost(compilation_id):
            handled.append(compilation_id)
    return handled


def requeue_if_lost(compilation_id: str) -> bool:
    """Send a new message for one overdue `queued` compilation, or end its log with
    `compile.failed` (reason `queue_lost`) after `MAX_REQUEUES`; True if it did either.
    The row is re-read under its lock, so that concurrent reapers requeue it once."""
    with transaction.atomic():
        comp = Compilation.objects.select_for_update().filter(pk=compilation_id).first()
        if comp is None or comp.status != Compilation.Status.QUEUED:
            return False
        if (comp.enqueued_at or comp.created_at) > timezone.now() - requeue_after():
            return False  # another reaper just sent one
        if comp.requeues < MAX_REQUEUES:
            comp.requeues += 1
            comp.enqueued_at = timezone.now()
            comp.save(update_fields=["requeues", "enqueued_at"])
            log.warning("compilation %s: its task message was lost before any worker started it; "
                        "queued again (%d of %d)", comp.id, comp.requeues, MAX_REQUEUES)
            publish_on_commit(comp.id, comp.target)
            return True
    log.warning("compilation %s: task message lost %d times; failing it", compilation_id, MAX_REQUEUES + 1)
    return append_failure(
        compilation_id, reason="queue_lost", stage="queue",
        message=f"the job queue lost this compilation's task message {MAX_REQUEUES + 1} times "
                "(the queue was restarted or purged) before any worker started it; submit it again",
    )
