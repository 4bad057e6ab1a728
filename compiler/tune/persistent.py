"""The measuring child kept for many batches: :class:`MeasuringChild`, the parent's side of
``python -m compiler.tune.child`` (its protocol is that module's docstring).

One child serves batch after batch, so that a tuning run pays an interpreter's start, the compiler's
imports and each workload's default schedule once, not once per batch (each fresh child cost some 30%
of a batch's CPU). A candidate during which the child dies (a signal, an exit) or goes silent past
its timeout ends that child (:attr:`Served.end` ``crashed`` or ``timeout``, naming the candidate in
flight); the next :meth:`MeasuringChild.serve` starts a new one, so only that candidate is lost.
A child that exited on its own between batches (idle, or recycled before an rlimit: see
``compiler.tune.child``) is started again without a report.

The child's folder (``prism-tune-<pid>-*`` in the temporary directory: its stderr) is removed when it
is closed; a parent that is killed leaves it to ``compiler.runtime.process.remove_stale_run_dirs``.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..runtime.limits import Limits
from ..runtime.process import clean_tail

START_S = 30.0  # seconds a batch's first record may take beyond a candidate's timeout: a new child's start
# and the default schedule's build


def how(rc: int) -> str:
    """``killed by SIGSEGV`` or ``exited with status 3``."""
    return f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with status {rc}"


@dataclass
class Served:
    """What one batch sent to the child came back as: its records (the child's JSON lines, ``start``
    markers left out), how it ended (``done``; ``crashed``: the child died; ``timeout``: it was killed
    after ``timeout_s`` without a record), the candidate in flight when it did (None: none), and a
    message (the exit status or signal and the child's last line of stderr)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    end: str = "done"
    in_flight: int | None = None
    message: str = ""


def _stop(proc: subprocess.Popen[bytes], folder: str) -> None:
    if proc.poll() is None:
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # the child exits at the end of its stdin
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    shutil.rmtree(folder, ignore_errors=True)


class MeasuringChild:
    """A measuring child kept across batches (module docstring). ``obj_dir``: the compiled objects'
    folder its children share (``compiler.tune.child.compiled``); ``started``: children started so
    far (restarts included); ``pid``: the running child's, or None."""

    def __init__(self, obj_dir: str = "") -> None:
        self.obj_dir = obj_dir
        self.started = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._folder = ""
        self._buf = b""
        self._finalizer: Any = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _start(self) -> None:
        self.close()
        self._folder = tempfile.mkdtemp(prefix=f"prism-tune-{os.getpid()}-")
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        env.update(Limits.from_env().child_env())
        env["PRISM_PARENT_PID"] = str(os.getpid())
        if self.obj_dir:
            env["PRISM_TUNE_OBJ_DIR"] = self.obj_dir
        with open(Path(self._folder) / "stderr.txt", "wb") as err:
            self._proc = subprocess.Popen([sys.executable, "-m", "compiler.tune.child"], env=env, cwd=root,
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        self._buf = b""
        self.started += 1
        self._finalizer = weakref.finalize(self, _stop, self._proc, self._folder)

    def close(self) -> None:
        """End the child (at the end of its stdin; killed after 5 s) and remove its folder."""
        if self._finalizer is not None:
            self._finalizer()  # runs _stop once
        self._proc, self._finalizer = None, None

    def _tail(self) -> str:
        try:
            with open(Path(self._folder) / "stderr.txt", "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 65536))
                return clean_tail(f.read().decode(errors="replace"))
        except OSError:
            return ""

    def _send(self, line: bytes) -> bool:
        proc = self._proc
        if proc is None or proc.poll() is not None or proc.stdin is None:
            return False
        try:
            proc.stdin.write(line)
            proc.stdin.flush()
        except OSError:  # BrokenPipeError: it died between batches
            return False
        return True

    def _readline(self, timeout_s: float) -> bytes | None:
        """The child's next line; b"" at its end (it died or exited), None after ``timeout_s`` without one."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        until = time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            left = until - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""  # a last line cut short by the child's death is dropped
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def serve(self, request: dict[str, Any], todo: list[int], deadline: float | None, timeout_s: float) -> Served:
        """Measure ``todo`` of ``request`` in the child (started when none runs), no candidate starting
        after ``deadline`` (``time.monotonic()``; None: none). A record must come within ``timeout_s``
        of the last one (the first within ``timeout_s`` + :data:`START_S`), else the child is killed."""
        line = (json.dumps({"request": request, "todo": todo, "deadline": deadline}) + "\n").encode()
        if not self._send(line):
            self._start()
            if not self._send(line):
                return Served(end="crashed", message=f"the measuring child could not be started: {self._tail()}")
        out = Served()
        wait = timeout_s + START_S
        while True:
            raw = self._readline(wait)
            if raw is None:
                tail = self._tail()
                assert self._proc is not None
                self._proc.kill()  # a hung child (or a stopped one) does not read its stdin's end
                self._proc.wait()
                self.close()
                out.end, out.message = "timeout", tail
                return out
            if raw == b"":
                assert self._proc is not None
                rc = self._proc.wait()
                out.end, out.message = "crashed", how(rc) + (f": {self._tail()}" if self._tail() else "")
                self.close()
                return out
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError:
                continue
            wait = timeout_s
            if "start" in rec:
                out.in_flight = int(rec["start"])
            elif rec.get("done"):
                if rec.get("recycle"):
                    self.close()
                return out
            else:
                out.records.append(rec)
                if rec.get("index") == out.in_flight:
                    out.in_flight = None


__all__ = ["MeasuringChild", "Served", "how"]
