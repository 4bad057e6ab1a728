"""Appending to a compilation's event log: the database first, then the channel layer.

The log is append-only. An event is committed in its own transaction before it is announced on
the compilation's channel-layer group; the announcement is a hint (the channel layer is
at-most-once, DESIGN.md "The explorer") and the database is the truth.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import threading
import time
from collections import Counter
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone
from redis.exceptions import RedisError

from compiler.errors import one_line
from compiler.events import EVENT_STAGE, RESERVED_KEYS, TERMINAL_EVENT_TYPES, check_payload
from explorer.compilations import messages
from explorer.compilations.models import Compilation, CompilationEvent

log = logging.getLogger(__name__)

class CompilationSuperseded(BaseException):  # noqa: N818
    """This run no longer owns the compilation (it was reaped or finished elsewhere).

    A BaseException, so that the compiler's own `except Exception` handlers let it through and the
    run stops at once instead of emitting more events.
    """


def jsonable(value: Any) -> Any:
    """Plain JSON data: numpy scalars and arrays become Python numbers and lists, tuples become
    lists, and non-finite floats (NaN, ±inf: not JSON) become None."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if hasattr(value, "tolist"):  # numpy scalar or array
        return jsonable(value.tolist())
    return str(value)


def stage_after(event_type: str | None) -> str:
    """The compiler stage in progress after an event of this type: the stage the schema says it is
    emitted in (``compiler.events.EVENT_STAGE``); "import" before any event."""
    return EVENT_STAGE.get(event_type or "", "import")


def failure_stage(comp: Compilation) -> str:
    """The stage a run was in when it stopped, read from its log: the stage of its last event's type
    (`stage_after`), except that once every lowered kernel has its `kernel.compiled` the codegen
    stage is over and the run stage (link, run in the child) has begun."""
    last = comp.events.order_by("-seq").values_list("type", flat=True).first()
    if last == "kernel.compiled":
        counts = Counter(comp.events.filter(type__in=("kernel.lowered", "kernel.compiled"))
                         .values_list("type", flat=True))
        if counts["kernel.compiled"] >= counts["kernel.lowered"]:
            return "run"
    return stage_after(last)


def record_event(compilation_id: str, event: dict, *, attempt: int | None = None) -> CompilationEvent:
    """Store one event and then announce it on the compilation's group.

    Args:
        compilation_id: the compilation's public id.
        event: `{"seq","type","ts",...payload}`; `seq` should be the next one in the log; if it
            is not (an event before it was lost), the event is stored under the next seq.
        attempt: when given, the run that emits it; the event is refused unless the compilation is
            still `running` under that attempt.
    Raises:
        CompilationSuperseded: the compilation is no longer this attempt's to write.
    A terminal event (`compile.finished` / `compile.failed`) also sets the compilation's status,
    `finished_at` and `error`, in the same transaction.
    """
    event = jsonable(event)
    seq, etype = int(event["seq"]), str(event["type"])
    ts = event.get("ts")
    ts = float(ts) if isinstance(ts, (int, float)) else time.time()
    payload = {k: v for k, v in event.items() if k not in RESERVED_KEYS}
    with transaction.atomic():
        comp = Compilation.objects.select_for_update().get(pk=compilation_id)
        if attempt is not None and (comp.status != Compilation.Status.RUNNING or comp.attempts != attempt):
            raise CompilationSuperseded(compilation_id)
        stored = _append(comp, etype, payload, ts)
        if stored.seq != seq:
            # The compiler numbered an event that never got stored (e.g. the soft time limit
            # interrupted its write): the stored log stays gapless, numbered by the service.
            log.warning("compilation %s: compiler seq %s stored as %s", compilation_id, seq, stored.seq)
    announce(compilation_id, stored.as_event())
    return stored


def append_failure(compilation_id: str, *, message: str, reason: str, stage: str | None = None) -> bool:
    """End a compilation's log with a `compile.failed` event written by the service itself.

    Used when the compiler could not say it: the worker was lost, the time limit struck, or the
    service failed. The event carries `reason` ("worker_lost", "time_limit", "internal") besides
    the contract's `stage` and `message`. Does nothing (returns False) when the log already ended.
    """
    with transaction.atomic():
        comp = Compilation.objects.select_for_update().get(pk=compilation_id)
        if comp.status in (Compilation.Status.SUCCEEDED, Compilation.Status.FAILED):
            return False
        payload = {"stage": stage or failure_stage(comp), "message": one_line(message), "reason": reason}
        check_payload("compile.failed", payload)
        stored = _append(comp, "compile.failed", payload, time.time())
    announce(compilation_id, stored.as_event())
    return True


def _append(comp: Compilation, etype: str, payload: dict[str, Any], ts: float) -> CompilationEvent:
    """Store one event under the next seq of ``comp``'s log, the one place the service numbers events
    (``comp`` is locked by the caller's ``select_for_update``). A terminal event also sets the
    compilation's status, ``finished_at`` and ``error``; every event refreshes ``heartbeat_at``."""
    last = comp.events.order_by("-seq").values_list("seq", flat=True).first()
    seq = 0 if last is None else last + 1
    stored = CompilationEvent.objects.create(compilation=comp, seq=seq, type=etype, ts=ts, payload=payload)
    now = timezone.now()
    update: dict[str, Any] = {"heartbeat_at": now}
    if etype in TERMINAL_EVENT_TYPES:
        ok = etype == "compile.finished"
        update.update(status=Compilation.Status.SUCCEEDED if ok else Compilation.Status.FAILED, finished_at=now,
                      error=None if ok else payload)
    Compilation.objects.filter(pk=comp.pk).update(**update)
    return stored


def announce(compilation_id: str, event: dict) -> None:
    """Send a stored event to the compilation's group. Redis and network failures are logged, not
    raised: the consumers fall back to the database. Anything else (such as Celery's soft time
    limit striking here) propagates."""
    size = len(json.dumps(event))
    message = {
        "type": messages.EVENT_MESSAGE,
        "seq": event["seq"],
        "event": event if size <= messages.INLINE_EVENT_MAX_BYTES else None,
    }
    try:
        _Sender.get().group_send(messages.group_name(compilation_id), message)
    except (RedisError, OSError, TimeoutError, ChannelFull):  # clients fall back to the DB
        log.warning("could not announce event %s of %s", event["seq"], compilation_id, exc_info=True)


class _Sender:
    """One event loop thread per process for channel-layer sends from sync code (the worker).

    `async_to_sync` would start a new loop, and so a new Redis connection, for every event;
    this keeps one loop and channels_redis' connection pool alive. Created lazily per process
    id, so that a forked pool process never uses its parent's loop.
    """

    _instance: _Sender | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="prism-channel-sender", daemon=True).start()

    @classmethod
    def get(cls) -> _Sender:
        with cls._lock:
            if cls._instance is None or cls._instance.pid != os.getpid():
                cls._instance = _Sender()
            return cls._instance

    @classmethod
    def _forget_after_fork(cls) -> None:
        cls._instance = None  # its loop thread does not exist in the child
        cls._lock = threading.Lock()  # it may have been held by another thread at fork time

    def group_send(self, group: str, message: dict, timeout: float = 10.0) -> None:
        future = asyncio.run_coroutine_threadsafe(get_channel_layer().group_send(group, message), self.loop)
        future.result(timeout=timeout)


os.register_at_fork(after_in_child=_Sender._forget_after_fork)
