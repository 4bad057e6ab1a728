"""The tuning database in the explorer's database (issue 16): `compiler.tune.database`'s
`TuningDatabase` seam on the `TuningRecord` table, shared by every compilation of every user.

A compilation (tuning or not) compiles with `DjangoTuningDatabase(compilation_id)`: every kernel
whose workload (kernel signature and machine kind, `compiler.tune.workload`) has a record gets the
best one's schedule, whoever found it. Tuning adds records through `add`, with the compilation
(and its owner) as provenance. The workload keys a compilation looked up are kept on it
(`Compilation.tuning_workloads`), so that the result cache can tell when a newer record makes a
stored result stale (`last_record_at`).

Record format (the compiler's, one JSON object): `{"version": 1, "workload", "desc", "target",
"triple", "cpu", "features", "trace", "median_us", "default_us", "trials", "threads",
"compiler_version", "ts"}`; `best` adds `"record_id"`, `"compilation"` (the finder's public id) and
`"this_run"` (found by the compilation this database serves: the kernels pane's "this run") to what
it returns. Semantics: tune-api.md (compiler side), TVM MetaSchedule's `Database`
(`commit_tuning_record`, `get_top_k`).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db.models import ExpressionWrapper, F, FloatField, Max

from explorer.compilations.models import Compilation, TuningRecord

log = logging.getLogger(__name__)

REQUIRED = ("workload", "triple", "trace", "median_us", "default_us")


class InvalidRecord(ValueError):
    """A record that cannot be stored; the message names the field and what is wrong."""


def check_record(record: dict) -> None:
    """Raise InvalidRecord unless `record` has the required fields (`REQUIRED`), a JSON-object
    trace, and finite positive `median_us` and `default_us` (µs); a `status` other than "ok" (a mismatch, a crash)
    is refused too: only a candidate whose outputs matched the default schedule's is ever stored."""
    if not isinstance(record, dict):
        raise InvalidRecord(f"a tuning record is a JSON object, got {type(record).__name__}")
    missing = [k for k in REQUIRED if record.get(k) in (None, "")]
    if missing:
        raise InvalidRecord(f"tuning record for workload {record.get('workload')!r}: missing {', '.join(missing)}")
    if not isinstance(record["trace"], dict):
        raise InvalidRecord(f"tuning record {record['workload']}: trace must be an object, got "
                            f"{type(record['trace']).__name__}")
    for name in ("median_us", "default_us"):
        t = record[name]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise InvalidRecord(f"tuning record {record['workload']}: {name} must be a positive number of µs, got {t!r}")
    if record.get("status", "ok") != "ok":
        raise InvalidRecord(f"tuning record {record['workload']}: status {record['status']!r} is not stored "
                            "(only candidates whose outputs matched the default schedule's)")


def as_record(row: TuningRecord) -> dict[str, Any]:
    """A row in the compiler's record format (`compiler.tune.database`)."""
    return {
        "version": 1, "workload": row.workload_key, "desc": row.workload, "kernel": row.kernel,
        "target": row.target, "triple": row.triple, "cpu": row.cpu, "features": row.features,
        "trace": row.trace, "median_us": row.median_us, "default_us": row.default_us, "trials": row.trials,
        "threads": row.threads, "compiler_version": row.compiler_version,
        "ts": row.created_at.timestamp() if row.created_at else None,
    }


def ranked(rows: Any) -> Any:
    """`rows` annotated with `ratio` = median_us / default_us, how records rank (the compiler's
    `compiler.tune.database.speed_ratio`: medians measured at different moments of a shared machine
    are not comparable, the ratio to the default timed in alternation in the same child is); a
    record without `default_us` ranks last."""
    return rows.annotate(ratio=ExpressionWrapper(F("median_us") / F("default_us"), output_field=FloatField()))


def _machine(target: Any) -> dict[str, str]:
    """The machine-kind fields of a `compiler.targets.Target` (or of a record dict)."""
    get = target.get if isinstance(target, dict) else lambda k, d="": getattr(target, k, d)
    return {"triple": str(get("triple", "") or ""), "cpu": str(get("cpu", "") or ""),
            "features": str(get("features", "") or "")}


