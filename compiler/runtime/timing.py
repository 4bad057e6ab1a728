"""The measurement loop of the runtime's child (``compiler.runtime.child``): Prism against ONNX Runtime.

One warm-up run, then ``repeats`` rounds (enough for about ``budget_s / 2`` seconds of Prism, clamped
to [``min_repeats``, ``max_repeats``]). Each round runs, close together so that all see the same
machine load (at one thread round by round; at more, in blocks of :data:`BLOCK` rounds, Prism's block
then ONNX Runtime's: both keep worker threads spinning for a while after a run, and on a machine with
as many cores as threads the other engine's spinning workers would take the cores the next run needs,
measured 2026-12-01 at 2 threads on mobilenet_v2ish: Prism 8.7 ms alternating run by run, 1.1 ms alone;
each block's first run pays that, and the medians leave it out):

1. the whole model through its entry function (``compiler.codegen.entry``: one native call): the
   model time ``prism_ms`` (median), what an application embedding the model pays;
2. the kernels one ``ctypes`` call each, each call timed (``time.perf_counter_ns``): the kernel
   times ``median_us`` and their round total ``prism_kernel_calls_ms`` (median), so that
   ``prism_kernel_calls_ms - prism_ms`` is the per-kernel dispatch cost the entry function saves
   (timer reads included);
3. every ONNX Runtime session (``onnxruntime_ms`` ...), same inputs.

Prism's parallel loops and ONNX Runtime's intra-op pool run on the same number of threads
(``Program.threads``: :func:`ort_options`). With more than one, :func:`one_thread` then times the
kernels and the model again on one thread (``median_us_1t``, ``prism_ms_1t``).

All medians; times in ms (model) and µs (kernels).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .pool import set_threads

BLOCK = 5  # rounds per engine between switches at more than one thread


def ort_options(ort: Any, threads: int) -> Any:
    """ONNX Runtime session options at ``threads`` intra-op threads (and one inter-op thread,
    sequential execution): the same thread count as Prism's run."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return so


def repeats_for(run: Callable[[], None], man: dict[str, Any]) -> int:
    """The number of timed rounds: ``budget_s / 2`` over the time of one ``run()`` (which also warms
    up), clamped to ``[min_repeats, max_repeats]``."""
    t0 = time.perf_counter()
    run()
    once = max(time.perf_counter() - t0, 1e-6)
    return int(min(man["max_repeats"], max(man["min_repeats"], man["budget_s"] / 2 / once)))


def time_rounds(bound: Any, sessions: list[tuple[str, Any]], feed: dict[str, np.ndarray],
                repeats: int) -> dict[str, Any]:
    """``repeats`` alternating rounds (module docstring) of ``bound`` (``compiler.runtime.program.Bound``)
    and ``sessions`` (``[(result key, onnxruntime.InferenceSession)]``, warmed up here) on ``feed``.
    Returns ``kernels`` [{name, median_us}], ``prism_ms``, ``prism_kernel_calls_ms``, ``repeats`` and
    one median (ms) per session key."""
    calls = bound.calls
    for _, s in sessions:
        s.run(None, feed)
    pc = time.perf_counter_ns
    per: list[list[int]] = [[] for _ in calls]
    entry: list[int] = []
    kernel_calls: list[int] = []
    ort_times: dict[str, list[int]] = {k: [] for k, _ in sessions}
    done = 0
    while done < repeats:  # blocks of rounds: Prism's, then each session's (module docstring)
        block = min(BLOCK if bound.threads > 1 else 1, repeats - done)
        for _ in range(block):
            t = pc()
            bound.run()
            entry.append(pc() - t)
            t_start = pc()
            for j, (_, fn, ptrs) in enumerate(calls):
                t = pc()
                fn(*ptrs)
                per[j].append(pc() - t)
            kernel_calls.append(pc() - t_start)
        for key, s in sessions:
            for _ in range(block):
                t = pc()
                s.run(None, feed)
                ort_times[key].append(pc() - t)
        done += block
    out: dict[str, Any] = {
        "kernels": [{"name": c[0], "median_us": float(np.median(p)) / 1e3} for c, p in zip(calls, per, strict=True)],
        "prism_ms": float(np.median(entry)) / 1e6, "prism_kernel_calls_ms": float(np.median(kernel_calls)) / 1e6,
        "repeats": repeats}
    for key, ts in ort_times.items():
        if ts:
            out[key] = float(np.median(ts)) / 1e6
    return out


def one_thread(bound: Any, repeats: int, kernels: list[dict[str, Any]]) -> dict[str, Any]:
    """``repeats`` rounds of ``bound`` with the pool at one thread (entry function, then each kernel
    timed), the pool restored to ``bound.threads`` after. Adds ``median_us_1t`` to each of
    ``kernels`` (``time_rounds``' list, same order) and returns ``{"prism_ms_1t": median ms}``."""
    set_threads(1)
    try:
        pc = time.perf_counter_ns
        per: list[list[int]] = [[] for _ in bound.calls]
        entry: list[int] = []
        bound.run()
        for _ in range(repeats):
            t = pc()
            bound.run()
            entry.append(pc() - t)
            for j, (_, fn, ptrs) in enumerate(bound.calls):
                t = pc()
                fn(*ptrs)
                per[j].append(pc() - t)
    finally:
        set_threads(bound.threads)
    for k, p in zip(kernels, per, strict=True):
        k["median_us_1t"] = float(np.median(p)) / 1e3
    return {"prism_ms_1t": float(np.median(entry)) / 1e6}


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall time of ``fn()`` over ``repeats`` calls after one warm-up call, in milliseconds
    (``time.perf_counter``). Raises ValueError when ``repeats`` < 1."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e3
