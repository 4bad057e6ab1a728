"""Tuning databases: the best measured schedule trace per workload and target.

:class:`TuningDatabase` is the seam (the explorer implements it on its own models); :class:`JsonlDatabase`
is the command line's file, one JSON record a line, appended as records are found (a file that many
tuning runs share stays valid: each line stands alone). A record::

    {"version": 1, "workload": "3f2a9c...", "desc": {...}, "summary": "Conv+Relu f32[1, 64, 56, 56] -> ...",
     "target": "host", "triple": "x86_64-unknown-linux-gnu", "cpu": "znver5", "features": "+avx512f,...",
     "trace": {"tile": "8x2", "block_tiles": 4}, "median_us": 98.7, "default_us": 123.4, "trials": 64,
     "threads": 2, "compiler_version": "0.1.0", "ts": 1764611000.0,
     "found_by": {"model": "light_resnet50", "host": "worker-3"}}   # optional: the tuning run that found it

``median_us`` and ``default_us`` are medians measured in the same child on the same machine (µs).
Only records whose outputs matched the default schedule's are ever added (``compiler.tune.measure``
discards the others). Reading: a line that is not a JSON object with the fields above is skipped with
a warning naming the file and line (``strict``: TuneError instead); a record for another target (its
triple, CPU or features differ from the target asked about) is skipped with a warning.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..targets import Target
from ..version import __version__
from .errors import TuneError

RECORD_VERSION = 1
REQUIRED: dict[str, type | tuple[type, ...]] = {"workload": str, "triple": str, "cpu": str, "features": str, "trace": dict, "median_us": (int, float),
            "default_us": (int, float)}


@runtime_checkable
class TuningDatabase(Protocol):
    """Where tuning records live (module docstring)."""

    def best(self, workload: str, target: Target) -> dict[str, Any] | None:
        """The record with the lowest :func:`speed_ratio` (``median_us / default_us``: both measured in
        the same child, in alternation) for ``workload`` on ``target``, or None."""

    def add(self, record: dict[str, Any]) -> None:
        """Store a record (:func:`make_record`)."""

    def records(self) -> Iterator[dict[str, Any]]:
        """Every valid record."""


def speed_ratio(record: dict[str, Any]) -> float:
    """A record's ``median_us / default_us``: how it ranks. Raw medians of records measured at
    different moments of a shared machine are not comparable; the ratio to the default timed in
    alternation with the candidate in the same child is (the search ranks candidates by it too)."""
    return float(record["median_us"]) / float(record["default_us"])


def same_target(record: dict[str, Any], target: Target) -> bool:
    return (record["triple"], record["cpu"], record["features"]) == (target.triple, target.cpu, target.features)


def check_record(record: Any) -> str | None:
    """Why ``record`` is not a valid tuning record, or None."""
    if not isinstance(record, dict):
        return f"not a JSON object but {type(record).__name__}"
    for name, typ in REQUIRED.items():
        if name not in record:
            return f"missing field {name!r}"
        if not isinstance(record[name], typ) or isinstance(record[name], bool):
            return f"field {name!r} is {type(record[name]).__name__}, not {getattr(typ, '__name__', 'a number')}"
    for name in ("median_us", "default_us"):
        if not math.isfinite(record[name]) or record[name] <= 0:
            return f"field {name!r} is {record[name]}, not a positive time in µs"
    fb = record.get("found_by")
    if fb is not None and not (isinstance(fb, dict) and all(isinstance(v, str) for v in fb.values())):
        return "field 'found_by' is not an object of strings"
    if any(not isinstance(v, int | str) or isinstance(v, bool) for v in record["trace"].values()):
        return "field 'trace' has a value that is neither an int nor a string"
    return None


def make_record(workload: str, desc: dict[str, Any], target: Target, trace: dict[str, Any], median_us: float,
                default_us: float, *, trials: int, threads: int, summary: str = "",
                found_by: dict[str, str] | None = None) -> dict[str, Any]:
    """A tuning record (module docstring) for ``target``; ``found_by``: the tuning run that found it
    (its model's name and the measuring host). Raises TuneError if it is not valid."""
    rec = {"version": RECORD_VERSION, "workload": workload, "desc": desc, "summary": summary, "target": target.name,
           "triple": target.triple, "cpu": target.cpu, "features": target.features, "trace": dict(trace),
           "median_us": float(median_us), "default_us": float(default_us), "trials": int(trials),
           "threads": int(threads), "compiler_version": __version__, "ts": time.time(),
           **({"found_by": {str(k): str(v) for k, v in found_by.items()}} if found_by else {})}
    why = check_record(rec)
    if why is not None:
        raise TuneError(f"tuning record for workload {workload}: {why}")
    return rec


class JsonlDatabase:
    """A JSON-lines tuning database at ``path`` (module docstring). ``on_warning`` receives each
    warning (also kept in ``warnings``); ``strict`` makes an invalid line a TuneError."""

    def __init__(self, path: str | os.PathLike[str], *, strict: bool = False,
                 on_warning: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self.strict = strict
        self.on_warning = on_warning
        self.warnings: list[str] = []
        self._records: list[tuple[int, dict[str, Any]]] | None = None
        self._warned_targets: set[int] = set()

    def _warn(self, msg: str) -> None:
        self.warnings.append(msg)
        if self.on_warning is not None:
            self.on_warning(msg)

    def _load(self) -> list[tuple[int, dict[str, Any]]]:
        if self._records is not None:
            return self._records
        self._records = []
        if not self.path.exists():
            return self._records
        if self.path.is_dir():
            raise TuneError(f"tuning database {self.path} is a directory, not a JSON-lines file")
        with self.path.open(encoding="utf-8", errors="replace") as f:
            for no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec: Any = json.loads(line)
                    why = check_record(rec)
                except json.JSONDecodeError as exc:
                    why = f"not valid JSON ({exc.msg} at column {exc.colno})"
                if why is not None:
                    msg = f"{self.path}:{no}: {why}: line skipped"
                    if self.strict:
                        raise TuneError(msg)
                    self._warn(msg)
                    continue
                self._records.append((no, rec))
        return self._records

    def records(self) -> Iterator[dict[str, Any]]:
        for _, rec in self._load():
            yield rec

    def best(self, workload: str, target: Target) -> dict[str, Any] | None:
        best: dict[str, Any] | None = None
        for no, rec in self._load():
            if rec["workload"] != workload:
                continue
            if not same_target(rec, target):
                if no not in self._warned_targets:
                    self._warned_targets.add(no)
                    self._warn(f"{self.path}:{no}: record for {rec['triple']} cpu {rec['cpu']} (features differ or "
                               f"another machine), not this target {target.name} ({target.triple} cpu {target.cpu}): "
                               "skipped")
                continue
            if best is None or speed_ratio(rec) < speed_ratio(best):
                best = rec
        return best

    def add(self, record: dict[str, Any]) -> None:
        why = check_record(record)
        if why is not None:
            raise TuneError(f"not a valid tuning record: {why}")
        recs = self._load()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
        recs.append((len(recs) + 1 + len(self.warnings), record))


def open_database(db: str | os.PathLike[str] | TuningDatabase, **kw: Any) -> TuningDatabase:
    """``db`` if it already is a :class:`TuningDatabase`, else a :class:`JsonlDatabase` at that path."""
    if isinstance(db, str | os.PathLike):
        return JsonlDatabase(db, **kw)
    if not isinstance(db, TuningDatabase):
        raise TuneError(f"tuning database {db!r} is neither a path nor a TuningDatabase")
    return db


__all__ = ["JsonlDatabase", "TuningDatabase", "check_record", "make_record", "open_database", "same_target"]
