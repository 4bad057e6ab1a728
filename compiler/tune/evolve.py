"""Evolutionary proposal of candidate traces for one task, ranked by the cost model.

Per batch (Ansor's evolutionary search, Zheng et al., OSDI 2020, over a space of named decisions
instead of sketches): a pool of unmeasured traces is made from the best measured ones (mutation: one
or two knobs re-drawn from their choices; crossover: each knob from one of two parents) and fresh
random traces; when the space is small the pool is the whole unmeasured space. Each pool trace is
lowered here, before any measurement (the validity check: a trace a schedule refuses, ``KnobError``
or ``ScheduleError``, is discarded and never sent), and its loop-IR features computed; the cost
model ranks the valid ones, the batch takes the best predicted and, for exploration, a share of
random ones (all random while the model has too few samples). The task's seeds (the best traces of
similar workloads in the database, ``compiler.tune.seed``) go first, once each, and are the parents
of its first mutations. Deterministic for a given seed.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..driver.lower import lower_node
from ..schedule.knobs import KnobError
from ..schedule.primitives import ScheduleError
from ..targets import Target
from .cost_model import CostModel
from .features import features
from .tasks import Task

POOL = 48
EXPLORE = 0.25
ENUMERATE_BELOW = 256  # spaces this small are enumerated instead of sampled


def trace_key(trace: dict[str, Any]) -> str:
    return json.dumps(trace, sort_keys=True)


@dataclass
class TaskState:
    """What the search knows of one task: measured traces (``key -> median_us``, None when discarded),
    the default's time, the best trace, the time spent on it (s) and whether its space is exhausted."""

    task: Task
    measured: dict[str, float | None] = field(default_factory=dict)
    feats: dict[str, np.ndarray] = field(default_factory=dict)
    default_us: float | None = None
    best_us: float | None = None
    best_trace: dict[str, Any] | None = None
    spent_s: float = 0.0
    trials: int = 0
    invalid: int = 0
    exhausted: bool = False
    stored_us: float | None = None
    stored_trace: dict[str, Any] | None = None
    seeds: list[dict[str, Any]] = field(default_factory=list)  # from similar workloads (compiler.tune.seed)
    failed: str = ""  # why its default schedule could not be measured (then it is not searched further)

    def record(self, trace: dict[str, Any], median_us: float | None) -> None:
        self.measured[trace_key(trace)] = median_us
        self.trials += 1
        if median_us is not None and (self.best_us is None or median_us < self.best_us):
            self.best_us, self.best_trace = median_us, dict(trace)


def _random_trace(task: Task, rng: random.Random) -> dict[str, Any]:
    return {k.name: rng.choice(k.choices) for k in task.knobs}


def _mutate(parent: dict[str, Any], task: Task, rng: random.Random) -> dict[str, Any]:
    child = dict(parent)
    for k in rng.sample(task.knobs, min(len(task.knobs), rng.choice((1, 1, 2)))):
        child[k.name] = rng.choice(k.choices)
    return child


def _cross(a: dict[str, Any], b: dict[str, Any], task: Task, rng: random.Random) -> dict[str, Any]:
    return {k.name: (a if rng.random() < 0.5 else b).get(k.name, k.default) for k in task.knobs}


def _pool(state: TaskState, rng: random.Random) -> list[dict[str, Any]]:
    task = state.task
    if task.space_size <= ENUMERATE_BELOW:
        names = [k.name for k in task.knobs]
        every = [dict(zip(names, vals, strict=True)) for vals in itertools.product(*(k.choices for k in task.knobs))]
        return [t for t in every if trace_key(t) not in state.measured]
    ranked = sorted(((us, json.loads(k)) for k, us in state.measured.items() if us is not None), key=lambda x: x[0])
    parents = [t for _, t in ranked[:5]] or state.seeds or [task.default_trace]
    out: dict[str, dict[str, Any]] = {}
    for _ in range(POOL * 4):
        if len(out) >= POOL:
            break
        r = rng.random()
        t = _mutate(rng.choice(parents), task, rng) if r < 0.5 else \
            _cross(rng.choice(parents), rng.choice(parents), task, rng) if r < 0.7 and len(parents) > 1 else \
            _random_trace(task, rng)
        key = trace_key(t)
        if key not in state.measured:
            out[key] = t
    return list(out.values())


def valid_features(state: TaskState, trace: dict[str, Any], target: Target) -> np.ndarray | None:
    """Lower the task's kernel with ``trace`` (the validity check) and return its features, or None
    (counted in ``state.invalid``, and marked measured so that it is never proposed again)."""
    task = state.task
    try:
        lk, _ = lower_node(task.node, task.kernel, task.opset, target, trace)
    except (KnobError, ScheduleError):
        state.invalid += 1
        state.measured[trace_key(trace)] = None
        return None
    f = features(lk, trace)
    state.feats[trace_key(trace)] = f
    return f


def propose(state: TaskState, model: CostModel, target: Target, n: int, rng: random.Random) -> list[dict[str, Any]]:
    """Up to ``n`` valid, unmeasured traces for the next batch (module docstring); sets
    ``state.exhausted`` when the space has none left."""
    seeded = [t for t in state.seeds if trace_key(t) not in state.measured]
    seeded = [t for t in seeded if trace_key(t) in state.feats or valid_features(state, t, target) is not None]
    state.seeds, seeded = seeded[n:], seeded[:n]
    if len(seeded) >= n:
        return seeded
    pool = [t for t in _pool(state, rng) if trace_key(t) not in {trace_key(x) for x in seeded}]
    rng.shuffle(pool)
    n -= len(seeded)
    valid: list[tuple[dict[str, Any], np.ndarray]] = []
    for t in pool:
        f = valid_features(state, t, target)
        if f is not None:
            valid.append((t, f))
        if len(valid) >= max(n * 4, POOL) and state.task.space_size > ENUMERATE_BELOW:
            break
    if not valid:
        state.exhausted = not seeded and (state.task.space_size <= ENUMERATE_BELOW or not pool)
        return seeded
    pred = model.predict([f for _, f in valid])
    if pred is None:
        return seeded + [t for t, _ in valid[:n]]
    order = [valid[i][0] for i in np.argsort(pred, kind="stable")]
    n_explore = max(1, int(n * EXPLORE)) if len(order) > n else 0
    chosen = order[:n - n_explore]
    rest = order[n - n_explore:]
    chosen += rng.sample(rest, min(n_explore, len(rest)))
    return seeded + chosen


__all__ = ["TaskState", "propose", "trace_key", "valid_features"]
