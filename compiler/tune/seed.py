"""Seeds for a task's search: the best traces of similar workloads already in the tuning database.

A workload the database has no record of often has a neighbour that it does: the same ops at other
shapes (ResNet-50's 3x3 Convs at 56, 28, 14 and 7 pixels; an encoder's MatMuls at another sequence
length or width; the same model at another batch size). Their best schedules are a better start than
the default or a random draw (TVM's MetaSchedule seeds its evolutionary search from the database's
top records of the workload; here, of similar ones, since this one has none). A record is similar
when its workload description (``compiler.tune.workload.describe``) has the same kind and the same
ops in the same order on the same target; the nearest come first: the sum over the ops' output
shapes of ``|log2(a / b)|`` per dimension (a rank that differs counts 8), plus 1 for every attribute
that differs, then the record's speed ratio. A record's trace is projected onto the task's knobs: a
knob the record lacks, or a value the task's knob does not offer, takes the task's default; a
projection equal to the default trace is no seed.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..targets import Target
from .database import TuningDatabase, same_target, speed_ratio
from .tasks import Task

SEEDS = 4  # seeds per task, at most


def _signature(desc: dict[str, Any]) -> Any:
    return json.dumps([desc.get("kind"), [op[:2] for op in desc.get("ops") or []]])


def _distance(a: dict[str, Any], b: dict[str, Any]) -> float:
    d = 0.0
    for oa, ob in zip(a.get("ops") or [], b.get("ops") or [], strict=False):
        attrs_a, attrs_b = oa[2] or {}, ob[2] or {}
        d += sum(attrs_a.get(k) != attrs_b.get(k) for k in set(attrs_a) | set(attrs_b))
        for ta, tb in zip(oa[4] or [], ob[4] or [], strict=False):
            sa, sb = (ta or [None, []])[1], (tb or [None, []])[1]
            if len(sa) != len(sb):
                d += 8.0
                continue
            d += sum(abs(math.log2(max(x, 1) / max(y, 1))) for x, y in zip(sa, sb, strict=True))
    return d


def project(trace: dict[str, Any], task: Task) -> dict[str, Any] | None:
    """``trace`` onto ``task``'s knobs (module docstring), or None when that is the default trace."""
    out = {k.name: trace[k.name] if trace.get(k.name) in k.choices else k.default for k in task.knobs}
    return None if out == task.default_trace else out


def similar_traces(db: TuningDatabase, task: Task, target: Target, limit: int = SEEDS) -> list[dict[str, Any]]:
    """Up to ``limit`` distinct traces for ``task`` from the records of similar workloads on ``target``,
    the nearest first (module docstring)."""
    sig = _signature(task.desc)
    found: list[tuple[float, float, str, dict[str, Any]]] = []
    for rec in db.records():
        desc = rec.get("desc")
        if rec.get("workload") == task.workload or not isinstance(desc, dict) or not same_target(rec, target):
            continue
        if _signature(desc) != sig:
            continue
        t = project(rec["trace"], task)
        if t is not None:
            found.append((_distance(desc, task.desc), speed_ratio(rec), json.dumps(t, sort_keys=True), t))
    out: dict[str, dict[str, Any]] = {}
    for _, _, key, t in sorted(found, key=lambda x: x[:3]):
        out.setdefault(key, t)
        if len(out) >= limit:
            break
    return list(out.values())


__all__ = ["SEEDS", "project", "similar_traces"]
