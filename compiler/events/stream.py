"""The compiler's event stream: numbers, validates and hands out events (DESIGN.md "Events").

Each event is one JSON-serializable dict ``{"seq": int, "type": str, "ts": float, ...payload}`` with
``seq`` counting from 0 without gaps within one compilation and ``ts`` in Unix seconds. This class is
the one place the compiler assigns ``seq``; the payload is checked against
:mod:`compiler.events.schema` before the event exists.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .schema import EVENTS
from .validate import EventSchemaError, check_struct, matches

EventCallback = Callable[[dict[str, Any]], None]

RESERVED_KEYS = ("seq", "type", "ts")

_PAYLOADS = {spec.type: spec.payload for spec in EVENTS}


def check_payload(type: str, payload: dict[str, Any]) -> None:
    """Check one payload against its event type's schema.

    Raises EventSchemaError for an unknown type, a reserved key (``seq``, ``type``, ``ts``), a missing
    or undeclared field or a value of the wrong type, naming the event type and the field's path."""
    cls = _PAYLOADS.get(type)
    if cls is None:
        raise EventSchemaError(f"unknown event type {type!r}; the schema has {sorted(_PAYLOADS)}")
    reserved = set(RESERVED_KEYS) & payload.keys()
    if reserved:
        raise EventSchemaError(f"{type}: the payload may not set {sorted(reserved)}")
    if not matches(payload, cls):
        check_struct(payload, cls, type)  # names the path; raises
        raise EventSchemaError(f"{type}: the payload does not match the schema")  # the two passes disagree


class EventStream:
    """Numbers events and hands each to ``on_event`` synchronously, keeping a copy.

    ``emit(type, **payload)`` checks the payload (:func:`check_payload`; raises EventSchemaError, a
    ValueError, when it does not match the schema), assigns the next ``seq`` and the time, and returns
    the event.
    """

    def __init__(self, on_event: EventCallback | None = None) -> None:
        self._on_event = on_event
        self.events: list[dict[str, Any]] = []

    def emit(self, type: str, **payload: Any) -> dict[str, Any]:
        check_payload(type, payload)
        event = {"seq": len(self.events), "type": type, "ts": time.time(), **payload}
        self.events.append(event)
        if self._on_event is not None:
            self._on_event(event)
        return event

    @property
    def next_seq(self) -> int:
        return len(self.events)
