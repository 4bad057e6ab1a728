"""Soak: many compilations through a real stack, memory sampled, nothing lost (issue 17 item 8).

    .venv/bin/python scripts/soak.py [--compilations 200] [--workers 2] [--model light_squeezenet]
                                     [--pipeline O1] [--benchmark] [--json soak.json]

Starts its own stack (tests/explorer/prism_stack.py: daphne, `--workers` Celery worker processes of one
pool process each, Redis DB 15, a SQLite file in a temporary folder), uploads the model (an onnx wheel
light model, or a path), submits the compilations 8 at a time ahead of what has finished, and samples
the resident memory (VmRSS, /proc) of the web server and of every worker process and pool process once
a second. It prints the memory curve (ten points: MiB of the web server and the sum over the workers),
the totals (succeeded, failed, lost) and the wall time; every log is read back and checked gap-free
with one terminal event. Exit status 0 when nothing was lost or broken. Not part of the test suite:
a soak of 200 takes minutes (docs: README, "Reliability").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # prism_stack imports explorer's message names
sys.path.insert(0, str(REPO / "tests" / "explorer"))
os.environ.setdefault("DJANGO_SECRET_KEY", "prism-soak-" + os.urandom(8).hex())
os.environ.setdefault("PRISM_UPLOAD_RATE", "100000/min")
os.environ.setdefault("PRISM_COMPILE_RATE", "100000/min")

from prism_stack import TERMINAL, Stack  # noqa: E402


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def group_pids(pgid: int) -> list[int]:
    """Every process of a process group (a worker and its pool processes and their children)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            out.append(int(stat.parent.name))
    return out


class Sampler(threading.Thread):
    """Once a second: (t, web MiB, workers MiB) into `samples`."""

    def __init__(self, stack: Stack, workers: list[str]) -> None:
        super().__init__(daemon=True)
        self.stack, self.workers, self.samples, self.stop = stack, workers, [], threading.Event()
        self.t0 = time.monotonic()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            web = rss_mib(self.stack.procs["web"].pid)
            workers = sum(rss_mib(p) for w in self.workers for p in group_pids(self.stack.procs[w].pid))
            self.samples.append((round(time.monotonic() - self.t0, 1), round(web, 1), round(workers, 1)))


def model_path(name: str) -> Path:
    if Path(name).is_file():
        return Path(name)
    import onnx

    return Path(onnx.__file__).parent / f"backend/test/data/light/{name}.onnx"


def soak(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="prism-soak-"))
    stack = Stack(tmp)
    try:
        stack.start_web()
        workers = [f"w{i}" for i in range(args.workers)]
        for w in workers:
            stack.start_worker(w)
        model = stack.upload(model_path(args.model))
        sampler = Sampler(stack, workers)
        sampler.start()
        started = time.monotonic()
        ids: list[str] = []
        finals: dict[str, dict] = {}
        while len(finals) < args.compilations:
            while len(ids) < args.compilations and len(ids) - len(finals) < 8:
                ids.append(stack.compile(model["id"], pipeline=args.pipeline, cache=False,
                                         options={"benchmark": args.benchmark})["id"])
            for cid in ids:
                if cid not in finals and (c := stack.get(cid))["status"] in ("succeeded", "failed"):
                    finals[cid] = c
            time.sleep(0.5)
        wall = time.monotonic() - started
        sampler.stop.set()
        sampler.join()
        broken = []
        with stack.http() as c:
            for cid in ids:
                evs = c.get(f"/api/compilations/{cid}/events", params={"limit": 1000}).json()["events"]
                ok = [e["seq"] for e in evs] == list(range(len(evs))) and sum(e["type"] in TERMINAL for e in evs) == 1
                if not ok:
                    broken.append(cid)
        statuses = [f["status"] for f in finals.values()]
        lost = [cid for cid, f in finals.items() if (f.get("error") or {}).get("reason") in ("worker_lost", "queue_lost")]
        return {"compilations": len(ids), "succeeded": statuses.count("succeeded"), "failed": statuses.count("failed"),
                "lost": len(lost), "broken_logs": broken, "wall_s": round(wall, 1), "samples": sampler.samples,
                "errors": sorted({(f.get("error") or {}).get("message", "") for f in finals.values() if f.get("error")})}
    finally:
        stack.close()


def curve(samples: list[tuple[float, float, float]], points: int = 10) -> list[tuple[float, float, float]]:
    if not samples:
        return []
    step = max(1, len(samples) // points)
    return samples[::step][:points] + [samples[-1]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--compilations", type=int, default=200)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--model", default="light_squeezenet", help="an onnx wheel light model name, or a path")
    p.add_argument("--pipeline", default="O1")
    p.add_argument("--benchmark", action="store_true", help="time each compilation too (slower)")
    p.add_argument("--json", help="write the whole report (every memory sample) here")
    args = p.parse_args(argv)
    report = soak(args)
    print(f"{report['compilations']} compilations on {args.workers} workers in {report['wall_s']} s: "
          f"{report['succeeded']} succeeded, {report['failed']} failed, {report['lost']} lost, "
          f"{len(report['broken_logs'])} broken logs")
    print("memory (s, web MiB, workers MiB):", curve(report["samples"]))
    if report["samples"]:
        first, last = report["samples"][0], report["samples"][-1]
        peak = max(s[2] for s in report["samples"])
        print(f"workers: first {first[2]} MiB, last {last[2]} MiB, peak {peak} MiB; web: first {first[1]}, last {last[1]}")
    for e in report["errors"]:
        print("error:", e)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0 if report["lost"] == 0 and not report["broken_logs"] and report["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
