"""A tuning compilation's run (issue 16): search first, then compile with what was found.

A compilation asked with `tune_budget_s` (kept as `options["tune_budget_s"]`) is one event log:
the search's events (`tune.started`, one `tune.progress` per measured batch, `tune.finished`), then
the compilation's own (`compile.started` ... `compile.finished`), compiled with the tuning database
so that its kernels take the schedules just found (and any found before, by anyone). The search is
`compiler.tune.search.tune_model` with the explorer's seams: the database (`tuning_db`), the
measurer that fans batches out to the workers (`tuning_queue.CeleryMeasurer`), and the stop flag
that POST /api/compilations/<id>/tuning/stop sets (`tuning_queue.StopRequested`); stopping ends the
search after the batch in flight and keeps every record found, and the compilation goes on.

Time limits grow by the budget: the run's soft and hard limits are those of a compilation plus
`tune_budget_s` (`extra_time_s`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from compiler.errors import one_line
from compiler.events import check_payload
from compiler.tune.search import tune_model
from explorer.compilations.models import Compilation
from explorer.compilations.services.queue import extra_time as extra_time_s
from explorer.compilations.services.tuning_db import DjangoTuningDatabase
from explorer.compilations.services.tuning_queue import CeleryMeasurer, StopRequested

log = logging.getLogger(__name__)

__all__ = ["extra_time_s", "tune"]


def tune(comp: Compilation, db: DjangoTuningDatabase, on_event: Callable[[dict], None], own_node: str = "") -> int:
    """Run the search of tuning compilation `comp`, its events through `on_event` (`own_node`: the
    Celery node running it, `tuning_queue.workers_serving`); returns how many
    events it emitted (the compile's events are numbered after them). A search that fails is logged
    and ended in the log with a `tune.finished` carrying `error` (unless it had ended already); the
    compilation goes on with the records it found."""
    emitted = 0
    ended = False

    def counted(event: dict) -> None:
        nonlocal emitted, ended
        on_event(event)
        emitted += 1
        ended = ended or event.get("type") == "tune.finished"

    measurer = CeleryMeasurer(comp.id, comp.target, own_node)
    kwargs: dict[str, Any] = {}
    if comp.options.get("threads"):
        kwargs["threads"] = comp.options["threads"]
    try:
        tune_model(
            comp.model.file.path, target=comp.target, budget_s=float(comp.options["tune_budget_s"]), database=db,
            measurer=measurer, stop=StopRequested(comp.id), on_event=counted,
            input_shapes=comp.input_shapes or None, pipeline=comp.pipeline, **kwargs,
        )
    except Exception as exc:  # noqa: BLE001 - the compilation still runs, with the database as it is
        log.exception("tuning of compilation %s failed; compiling with the records found", comp.id)
        if not ended:  # the log says why the search ended (tune.finished.error), the browser shows it
            payload = {"trials": 0, "duration_s": 0.0, "stopped": False, "reason": "error", "database": db.name, "tuned": [],
                       "error": one_line(f"the search could not run: {exc}")}
            check_payload("tune.finished", payload)
            counted({"seq": emitted, "type": "tune.finished", "ts": time.time(), **payload})
    finally:
        measurer.close()
    return emitted
