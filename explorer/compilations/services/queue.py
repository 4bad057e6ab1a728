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

Stacks sharing one Redis database never see each other's messages: every broker key carries the
stack's prefix (`PRISM_STACK`, kombu's `global_keyprefix`; `broker_key`). A message that names a
compilation this stack's database does not hold (a misconfigured stack sharing the prefix, a
database restored from an old backup) is not acknowledged as done: `dead_letter` keeps it in the
`<prefix>dead-letter` list with a log line naming it, and the stack that owns the compilation sends
it again when its requeue check finds the message gone.

Semantics of the broker check: kombu's Redis transport keeps a queue as a list per priority
(`<prefix><queue>`, `<prefix><queue>\\x06\\x16<pri>`) and reserved messages in the `<prefix>unacked`
hash; both hold the message's JSON, whose headers carry our task id
(`prism-compile-<id>-<random>`) and Celery's `argsrepr` (`('<id>',)`). With another broker the check cannot be made and every overdue
compilation is queued again (harmless: see above).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import Q
from django.utils import timezone
from kombu.exceptions import OperationalError
from redis import Redis
from redis.exceptions import RedisError

from explorer.celery import app as celery_app
from explorer.compilations.models import Compilation
from explorer.compilations.services.events import append_failure

log = logging.getLogger(__name__)

MAX_REQUEUES = 3
TASK_ID_PREFIX = "prism-compile-"
TASK_NAME = "prism.run_compilation"  # tasks.run_compilation_task
DEAD_LETTERS_KEPT = 1000


def broker_key(name: str) -> str:
    """The Redis key of a broker object (a queue, `unacked`, `dead-letter`) of this stack."""
    return f"{settings.PRISM_BROKER_KEY_PREFIX}{name}"


class QueueUnavailable(Exception):
    """The job queue (the Celery broker, Redis) could not be reached to send a task message."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"the job queue is unreachable ({' '.join(detail.split())})")


def queue_for(target: str) -> str:
    """The Celery queue of a target: `PRISM_TARGET_QUEUES[target]`, else `PRISM_COMPILE_QUEUE`."""
    return settings.PRISM_TARGET_QUEUES.get(target, settings.PRISM_COMPILE_QUEUE)


def publish(compilation_id: str, target: str, extra_time_s: int = 0) -> None:
    """Send one task message for a compilation to its target's queue, now.

    The message carries no time limits, so the worker that runs it applies its own
    (`PRISM_COMPILE_TIME_LIMIT_S` of the worker's environment), not the sender's; except that a
    tuning compilation's hard limit is longer by its budget (`extra_time_s`, seconds), which the
    message then carries (the sender's limit plus the budget).
    Raises:
        QueueUnavailable: the broker refused or did not answer (kombu's OperationalError after
            Celery's publish retries, about 1 s for a refused connection).
    """
    limit = int(settings.PRISM_COMPILE_TIME_LIMIT_S) + extra_time_s if extra_time_s > 0 else None
    try:
        celery_app.send_task(
            TASK_NAME, (compilation_id,), queue=queue_for(target), time_limit=limit,
            soft_time_limit=None, task_id=f"{TASK_ID_PREFIX}{compilation_id}-{uuid.uuid4().hex[:12]}",
        )
    except (OperationalError, OSError) as exc:
        raise QueueUnavailable(str(exc)) from exc


def publish_on_commit(compilation_id: str, target: str, extra_time_s: int = 0) -> None:
    """`publish` once the current transaction commits (at once outside one). A failure there is
    logged, not raised: `enqueued_at` is set, so the requeue check sends the message later."""

    def send() -> None:
        try:
            publish(compilation_id, target, extra_time_s)
        except QueueUnavailable as exc:
            log.warning("compilation %s not queued yet: %s", compilation_id, exc)

    transaction.on_commit(send)


def enqueue(compilation_id: str) -> None:
    """Queue the Celery task on its target's queue once the current transaction (if any) commits
    (`publish_on_commit`), stamping `enqueued_at` for the requeue check."""
    row = Compilation.objects.filter(pk=compilation_id).values_list("target", "options").first()
    Compilation.objects.filter(pk=compilation_id).update(enqueued_at=timezone.now())
    publish_on_commit(compilation_id, row[0] if row else "", extra_time(row[1] if row else None))


def extra_time(options: dict | None) -> int:
    """A compilation's tuning budget in whole seconds (0 without one): its time limits grow by it."""
    budget = (options or {}).get("tune_budget_s")
    return int(-(-float(budget) // 1)) if isinstance(budget, (int, float)) and budget > 0 else 0


def requeue_after() -> timedelta:
    return timedelta(seconds=float(settings.PRISM_REQUEUE_AFTER_S))


def waiting_messages(queues: set[str]) -> list[str] | None:
    """The raw JSON of every message waiting in these queues or reserved by a worker, or None
    when the broker cannot be inspected (not kombu's Redis transport).
    Raises:
        QueueUnavailable: the broker did not answer.
    """
    try:
        with celery_app.connection_for_read() as conn:
            channel = conn.default_channel
            client = getattr(channel, "client", None)
            if client is None or not hasattr(channel, "_q_for_pri"):
                return None
            keys = {channel._q_for_pri(q, pri) for q in queues for pri in channel.priority_steps}
            raw: list = []
            # LRANGE and HVALS are not among the commands kombu's client prefixes itself
            for key in sorted(keys):
                raw.extend(client.lrange(broker_key(key), 0, -1))
            raw.extend(client.hvals(broker_key(channel.unacked_key)))
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
            publish_on_commit(comp.id, comp.target, extra_time(comp.options))
            return True
    log.warning("compilation %s: task message lost %d times; failing it", compilation_id, MAX_REQUEUES + 1)
    return append_failure(
        compilation_id, reason="queue_lost", stage="queue",
        message=f"the job queue lost this compilation's task message {MAX_REQUEUES + 1} times "
                "(the queue was restarted or purged) before any worker started it; submit it again",
    )


def dead_letter(compilation_id: str, task_id: str, queue: str, worker: str) -> None:
    """Keep a task message for a compilation this stack's database does not hold in the
    `<prefix>dead-letter` list (the newest `DEAD_LETTERS_KEPT`), with a warning naming it; the
    caller then rejects the message without requeueing it (requeued, it would come straight back
    to the same worker). Never raises: a broker error is logged instead."""
    record = {"compilation": compilation_id, "task_id": task_id, "queue": queue, "worker": worker,
              "stack": settings.PRISM_STACK, "at": time.time(),
              "reason": "no such compilation in this stack's database"}
    log.warning("task %s for compilation %s on queue %s: no such compilation in the database of stack "
                "%s; not run, not acknowledged as done: kept in %s", task_id, compilation_id, queue,
                settings.PRISM_STACK, broker_key("dead-letter"))
    try:
        client = Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=5)
        with client.pipeline() as pipe:
            pipe.lpush(broker_key("dead-letter"), json.dumps(record))
            pipe.ltrim(broker_key("dead-letter"), 0, DEAD_LETTERS_KEPT - 1)
            pipe.execute()
    except (RedisError, OSError):
        log.warning("could not keep the dead letter of compilation %s", compilation_id, exc_info=True)
