"""The measurement loop of the runtime's child (``compiler.runtime.child``): Prism against ONNX Runtime.

One warm-up run, then ``repeats`` rounds (enough for about ``budget_s / 2`` seconds of Prism, clamped
to [``min_repeats``, ``max_repeats``]). Each round runs, back to back so that all see the same
machine load:

1. the whole model through its entry function (``compiler.codegen.entry``: one native call): the
   model time ``prism_ms`` (median), what an application embedding the model pays;
2. the kernels one ``ctypes`` call each, each call timed (``time.perf_counter_ns``): the kernel
   times ``median_us`` and their round total ``prism_kernel_calls_ms`` (median), so that
   ``prism_kernel_calls_ms - prism_ms`` is the per-kernel dispatch cost the entry function saves
   (timer reads included);
3. every ONNX Runtime session (``onnxruntime_ms`` ...), same inputs.

All medians; times in ms (model) and µs (kernels).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np


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
    for _ in range(repeats):
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
            t = pc()
            s.run(None, feed)
            ort_times[key].append(pc() - t)
    out: dict[str, Any] = {
        "kernels": [{"name": c[0], "median_us": float(np.median(p)) / 1e3} for c, p in zip(calls, per, strict=True)],
        "prism_ms": float(np.median(entry)) / 1e6, "prism_kernel_calls_ms": float(np.median(kernel_calls)) / 1e6,
        "repeats": repeats}
    for key, ts in ort_times.items():
        if ts:
            out[key] = float(np.median(ts)) / 1e6
    return out
