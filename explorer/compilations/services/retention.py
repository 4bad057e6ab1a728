"""Deleting compilations and models: by their owner (the API's DELETE) and by age (retention).

A compilation is deleted with everything it holds: its event log, comments, reviews and review log
(the foreign keys cascade) and its artifacts folder (`PRISM_VAR_DIR/artifacts/<id>/`). A model's
bytes (its row and stored file) go once nothing uses them: no compilation and no upload left.
Only finished compilations are deleted: a queued or running one still has a worker writing to it.

Retention (`prune`, `manage.py prune`, and the workers' reaper once an hour when
`PRISM_RETENTION_DAYS` > 0): finished compilations created more than N days ago, then uploads older
than that, then the models nothing uses any more, calibration files no compilation names, and
artifacts folders whose compilation no longer exists (left by a deletion that ended half-way).
"""

from __future__ import annotations

import logging
import shutil
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from explorer.compilations.models import Compilation, ModelUpload, UploadedModel
from explorer.compilations.services import artifacts

log = logging.getLogger(__name__)
FINISHED = (Compilation.Status.SUCCEEDED, Compilation.Status.FAILED)


class StillRunning(Exception):
    """The compilation is queued or running: it cannot be deleted yet."""


def delete_model_if_unused(model_id: int) -> bool:
    """Delete a model's row and stored file when no compilation and no upload uses it; True if so."""
    with transaction.atomic():
        model = UploadedModel.objects.select_for_update().filter(pk=model_id).first()
        if model is None or model.compilations.exists() or model.uploads.exists():
            return False
        name = model.file.name
        model.delete()
    if name:
        (Path(settings.MEDIA_ROOT) / name).unlink(missing_ok=True)
    return True


def delete_compilation(comp: Compilation) -> None:
    """Delete a finished compilation with its events, comments and reviews, and its model's bytes
    when nothing else uses them. Raises StillRunning when it is queued or running."""
    with transaction.atomic():
        locked = Compilation.objects.select_for_update().filter(pk=comp.pk).first()
        if locked is None:
            return
        if locked.status not in FINISHED:
            raise StillRunning(f"compilation {comp.pk} is {locked.status}: delete it once it has finished")
        model_id = locked.model_id
        locked.delete()
    shutil.rmtree(artifacts.folder(comp.pk), ignore_errors=True)
    delete_model_if_unused(model_id)


def delete_upload(model: UploadedModel, owner) -> bool:
    """Delete `owner`'s uploads of a model (its listing entry) and the model's bytes when nothing
    else uses them; False when `owner` has no upload of it."""
    deleted, _ = ModelUpload.objects.filter(model=model, owner=owner).delete()
    if deleted:
        delete_model_if_unused(model.pk)
    return bool(deleted)


def prune(days: int, now=None) -> dict[str, int]:
    """Delete what is older than `days` days (see the module docstring); returns the counts
    `{"compilations", "uploads", "models", "calibrations", "artifacts"}` (artifacts: orphaned folders)."""
    cutoff = (now or timezone.now()) - timedelta(days=days)
    counts = {"compilations": 0, "uploads": 0, "models": 0, "calibrations": 0, "artifacts": 0}
    old = Compilation.objects.filter(created_at__lt=cutoff, status__in=FINISHED)
    for comp in old.iterator():
        try:
            delete_compilation(comp)
            counts["compilations"] += 1
        except StillRunning:
            pass
    counts["uploads"], _ = ModelUpload.objects.filter(created_at__lt=cutoff).delete()
    for model_id in UploadedModel.objects.filter(created_at__lt=cutoff).values_list("pk", flat=True):
        counts["models"] += delete_model_if_unused(model_id)
    counts["calibrations"] = _prune_calibrations(cutoff)
    counts["artifacts"] = _prune_orphan_artifacts()
    if any(counts.values()):
        log.info("retention (%d days): deleted %s", days, counts)
    return counts


def _prune_calibrations(cutoff) -> int:
    folder = Path(settings.MEDIA_ROOT) / "calibration"
    if not folder.is_dir():
        return 0
    named = {str(o.get("calibration")) for o in Compilation.objects.values_list("options", flat=True)
             if isinstance(o, dict) and o.get("calibration")}
    removed = 0
    for f in folder.glob("*.npz"):
        if f.stem not in named and f.stat().st_mtime < cutoff.timestamp():
            f.unlink(missing_ok=True)
            removed += 1
    return removed


def _prune_orphan_artifacts() -> int:
    if not artifacts.root().is_dir():
        return 0
    folders = {d.name: d for d in artifacts.root().iterdir() if d.is_dir()}
    alive = set(Compilation.objects.filter(pk__in=list(folders)).values_list("pk", flat=True))
    for name in folders.keys() - alive:
        shutil.rmtree(folders[name], ignore_errors=True)
    return len(folders.keys() - alive)
