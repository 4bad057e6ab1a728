"""Start the runtime's child process and turn its failures into errors that name the kernel.

Both runtime paths run generated code in a fresh interpreter, ``python -m compiler.runtime.child DIR``
(started with ``subprocess``: Celery's prefork workers are daemonic and ``multiprocessing`` refuses
to start children there): ``compiler.runtime.runner`` to verify and time a model,
``compiler.runtime.execute.run_program_isolated`` to execute one for the ONNX backend. The child
writes the progress markers of ``compiler.runtime.buffers``; a crash of generated code (a signal,
a non-zero exit) or a timeout becomes ``CompileError(stage="run", kernel=...)`` here, naming the
kernel that was running, and the calling process carries on.

No orphans: the child runs under the rlimits of ``compiler.runtime.limits`` and dies with its parent
(``PR_SET_PDEATHSIG``, set by the child itself: ``limits.apply_child_limits``). Its folder
(:func:`run_dir`, ``prism-<kind>-<parent pid>-*`` in the temporary directory) is removed when the run
ends, however it ends, in a parent that lives on; a parent that is killed leaves it behind, and
:func:`remove_stale_run_dirs` (the explorer's reaper calls it) removes the folders of dead parents.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import CompileError, one_line
from .buffers import last_marker, running_kernel
from .limits import Limits, limit_message

RUN_DIR = re.compile(r"prism-(run|exec|tune|tuneobj)-(\d+)-")
# ONNX Runtime's log lines ("2026-01-01 10:00:00.1 [W:onnxruntime:...]")
_ORT_LOG = re.compile(r"^\s*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \[[A-Z]:onnxruntime")


@contextmanager
def run_dir(kind: str = "run") -> Iterator[Path]:
    """A fresh folder ``prism-<kind>-<this pid>-*`` for one child's job, removed on exit."""
    with tempfile.TemporaryDirectory(prefix=f"prism-{kind}-{os.getpid()}-") as tmp:
        yield Path(tmp)


def remove_stale_run_dirs(root: Path | None = None, older_than_s: float = 60.0) -> list[Path]:
    """Remove the run folders (:func:`run_dir`) under ``root`` (the temporary directory) whose parent
    process no longer exists and that are older than ``older_than_s``; returns those removed."""
    removed = []
    root = Path(root or tempfile.gettempdir())
    now = time.time()
    for d in root.glob("prism-*-*-*"):
        m = RUN_DIR.match(d.name)
        if m is None or not d.is_dir() or pid_alive(int(m.group(2))):
            continue
        try:
            if now - d.stat().st_mtime < older_than_s:
                continue
        except OSError:
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (kill(2) with signal 0; one of another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_tail(stderr: str) -> str:
    """The last meaningful line of a child's stderr: terminal control codes removed, ONNX Runtime's
    own log lines (warnings printed while loading a model) skipped, at most 300 characters."""
    lines = [one_line(line) for line in stderr.splitlines()]
    lines = [line for line in lines if line and not _ORT_LOG.match(line)]
    return (lines or [""])[-1][:300]


def run_child(d: Path, timeout_s: float, after: str = "the child process", limits: Limits | None = None) -> None:
    """Run ``python -m compiler.runtime.child d`` (``d`` holds its ``job.pkl``) to completion, under
    ``limits`` (default ``Limits.from_env()``: the child's address-space and CPU-time rlimits).

    Raises CompileError(stage="run"): ``the run did not finish within N s`` on a timeout;
    ``the run ran out of memory under its address-space limit of N bytes`` or ``... CPU-time limit``
    when it hit an rlimit; ``generated code crashed in kernel K: killed by SIGSEGV ...`` (or ``before
    the first kernel``) when it dies while kernels run, with ``kernel=K``; ``the kernels ran, then
    <after> failed`` when it dies after its kernels finished (the comparison, the timing, writing
    the result); ReferenceFailed (``ONNX Runtime failed (killed by SIGFPE)``) when it died inside ONNX
    Runtime's load or run of the reference. Messages carry no control characters.
    """
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    env.update((limits or Limits.from_env()).child_env())
    env["PRISM_PARENT_PID"] = str(os.getpid())
    try:
        proc = subprocess.run([sys.executable, "-m", "compiler.runtime.child", str(d)], env=env,
                              capture_output=True, text=True, timeout=timeout_s, cwd=root)
    except subprocess.TimeoutExpired:
        raise CompileError("run", f"the run did not finish within {timeout_s:.0f} s",
                           kernel=running_kernel(d)) from None
    if proc.returncode == 0:
        return
    if proc.returncode == 3 and (d / "error.json").is_file():  # a run-time check failed (runtime.faults)
        e = json.loads((d / "error.json").read_text())
        raise CompileError(e["stage"], e["message"], node=e["node"], op=e["op"], kernel=e["kernel"])
    kernel = running_kernel(d)
    limit = limit_message(proc.stderr, proc.returncode)
    if limit is not None:
        raise CompileError("run", limit + (f", in kernel {kernel}" if kernel else ""), kernel=kernel)
    how = (f"killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
           else f"exited with status {proc.returncode}")
    if proc.returncode == -signal.SIGKILL:  # none of the child's limits sends it: the OOM killer, an operator
        how += "; not by a limit of Prism's, most likely the kernel's OOM killer"
    tail = clean_tail(proc.stderr)
    if kernel is None and _finished(d):
        if last_marker(d) == "onnxruntime":
            raise ReferenceFailed(f"ONNX Runtime failed ({how}{': ' + tail if tail else ''})")
        raise CompileError("run", f"the kernels ran, then {after} failed ({how}): {tail}")
    where = f"in kernel {kernel}" if kernel else "before the first kernel"
    raise CompileError("run", f"generated code crashed {where}: {how} {tail}".strip(), kernel=kernel)


def _finished(d: Path) -> bool:
    p = d / "progress"
    return p.exists() and "done" in p.read_text().splitlines()


class ReferenceFailed(CompileError):
    """Prism's kernels ran, then the child died inside ONNX Runtime (a signal or an exit while it loaded
    or ran the reference): the runner measures again without it (``compiler.runtime.runner``)."""

    def __init__(self, message: str) -> None:
        super().__init__("run", message)
