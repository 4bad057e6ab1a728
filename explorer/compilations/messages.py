"""Names of the messages between the service's parts, in one place.

Channel layer (worker -> consumers of a compilation's group):
    EVENT_MESSAGE  {"type": EVENT_MESSAGE, "seq": int, "event": dict | None}
                   `event` is None when the event is large: the consumer then reads it from the DB.
WebSocket (server -> browser): each text frame is one event, `{"seq","type","ts",...payload}`,
exactly as stored; after the terminal event the server closes with code 1000.
WebSocket close codes: 4400 bad `after` parameter, 4404 unknown compilation.
"""

EVENT_MESSAGE = "compilation.event"
EVENT_HANDLER = "compilation_event"  # Channels maps "compilation.event" to this method name

TERMINAL_EVENT_TYPES = frozenset({"compile.finished", "compile.failed"})

CLOSE_BAD_REQUEST = 4400
CLOSE_NOT_FOUND = 4404

# Events larger than this (JSON bytes) travel through the channel layer as a seq-only hint.
INLINE_EVENT_MAX_BYTES = 256 * 1024


def group_name(compilation_id: str) -> str:
    """The channel-layer group of one compilation's live events."""
    return f"compilation.{compilation_id}"
