"""The event stream, the seam between the compiler, the service and the browser (DESIGN.md "Events").

- :mod:`.schema`: every event type, its payload fields, the stages and the terminal types, defined once;
- :mod:`.stream`: :class:`EventStream`, which validates each payload and assigns ``seq``;
- :mod:`.validate`: the structural check (:class:`EventSchemaError`);
- :mod:`.typescript`: ``python -m compiler.events.typescript`` prints ``frontend/src/events.generated.ts``.
"""

from __future__ import annotations

from .schema import EVENTS, FAILURE_STAGES, SERVICE_FAILURE_STAGES, STAGE_KEYS
from .stream import RESERVED_KEYS, EventCallback, EventStream, check_payload
from .validate import EventSchemaError

#: every event type, in the order a compilation emits them
EVENT_TYPES: tuple[str, ...] = tuple(spec.type for spec in EVENTS)

#: the types that end a stream (exactly one per compilation)
TERMINAL_EVENT_TYPES: frozenset[str] = frozenset(spec.type for spec in EVENTS if spec.terminal)

#: the ``stage_ms`` key of the stage each non-terminal event type is emitted in
EVENT_STAGE: dict[str, str] = {spec.type: spec.stage for spec in EVENTS if spec.stage is not None}

__all__ = ["EVENTS", "EVENT_STAGE", "EVENT_TYPES", "FAILURE_STAGES", "RESERVED_KEYS", "SERVICE_FAILURE_STAGES",
           "STAGE_KEYS", "TERMINAL_EVENT_TYPES", "EventCallback", "EventSchemaError", "EventStream", "check_payload"]
