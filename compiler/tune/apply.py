"""Compiling with a tuning database: the best record per workload schedules each kernel.

:class:`DatabaseSchedules` is what ``compiler.compile(..., tuning_db=...)`` hands the driver
(``Request.schedules``): for each schedule step the driver lowers, it computes the workload key
(``compiler.tune.workload``) and returns the database's best record for this target, whose trace the
driver replays (``compiler.driver.lower.lower_graph``); a step with no record, or one that cannot be
described as a workload (a control-flow body, a symbolic shape), keeps the default schedule.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import CompileError
from ..targets import Target
from .database import JsonlDatabase, TuningDatabase, open_database
from .errors import TuneError
from .workload import Untunable, workload_key


class DatabaseSchedules:
    """The driver's schedule source backed by a :class:`~compiler.tune.database.TuningDatabase`.

    Attributes:
        name: how the kernel events and schedule text name the database (the file's name).
        label: how ``tune.applied``'s message names it: the database's own ``label`` where it has
            one, else "the database <name>".
        looked_up: schedule steps asked about; found: those with a record for this target.
    """

    def __init__(self, db: str | os.PathLike[str] | TuningDatabase) -> None:
        self._given = db
        self.db: TuningDatabase | None = None
        self.name = os.path.basename(os.fspath(db)) if isinstance(db, str | os.PathLike) else \
            str(getattr(db, "name", type(db).__name__))
        # a database object may name itself in a sentence ("this server's tuning database")
        self.label = str(getattr(db, "label", "") or f"the database {self.name}")
        self.looked_up = 0
        self.found = 0

    def check(self) -> None:
        """Open the database (the driver's ``request`` stage): a JSON-lines file is read whole here; any
        other database's optional ``check()`` is called (a table is not read whole per compilation).
        CompileError(stage="request") for a database that cannot be read (a directory, not a database
        object); invalid lines are warnings, not errors (``compiler.tune.database``)."""
        try:
            self.db = open_database(self._given)
            if isinstance(self.db, JsonlDatabase):
                for _ in self.db.records():
                    pass
            elif callable(getattr(self.db, "check", None)):
                self.db.check()  # type: ignore[attr-defined]
        except (TuneError, OSError) as exc:
            raise CompileError("request", f"tuning database {self.name}: {exc}") from None

    def lookup(self, node: Any, kernel: str, target: Target) -> dict[str, Any] | None:
        """``{"trace", "median_us", "default_us", "source", "workload", "this_run"}`` (and ``found_by``
        when the record names the tuning run that found it) of the best record of ``node``'s workload
        on ``target``, or None. ``this_run``: the database says the record was
        found by the tuning run of the compilation it serves (its record's optional ``this_run``)."""
        self.looked_up += 1
        if self.db is None:
            self.check()
        assert self.db is not None
        try:
            key = workload_key(node, target)
        except Untunable:
            return None
        rec = self.db.best(key, target)
        if rec is None:
            return None
        self.found += 1
        return {"trace": dict(rec["trace"]), "median_us": float(rec["median_us"]),
                "default_us": float(rec["default_us"]), "source": self.name, "workload": key,
                "this_run": bool(rec.get("this_run", False)),
                **({"found_by": dict(rec["found_by"])} if isinstance(rec.get("found_by"), dict) else {})}

    def warnings(self) -> list[str]:
        """The database's warnings so far (skipped lines, records for another target)."""
        return list(getattr(self.db, "warnings", []))


__all__ = ["DatabaseSchedules"]
