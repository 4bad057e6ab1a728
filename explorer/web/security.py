"""Cross-site protection, the Content-Security-Policy of the app's pages, and per-client rate limits.

`CrossOriginProtection` (middleware): a state-changing request (POST, PUT, PATCH, DELETE) that a
browser sent from another site is refused with 403, whatever its authentication: the browser says
where a request comes from in `Sec-Fetch-Site` (every current browser) and `Origin` (on every
cross-origin POST), and a page elsewhere cannot send it without them, nor change them. A request
with neither header is not a browser's (curl, scripts) and passes; so does one with
`Authorization: Token ...` (the API's scripts: a page elsewhere cannot add that header without a CORS
preflight, which this server never grants). The same rule as Go's `http.CrossOriginProtection`;
Django's CSRF token check still guards the admin and session-authenticated DRF views.

`ContentSecurityPolicy` (middleware): every HTML response gets `PRISM_CSP` (`{host}` replaced by the
request's host) unless it has one.

Rate limits (`take`): at most N requests per period per client (the signed-in user, else the
address) and scope, counted in Redis (`<PRISM_STACK>:rate:<scope>:<client>:<window>`, INCR +
EXPIRE: atomic, shared by every web process). Scopes (`RATES`): `upload` (`PRISM_UPLOAD_RATE`),
`compile` (`PRISM_COMPILE_RATE`), `comment` (`PRISM_COMMENT_RATE`: comments and reviews, their edits
and deletions) for HTTP, answered 429 with `Retry-After` (seconds to the end of the window) by the
`RateThrottle` DRF throttle; and `connect` (`PRISM_WS_CONNECT_RATE`) for WebSocket connections,
which `refuse_flood` closes with 4429 (`messages.CLOSE_TOO_MANY_REQUESTS`) and the same message as
the close reason. When Redis cannot be reached the request passes (the limit is a guard against
floods, not a lock) with a warning.
"""

from __future__ import annotations

import logging
import math
import time
from urllib.parse import urlsplit

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from redis import Redis
from redis.exceptions import RedisError
from rest_framework.exceptions import Throttled
from rest_framework.throttling import BaseThrottle

from explorer.compilations.messages import CLOSE_TOO_MANY_REQUESTS

log = logging.getLogger(__name__)

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def cross_site_problem(request: HttpRequest) -> str | None:
    """Why this state-changing request is a cross-site one a browser sent, or None when it is not."""
    if request.method not in UNSAFE_METHODS:
        return None
    if request.META.get("HTTP_AUTHORIZATION", "").startswith("Token "):
        return None
    site = request.META.get("HTTP_SEC_FETCH_SITE", "")
    if site:
        if site in ("same-origin", "none"):  # none: typed by the user, a bookmark
            return None
        return f"Sec-Fetch-Site is {site!r}"
    origin = request.META.get("HTTP_ORIGIN", "")
    if not origin:
        return None  # not a browser
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return None
    parts = urlsplit(origin)
    if parts.scheme in ("http", "https") and parts.netloc == request.get_host():
        return None
    return f"Origin {origin} is not this server"


class CrossOriginProtection:
    """Middleware: 403 `{"error": ...}` for a state-changing request a browser sent from another
    site (`cross_site_problem`)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        problem = cross_site_problem(request)
        if problem is not None:
            log.warning("refused a cross-site %s %s: %s", request.method, request.path, problem)
            return JsonResponse({"error": f"cross-site request refused: {problem}; send it from this "
                                          "server's own pages, or with an API token"}, status=403)
        return self.get_response(request)


class ContentSecurityPolicy:
    """Middleware: the `Content-Security-Policy` header (`PRISM_CSP`) on every HTML response."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html") and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.PRISM_CSP.replace("{host}", request.get_host())
        return response


def parse_rate(rate: str) -> tuple[int, int]:
    """`"30/min"` -> `(30, 60)`: requests and the window in seconds (`s`, `m`, `h`, `d` prefixes)."""
    count, _, period = rate.partition("/")
    return int(count), PERIODS[period.strip()[:1]]


