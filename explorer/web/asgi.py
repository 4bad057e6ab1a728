"""ASGI wrappers in front of Django and Channels."""

import json
import tempfile

from channels.security.websocket import OriginValidator
from django.conf import settings

from explorer.compilations.services.uploads import too_large_message
from explorer.web import bounded


class BodyLimit:
    """Answer 413 at once to an HTTP request whose Content-Length is over the upload limit
    (`PRISM_MAX_UPLOAD_BYTES` plus 64 KiB of multipart framing), before its body is read.

    A request without Content-Length (a chunked body: `curl -F model=@/dev/null`, a streamed upload)
    is read here, up to the same limit, and handed on with its Content-Length: Django parses a form
    or multipart body only as far as Content-Length says, so it would otherwise see no fields at all.

    Under daphne a body of 100 kB or more arrives by reference (`explorer.web.bounded`: its
    `X-Prism-Spooled-Body` token names the file daphne spooled it to) and is handed to Django from
    that file, 1 MiB a message as Django reads it.
    """

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            limit = int(settings.PRISM_MAX_UPLOAD_BYTES) + 64 * 1024
            length = headers.get(b"content-length")
            token = headers.get(bounded.SPOOLED_HEADER)
            spooled = bounded.take_spooled(token.decode("latin-1")) if token else None
            if token is not None:
                kept = [(k, v) for k, v in scope.get("headers") or [] if k != bounded.SPOOLED_HEADER]
                scope = {**scope, "headers": kept}
            if spooled is not None:
                body, size = spooled
                try:
                    if length is None:
                        scope = {**scope, "headers": [*scope["headers"], (b"content-length", str(size).encode())]}
                    return await self.app(scope, _replay(body, size, _after_body(receive)), send)
                finally:
                    body.close()
            if length is None:
                try:
                    buffered = await _read_body(receive, limit)
                except _ClientGone:
                    return None
                if buffered is None:
                    return await _too_large(send, None)
                body, size = buffered
                scope = {**scope, "headers": [*(scope.get("headers") or []),
                                              (b"content-length", str(size).encode())]}
                receive = _replay(body, size, receive)
            elif length.isdigit() and int(length) > limit:
                return await _too_large(send, int(length))
        await self.app(scope, receive, send)


class _ClientGone(Exception):
    """The client disconnected before it sent the whole body."""


async def _read_body(receive, limit: int):
    """The whole request body as `(spooled file at offset 0, size)`, or None past `limit` bytes;
    raises _ClientGone when the client disconnects first."""
    body = tempfile.SpooledTemporaryFile(max_size=1 << 20)
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            body.close()
            raise _ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            body.close()
            return None
        body.write(chunk)
        if not message.get("more_body", False):
            body.seek(0)
            return body, size


def _after_body(receive):
    """`receive` without daphne's own (empty) body message of a request whose body was spooled:
    what comes after the body (the client's disconnect)."""

    async def rest():
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return message

    return rest


def _replay(body, size: int, receive):
    """An ASGI `receive` that hands out `body` (`size` bytes) again, 1 MiB a message, then defers to
    `receive` (for the client's disconnect)."""
    sent = 0
    done = False

    async def replayed():
        nonlocal sent, done
        if done:
            return await receive()
        chunk = body.read(1 << 20)
        sent += len(chunk)
        if sent >= size:
            done = True
            body.close()
        return {"type": "http.request", "body": chunk, "more_body": not done}

    return replayed


async def _too_large(send, size: int | None) -> None:
    body = json.dumps({"error": too_large_message(size)}).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class OriginCheck(OriginValidator):
    """Browsers must connect from an allowed host (no cross-site WebSocket hijacking); clients
    that send no Origin header (curl, scripts) are not browsers and are let through."""

    def __init__(self, app) -> None:
        super().__init__(app, settings.ALLOWED_HOSTS)

    def valid_origin(self, parsed_origin) -> bool:
        if parsed_origin is None:
            return True
        if "*" in self.allowed_origins:
            return True
        return self.validate_origin(parsed_origin)
