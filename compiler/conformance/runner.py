"""Run conformance cases through the Prism backend in isolated worker processes.

Each of ``jobs`` threads owns one worker (``python -m compiler.conformance.worker``, a fresh
interpreter) and feeds it one case at a time. A case that kills its worker (a crash of generated
code) is reported as ``crash`` with the signal or exit status and the last line of the worker's
stderr; a case that runs past ``timeout_s`` is reported as ``timeout`` and its worker is killed;
in both cases a new worker takes over. So no case can stop the run. Workers are also replaced
every ``recycle`` cases to bound the memory held by JIT engines.

Statuses: ``passed``, ``failed`` (wrong values, shape or dtype), ``error`` (a CompileError: the
stage and message), ``crash``, ``timeout``, ``skipped`` (with the skip file's reason).
"""

from __future__ import annotations

import json
import os
import pickle
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .cases import Case

ROOT = str(Path(__file__).resolve().parents[2])


class Worker:
    """One worker process and its stderr log."""

    def __init__(self, tmp: Path, index: int) -> None:
        self.log = tmp / f"worker{index}.log"
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        self._err = open(self.log, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "compiler.conformance.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._err, env=env, cwd=ROOT)
        self.done = 0

    def ask(self, file: str, timeout_s: float) -> dict[str, Any]:
        """Send one job; the worker's result, or a ``crash``/``timeout`` result (worker then dead)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        t0 = time.perf_counter()
        try:
            self.proc.stdin.write((json.dumps({"file": file}) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._dead(t0)
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            self.kill()
            return {"status": "timeout", "stage": "run", "message": f"no result within {timeout_s:g} s",
                    "seconds": round(time.perf_counter() - t0, 3)}
        line = self.proc.stdout.readline()
        if not line:
            return self._dead(t0)
        self.done += 1
        return json.loads(line)

    def _dead(self, t0: float) -> dict[str, Any]:
        rc = self.proc.wait()
        how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with status {rc}"
        tail = ""
        try:
            lines = [x for x in self.log.read_text(errors="replace").splitlines() if x.strip()]
            tail = lines[-1][:300] if lines else ""
        except OSError:
            pass
        return {"status": "crash", "stage": "run", "message": f"worker {how} {tail}".strip(),
                "seconds": round(time.perf_counter() - t0, 3)}

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._err.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
        self._err.close()


def _job(case: Case, pipeline: str) -> dict[str, Any]:
    model = case.model.SerializeToString() if case.suite == "node" and case.model is not None else None
    return {"name": case.name, "suite": case.suite, "path": case.path, "model": model,
            "data_sets": case.data_sets if model is not None else None, "rtol": case.rtol, "atol": case.atol,
            "pipeline": pipeline}


def run_cases(cases: list[Case], *, jobs: int = 1, timeout_s: float = 120.0, pipeline: str = "O2",
              recycle: int = 150, on_result: Callable[[Case, dict[str, Any]], None] | None = None
              ) -> dict[str, dict[str, Any]]:
    """Run ``cases`` (not skipped ones) on ``jobs`` workers; returns ``{case.id: result}``."""
    results: dict[str, dict[str, Any]] = {}
    todo: queue.Queue[Case] = queue.Queue()
    for c in cases:
        todo.put(c)
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="prism-conformance-") as tmp_s:
        tmp = Path(tmp_s)

        def loop(index: int) -> None:
            w: Worker | None = None
            n = 0
            while True:
                try:
                    case = todo.get_nowait()
                except queue.Empty:
                    break
                if w is None or w.proc.poll() is not None or w.done >= recycle:
                    if w is not None:
                        w.close()
                    w = Worker(tmp, index)
                n += 1
                f = tmp / f"job{index}_{n}.pkl"
                with open(f, "wb") as fh:
                    pickle.dump(_job(case, pipeline), fh, protocol=pickle.HIGHEST_PROTOCOL)
                res = w.ask(str(f), timeout_s)
                f.unlink(missing_ok=True)
                if res["status"] in ("crash", "timeout"):
                    w.kill()
                    w = None
                with lock:
                    results[case.id] = res
                    if on_result is not None:
                        on_result(case, res)
            if w is not None:
                w.close()

        threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(max(1, jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return results
