"""``tune_model``: search schedules for a model's kernels within a time budget, store the best ones.

1. The model goes through the graph passes and every kernel is lowered once with the default schedule
   inside a knobs context: its tuning task, grouped by workload (``compiler.tune.tasks``). Workloads the
   database already holds a record for on this target are skipped (``retune``: tuned again): a workload
   is never measured twice. A task's search starts from the best traces of similar workloads in the
   database (``compiler.tune.seed``), read again at its first batch (records this run stored count).
2. Rounds until the budget (wall-clock seconds from the start, the passes included) is spent (``reason``
   ``budget``), every space is exhausted (``exhausted``), ``stop.is_set()`` (``stopped``), or the search
   fails (``error``: the measurer raised, or no task's default schedule could be measured; what was
   stored stays). Every round, the first included, is sized to the time left (``_Run.fitting``: the
   last round's time per candidate, or a prior before any), and its requests carry the time left, so
   the measurer starts no candidate past it: a run ends at most about one candidate's time past its
   budget. Each round, the task that has had the least measuring time for its
   weight (its kernels' estimated default time, ``compiler.schedule.parallel.estimated_us``) gets the
   next batch (its measuring time counted from :data:`PRIOR_S`; ``compiler.tune.evolve.propose``: evolutionary, ranked by the XGBoost cost model of
   ``compiler.tune.cost_model``); a measurer with ``concurrency`` N (the explorer's Celery fan-out) gets
   N batches of N tasks at once. Each batch is one measurement request (``compiler.tune.measure``);
   its results train the cost model (on the candidate/default time ratio measured in alternation in
   the same child); a batch's best candidate faster than :data:`STORE_BELOW` x the default that beats
   the task's stored record is measured again in a fresh child (``confirm``: the winner's curse) and
   added to the database at once when it still is (a stop or a crash later keeps it). A
   candidate's time is that ratio x its task's first measured default time.
3. Events (``compiler.events.schema``): ``tune.started``, one ``tune.progress`` per batch when it is
   submitted (``measuring``: its candidates, ``batch_trials`` 0: a watcher sees the search running
   before the first result) and one when it has been measured (after the round's confirmation),
   ``tune.finished`` (with ``reason``). Their ``best_us`` is the kept schedule's time: the stored
   candidate's, else the default's (never slower than the default); ``candidate_us`` the best
   candidate measured (it may be slower than the default: then the default is kept).
"""

from __future__ import annotations

import json
import math
import random
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import one_line
from ..events import EventCallback, EventStream
from ..frontend import ModelSource
from ..runtime.pool import check_threads
from .cost_model import CostModel
from .database import TuningDatabase, make_record, open_database
from .errors import TuneError
from .evolve import TaskState, propose, trace_key
from .measure import LocalMeasurer, Measurer, StopFlag, make_request
from .seed import similar_traces
from .tasks import compile_graph, extract_tasks

# a task's measuring time counts from PRIOR_S seconds (about one batch), so that a task of 1% of the
# model's time waits until the large ones have had some 100 x PRIOR_S each, instead of every task,
# however small, taking a batch in the first round (a Reshape of 1 us cost as much as a Conv of 5 ms)
PRIOR_S = 5.0
STORE_BELOW = 0.95  # a candidate is stored when its time is below this fraction of the default's (noise margin)
# before any batch has been measured, the first round is sized to the time left from these: a measuring child's
# start with the default schedule's build (s), and one candidate's build, check and timing (s)
PRIOR_START_S = 3.0
PRIOR_CANDIDATE_S = 1.5
REASONS = ("budget", "stopped", "exhausted", "error")  # why a run ended: tune.finished's reason


@dataclass
class TuneResult:
    """What a tuning run did: its events, trials (candidates measured, valid or not), wall time (s),
    whether it was stopped, the tuned tasks (``tune.finished``'s ``tuned``), the skipped workloads
    (already in the database), the kernels of the model, why it ended (one of :data:`REASONS`) and,
    for ``error``, why it failed."""

    events: list[dict[str, Any]]
    trials: int
    duration_s: float
    stopped: bool
    tuned: list[dict[str, Any]]
    skipped: int
    kernels: int
    states: list[TaskState] = field(default_factory=list)
    reason: str = "budget"
    error: str = ""


