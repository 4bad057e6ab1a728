"""The schedules a finished compilation used, replayed from its event log (``kernel.lowered.tuned``).

A compilation compiled with a tuning database records, per kernel that took a tuned schedule, the
trace it replayed and the workload it was recorded for (``kernel.lowered``: ``schedule_source:
"tuned"``, ``tuned`` {trace, median_us, default_us, database, workload}). Rebuilding an artifact of that
compilation later (the explorer's ``module.so``) must build the same kernels, not the defaults and not
whatever the database holds by then: :class:`RecordedSchedules` is a driver schedule source
(``compiler.driver.lower.ScheduleSource``) that gives each kernel exactly its recorded trace. A kernel
whose workload no longer matches its record (another compiler version lowering the model differently)
gets the default schedule and a warning naming it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..targets import Target
from .workload import Untunable, workload_key


class RecordedSchedules:
    """A schedule source replaying the tuned schedules of one event log (see the module docstring).

    Attributes:
        name: how the rebuilt kernels' schedule text names the source (also its ``label``).
        records: kernel name -> its ``kernel.lowered.tuned`` payload.
    """

    def __init__(self, events: Iterable[Mapping[str, Any]], name: str = "this compilation's schedules") -> None:
        self.name = name
        self.label = name
        self.records: dict[str, dict[str, Any]] = {
            str(e["kernel"]): dict(e["tuned"]) for e in events
            if e.get("type") == "kernel.lowered" and e.get("schedule_source") == "tuned" and isinstance(e.get("tuned"), dict)}
        self._warnings: list[str] = []

    def __bool__(self) -> bool:
        return bool(self.records)

    def check(self) -> None:
        """Nothing to open: the records were read from the log."""

    def lookup(self, node: Any, kernel: str, target: Target) -> dict[str, Any] | None:
        """``{"trace", "median_us", "default_us", "source", "workload"}`` of kernel ``kernel``'s recorded
        schedule, or None (it took the default, or its workload changed: a warning says so)."""
        rec = self.records.get(kernel)
        if rec is None:
            return None
        try:
            key = workload_key(node, target)
        except Untunable:
            key = None
        if rec.get("workload") and key != rec["workload"]:
            self._warnings.append(f"kernel {kernel}: its workload changed since the compilation; default schedule")
            return None
        return {"trace": dict(rec["trace"]), "median_us": float(rec["median_us"]), "default_us": float(rec["default_us"]),
                "source": str(rec.get("database") or self.name), "workload": key or ""}

    def warnings(self) -> list[str]:
        """Kernels whose record could not be replayed."""
        return list(self._warnings)


__all__ = ["RecordedSchedules"]
