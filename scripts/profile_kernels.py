"""Per-kernel CPU time of a compiled model at one thread, and the whole model against ONNX Runtime.

``python scripts/profile_kernels.py MODEL [--top 15] [--repeats 7] [--env K=V ...]`` compiles MODEL (a
``compiler.samples`` name, a ``compiler.bench_models`` name or an ``.onnx`` path) with pipeline O2 for the
host, runs it at one thread in this process and prints, per kernel, the median CPU time of the calling
thread (``time.thread_time_ns``: time the OS gave other processes does not count, so the figures hold on a
shared machine, unlike wall time) with its GFLOP/s and its share of the model, the ``--top`` slowest first,
then the model's entry-function CPU time against ONNX Runtime's (CPU EP, one intra-op thread, which runs on
the calling thread) measured alternately in the same process: ``ratio`` = Prism / ONNX Runtime.

``--pipeline 'O2,quantize{dtype=int8}'`` profiles a quantized compilation (calibrated on seeded random inputs:
the ranges mean little, the kernels and their times are the ones a calibrated compilation runs); ONNX Runtime
then also runs the pass's QDQ model (its integer kernels), and ``--ort-ops`` prints ONNX Runtime's profiler
time per op type for it (or for the FP32 model), the counterpart of the kernel table.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np
import onnxruntime as ort

from compiler import bench_models, samples
from compiler.driver import compile_program
from compiler.runtime.pool import set_threads
from compiler.runtime.program import Bound
from compiler.runtime.timing import ort_options


def load(name: str) -> tuple[Any, dict[str, list[int]] | None]:
    """The model bytes or path and its input shapes (None: the model's own)."""
    if name.endswith(".onnx"):
        return name, None
    if name in bench_models.BENCH_MODELS:
        return str(bench_models.load(name)), None
    s = samples.get(name)
    model = samples.randomized(name, seed=0) if s.package is None else samples.fetch(name)
    return model, (s.input_shapes or None)


def cpu_ms(fn: Any, repeats: int) -> float:
    """Median CPU time (ms) of the calling thread over ``repeats`` calls of ``fn`` (after one warm-up)."""
    fn()
    ts = []
    for _ in range(repeats):
        t = time.thread_time_ns()
        fn()
        ts.append(time.thread_time_ns() - t)
    return float(np.median(ts)) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--pipeline", default="O2")
    ap.add_argument("--ort-ops", action="store_true", help="ONNX Runtime's profiler time per op type")
    args = ap.parse_args()
    model, shapes = load(args.model)
    comp = compile_program(model, shapes, pipeline=args.pipeline)
    prog = comp.program
    prog.threads = 1
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s).astype(dt) for _, dt, s in prog.inputs]
    b = Bound(prog, inputs)
    set_threads(1)
    flops = {lk.name: int(lk.func.attrs.get("flops", 0)) for lk in comp.kernels}
    sched = {lk.name: lk.func.attrs.get("schedule", []) for lk in comp.kernels}
    rows = []
    for name, fn, ptrs in b.calls:
        ms = cpu_ms(lambda fn=fn, ptrs=ptrs: fn(*ptrs), args.repeats)
        rows.append((ms, name))
    total = sum(ms for ms, _ in rows)
    print(f"{'kernel':<48} {'cpu ms':>8} {'share':>6} {'GFLOP/s':>8}  schedule")
    for ms, name in sorted(rows, reverse=True)[:args.top]:
        gf = flops.get(name, 0) / (ms * 1e6) if ms > 0 else 0.0
        par = [s.split("#")[0].strip() for s in sched.get(name, []) if "split into tasks" in s]
        first = next((s for s in sched.get(name, []) if s.startswith(("tile", "split", "pack"))), "")
        print(f"{name[:48]:<48} {ms:8.3f} {100 * ms / total:5.1f}% {gf:8.1f}  {'par' if par else 'SER'}  "
              f"{first[:60]}")
    serial = sum(ms for ms, name in rows if not any("split into tasks" in s for s in sched.get(name, [])))
    print(f"sum of kernels {total:.3f} ms over {len(rows)} kernels; {serial:.3f} ms in kernels with no parallel loop")
    raw = model if isinstance(model, bytes) else open(model, "rb").read() if isinstance(model, str) else \
        model.SerializeToString()
    arts = comp.ctx.artifacts if comp.ctx is not None else None
    models = {"ORT": raw} | ({"ORT INT8": arts.qdq_model.SerializeToString()}
                             if arts is not None and arts.qdq_model is not None else {})
    sessions = {k: ort.InferenceSession(m, ort_options(ort, 1), providers=["CPUExecutionProvider"])
                for k, m in models.items()}
    feeds = {k: {i.name: x for i, x in zip(s.get_inputs(), inputs, strict=True)} for k, s in sessions.items()}
    p: list[float] = []
    o: dict[str, list[float]] = {k: [] for k in sessions}
    for _ in range(3):
        p.append(cpu_ms(b.run, args.repeats))
        for k, s in sessions.items():
            o[k].append(cpu_ms(lambda s=s, k=k: s.run(None, feeds[k]), args.repeats))
    pm = float(np.median(p))
    print(f"model cpu ms: Prism {pm:.3f}  " + "  ".join(
        f"{k} {float(np.median(v)):.3f} (ratio {pm / float(np.median(v)):.3f})" for k, v in o.items()))
    if args.ort_ops:
        ort_ops(list(models.values())[-1], feeds[list(models)[-1]], args.repeats)


def ort_ops(model: bytes, feed: dict[str, Any], repeats: int) -> None:
    """ONNX Runtime's profiler: kernel time per op type, the median over ``repeats`` runs after a warm-up, the
    slowest first, as a share of the run (the profiler slows every kernel: compare shares, not ms)."""
    so = ort_options(ort, 1)
    so.enable_profiling = True
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    for _ in range(repeats + 1):
        sess.run(None, feed)
    path = sess.end_profiling()
    with open(path) as f:
        trace = json.load(f)
    os.remove(path)
    runs = sorted((ev["ts"], ev["ts"] + ev["dur"]) for ev in trace if ev.get("name") == "model_run")[1:]
    per: dict[str, list[float]] = {}
    for i, (t0, t1) in enumerate(runs):
        for ev in trace:
            if ev.get("cat") == "Node" and str(ev.get("name", "")).endswith("_kernel_time") and t0 <= ev["ts"] <= t1:
                op = per.setdefault(ev["args"].get("op_name", "?"), [0.0] * len(runs))
                op[i] += float(ev["dur"])
    total = sum(float(np.median(v)) for v in per.values())
    for op, v in sorted(per.items(), key=lambda x: -float(np.median(x[1]))):
        print(f"ORT {op:<32} {100 * float(np.median(v)) / total:5.1f}%")

if __name__ == "__main__":
    main()