def check_budget(budget_s: Any) -> float:
    """``budget_s`` as a float; TuneError when it is not a positive, finite number of seconds."""
    try:
        b = float(budget_s)
    except (TypeError, ValueError):
        raise TuneError(f"tuning budget {budget_s!r} is not a number of seconds") from None
    if not math.isfinite(b) or b <= 0:
        raise TuneError(f"tuning budget must be a positive number of seconds, got {budget_s!r}")
    return b


def _db_name(db: TuningDatabase) -> str:
    path = getattr(db, "path", None)
    return str(path) if path is not None else str(getattr(db, "name", type(db).__name__))


def _task_payload(s: TaskState) -> dict[str, Any]:
    t = s.task
    return {"kernel": t.kernel, "workload": t.workload, "summary": t.summary, "kernels": len(t.kernels),
            "space_size": t.space_size, "estimated_us": round(t.estimated_us, 3), "seeds": len(s.seeds)}


def _tuned_payload(s: TaskState) -> dict[str, Any]:
    """``tune.finished``'s entry for a task: ``best_us`` and ``trace`` are the schedule kept (the stored
    candidate's, or the default's: ``{}``), ``candidate_us`` the best candidate measured."""
    stored = s.stored_us is not None
    return {"kernel": s.task.kernel, "workload": s.task.workload, "default_us": s.default_us,
            "best_us": s.stored_us if stored else s.default_us, "candidate_us": s.best_us, "trials": s.trials,
            "trace": (s.stored_trace or {}) if stored else {}, "stored": stored}


