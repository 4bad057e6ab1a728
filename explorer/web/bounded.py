"""Request bodies bounded before they are read, in daphne itself (issue 17 item 2).

Daphne (on twisted.web) receives a request's whole body before it calls the ASGI application, so
`explorer.web.asgi.BodyLimit` alone cannot stop a large one: twisted spools it to a file, then parses
a multipart body in memory (`Request.requestReceived` reads it whole and hands it to the email parser,
several copies of it: gigabytes for a few hundred megabytes), and a request announcing more than it
sends waits for bytes that never come. `BoundedRequest`, the request class daphne builds once
`install()` ran (`explorer.asgi` calls it), instead:

- answers 413 (`{"error": ...}`, `Connection: close`) as soon as the headers announce a
  `Content-Length` over the limit (`PRISM_MAX_UPLOAD_BYTES` plus 64 KiB of multipart framing), or a
  chunked body passes it; the rest of the body is read and dropped, never stored, and the connection
  is closed once it has ended or `LINGER_S` seconds later (closing at once would reset a connection
  whose client is still sending, and it might never read the answer);
- never parses form bodies (Django parses them, streaming multipart parts to disk);
- spools bodies of 100 kB or more to a temporary file, as twisted does, and hands that file to the
  application by reference: daphne itself would read the whole file into its queue to the application
  at once (8 KiB messages, all queued before the application reads the first: a 150 MiB upload held
  in the web server's memory), so the request instead carries an `X-Prism-Spooled-Body` header with a
  random token (one a client sends is removed first), and `explorer.web.asgi.BodyLimit` takes the file
  from `take_spooled` and feeds it to Django 1 MiB a message as Django reads (to its own temporary
  file, then the multipart parser to the upload's temporary file: the body is never in memory whole).
"""

from __future__ import annotations

import io
import json
import logging
import secrets
from typing import IO, Any

from daphne import http_protocol
from django.conf import settings

from explorer.compilations.services.uploads import too_large_message

log = logging.getLogger(__name__)

LINGER_S = 5.0
FRAMING = 64 * 1024  # multipart boundaries and part headers around the file
SPOOLED_HEADER = b"x-prism-spooled-body"
_spooled: dict[str, tuple[IO[bytes], int]] = {}  # token -> (body file at offset 0, size in bytes)


def take_spooled(token: str) -> tuple[IO[bytes], int] | None:
    """The spooled body `(file at offset 0, size)` a request's `X-Prism-Spooled-Body` token names,
    now the caller's to read and close; None for a token this process did not hand out (or gave)."""
    return _spooled.pop(token, None)


def body_limit() -> int:
    return int(settings.PRISM_MAX_UPLOAD_BYTES) + FRAMING


class _Dropped:
    """The body of a refused request: writes are dropped; reads see nothing."""

    closed = False

    def write(self, data: bytes) -> None:
        pass

    def seek(self, *args: Any) -> int:
        return 0

    def tell(self) -> int:
        return 0

    def read(self, *args: Any) -> bytes:
        return b""

    def close(self) -> None:
        self.closed = True


class BoundedRequest(http_protocol.WebRequest):
    """Daphne's request with the body limit of the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parsePOSTFormSubmission = False  # Django parses forms; twisted would read them into memory
        self.refused = False
        self._received = 0

    def gotLength(self, length: int | None) -> None:
        if length is not None and length > body_limit():
            self._refuse(length)
            return
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self.refused:
            return
        self._received += len(data)
        if self._received > body_limit():
            self._refuse(None)
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if self.refused:  # the whole (dropped) body has arrived: the answer is out, close now
            self.channel.transport.loseConnection()
            return
        self.requestHeaders.removeHeader(SPOOLED_HEADER)  # only this server names a spooled body
        if self.content is not None and not isinstance(self.content, io.BytesIO):  # spooled to a file
            self._token = secrets.token_hex(16)
            self.content.seek(0, 0)
            _spooled[self._token] = (self.content, self._received)
            self.requestHeaders.setRawHeaders(SPOOLED_HEADER, [self._token.encode()])
            self.content = io.BytesIO()  # what daphne reads and queues: nothing
        super().requestReceived(command, path, version)

    def connectionLost(self, reason: Any) -> None:
        entry = _spooled.pop(getattr(self, "_token", ""), None)  # the application never took it
        if entry is not None:
            entry[0].close()
        super().connectionLost(reason)

    def _refuse(self, size: int | None) -> None:
        # the reactor daphne installed (asyncio): importing it at module level would install the default one
        from twisted.internet import reactor

        self.refused = True
        old = getattr(self, "content", None)
        if old is not None:
            old.close()
        self.content = _Dropped()
        body = json.dumps({"error": too_large_message(size)}).encode()
        head = (b"HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
        transport = self.channel.transport
        transport.write(head + body)
        reactor.callLater(LINGER_S, transport.loseConnection)
        log.warning("refused a request body of %s bytes from %s: over the limit of %d bytes",
                    size if size is not None else "more than the limit", self.getClientAddress(), body_limit())


def install() -> None:
    """Make daphne build `BoundedRequest`s (its factory looks the request class up at each connection)."""
    http_protocol.WebRequest = BoundedRequest  # type: ignore[misc]
