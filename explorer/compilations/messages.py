"""Names of the messages between the service's parts, in one place.

Channel layer (worker -> consumers of a compilation's group):
    EVENT_MESSAGE  {"type": EVENT_MESSAGE, "seq": int, "event": dict | None}
                   `event` is None when the event is large: the consumer then reads it from the DB.
WebSocket (server -> browser): each text frame is one event, `{"seq","type","ts",...payload}`,
exactly as stored (types and payloads: `compiler.events.schema`); after the terminal event
(`compiler.events.TERMINAL_EVENT_TYPES`) the server closes with code 1000.
WebSocket close codes: 4400 bad `after` parameter, 4404 unknown compilation, 4429 too many connections
from this client (`PRISM_WS_CONNECT_RATE`; the reason says when to retry), 4413 the next event
is larger than a WebSocket message may be (`WS_MESSAGE_MAX_BYTES`): the client reads the stored
events from `GET /api/compilations/<id>/events?after=<last seq it holds>` (no size limit) and then
reconnects after the last one it read.
"""

EVENT_MESSAGE = "compilation.event"
EVENT_HANDLER = "compilation_event"  # Channels maps "compilation.event" to this method name

CLOSE_BAD_REQUEST = 4400
CLOSE_NOT_FOUND = 4404
CLOSE_EVENT_TOO_LARGE = 4413
CLOSE_TOO_MANY_REQUESTS = 4429

# The largest WebSocket message the server sends: daphne's --websocket-max-message-size default
# (1 MiB), which autobahn applies to outgoing messages as well (it refuses to send a larger one and
# the connection stalls). A larger event (a kernel's LLVM IR, a 5,000-node fusion graph) is read
# over HTTP instead (CLOSE_EVENT_TOO_LARGE).
WS_MESSAGE_MAX_BYTES = 1024 * 1024

# Events larger than this (JSON bytes) travel through the channel layer as a seq-only hint.
INLINE_EVENT_MAX_BYTES = 256 * 1024


def group_name(compilation_id: str) -> str:
    """The channel-layer group of one compilation's live events."""
    return f"compilation.{compilation_id}"


# Comments and reviews (explorer.review). Channel layer: one group per model (the same bytes), since
# comments carry to every compilation of that model; the message is a hint naming the review-log
# seq, and each socket reads the entry from the database as its requester may see it.
REVIEW_HINT_MESSAGE = "review.hint"
REVIEW_HINT_HANDLER = "review_hint"  # Channels maps "review.hint" to this method name

# WebSocket /ws/compilations/<id>/comments/?after=<seq> (server -> browser): each text frame is
# `{"seq": int, "type": <one of these>, "ts": float, "compilation": <the id the socket is for>,
#   "comment": {...} (comment.*) | "review": {...}, "review_state": {...} (review.created)}`,
# `seq` from the model's review log, increasing, each at most once (entries the requester may not
# see, or that do not concern this compilation, are skipped). The socket stays open.
COMMENT_CREATED = "comment.created"
COMMENT_UPDATED = "comment.updated"  # edited, resolved or reopened
COMMENT_DELETED = "comment.deleted"
REVIEW_CREATED = "review.created"
REVIEW_MESSAGE_TYPES = (COMMENT_CREATED, COMMENT_UPDATED, COMMENT_DELETED, REVIEW_CREATED)


def review_group_name(model_sha256: str) -> str:
    """The channel-layer group of one model's comment and review hints."""
    return f"review.{model_sha256}"
