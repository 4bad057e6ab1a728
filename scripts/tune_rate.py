"""Trials per second of a tuning run, by how candidates are measured, on a model's largest workloads at
one thread: ``python scripts/tune_rate.py --model light_resnet50 --budget 120 --modes kept,nobuilder,fresh``.

Modes: ``kept``, one measuring child kept for the run, its builder compiling the next candidates on
another core (``PRISM_TUNE_BUILDER=1``; by default only when the load leaves a core idle);
``nobuilder``, that child without its builder (``PRISM_TUNE_BUILDER=0``);
``fresh``, a fresh child per batch without a builder (how every batch was measured before).

Each mode is a separate ``tune_model`` run into its own empty database, so both search the same
workloads from scratch; runs alternate (``--repeat`` N: N of each) so that a shared machine's load
falls on both. Prints per run the trials, the duration, trials/s, the children started and why the
run ended. Run it under ``flock /work/coord/bench.lock`` on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.tune.bench import load_model  # noqa: E402
from compiler.tune.measure import LocalMeasurer, run_request  # noqa: E402
from compiler.tune.search import tune_model  # noqa: E402


class Fresh:
    """A child started for each request and ended after it."""

    children_started = 0

    def measure(self, requests: Any, stop: Any = None) -> list[dict[str, Any]]:
        self.children_started += len(requests)
        return [run_request(r) for r in requests]


def one(model: Any, mode: str, budget: float, max_tasks: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PRISM_TUNE_BUILDER"] = "1" if mode == "kept" else "0"  # read by each new child
        measurer: Any = Fresh() if mode == "fresh" else LocalMeasurer()
        try:
            r = tune_model(model, budget_s=budget, database=os.path.join(tmp, "t.jsonl"), threads=1,
                           max_tasks=max_tasks, measurer=measurer)
        finally:
            getattr(measurer, "close", lambda: None)()
    return {"mode": mode, "trials": r.trials, "duration_s": r.duration_s, "rate": r.trials / r.duration_s,
            "children": measurer.children_started, "reason": r.reason,
            "stored": sum(1 for t in r.tuned if t["stored"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="light_resnet50")
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--max-tasks", type=int, default=6)
    ap.add_argument("--modes", default="kept,nobuilder,fresh")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    model = load_model(a.model)
    rows = []
    for _ in range(a.repeat):
        for mode in a.modes.split(","):
            row = one(model, mode, a.budget, a.max_tasks)
            rows.append(row)
            print(f"{a.model} {mode:5s}: {row['trials']:4d} trials in {row['duration_s']:6.1f} s: {row['rate']:.3f} "
                  f"trials/s, {row['children']} children, reason {row['reason']}, {row['stored']} stored", flush=True)
    rates = {m: [r["rate"] for r in rows if r["mode"] == m] for m in a.modes.split(",")}
    mean = {m: sum(v) / len(v) for m, v in rates.items() if v}
    for m in [m for m in mean if m != "fresh"]:
        if "fresh" in mean:
            print(f"{m} / fresh trials per second: {mean[m] / mean['fresh']:.2f}x ({mean[m]:.3f} vs {mean['fresh']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
