"""The compiler's event stream: the seam between the compiler, the service and the browser.

Each event is one JSON-serializable dict ``{"seq": int, "type": str, "ts": float, ...payload}``
with ``seq`` counting from 0 without gaps within one compilation and ``ts`` in Unix seconds.
The types and payloads are the table in DESIGN.md "Events"; fields may be added, never renamed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

EVENT_TYPES = (
    "compile.started",
    "pass.started",
    "pass.finished",
    "graph.fused",
    "memory.planned",
    "kernel.lowered",
    "kernel.compiled",
    "kernel.timed",
    "model.timed",
    "model.verified",
    "model.accuracy",
    "compile.finished",
    "compile.failed",
)

EventCallback = Callable[[dict[str, Any]], None]


class EventStream:
    """Numbers events and hands each to ``on_event`` synchronously, keeping a copy.

    ``emit(type, **payload)`` returns the event. Raises ``ValueError`` for a type outside
    :data:`EVENT_TYPES` or a payload that uses a reserved key (``seq``, ``type``, ``ts``).
    """

    def __init__(self, on_event: EventCallback | None = None) -> None:
        self._on_event = on_event
        self.events: list[dict[str, Any]] = []

    def emit(self, type: str, **payload: Any) -> dict[str, Any]:
        if type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {type!r}")
        reserved = {"seq", "type", "ts"} & payload.keys()
        if reserved:
            raise ValueError(f"event payload may not set {sorted(reserved)}")
        event = {"seq": len(self.events), "type": type, "ts": time.time(), **payload}
        self.events.append(event)
        if self._on_event is not None:
            self._on_event(event)
        return event

    @property
    def next_seq(self) -> int:
        return len(self.events)
