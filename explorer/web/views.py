"""Pages. Every page URL serves the browser app's built `frontend/dist/index.html`; the app reads
the URL itself. Without a build, a short page says how to build it.

A page of a compilation the requester may not see (`selectors.compilation_for`), or a compare page
with one, is served with status 404, exactly as for an unknown id (the app then says there is no
such compilation). Every page sets Django's CSRF cookie, which the app sends back on writes."""

import re

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import ensure_csrf_cookie

from explorer.compilations import selectors

FALLBACK = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Prism</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 46rem; margin: 3rem auto; line-height: 1.5">
<h1>Prism</h1>
<p>The browser app is not built: <code>frontend/dist/index.html</code> is missing.
Build it with <code>cd frontend &amp;&amp; npm ci &amp;&amp; npm run build</code>
(<code>make run</code> does this), then reload.</p>
<p>The service itself is up: see the API schema at <a href="/api/schema">/api/schema</a>,
the targets at <a href="/api/targets">/api/targets</a> and the samples at
<a href="/api/samples">/api/samples</a>.</p>
</body></html>
"""


def _all_visible(request: HttpRequest, kwargs: dict) -> bool:
    ids = [kwargs["compilation_id"]] if "compilation_id" in kwargs else []
    if "ids" in kwargs:
        ids = [i for i in re.split(r"\.\.\.", kwargs["ids"]) if i]
    return all(selectors.compilation_for(request.user, i) is not None for i in ids)


@ensure_csrf_cookie
def not_found(request: HttpRequest, **kwargs) -> HttpResponse:
    """Any other path (not /api/, /admin/, /assets/, /static/): the app with status 404, so an
    unknown link shows the app's own "No page at ..." page (with its header and a way back)
    instead of Django's plain "Not Found"."""
    return _index(404)


@ensure_csrf_cookie
def spa(request: HttpRequest, **kwargs) -> HttpResponse:
    """`/`, `/signin`, `/signup`, `/account`, `/c/<id>` (and `/summary`, `/kernels`, `/remarks`,
    `/comments`, `/comments/<cid>`), `/c/<id>/pass/<n>`, `/c/<id>/kernel/<name>`, `/c/<id>/graph`,
    `/compare/...`; 404 (the same app) for a compilation the requester may not see."""
    return _index(200 if _all_visible(request, kwargs) else 404)


def _index(status: int) -> HttpResponse:
    index = settings.FRONTEND_DIST / "index.html"
    try:
        html = index.read_text(encoding="utf-8")
    except FileNotFoundError:
        return HttpResponse(FALLBACK, content_type="text/html; charset=utf-8", status=status)
    response = HttpResponse(html, content_type="text/html; charset=utf-8", status=status)
    response["Cache-Control"] = "no-cache"
    return response
