"""The measuring child: ``python -m compiler.tune.child``, one per measurer, serving many batches.

Started by ``compiler.tune.measure.MeasuringChild`` in a fresh interpreter (never imported by the
tuner's process), under the runtime's rlimits and dying with its parent
(``compiler.runtime.limits.apply_child_limits``). It reads jobs from stdin, one JSON line each,
``{"request", "todo", "deadline"}`` (a measurement request, the indices of its traces still to measure,
and the ``time.monotonic()`` instant after which no candidate may start, or null), and writes its
records to stdout, one JSON line each, flushed at once (anything else the process prints goes to
stderr: stdout is the parent's channel alone):

1. the default schedule of the request's kernel (rebuilt from its source, ``compiler.tune.source``),
   built, run and timed once per workload and thread count in this child (kept for the next batches of
   the same workload, the :data:`KEEP_WORKLOADS` latest): ``{"index": -1, "status": "ok", "median_us",
   "cached"}``, or ``{"index": -1, "status": "error", "message"}`` and nothing more for this batch when
   it cannot be built; its outputs are the oracle of every candidate;
2. for each index of ``todo``: ``{"start": i}`` (a parent whose child died or hung knows which
   candidate did it), then the candidate lowered with its trace (``invalid`` when the trace does not
   apply), compiled, linked and run on the default's seeded inputs, its outputs compared with the
   default's (``mismatch`` beyond the request's ``rtol``/``atol``: never timed), and timed (``ok``):
   ``{"index", "status", "median_us", "default_us", "ratio", "max_abs_error", "elapsed_s", "child",
   "compiled_before"}`` (its object compiled ahead by the builder or in an earlier batch)
   (an exception while building or running it is that candidate's ``error``; the child lives on);
   a candidate is not started once the deadline has passed or when the time it is expected to take
   (the median of this workload's last candidates in this child) would end past it, nor a default
   schedule not kept yet once the deadline has passed: the rest of the batch is
   ``{"index", "status": "skipped"}``;
   while the next candidates are compiled ahead on another core by the builder
   (``compiler.tune.builder``: when the request's threads and the machine's load leave a core free:
   :meth:`Server.build_ahead`), through the measurer's object folder;
3. ``{"done": true, "recycle": bool}``: with ``recycle`` the child exits after the job, having used half
   of its CPU-time or address-space limit or measured :data:`RECYCLE_AFTER` candidates (the parent
   starts a new one for the next batch), before an rlimit would kill it mid-candidate.

The child exits at the end of stdin, and after :data:`IDLE_EXIT_S` seconds without a job.

Timing: the kernel's one ``ctypes`` call after a warm-up, ``perf_counter_ns`` per call, at the
request's ``threads`` (the runtime's pool). A candidate is timed in alternation with the default
kernel (both bound in this child), call by call, ``repeats`` rounds (fewer when a round is long: about
``budget_ms`` in all, at least 5): its ``median_us``, the paired ``default_us`` and the median per-round
``ratio`` candidate/default, so that a shared machine's load, which changes from second to second,
weighs on both alike. With the request's ``flush_bytes`` (default 64 MiB, twice this machine's L3)
at one thread, every timed call starts with cold caches (the flush is outside the timer); at more
threads caches are not flushed (see :func:`_setup_flush`). Environment ``PRISM_TUNE_FAULT=<index>:<signal>``
makes the child kill itself with that signal before candidate ``index`` of a batch, and
``<index>:corrupt`` adds 1 to that candidate's outputs (a miscompile) — fault injection for the
isolation and miscompile tests; nothing else sets it.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compiler.driver.lower import graph_opset, lower_node
from compiler.driver.run import link_program
from compiler.errors import CompileError
from compiler.runtime.limits import apply_child_limits
from compiler.runtime.program import bind
from compiler.runtime.runner import random_inputs
from compiler.schedule.knobs import KnobError
from compiler.schedule.primitives import ScheduleError
from compiler.targets import get_target
from compiler.tune.builder import compile_claimed as compiled
from compiler.tune.source import load_source

_FLUSH: dict[int, np.ndarray] = {}
KEEP_WORKLOADS = 4  # default schedules kept bound (their buffers and code) for the next batches
RECYCLE_AFTER = 2000  # candidates one child measures before it makes way for a fresh one
IDLE_EXIT_S = 120.0  # a child without a job for this long exits (its measurer starts a new one when needed)


def _flush(size: int) -> None:
    """Evict the CPU caches before a timed call (TVM's ``enable_cpu_cache_flush``): read a buffer of
    the request's ``flush_bytes`` (0: no flush) so that the kernel starts with cold caches, as it does
    inside a model where the kernels before it filled them. It costs about 11-13 ms a call at 64 MiB
    (memory bound: summing one float64 per cache line measured no faster, 12.9 against 10.9 ms)."""
    buf = _FLUSH.get(size)
    if buf is not None:
        float(buf.sum())


def _setup_flush(flush: int, threads: int) -> int:
    """The flush size (bytes) for a request: ``flush`` at one thread, else 0. At more threads the pool's
    workers sleep through a flush and waking them costs milliseconds on a busy machine (measured: a 30 us
    kernel took 6.5 ms after a 23 ms flush at 2 threads, 89 us at 1): inside a model they spin between
    kernels, so there the caches stay warm."""
    size = flush if flush > 0 and threads == 1 else 0
    if size and size not in _FLUSH:
        _FLUSH.clear()
        _FLUSH[size] = np.ones(size // 8, np.float64)
    return size


def _once_ns(fn: Any, ptrs: tuple[int, ...], flush: int) -> int:
    _flush(flush)
    t = time.perf_counter_ns()
    fn(*ptrs)
    return time.perf_counter_ns() - t


def _median_us(fn: Any, ptrs: tuple[int, ...], repeats: int, budget_ms: float, flush: int) -> float:
    fn(*ptrs)  # warm-up
    once = max(_once_ns(fn, ptrs, flush), 1)
    n = int(max(3, min(repeats, budget_ms * 1e6 / once)))
    return float(np.median([_once_ns(fn, ptrs, flush) for _ in range(n)])) / 1e3


def _paired_us(cand: tuple[Any, tuple[int, ...]], ref: tuple[Any, tuple[int, ...]], repeats: int,
               budget_ms: float, flush: int) -> tuple[float, float, float]:
    """The candidate and the default kernel timed call by call in alternation (so that both see the
    same machine load: the machine is shared): (candidate median µs, default median µs, median of the
    per-round ratios candidate/default)."""
    (fc, pc), (fr, pr) = cand, ref
    fc(*pc)
    fr(*pr)
    once = max(_once_ns(fc, pc, flush) + _once_ns(fr, pr, flush), 1)
    n = int(max(5, min(repeats, budget_ms * 1e6 / once)))
    tc, tr = [], []
    for _ in range(n):
        tc.append(_once_ns(fc, pc, flush))
        tr.append(_once_ns(fr, pr, flush))
    ratio = float(np.median(np.asarray(tc, np.float64) / np.maximum(np.asarray(tr, np.float64), 1.0)))
    return float(np.median(tc)) / 1e3, float(np.median(tr)) / 1e3, ratio


def _fault(index: int) -> bool:
    """Fault injection (module docstring): kill this child with the named signal before candidate
    ``index``; ``corrupt``: returns True, and that candidate's outputs are perturbed (a miscompile)."""
    spec = os.environ.get("PRISM_TUNE_FAULT", "")
    at, _, what = spec.partition(":")
    if at.strip() != str(index):
        return False
    if what.strip() == "corrupt":
        return True
    os.kill(os.getpid(), getattr(signal, what.strip() or "SIGSEGV"))
    return False


def _compare(outs: list[np.ndarray], ref: list[np.ndarray], rtol: float, atol: float) -> tuple[bool, float]:
    """Whether every output matches the reference within ``rtol`` and ``atol`` x max(1, max|reference|)
    (floats; others exactly), and the largest absolute difference."""
    worst, ok = 0.0, True
    scale = max([1.0, *(float(np.max(np.abs(r))) for r in ref if r.dtype.kind in "fc" and r.size)])
    atol = atol * scale
    for o, r in zip(outs, ref, strict=True):
        if o.shape != r.shape:
            return False, float("inf")
        if o.dtype.kind in "fc":
            diff = np.abs(o.astype(np.float64) - r.astype(np.float64))
            bad = ~(diff <= atol + rtol * np.abs(r.astype(np.float64)))
            worst = max(worst, float(np.nanmax(diff)) if diff.size else 0.0)
            ok = ok and not bool(np.any(bad))
        else:
            ok = ok and bool(np.array_equal(o, r))
    return ok, worst


@dataclass
class _Workload:
    """One kernel rebuilt from its source with its default schedule bound and timed: the oracle."""

    graph: Any
    node: Any
    kernel: str
    target: Any
    opset: int
    threads: int
    inputs: list[np.ndarray]
    ref: list[np.ndarray]
    default: tuple[Any, Any, tuple[int, ...]]  # (the bound program kept alive, function, pointers)
    default_us: float
    candidate_s: list[float] = field(default_factory=list)  # wall time of each candidate measured (s)

    def build_run(self, trace: dict[str, Any] | None) -> tuple[list[np.ndarray], tuple[Any, Any, tuple[int, ...]], bool]:
        """Outputs, (binding, function, pointers), and whether its object was already compiled (by the
        builder, or an earlier batch)."""
        lk, _ = lower_node(self.node, self.kernel, self.opset, self.target, trace)
        ck = compiled(lk.func, self.target)
        prog = link_program(self.graph, None, [lk], [ck])
        prog.threads = self.threads
        bound = bind(prog, self.inputs)
        bound.run(per_kernel=True)
        _, fn, ptrs = bound.calls[0]
        return bound.outputs(), (bound, fn, ptrs), ck.cached

    def expected_s(self) -> float | None:
        """The time the next candidate is expected to take (s): the median of the last few, or None."""
        last = self.candidate_s[-8:]
        return float(np.median(last)) if last else None


def _workload(req: dict[str, Any], flush: int) -> _Workload:
    graph = load_source(req["source"])
    node, kernel = graph.nodes[0], req["source"].get("kernel") or req["kernel"]
    target, opset, threads = get_target(req["target"]), graph_opset(graph), int(req.get("threads", 1))
    lk, _ = lower_node(node, kernel, opset, target, None)
    prog = link_program(graph, None, [lk], [compiled(lk.func, target)])
    prog.threads = threads
    drawn = random_inputs(prog.inputs, seed=0)
    inputs = [drawn[n] for n, _, _ in prog.inputs]
    bound = bind(prog, inputs)
    bound.run(per_kernel=True)
    _, fn, ptrs = bound.calls[0]
    us = _median_us(fn, ptrs, int(req.get("repeats", 30)), float(req.get("budget_ms", 200)), flush)
    return _Workload(graph, node, kernel, target, opset, threads, inputs, bound.outputs(), (bound, fn, ptrs), us)


class Server:
    """The child's state across jobs: the kept default schedules and the candidates measured."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.workloads: OrderedDict[str, _Workload] = OrderedDict()
        self.candidates = 0
        self.recent: list[float] = []  # wall time of the last candidates measured, any workload (s)
        self.builder: subprocess.Popen[bytes] | None = None
        folder = os.environ.get("PRISM_TUNE_OBJ_DIR", "")
        self.started = Path(folder) / f"started.{os.getpid()}" if folder and Path(folder).is_dir() else None

    def build_ahead(self, req: dict[str, Any], todo: list[int], deadline: float | None) -> None:
        """Hand the batch to the builder (``compiler.tune.builder``, started when none runs) when there is
        a next candidate to compile ahead and a core free for it: ``PRISM_TUNE_BUILDER`` ``1`` always, ``0``
        never, else (``auto``) when the request's threads plus the machine's 1-minute load average (this
        child included) leave a core idle (on a machine busy with other work a builder only competes for
        the same cores: measured at load 19 on 2 cores, 7 trials in 120 s with it, 12 without)."""
        mode, cpus, threads = os.environ.get("PRISM_TUNE_BUILDER", "auto"), len(os.sched_getaffinity(0)), \
            int(req.get("threads", 1))
        if self.started is None or len(todo) < 2 or mode == "0" or threads >= cpus:
            return
        if mode != "1" and os.getloadavg()[0] > cpus - threads + 0.5:
            return
        line = (json.dumps({"request": req, "todo": todo, "deadline": deadline}) + "\n").encode()
        for _ in range(2):
            if self.builder is None or self.builder.poll() is not None:
                env = dict(os.environ, PRISM_PARENT_PID=str(os.getpid()))
                self.builder = subprocess.Popen([sys.executable, "-m", "compiler.tune.builder", str(self.started)],
                                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
            try:
                assert self.builder.stdin is not None
                self.builder.stdin.write(line)
                self.builder.stdin.flush()
                return
            except OSError:  # it died (a candidate crashed it): started again once
                self.builder = None

    def write(self, rec: dict[str, Any]) -> None:
        self.out.write(json.dumps(rec) + "\n")
        self.out.flush()

    def job(self, req: dict[str, Any], todo: list[int], deadline: float | None) -> None:
        """Measure ``todo`` of ``req`` (module docstring), the default first."""
        def late(expected: float | None) -> bool:
            return deadline is not None and time.monotonic() + (expected or 0.0) > deadline

        if late(None):
            for i in todo:
                self.write({"index": i, "status": "skipped"})
            return
        flush = _setup_flush(int(req.get("flush_bytes", 0)), int(req.get("threads", 1)))
        key = json.dumps([req["workload"], req["source"].get("kernel") or req["kernel"], req.get("threads", 1),
                          flush, req.get("repeats"), req.get("budget_ms")])
        w = self.workloads.pop(key, None)
        cached = w is not None
        if w is None and late(None):  # a new default is built only before the deadline (a worker confirming a
            # candidate another worker found builds its default first: the confirmation's grace covers it)
            for i in todo:
                self.write({"index": i, "status": "skipped"})
            return
        try:
            w = w or _workload(req, flush)
        except Exception as exc:  # noqa: BLE001 - reported as the batch's error; the child serves the next batch
            self.write({"index": -1, "status": "error", "message": f"{type(exc).__name__}: {exc}"[:300]})
            return
        self.workloads[key] = w
        while len(self.workloads) > KEEP_WORKLOADS:
            self.workloads.popitem(last=False)
        self.write({"index": -1, "status": "ok", "median_us": w.default_us, "cached": cached})
        if self.started is not None:
            self.started.write_text("-1")  # a new batch: none of its candidates started yet
        self.build_ahead(req, todo, deadline)
        rtol, atol = float(req.get("rtol", 1e-4)), float(req.get("atol", 1e-5))
        repeats, budget = int(req.get("repeats", 30)), float(req.get("budget_ms", 200))
        for n, i in enumerate(todo):
            if late(w.expected_s()):
                for j in todo[n:]:
                    self.write({"index": j, "status": "skipped"})
                return
            self.write({"start": i})
            if self.started is not None:
                self.started.write_text(str(i))  # the builder leaves this one and those before it to us
            t0 = time.monotonic()
            self.write({"index": i, **self.candidate(w, req["traces"][i], _fault(i), rtol, atol, repeats, budget, flush),
                        "elapsed_s": round(time.monotonic() - t0, 4), "child": os.getpid()})
            w.candidate_s.append(time.monotonic() - t0)
            self.recent = [*self.recent[-7:], w.candidate_s[-1]]
            self.candidates += 1

    @staticmethod
    def candidate(w: _Workload, trace: dict[str, Any], corrupt: bool, rtol: float, atol: float, repeats: int,
                  budget: float, flush: int) -> dict[str, Any]:
        try:
            outs, call, ahead = w.build_run(trace)
        except (KnobError, ScheduleError) as exc:
            return {"status": "invalid", "message": str(exc)[:300]}
        except CompileError as exc:
            return {"status": "error", "message": f"{exc.stage}: {exc}"[:300]}
        except Exception as exc:  # noqa: BLE001 - one candidate's failure, reported; the child lives on
            return {"status": "error", "message": f"{type(exc).__name__}: {exc}"[:300]}
        if corrupt:
            outs = [o + 1.0 if o.dtype.kind == "f" else o for o in outs]
        ok, worst = _compare(outs, w.ref, rtol, atol)
        if not ok:
            return {"status": "mismatch", "median_us": None, "max_abs_error": worst, "compiled_before": ahead,
                    "message": f"outputs differ from the default schedule's: max abs error {worst:.3g}"}
        us, paired, ratio = _paired_us(call[1:], w.default[1:], repeats, budget, flush)  # timed only when it
        # computes the same outputs
        return {"status": "ok", "median_us": us, "default_us": paired, "ratio": ratio, "max_abs_error": worst,
                "compiled_before": ahead}

    def worn(self) -> bool:
        """Whether this child has used half of its CPU-time or address-space limit, or measured
        :data:`RECYCLE_AFTER` candidates: then it makes way for a fresh one (module docstring)."""
        if self.candidates >= RECYCLE_AFTER:
            return True
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu_soft = resource.getrlimit(resource.RLIMIT_CPU)[0]
        if cpu_soft != resource.RLIM_INFINITY and usage.ru_utime + usage.ru_stime > cpu_soft / 2:
            return True
        as_soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        try:
            vm = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return False
        return as_soft != resource.RLIM_INFINITY and vm > as_soft / 2


def main() -> int:
    parent = os.environ.get("PRISM_PARENT_PID", "")
    apply_child_limits(int(parent) if parent.isdigit() else None)
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints (Python's or a library's) go to stderr: stdout is the records' channel
    sys.stdout = sys.stderr
    server = Server(out)
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], IDLE_EXIT_S)
        if not ready:
            return 0
        line = sys.stdin.readline()
        if not line:
            return 0
        job = json.loads(line)
        server.job(job["request"], [int(i) for i in job["todo"]], job.get("deadline"))
        recycle = server.worn()
        server.write({"done": True, "recycle": recycle})
        if recycle:
            return 0


if __name__ == "__main__":
    sys.exit(main())
