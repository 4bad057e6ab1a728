"""Start the runtime's child process and turn its failures into errors that name the kernel.

Both runtime paths run generated code in a fresh interpreter, ``python -m compiler.runtime.child DIR``
(started with ``subprocess``: Celery's prefork workers are daemonic and ``multiprocessing`` refuses
to start children there): ``compiler.runtime.runner`` to verify and time a model,
``compiler.runtime.execute.run_program_isolated`` to execute one for the ONNX backend. The child
writes the progress markers of ``compiler.runtime.buffers``; a crash of generated code (a signal,
a non-zero exit) or a timeout becomes ``CompileError(stage="run", kernel=...)`` here, naming the
kernel that was running, and the calling process carries on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from ..errors import CompileError
from .buffers import running_kernel


def run_child(d: Path, timeout_s: float, after: str = "the child process") -> None:
    """Run ``python -m compiler.runtime.child d`` (``d`` holds its ``job.pkl``) to completion.

    Raises CompileError(stage="run"): ``the run did not finish within N s`` on a timeout;
    ``generated code crashed in kernel K: killed by SIGSEGV ...`` (or ``before the first kernel``)
    when it dies while kernels run, with ``kernel=K``; ``the kernels ran, then <after> failed``
    when it dies after its kernels finished (ONNX Runtime, the comparison, writing the result).
    """
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    try:
        proc = subprocess.run([sys.executable, "-m", "compiler.runtime.child", str(d)], env=env,
                              capture_output=True, text=True, timeout=timeout_s, cwd=root)
    except subprocess.TimeoutExpired:
        raise CompileError("run", f"the run did not finish within {timeout_s:.0f} s",
                           kernel=running_kernel(d)) from None
    if proc.returncode == 0:
        return
    kernel = running_kernel(d)
    how = (f"killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
           else f"exited with status {proc.returncode}")
    tail = (proc.stderr.strip().splitlines() or [""])[-1][:300]
    if kernel is None and _finished(d):
        raise CompileError("run", f"the kernels ran, then {after} failed ({how}): {tail}")
    where = f"in kernel {kernel}" if kernel else "before the first kernel"
    raise CompileError("run", f"generated code crashed {where}: {how} {tail}".strip(), kernel=kernel)


def _finished(d: Path) -> bool:
    p = d / "progress"
    return p.exists() and p.read_text().splitlines()[-1:] == ["done"]
