"""Celery tasks: thin, they take ids and call services."""

from celery import shared_task
from celery.exceptions import Reject
from django.conf import settings

from explorer.compilations.models import Compilation
from explorer.compilations.services.queue import TASK_NAME, dead_letter
from explorer.compilations.services.runs import run_compilation, worker_name
from explorer.compilations.services.tuning_queue import TUNE_TASK_NAME, measure_and_reply


@shared_task(
    bind=True,
    name=TASK_NAME,
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=settings.PRISM_COMPILE_TIME_LIMIT_S,
    soft_time_limit=None,
    ignore_result=True,
)
def run_compilation_task(self, compilation_id: str) -> None:
    """Run compilation `compilation_id` (its public id).

    Idempotent: a compilation may get more than one message (a lost one queued again that turns up
    after all, a redelivery); only the one that claims it (`queued` -> `running`, under its row
    lock, `services.runs.claim`) runs it, the others find it running or finished and return.

    A message for a compilation this stack's database does not hold is not acknowledged as done:
    it is dead-lettered (`services.queue.dead_letter`, a warning naming it) and rejected.

    Time limits: the soft limit (`PRISM_COMPILE_SOFT_TIME_LIMIT_S`) is checked at every event and
    ends the log with a `compile.failed` saying so; Celery's hard limit
    (`PRISM_COMPILE_TIME_LIMIT_S`) kills a run stuck between events. Celery's own soft limit is not
    used: it raises an Exception at an arbitrary point inside the compiler, whose fallback paths
    (`except Exception`) may swallow it or report it as a compile error of their own.
    """
    if not Compilation.objects.filter(pk=compilation_id).exists():
        queue = (self.request.delivery_info or {}).get("routing_key") or ""
        dead_letter(compilation_id, self.request.id or "", queue, worker_name())
        raise Reject(f"no compilation {compilation_id} in stack {settings.PRISM_STACK}", requeue=False)
    run_compilation(compilation_id, soft_limit_s=settings.PRISM_COMPILE_SOFT_TIME_LIMIT_S,
                    node=self.request.hostname or "")


@shared_task(
    bind=True,
    name=TUNE_TASK_NAME,
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=settings.PRISM_TUNE_BATCH_TIMEOUT_S + 60,
    soft_time_limit=None,
    ignore_result=True,
)
def measure_batch_task(self, job_id: str, part_id: str, request: dict) -> None:
    """Measure one batch of tuning candidates for tuning compilation `job_id` and reply on its list
    (`services.tuning_queue`). Runs on a worker serving `prism.tune.<target>`; the candidates run in
    an isolated child, so a crashing candidate costs the batch a new child, never this worker."""
    measure_and_reply(job_id, part_id, request, worker=self.request.hostname or worker_name())
