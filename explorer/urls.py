"""URL map: /api/ (JSON), /admin/, and the browser app's pages. WebSocket routes live in
`explorer.compilations.routing`; /assets/ and /static/ are served by WhiteNoise."""

from django.contrib import admin
from django.urls import include, path, re_path

from explorer.web.views import not_found, spa

urlpatterns = [
    path("api/", include("explorer.accounts.urls")),
    path("api/", include("explorer.review.urls")),
    path("api/", include("explorer.compilations.api.urls")),  # last: its catch-all JSON 404
    path("admin/", admin.site.urls),
    path("", spa),
    path("signin", spa),
    path("signup", spa),
    path("account", spa),
    path("c/<str:compilation_id>", spa),
    path("c/<str:compilation_id>/pass/<int:index>", spa),
    path("c/<str:compilation_id>/summary", spa),
    path("c/<str:compilation_id>/kernels", spa),
    path("c/<str:compilation_id>/remarks", spa),
    path("c/<str:compilation_id>/kernel/<path:kernel>", spa),
    path("c/<str:compilation_id>/graph", spa),
    path("c/<str:compilation_id>/comments", spa),
    path("c/<str:compilation_id>/comments/<int:comment_id>", spa),
    re_path(r"^compare/(?P<ids>[\w.]+)$", spa),
    re_path(r"^(?!(?:api|admin|assets|static|ws)(?:/|$))", not_found),  # last: the app's own 404 page
]