class _Run:
    """One tuning run's mutable state (the loop of :func:`tune_model`)."""

    def __init__(self, db: TuningDatabase, target: Any, events: EventStream, budget_s: float, threads: int,
                 timeout_s: float, seed: int) -> None:
        self.db, self.target, self.events, self.budget_s = db, target, events, budget_s
        self.threads, self.timeout_s = threads, timeout_s
        self.model = CostModel(seed)
        self.rng = random.Random(seed)
        self.t0 = time.perf_counter()
        self.trials = 0
        self.found_by: dict[str, str] = {}
        # the last round's wall time (s, measurement and confirmation) and its candidates: the estimate
        # of the next round's size (:meth:`fitting`)
        self.last_round: tuple[float, int] | None = None
        self.out_of_budget = False
        self.started = False  # whether a batch has been submitted (a measuring child started)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def absorb(self, s: TaskState, traces: list[dict[str, Any]], res: dict[str, Any]
               ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """Fold one request's result into ``s`` and the cost model. Returns the batch's best candidate
        when it beats the default by the store margin and the task's stored record (to be confirmed
        before it is stored: :meth:`confirm`), else None; and the batch's counts for its
        ``tune.progress`` (:meth:`progress`, emitted after the confirmation)."""
        default = res.get("default_us")
        if default is not None and s.default_us is None:
            s.default_us = float(default)
        if default is None and s.default_us is None and res.get("error"):
            s.failed, s.exhausted = str(res["error"]), True  # nothing to compare candidates with: not searched on
        discarded, mismatched, measured = 0, 0, 0
        messages: list[str] = []
        pending: tuple[dict[str, Any], float] | None = None
        for r in res["results"]:
            t = r["trace"]
            if r["status"] == "skipped":  # not started: the run's time was spent (not a trial, may come again)
                continue
            measured += 1
            ok = r["status"] == "ok" and r.get("median_us") is not None and s.default_us is not None
            # the candidate's time relative to the default timed in alternation with it (same child, same
            # moments), scaled to the task's first default time: comparable across batches on a busy machine
            ratio = float(r.get("ratio") or float(r["median_us"]) / float(default)) if ok and default else None
            score = ratio * s.default_us if ratio is not None and s.default_us is not None else None
            s.record(t, score)
            self.trials += 1
            if ratio is not None and trace_key(t) in s.feats:
                self.model.update(s.feats[trace_key(t)], ratio, 1.0)
            if score is None:
                discarded += 1
                mismatched += r["status"] == "mismatch"
                if len(messages) < 5:
                    messages.append(f"{r['status']}: {r.get('message', '')}"[:300])
            elif ratio is not None and ratio < STORE_BELOW and (s.stored_us is None or score < s.stored_us) and \
                    (pending is None or score < pending[1]):
                pending = (t, score)
        counts = {"trials_total": self.trials, "batch_trials": measured, "discarded": discarded,
                  "mismatched": mismatched, **({"messages": messages} if messages else {})}
        return (pending[0] if pending is not None else None), counts

    def progress(self, s: TaskState, counts: dict[str, Any]) -> None:
        """Emit ``tune.progress`` for a batch of ``s``: ``best_us`` is the time of the schedule the
        compilation would take now, the stored (confirmed) candidate's or else the default's, so never
        above the default (the default schedule is a point of the space); ``candidate_us`` is the
        best candidate measured, which may be slower than the default."""
        kept = s.stored_us if s.stored_us is not None and s.default_us is not None and s.stored_us < s.default_us \
            else None
        self.events.emit("tune.progress", kernel=s.task.kernel, workload=s.task.workload, trials=s.trials,
                         best_us=kept if kept is not None else s.default_us, default_us=s.default_us,
                         candidate_us=s.best_us, stored=kept is not None, elapsed_s=round(self.elapsed(), 3),
                         budget_s=self.budget_s, **counts)

    def time_left(self) -> float:
        return self.budget_s - self.elapsed()

    def fitting(self, parallel: int) -> int:
        """How many candidates a round can measure within the time left: from the last round's time
        per candidate, or before any, from :data:`PRIOR_START_S` and :data:`PRIOR_CANDIDATE_S` (``parallel``
        measurers at once). The measurers enforce it too: the requests carry the time left, and no
        candidate starts past it (``compiler.tune.measure``)."""
        left = self.time_left()
        if self.last_round is not None:
            seconds, n = self.last_round
            return int(left / max(seconds / max(n, 1), 1e-3))
        left -= 0.0 if self.started else PRIOR_START_S
        return int(max(left, 0.0) / PRIOR_CANDIDATE_S * parallel)

    def submitted(self, s: TaskState, candidates: int) -> None:
        """Emit ``tune.progress`` for a batch of ``s`` being submitted (``measuring``: its candidates),
        so that a watcher sees the search running (and its elapsed time) before the first result."""
        kept = s.stored_us if s.stored_us is not None and s.default_us is not None and s.stored_us < s.default_us \
            else None
        self.events.emit("tune.progress", kernel=s.task.kernel, workload=s.task.workload, trials=s.trials,
                         trials_total=self.trials, batch_trials=0, discarded=0, mismatched=0,
                         best_us=kept if kept is not None else s.default_us, default_us=s.default_us,
                         candidate_us=s.best_us, stored=kept is not None, elapsed_s=round(self.elapsed(), 3),
                         budget_s=self.budget_s, measuring=candidates)

    def confirm(self, found: list[tuple[TaskState, dict[str, Any]]], measurer: Measurer, stop: StopFlag | None,
                grace_s: float = 0.0) -> None:
        """Measure each found candidate again (a new batch: the object is compiled already), in alternation
        with the default, twice the rounds (the winner of a noisy batch is likely to have been measured low:
        the winner's curse), starting no later than ``grace_s`` past the budget;
        store it only when that measurement also beats the default by the store margin, both as the
        median per-round ratio and as the ratio of the two medians."""
        reqs = [make_request(s.task.workload, s.task.kernel, self.target.name, s.task.source(), [t],
                             threads=self.threads, timeout_s=self.timeout_s, repeats=24,
                             time_left_s=max(self.time_left() + grace_s, 0.0)) for s, t in found]
        for (s, t), res in zip(found, measurer.measure(reqs, stop) if reqs else [], strict=False):
            r = res["results"][0]
            if r["status"] == "skipped":  # not started: the run's time was spent; its first measurement stands
                continue
            ok = r["status"] == "ok" and r.get("ratio") and s.default_us is not None
            score = float(r["ratio"]) * float(s.default_us or 0.0) if ok else None
            s.measured[trace_key(t)] = score
            # both the median of the per-round ratios and the ratio of the medians (how the databases rank
            # records) must beat the margin: under bursty load they disagree (a record at medians 1.2x the
            # default's passed on its per-round ratio in a 15-minute run)
            medians = float(r["median_us"]) / float(r["default_us"]) if ok and r.get("default_us") else math.inf
            if score is not None and max(float(r["ratio"]), medians) < STORE_BELOW and \
                    (s.stored_us is None or score < s.stored_us):
                task = s.task
                self.db.add(make_record(task.workload, task.desc, self.target, t, float(r["median_us"]),
                                        float(r["default_us"]), trials=s.trials, threads=self.threads,
                                        summary=task.summary, found_by={**self.found_by, "host": str(
                                            res.get("worker", "")).rsplit(":", 1)[0] or socket.gethostname()}))
                s.stored_us, s.stored_trace = score, dict(t)
            valid = [(us, k) for k, us in s.measured.items() if us is not None]
            best = min(valid) if valid else None
            s.best_us, s.best_trace = (best[0], json.loads(best[1])) if best else (None, None)

    def round(self, states: list[TaskState], measurer: Measurer, batch: int, stop: StopFlag | None) -> bool:
        """One round of batches; False when nothing is left to measure."""
        live = [s for s in states if not s.exhausted]
        if not live:
            return False
        tb = time.perf_counter()  # the round's time, its proposals' validity checks included
        conc = max(1, int(getattr(measurer, "concurrency", 1)))
        room = self.fitting(conc)  # the first round too is sized to the time left, keeping the time of one
        # confirmation per batch (a winner found is measured again before it is stored: :meth:`confirm`)
        if room < 2:
            self.out_of_budget = True
            return False
        picks = pick_tasks(live, min(conc, room // 2))
        per = max(1, min(batch, room // len(picks) - 1))
        reqs, picked = [], []
        for s in picks:
            if not s.trials:  # its first batch: seeds read again, so that the records this
                # run stored for similar workloads seed it too (a 3x3 Conv at 28 pixels from the one at 56)
                s.seeds = similar_traces(self.db, s.task, self.target)
            traces = propose(s, self.model, self.target, per, self.rng)
            if traces:
                picked.append((s, traces))
        if not picked:
            return any(not s.exhausted for s in states)
        for s, traces in picked:
            reqs.append(make_request(s.task.workload, s.task.kernel, self.target.name, s.task.source(), traces,
                                     threads=self.threads, timeout_s=self.timeout_s,
                                     time_left_s=max(self.time_left(), 0.0)))
        self.started = True
        for s, traces in picked:
            self.submitted(s, len(traces))
        tm = time.perf_counter()
        results = measurer.measure(reqs, stop)
        dt = time.perf_counter() - tm
        found, batches = [], []
        for (s, traces), res in zip(picked, results, strict=False):
            s.spent_s += dt / max(len(results), 1)
            t, counts = self.absorb(s, traces, res)
            batches.append((s, counts))
            if t is not None:
                found.append((s, t))
        tc = time.perf_counter()
        # a winner's confirmation may end up to one candidate's time (this round's) past the budget, less what
        # the round already ran past it: what the budget allows, and a winner found is not thrown away
        self.confirm(found, measurer, stop, grace_s=dt / max(sum(c["batch_trials"] for _, c in batches), 1))
        for s, _ in found:
            s.spent_s += (time.perf_counter() - tc) / len(found)
        for s, counts in batches:  # after the confirmation: best_us is what the compilation would take
            self.progress(s, counts)
        measured = sum(counts["batch_trials"] for _, counts in batches)  # skipped candidates took no time
        self.last_round = (time.perf_counter() - tb, max(measured, 1))
        self.model.fit()
        return True


def pick_tasks(live: Sequence[TaskState], n: int) -> list[TaskState]:
    """The ``n`` tasks of ``live`` with the least measuring time (s, counted from :data:`PRIOR_S`) per
    µs of their kernels' estimated default time: time goes to tasks in proportion to their weight, and
    a task whose weight is a small share of the model's waits until the large ones have had their share."""
    return sorted(live, key=lambda s: (s.spent_s + PRIOR_S) / max(s.task.estimated_us, 1e-3))[:n]


def tune_model(model: ModelSource, *, budget_s: float, database: str | TuningDatabase, target: str = "host",
               pipeline: str = "O2", input_shapes: Mapping[str, Sequence[Any]] | None = None,
               threads: int | None = None, measurer: Measurer | None = None, stop: StopFlag | None = None,
               on_event: EventCallback | None = None, batch_size: int = 8, seed: int = 0, retune: bool = False,
               max_tasks: int | None = None, timeout_s: float = 30.0) -> TuneResult:
    """Tune ``model``'s kernels for ``target`` within ``budget_s`` seconds (module docstring), storing
    the best traces in ``database`` (a JSON-lines path or a TuningDatabase). ``threads``: the pool
    threads kernels are timed at (default: every CPU this process may use, as a compilation runs);
    ``measurer``: default :class:`~compiler.tune.measure.LocalMeasurer`; ``stop``: polled between
    batches; ``max_tasks``: tune only the largest N workloads. Raises TuneError for a budget that is
    not a positive number of seconds or a batch size below 1, CompileError when the model does not
    compile."""
    t_start = time.perf_counter()
    budget = check_budget(budget_s)
    if batch_size < 1:
        raise TuneError(f"batch size must be at least 1, got {batch_size}")
    db = open_database(database)
    nthreads = check_threads(threads)
    events = EventStream(on_event)
    graph, tgt = compile_graph(model, target=target, pipeline=pipeline, input_shapes=input_shapes)
    tasks, n_kernels = extract_tasks(graph, tgt)
    todo = [t for t in tasks if retune or db.best(t.workload, tgt) is None]
    skipped = len(tasks) - len(todo)
    todo = todo[:max_tasks] if max_tasks is not None else todo
    run = _Run(db, tgt, events, budget, nthreads, timeout_s, seed)
    run.t0 = t_start
    run.found_by = {"model": str(getattr(graph, "name", "") or "model")}
    states = [TaskState(t, seeds=similar_traces(db, t, tgt)) for t in todo]
    events.emit("tune.started", model=str(getattr(graph, "name", "model")), target=tgt.name, budget_s=budget,
                threads=nthreads, kernels=n_kernels, tasks=[_task_payload(s) for s in states])
    own = measurer is None
    reason, error = _search(run, states, measurer or LocalMeasurer(), batch_size, stop, own)
    tuned = [_tuned_payload(s) for s in states if s.trials]
    duration = round(run.elapsed(), 3)
    events.emit("tune.finished", trials=run.trials, duration_s=duration, stopped=reason == "stopped",
                database=_db_name(db), tuned=tuned, reason=reason, **({"error": error} if error else {}))
    return TuneResult(events.events, run.trials, duration, reason == "stopped", tuned, skipped, n_kernels, states,
                      reason, error)


def _search(run: _Run, states: list[TaskState], measurer: Measurer, batch: int, stop: StopFlag | None,
            own: bool = False) -> tuple[str, str]:
    """Rounds until the run ends; returns why (one of :data:`REASONS`) and, for ``error``, the error
    in one line. What was stored before an error stays stored. ``own``: the measurer was made here,
    and is closed at the end."""
    try:
        while True:
            if stop is not None and stop.is_set():
                return "stopped", ""
            if run.elapsed() >= run.budget_s or run.out_of_budget:
                return "budget", ""
            if not run.round(states, measurer, batch, stop):
                if run.out_of_budget:
                    return "budget", ""
                failed = [s for s in states if s.failed]
                if failed and len(failed) == len(states):  # no task could be measured at all
                    return "error", one_line(f"{failed[0].task.kernel}: {failed[0].failed}")
                return "exhausted", ""
    except Exception as exc:  # noqa: BLE001 - the search ends, what it stored stays, tune.finished says why
        return "error", one_line(f"{type(exc).__name__}: {exc}")
    finally:
        close = getattr(measurer, "close", None)
        if own and close is not None:
            close()


__all__ = ["PRIOR_S", "REASONS", "TuneResult", "check_budget", "pick_tasks", "tune_model"]
