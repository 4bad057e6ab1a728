"""Stopping a compilation's tuning (POST /api/compilations/<id>/tuning/stop; the caller checked that
the requester may manage it). The search polls the flag between batches (`tuning_queue.StopRequested`)
and ends keeping what it found; the compilation then compiles with those records."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from explorer.compilations.models import Compilation, CompilationEvent


class NotTuning(Exception):
    """The compilation was not asked to tune."""


class TuningOver(Exception):
    """The compilation's tuning has ended (its search finished or the compilation did)."""


def request_stop(comp: Compilation) -> None:
    """Ask the search of tuning compilation `comp` to stop (idempotent while it runs: a second request
    keeps the first time). Raises NotTuning for a compilation without `tune_budget_s`, TuningOver once its
    `tune.finished` is in the log or the compilation has finished."""
    if not comp.options.get("tune_budget_s"):
        raise NotTuning(f"compilation {comp.id} is not tuning (it was submitted without tune_budget_s)")
    with transaction.atomic():
        row = Compilation.objects.select_for_update().get(pk=comp.pk)
        over = row.status in (Compilation.Status.SUCCEEDED, Compilation.Status.FAILED) or \
            CompilationEvent.objects.filter(compilation_id=comp.pk, type="tune.finished").exists()
        if over:
            raise TuningOver(f"the tuning of compilation {comp.id} is over (compilation {row.status}); "
                             "nothing to stop")
        if row.tune_stop_requested_at is None:
            row.tune_stop_requested_at = timezone.now()
            row.save(update_fields=["tune_stop_requested_at"])
        comp.tune_stop_requested_at = row.tune_stop_requested_at