class DjangoTuningDatabase:
    """`TuningDatabase` (`best`, `add`, `records`) on the `TuningRecord` table.

    Args:
        compilation_id: the compilation this database serves: records it adds name it (and its
            owner) as their finder, and the workloads it looks up are saved on it by `flush`.
            None: a read/write view with no provenance (tests, a management command).
    Thread-safe: the compiler may look up kernels from several threads (each has its own database
    connection in Django). `name` is how the compiler's events name it (`tune.applied.database`,
    a record's source); `label` how a sentence does (`tune.applied.message`).
    """

    name = "explorer"
    label = "this server's tuning database"

    def __init__(self, compilation_id: str | None = None) -> None:
        self.compilation_id = compilation_id
        self._looked_up: set[str] = set()
        self._lock = threading.Lock()
        self.hits = 0
        self.added = 0

    def best(self, workload: str, target: Any) -> dict[str, Any] | None:
        """The best record (lowest median_us / default_us: `ranked`) of `workload` on `target`'s
        machine kind (same triple, CPU and features), or None. The returned dict is the compiler's record format plus `record_id`
        and `compilation` (the public id of the compilation whose tuning found it, or None)."""
        with self._lock:
            self._looked_up.add(str(workload))
        row = (ranked(TuningRecord.objects.filter(workload_key=str(workload), **_machine(target)))
               .order_by(F("ratio").asc(nulls_last=True), "created_at").first())
        if row is None:
            return None
        with self._lock:
            self.hits += 1
        return {**as_record(row), "record_id": row.pk, "compilation": row.compilation_id,
                "this_run": bool(self.compilation_id) and row.compilation_id == self.compilation_id}

    def add(self, record: dict) -> None:
        """Store a measured schedule when its median_us / default_us is below the best record's of its
        workload on its machine kind (`ranked`: the database keeps the best per workload and machine;
        a slower or equal one is dropped). Raises InvalidRecord for a record that is not valid (`check_record`)."""
        check_record(record)
        machine = _machine(record)
        current = (ranked(TuningRecord.objects.filter(workload_key=record["workload"], **machine))
                   .order_by(F("ratio").asc(nulls_last=True)).values_list("ratio", flat=True).first())
        if current is not None and current <= float(record["median_us"]) / float(record["default_us"]):
            return
        comp = (Compilation.objects.filter(pk=self.compilation_id).only("id", "owner_id").first()
                if self.compilation_id else None)
        TuningRecord.objects.create(
            workload_key=record["workload"], workload=record.get("desc") or {}, kernel=str(record.get("kernel") or ""),
            target=str(record.get("target") or ""), **machine, trace=record["trace"],
            median_us=float(record["median_us"]), default_us=_float_or_none(record.get("default_us")),
            trials=int(record.get("trials") or 0), threads=record.get("threads"),
            compiler_version=str(record.get("compiler_version") or ""),
            compilation=comp, found_by_id=comp.owner_id if comp else None,
        )
        with self._lock:
            self.added += 1

    def records(self) -> Iterator[dict]:
        """Every record, in the compiler's format (the best first within a workload)."""
        for row in TuningRecord.objects.order_by("workload_key", "median_us").iterator():
            yield as_record(row)

    def flush(self) -> None:
        """Save the workload keys looked up so far on the compilation (`tuning_workloads`), for the
        cache's staleness check. Never raises: a failure is logged (the result is still right)."""
        if not self.compilation_id:
            return
        with self._lock:
            keys = sorted(self._looked_up)
        try:
            Compilation.objects.filter(pk=self.compilation_id).update(tuning_workloads=keys)
        except Exception:  # noqa: BLE001 - only the cache's staleness check depends on it
            log.warning("could not save the tuning workloads of %s", self.compilation_id, exc_info=True)


def _float_or_none(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def last_record_at(workloads: list[str]) -> datetime | None:
    """When the newest tuning record of any of these workload keys was stored (None: none was).
    A result that finished before it is stale: compiled again now, some kernel would take that
    record's schedule, so the result cache must not serve it (`submission._cache_hit`)."""
    if not workloads:
        return None
    return TuningRecord.objects.filter(workload_key__in=list(workloads)).aggregate(at=Max("created_at"))["at"]
