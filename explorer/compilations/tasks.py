"""Celery tasks: thin, they take ids and call services."""

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from explorer.compilations.services.compilations import run_compilation


@shared_task(
    name="prism.run_compilation",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    ignore_result=True,
)
def run_compilation_task(compilation_id: str) -> None:
    """Run compilation `compilation_id` (its public id). Hard limit `PRISM_COMPILE_TIME_LIMIT_S`;
    the soft limit just before it ends the log with a `compile.failed` saying so."""
    run_compilation(
        compilation_id,
        soft_limit_s=settings.CELERY_TASK_SOFT_TIME_LIMIT,
        soft_limit_exc=SoftTimeLimitExceeded,
    )
