"""``python -m compiler.tune.bench``: tune models for a budget, then time default against tuned, and both against ONNX Runtime.

For each model (default: ResNet-50 with seeded random weights, ``compiler.samples.randomized
("light_resnet50", seed=0)``, and the transformer encoder ``vit_enc_4l`` of ``compiler.bench_models``):

1. ``tune_model`` for ``--budget`` seconds into ``--db`` (the largest ``--max-tasks`` workloads), printing
   the tuning curve: after each batch, the elapsed time, the trials so far and the estimated tuned
   share: sum over tuned workloads of best x kernels / default x kernels (medians measured in the
   tuning children);
2. the model compiled twice in one process, default schedules and with the database (``tuning_db``),
   each run with ``benchmark``/``verify``: Prism and ONNX Runtime in the same child at the same thread
   count (``compiler.runtime.runner``). Printed: the tuned kernels' summed median time default vs
   tuned (each from its own run's ``kernel.timed``), the model's time default vs tuned vs ONNX
   Runtime, the verification, and the trials the tuned compilation did (zero: it only reads the
   database).

The machine is shared: run it under ``flock /work/coord/bench.lock`` and compare ratios from one run.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import api, bench_models, samples
from ..runtime.pool import available_threads
from .search import tune_model

MODELS = ("light_resnet50", "vit_enc_4l")


def load_model(name: str) -> Any:
    if name in bench_models.BENCH_MODELS:
        return str(bench_models.load(name))
    return samples.randomized(str(samples.fetch(name)), seed=0)


def _kernel_us(events: list[dict[str, Any]]) -> dict[str, float]:
    return {e["kernel"]: float(e["median_us"]) for e in events if e["type"] == "kernel.timed"}


def _one(events: list[dict[str, Any]], type: str) -> dict[str, Any]:
    return next((e for e in events if e["type"] == type), {})


def bench(name: str, budget_s: float, db: str, threads: int, max_tasks: int | None, batch: int) -> dict[str, Any]:
    """Tune, then compare (module docstring); prints as it goes and returns the figures."""
    model = load_model(name)
    curve: list[tuple[float, int, float]] = []
    best: dict[str, tuple[float, float, int]] = {}
    counts: dict[str, int] = {}

    def on_event(e: dict[str, Any]) -> None:
        if e["type"] == "tune.started":
            counts.update({t["workload"]: t["kernels"] for t in e["tasks"]})
            print(f"  {len(e['tasks'])} workloads to tune of {e['kernels']} kernels", flush=True)
        if e["type"] == "tune.progress" and e["best_us"] and e["default_us"]:
            best[e["workload"]] = (e["best_us"], e["default_us"], counts.get(e["workload"], 1))
            tuned = sum(min(b, d) * k for b, d, k in best.values())
            default = sum(d * k for _, d, k in best.values())
            curve.append((e["elapsed_s"], e["trials_total"], default / tuned))
            print(f"  [{e['elapsed_s']:6.1f} s] {e['trials_total']:4d} trials  {e['kernel'][:44]:44s} "
                  f"best {e['best_us']:9.1f} us  default {e['default_us']:9.1f} us  tuned-so-far {default / tuned:.3f}x",
                  flush=True)

    tr = tune_model(model, budget_s=budget_s, database=db, threads=threads, on_event=on_event, max_tasks=max_tasks,
                    batch_size=batch)
    print(f"  tuning: {tr.trials} trials in {tr.duration_s:.0f} s, {sum(1 for t in tr.tuned if t['stored'])} "
          f"workloads stored, {tr.skipped} already in the database", flush=True)
    plain = api.compile(model, threads=threads, verify=True, benchmark=True)
    tuned = api.compile(model, threads=threads, verify=True, benchmark=True, tuning_db=db)
    if not (plain.ok and tuned.ok):
        raise SystemExit(f"{name}: compilation failed: {plain.error or tuned.error}")
    applied = _one(tuned.events, "tune.applied")
    sources = {e["kernel"]: e.get("schedule_source") for e in tuned.events if e["type"] == "kernel.lowered"}
    ku_plain, ku_tuned = _kernel_us(plain.events), _kernel_us(tuned.events)
    names = [k for k, s in sources.items() if s == "tuned" and k in ku_plain and k in ku_tuned]
    k_default, k_tuned = sum(ku_plain[k] for k in names), sum(ku_tuned[k] for k in names)
    mp, mt = _one(plain.events, "model.timed"), _one(tuned.events, "model.timed")
    vt = _one(tuned.events, "model.verified")
    out = {"model": name, "threads": threads, "trials": tr.trials, "tune_s": tr.duration_s, "curve": curve,
           "tuned_kernels": len(names), "kernels": applied.get("kernels"), "kernels_default_us": k_default,
           "kernels_tuned_us": k_tuned, "prism_default_ms": mp.get("prism_ms"), "prism_tuned_ms": mt.get("prism_ms"),
           "ort_ms_default_run": mp.get("onnxruntime_ms"), "ort_ms_tuned_run": mt.get("onnxruntime_ms"),
           "verified": vt.get("passed"), "second_compile_trials": sum(1 for e in tuned.events if e["type"] == "tune.progress")}
    print(f"  {applied.get('message')}; the tuned compilation measured {out['second_compile_trials']} candidates")
    ort_d, ort_t = mp.get("onnxruntime_ms") or 0.0, mt.get("onnxruntime_ms") or 0.0
    if ort_d and ort_t and mp.get("prism_ms") and mt.get("prism_ms"):  # the two runs see different machine loads:
        # each is normalized by ONNX Runtime timed in alternation with it in the same child
        nd, nt = mp["prism_ms"] / ort_d, mt["prism_ms"] / ort_t
        out.update(prism_over_ort_default=nd, prism_over_ort_tuned=nt)
        print(f"  Prism/ORT (same child): default {nd:.3f}, tuned {nt:.3f}: tuned model {nd / nt:.3f}x the default; "
              + (f"tuned kernels, each run's sum / its ORT ms: default {k_default / 1e3 / ort_d:.3f}, tuned "
                 f"{k_tuned / 1e3 / ort_t:.3f}: {(k_default / ort_d) / max(k_tuned / ort_t, 1e-12):.3f}x" if names else ""))
    if names:
        print(f"  tuned kernels ({len(names)}): default {k_default:.1f} us, tuned {k_tuned:.1f} us: "
              f"{k_default / max(k_tuned, 1e-9):.3f}x (each from its own end-to-end run)")
    print(f"  end to end at {threads} thread(s): Prism default {mp.get('prism_ms')} ms, Prism tuned {mt.get('prism_ms')} ms, "
          f"ONNX Runtime {mp.get('onnxruntime_ms')} / {mt.get('onnxruntime_ms')} ms (same child as each); "
          f"tuned/ORT {(mt.get('prism_ms') or 0) / (mt.get('onnxruntime_ms') or 1):.3f}; verified vs ORT: {vt.get('passed')}",
          flush=True)
    return out


def _ort(row: dict[str, Any]) -> float:
    return (row["ort_ms_default_run"] + row["ort_ms_tuned_run"]) / 2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compiler.tune.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--budget", type=float, default=900.0, help="tuning seconds per model")
    ap.add_argument("--db", required=True, metavar="FILE.jsonl")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--max-tasks", type=int, default=None)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args(argv)
    threads = args.threads or available_threads()
    rows = []
    for name in [m for m in args.models.split(",") if m]:
        print(f"{name}: tuning for {args.budget:g} s at {threads} thread(s) into {args.db}", flush=True)
        rows.append(bench(name, args.budget, args.db, threads, args.max_tasks, args.batch))
    kd = sum(r["kernels_default_us"] for r in rows)
    kt = sum(r["kernels_tuned_us"] for r in rows)
    if kt:
        print(f"all models: tuned kernels together {kd / kt:.3f}x faster than their default schedules (raw sums of "
              "two runs that saw different machine loads)")
    normed = [r for r in rows if r.get("ort_ms_default_run") and r.get("ort_ms_tuned_run")]
    if normed and kt:  # each run's kernel time in units of its own ORT time, weighted by the mean ORT time
        nd = sum(r["kernels_default_us"] / r["ort_ms_default_run"] * _ort(r) for r in normed)
        nt = sum(r["kernels_tuned_us"] / r["ort_ms_tuned_run"] * _ort(r) for r in normed)
        print(f"all models, ORT-normalized (each run's kernel sum / the ORT time measured in the same child): "
              f"tuned kernels together {nd / max(nt, 1e-12):.3f}x faster than their default schedules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
