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

`RateThrottle` (DRF throttle): at most N requests per period per client (the signed-in user, else the
address) and scope, counted in Redis (`<PRISM_STACK>:rate:<scope>:<client>:<window>`, INCR +
EXPIRE: atomic, shared by every web process), answered 429 with `Retry-After` (seconds to the end
of the window). Scopes: `upload` (`PRISM_UPLOAD_RATE`) and `compile` (`PRISM_COMPILE_RATE`). When
Redis cannot be reached the request passes (the limit is a guard against floods, not a lock) with a
warning.
"""

from __future__ import annotations

import logging
import math
import time
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from redis import Redis
from redis.exceptions import RedisError
from rest_framework.exceptions import Throttled
from rest_framework.throttling import BaseThrottle

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


_client: Redis | None = None


def _redis() -> Redis:
    global _client
    if _client is None:
        _client = Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    return _client


class RateThrottle(BaseThrottle):
    """A fixed-window counter per client and `scope` in Redis (see the module docstring). A view
    sets `throttle_scope` to `upload` or `compile`; unsafe methods only."""

    RATES = {"upload": "PRISM_UPLOAD_RATE", "compile": "PRISM_COMPILE_RATE"}

    def allow_request(self, request, view) -> bool:
        if request.method not in UNSAFE_METHODS:
            return True
        scope = view.throttle_scope
        count, window = parse_rate(getattr(settings, self.RATES[scope]))
        user = getattr(request, "user", None)
        who = f"user{user.pk}" if user is not None and user.is_authenticated else self.get_ident(request)
        now = time.time()
        key = f"{settings.PRISM_STACK}:rate:{scope}:{who}:{int(now // window)}"
        try:
            with _redis().pipeline() as pipe:
                used, _ = pipe.incr(key).expire(key, window + 1).execute()
        except (RedisError, OSError) as exc:
            log.warning("rate limit %s not checked (Redis: %s)", scope, exc)
            return True
        self._wait = window - (now % window)
        return int(used) <= count

    def wait(self) -> float:
        return math.ceil(self._wait)


class RateLimited:
    """A view mixin: `RateThrottle` on its unsafe methods, whose 429 names the limit, e.g.
    `too many compile requests: the limit is 30/min per client (PRISM_COMPILE_RATE); retry in 12 s`."""

    throttle_classes = [RateThrottle]
    throttle_scope = "compile"

    def throttled(self, request, wait) -> None:
        var = RateThrottle.RATES[self.throttle_scope]
        raise Throttled(wait, detail=f"too many {self.throttle_scope} requests: the limit is "
                                     f"{getattr(settings, var)} per client ({var}); retry in {math.ceil(wait or 1)} s")
