"""Pages. Every page URL serves the browser app's built `frontend/dist/index.html`; the app reads
the URL itself. Without a build, a short page says how to build it."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse

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


def spa(request: HttpRequest, **kwargs) -> HttpResponse:
    """`/`, `/c/<id>` (and `/summary`, `/kernels`, `/remarks`), `/c/<id>/pass/<n>`, `/c/<id>/kernel/<name>`,
    `/c/<id>/graph`, `/compare/...`."""
    index = settings.FRONTEND_DIST / "index.html"
    try:
        html = index.read_text(encoding="utf-8")
    except FileNotFoundError:
        return HttpResponse(FALLBACK, content_type="text/html; charset=utf-8")
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    return response
