"""URL map: /api/ (JSON), /admin/, and the browser app's pages. WebSocket routes live in
`explorer.compilations.routing`; /assets/ and /static/ are served by WhiteNoise."""

from django.contrib import admin
from django.urls import include, path, re_path

from explorer.web.views import spa

urlpatterns = [
    path("api/", include("explorer.compilations.api.urls")),
    path("admin/", admin.site.urls),
    path("", spa),
    path("c/<str:compilation_id>", spa),
    path("c/<str:compilation_id>/pass/<int:index>", spa),
    path("c/<str:compilation_id>/summary", spa),
    path("c/<str:compilation_id>/kernels", spa),
    path("c/<str:compilation_id>/remarks", spa),
    path("c/<str:compilation_id>/kernel/<path:kernel>", spa),
    path("c/<str:compilation_id>/graph", spa),
    re_path(r"^compare/(?P<ids>[\w.]+)$", spa),
]
