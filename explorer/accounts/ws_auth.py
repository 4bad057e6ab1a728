"""WebSocket authentication: the browser's session cookie (Channels' `AuthMiddlewareStack`), or
for scripts the same `Authorization: Token <key>` header as the HTTP API."""

from __future__ import annotations

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser
from rest_framework.authtoken.models import Token


@database_sync_to_async
def _token_user(key: str):
    token = Token.objects.select_related("user").filter(key=key).first()
    return token.user if token is not None and token.user.is_active else None


class TokenAuthMiddleware:
    """Sets `scope["user"]` from an `Authorization: Token <key>` header when one is sent (an
    unknown key leaves the requester anonymous); otherwise keeps the session's user."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        keyword, _, key = header.partition(" ")
        if keyword == "Token" and key.strip():
            user = await _token_user(key.strip())
            scope = {**scope, "user": user or AnonymousUser()}
        return await self.app(scope, receive, send)


def ws_auth(app):
    """`app` behind session and token authentication."""
    return AuthMiddlewareStack(TokenAuthMiddleware(app))
