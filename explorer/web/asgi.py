"""ASGI wrappers in front of Django and Channels."""

import json

from channels.security.websocket import OriginValidator
from django.conf import settings


class BodyLimit:
    """Answer 413 at once to an HTTP request whose Content-Length is over the upload limit
    (`PRISM_MAX_UPLOAD_BYTES` plus 64 KiB of multipart framing), before its body is read."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            length = dict(scope.get("headers") or []).get(b"content-length", b"0")
            limit = int(settings.PRISM_MAX_UPLOAD_BYTES)
            if length.isdigit() and int(length) > limit + 64 * 1024:
                from explorer.compilations.services.uploads import too_large_message

                body = json.dumps({"error": too_large_message(int(length))}).encode()
                await send({"type": "http.response.start", "status": 413,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode()),
                                        (b"connection", b"close")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


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
