from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView

from explorer.compilations.api import artifacts, tuning, views

urlpatterns = [
    path("models", views.ModelUploadView.as_view()),
    path("models/<str:sha256>", views.ModelDetailView.as_view()),
    path("calibrations", views.CalibrationUploadView.as_view()),
    path("compilations", views.CompilationListView.as_view()),
    path("compilations/<str:compilation_id>", views.CompilationDetailView.as_view()),
    path("compilations/<str:compilation_id>/events", views.CompilationEventsView.as_view()),
    path("compilations/<str:compilation_id>/tuning", tuning.TuningView.as_view()),
    path("compilations/<str:compilation_id>/tuning/stop", tuning.TuningStopView.as_view()),
    path("compilations/<str:compilation_id>/artifacts", artifacts.ArtifactListView.as_view()),
    path("compilations/<str:compilation_id>/artifacts/<str:name>", artifacts.ArtifactView.as_view()),
    path("targets", views.TargetsView.as_view()),
    path("passes", views.PassesView.as_view()),
    path("pipelines", views.PipelinesView.as_view()),
    path("pipelines/validate", views.PipelineValidateView.as_view()),
    path("samples", views.SampleListView.as_view()),
    path("samples/<str:name>/model", views.SampleModelView.as_view()),
    path("health", views.HealthView.as_view()),
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    re_path(r"", views.NotFoundView.as_view()),  # last: a JSON 404 for any other /api/ path
]
