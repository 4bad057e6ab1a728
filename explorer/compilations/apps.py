from django.apps import AppConfig


class CompilationsConfig(AppConfig):
    name = "explorer.compilations"
    label = "compilations"
    verbose_name = "Compilations"

    def ready(self) -> None:
        from explorer.compilations import signals  # noqa: F401  (connects Celery worker signals)
