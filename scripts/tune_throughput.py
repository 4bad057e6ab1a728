"""Tuning throughput with 1 and 2 measurement workers (issue 16 item 3): trials per second, printed.

    flock /work/coord/bench.lock .venv/bin/python scripts/tune_throughput.py [--budget 60] [--workers 1,2]
                                                                             [--model convs|PATH] [--threads 1]

For each worker count N, a fresh stack (tests/explorer/prism_stack.py: daphne, one compile worker, N
measurement workers of one pool process each serving `prism.tune.host`, Redis DB 15, a SQLite file in a
temporary folder: nothing carries over between the runs, so each one tunes every workload from
scratch) runs one tuning compilation of the model with `tune_budget_s` and `threads` (the threads each
candidate is timed at), and the script reads the search's own figures from its `tune.finished` event
(trials, seconds) and the per-worker batch counts from GET /api/compilations/<id>/tuning. It prints
one line per N and the ratio. Not a test, nothing asserted: the figure depends on the machine (cores
free for the workers beside the coordinating search) and on what else runs on it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # prism_stack imports explorer's message names
sys.path.insert(0, str(REPO / "tests" / "explorer"))
os.environ.setdefault("DJANGO_SECRET_KEY", "prism-tune-throughput-" + os.urandom(8).hex())
os.environ.setdefault("PRISM_UPLOAD_RATE", "100000/min")
os.environ.setdefault("PRISM_COMPILE_RATE", "100000/min")

from prism_stack import Stack  # noqa: E402
from tuning_models import conv_stack_model  # noqa: E402


def one_run(workers: int, model_path: Path | None, budget: float, threads: int) -> dict:
    """One fresh stack with `workers` measurement workers; the search's figures."""
    with tempfile.TemporaryDirectory(prefix=f"prism-tune-{workers}w-") as tmp:
        with Stack.running(Path(tmp), workers=("w1",)) as s:
            for i in range(workers):
                s.start_worker(f"t{i + 1}", queues="prism.tune.host")
            path = model_path or conv_stack_model(Path(tmp) / "convs.onnx")
            model = s.upload(path)
            started = time.monotonic()
            comp = s.compile(model["id"], pipeline="O2", tune_budget_s=budget, options={"threads": threads})
            events = s.ws_events(comp["id"], timeout=budget + 900)
            wall = time.monotonic() - started
            done = next((e for e in events if e["type"] == "tune.finished"), None)
            if done is None:
                raise SystemExit(f"{workers} worker(s): no tune.finished; last events "
                                 f"{[e['type'] for e in events[-5:]]}")
            with s.http() as c:
                job = c.get(f"/api/compilations/{comp['id']}/tuning").json()
            return {"workers": workers, "trials": done["trials"], "search_s": done["duration_s"], "wall_s": wall,
                    "per_worker": {k: v["candidates"] for k, v in job["workers"].items()},
                    "stored": sum(1 for k in done["tuned"] if k["stored"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=60.0, help="tune_budget_s of each run (seconds)")
    ap.add_argument("--workers", default="1,2", help="measurement worker counts, comma separated")
    ap.add_argument("--model", default="convs", help="'convs' (tests/explorer/tuning_models.py) or an .onnx path")
    ap.add_argument("--threads", type=int, default=1, help="threads each candidate is timed at")
    args = ap.parse_args()
    model_path = None if args.model == "convs" else Path(args.model)
    rows = [one_run(int(n), model_path, args.budget, args.threads) for n in args.workers.split(",")]
    print(f"tuning throughput: model {args.model}, budget {args.budget:g} s, candidates timed at "
          f"{args.threads} thread(s), {os.cpu_count()} CPUs (shared machine)")
    print(f"{'workers':>7} {'trials':>7} {'search s':>9} {'trials/s':>9}  candidates per worker")
    base = None
    for r in rows:
        rate = r["trials"] / r["search_s"] if r["search_s"] else 0.0
        base = base or rate
        per = ", ".join(f"{name.split('@')[0]}: {n}" for name, n in sorted(r["per_worker"].items()))
        print(f"{r['workers']:>7} {r['trials']:>7} {r['search_s']:>9.1f} {rate:>9.2f}  {per}  ({r['stored']} workloads stored)")
    if len(rows) > 1 and base:
        last = rows[-1]
        print(f"ratio {last['workers']} vs {rows[0]['workers']} worker(s): "
              f"{(last['trials'] / last['search_s']) / base:.2f}x trials/s")


if __name__ == "__main__":
    main()