RATES = {"upload": "PRISM_UPLOAD_RATE", "compile": "PRISM_COMPILE_RATE", "comment": "PRISM_COMMENT_RATE",
         "connect": "PRISM_WS_CONNECT_RATE"}
WHAT = {"upload": "upload requests", "compile": "compile requests", "comment": "comment requests",
        "connect": "WebSocket connections"}

_client: Redis | None = None


def _redis() -> Redis:
    global _client
    if _client is None:
        _client = Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    return _client


def take(scope: str, who: str) -> float | None:
    """Count one request of client `who` (`user<pk>` or an address) in `scope` (a key of `RATES`):
    None while within the limit, else the seconds until the window ends (when it may retry)."""
    count, window = parse_rate(getattr(settings, RATES[scope]))
    now = time.time()
    key = f"{settings.PRISM_STACK}:rate:{scope}:{who}:{int(now // window)}"
    try:
        with _redis().pipeline() as pipe:
            used, _ = pipe.incr(key).expire(key, window + 1).execute()
    except (RedisError, OSError) as exc:
        log.warning("rate limit %s not checked (Redis: %s)", scope, exc)
        return None
    return None if int(used) <= count else window - (now % window)


def limit_message(scope: str, wait: float | None) -> str:
    """E.g. `too many compile requests: the limit is 30/min per client (PRISM_COMPILE_RATE); retry in 12 s`."""
    return (f"too many {WHAT[scope]}: the limit is {getattr(settings, RATES[scope])} per client "
            f"({RATES[scope]}); retry in {math.ceil(wait or 1)} s")


class RateThrottle(BaseThrottle):
    """`take` for a DRF view (see the module docstring): the view sets `throttle_scope` to `upload`,
    `compile` or `comment`; unsafe methods only."""

    def allow_request(self, request, view) -> bool:
        if request.method not in UNSAFE_METHODS:
            return True
        user = getattr(request, "user", None)
        who = f"user{user.pk}" if user is not None and user.is_authenticated else self.get_ident(request)
        self._wait = take(view.throttle_scope, who)
        return self._wait is None

    def wait(self) -> float:
        return math.ceil(self._wait or 1)


class RateLimited:
    """A view mixin: `RateThrottle` on its unsafe methods, whose 429 names the limit (`limit_message`)."""

    throttle_classes = [RateThrottle]
    throttle_scope = "compile"

    def throttled(self, request, wait) -> None:
        raise Throttled(wait, detail=limit_message(self.throttle_scope, wait))


def ws_client(scope: dict) -> str:
    """Who opened a WebSocket, as `take` counts it: `user<pk>` when signed in, else the address
    (the client's, or with `PRISM_NUM_PROXIES` > 0 the one that many hops back in X-Forwarded-For,
    as DRF's `get_ident` reads it for HTTP)."""
    user = scope.get("user")
    if user is not None and getattr(user, "is_authenticated", False):
        return f"user{user.pk}"
    proxies = int(settings.REST_FRAMEWORK.get("NUM_PROXIES") or 0)
    forwarded = dict(scope.get("headers") or []).get(b"x-forwarded-for", b"").decode("latin-1")
    if proxies > 0 and forwarded:
        hops = [a.strip() for a in forwarded.split(",")]
        return hops[-min(proxies, len(hops))]
    client = scope.get("client") or ("unknown", 0)
    return str(client[0])


async def refuse_flood(consumer: AsyncWebsocketConsumer) -> bool:
    """Count this connection in the `connect` scope; over the limit, close the (accepted) socket with
    4429 and `limit_message` as the reason and return True."""
    wait = await sync_to_async(take)("connect", ws_client(consumer.scope))
    if wait is None:
        return False
    log.warning("refused a WebSocket connection to %s: over PRISM_WS_CONNECT_RATE", consumer.scope.get("path"))
    await consumer.close(code=CLOSE_TOO_MANY_REQUESTS, reason=limit_message("connect", wait))
    return True
