"""The measuring child's builder: ``python -m compiler.tune.builder``, compiling a batch's candidates ahead.

Compiling a candidate (LLVM at the target's full optimization) takes most of its measuring time (1.2 to
3.4 s for a ResNet-50 3x3 Conv, against some 0.3 s to check and time it), and the measuring child times
at one thread: the builder (TVM's builder/runner split: MetaSchedule's ``LocalBuilder`` compiles in
parallel, its runner measures one at a time) uses another core to compile the batch's next
candidates while the child compiles, checks and times the current one. Started by
``compiler.tune.child`` (dying with it: ``compiler.runtime.limits.apply_child_limits``) when the
request's threads leave a core free; it reads jobs ``{"request", "todo", "deadline"}`` from stdin and
writes nothing but the objects.

Both sides compile through :func:`compile_claimed`: a candidate's object lives in the measurer's
object folder under its kernel key (``<key>.o``); whoever creates ``<key>.claim`` first (``O_EXCL``,
holding its pid) compiles it, the other waits for the object, or compiles it itself when the
claimant died (a builder that crashed on a candidate leaves the candidate to the child, whose crash
is then reported for it) or after ``wait_s``. The builder drops a job when the next one arrives or
the job's deadline passes, and never compiles a candidate the child has started.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from pathlib import Path
from typing import Any

from compiler.codegen.compile import CompiledKernel, compile_kernel, kernel_key
from compiler.driver.lower import graph_opset, lower_node
from compiler.runtime.limits import apply_child_limits
from compiler.runtime.process import pid_alive
from compiler.targets import get_target
from compiler.tune.source import load_source

OBJ_CACHE_FILES = 4000  # at most this many objects in the measurer's object folder (each some 10-200 KB)


def _write(path: Path, data: bytes) -> None:
    if sum(1 for _ in path.parent.iterdir()) < OBJ_CACHE_FILES:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)


def _claim(claim: Path) -> bool:
    try:
        fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def _claimant(claim: Path) -> int | None:
    try:
        text = claim.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def compile_claimed(func: Any, target: Any, wait_s: float = 120.0) -> CompiledKernel:
    """``func`` compiled for ``target`` without its texts, through the object folder
    ``PRISM_TUNE_OBJ_DIR`` when it is set (module docstring): an object there is read, not compiled
    again (a winner confirmed in a later batch, a default measured again by a restarted child), and
    one being compiled by another process is waited for."""
    folder = os.environ.get("PRISM_TUNE_OBJ_DIR", "")
    key = kernel_key(func, target)
    if not folder or not Path(folder).is_dir():
        return compile_kernel(func, target, texts=False)
    path, claim = Path(folder) / f"{key[:40]}.o", Path(folder) / f"{key[:40]}.claim"
    until = time.monotonic() + wait_s
    while not path.is_file():
        if _claim(claim):
            try:
                ck = compile_kernel(func, target, texts=False)
                _write(path, ck.obj)
            finally:
                claim.unlink(missing_ok=True)
            return ck
        owner = _claimant(claim)
        if (owner is not None and not pid_alive(owner)) or time.monotonic() > until:
            claim.unlink(missing_ok=True)  # its claimant died (or hangs): compiled here instead
            continue
        time.sleep(0.01)
    return CompiledKernel("prism_k_" + key[:16], "", "", "", path.read_bytes(), 0.0, cached=True)


def _job_waiting() -> bool:
    return bool(select.select([sys.stdin], [], [], 0)[0])


def build(job: dict[str, Any], started: Path | None) -> None:
    """Compile the job's candidates in order, ahead of the child (module docstring)."""
    req, deadline = job["request"], job.get("deadline")
    graph = load_source(req["source"])
    node, kernel = graph.nodes[0], req["source"].get("kernel") or req["kernel"]
    target, opset = get_target(req["target"]), graph_opset(graph)
    for i in job["todo"]:
        if _job_waiting() or (deadline is not None and time.monotonic() > deadline):
            return
        if started is not None and started.is_file() and int(started.read_text() or -1) >= int(i):
            continue  # the child has reached it: it compiles it itself
        try:
            lk, _ = lower_node(node, kernel, opset, target, req["traces"][i])
        except Exception:  # noqa: BLE001 - an invalid trace: the child reports it
            continue
        folder = Path(os.environ.get("PRISM_TUNE_OBJ_DIR", ""))
        key = kernel_key(lk.func, target)[:40]
        if (folder / f"{key}.o").is_file() or not _claim(folder / f"{key}.claim"):
            continue
        try:
            ck = compile_kernel(lk.func, target, texts=False)
            _write(folder / f"{key}.o", ck.obj)
        except Exception:  # noqa: BLE001 - the child compiles it and reports what fails
            pass
        finally:
            (folder / f"{key}.claim").unlink(missing_ok=True)


def main() -> int:
    parent = os.environ.get("PRISM_PARENT_PID", "")
    apply_child_limits(int(parent) if parent.isdigit() else None)
    started = Path(sys.argv[1]) if len(sys.argv) > 1 else None  # the child's "candidate started" file
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        build(json.loads(line), started)


if __name__ == "__main__":
    sys.exit(main())
