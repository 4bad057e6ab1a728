"""Reaping: ending the logs of compilations whose run is gone, and queueing again lost messages.

Every worker pool process runs `reap_stale_compilations` at start and every
`PRISM_REAP_INTERVAL_S` seconds (`signals.py`); nothing else does: reads (the API, the pages, the
WebSocket consumer) never write. A `running` compilation whose run is gone (`runs.run_is_gone`:
its process no longer exists on this host, or no heartbeat for `PRISM_STALE_AFTER_S`) gets a
`compile.failed` event (`runs.lost_reason`), or, when that run stored no event, is queued again
(at most `runs.MAX_ATTEMPTS` runs in all). `queued` compilations whose task message was lost are
the queue module's (`queue.requeue_lost_compilations`).
"""

from __future__ import annotations

import logging

from django.db import close_old_connections, transaction
from django.utils import timezone

from explorer.compilations.models import Compilation
from explorer.compilations.services.events import append_failure
from explorer.compilations.services.queue import enqueue, requeue_lost_compilations
from explorer.compilations.services.runs import MAX_ATTEMPTS, lost_reason, run_is_gone

log = logging.getLogger(__name__)


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
