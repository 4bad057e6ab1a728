"""How a pool process died, for the message of the compilation it was running.

Each pool process writes Python's fatal-error report (`faulthandler`: "Fatal Python error: Aborted"
and the stack of the thread that was running, for SIGSEGV, SIGFPE, SIGABRT, SIGBUS and SIGILL) to
`var/faults/<host>-<pid>.log`, opened when the process starts (`enable`) and removed when it exits
cleanly (`disable`); the reaper removes those of dead processes after an hour (`remove_stale`). When a run is found gone (`runs.lost_reason`), `last_words` reads the dead
process's file: "it died of Aborted in compiler/codegen/compile.py line 165 (_compile)". LLVM ends a
process that way when an allocation fails under its address-space limit
(`PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES`, which the message then names). A SIGKILL (the kernel's OOM
killer, a time limit) leaves no report.
"""

from __future__ import annotations

import faulthandler
import os
import re
import socket
import time
from pathlib import Path
from typing import IO

from django.conf import settings

from compiler.runtime.process import pid_alive

_FILE: list[IO[str]] = []
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def path_for(host: str, pid: int) -> Path:
    return Path(settings.VAR_DIR) / "faults" / f"{host}-{pid}.log"


def enable() -> None:
    """In a pool process that starts: report a fatal error of this process to its file."""
    p = path_for(socket.gethostname(), os.getpid())
    p.parent.mkdir(parents=True, exist_ok=True)
    f = p.open("w")  # noqa: SIM115 - open for the process's life: faulthandler writes to its fd
    _FILE[:] = [f]
    faulthandler.enable(file=f, all_threads=True)


def disable() -> None:
    """In a pool process that exits cleanly: no report, no file."""
    if _FILE:
        faulthandler.disable()
        _FILE.pop().close()
        path_for(socket.gethostname(), os.getpid()).unlink(missing_ok=True)


def last_words(worker: str) -> str | None:
    """`it died of <error> in <file> line <n> (<function>)` from the report of `worker` ("<host> pid
    <n>", `Compilation.worker`), the innermost Prism frame named; None when it left none."""
    host, _, pid = worker.partition(" pid ")
    if not pid.isdigit():
        return None
    try:
        text = path_for(host, int(pid)).read_text(errors="replace")
    except OSError:
        return None
    lines = text.splitlines()
    error = next((line.strip() for line in lines if line.startswith("Fatal Python error")), None)
    if error is None:
        return None
    frames = [m for line in lines if (m := _FRAME.match(line))]
    # faulthandler lists each thread's most recent call first; the compiler's frame is the one that died
    ours = [m for m in frames if "/compiler/" in m["file"]] or [m for m in frames if "/explorer/" in m["file"]]
    words = f"it died of {error.removeprefix('Fatal Python error: ')}"
    if ours:
        m = ours[0]
        package = "compiler" if "/compiler/" in m["file"] else "explorer"
        words += f" in {package}/{m['file'].split(f'/{package}/', 1)[1]} line {m['line']} ({m['func']})"
    if "Aborted" in error:
        words += (" (an allocation that fails inside LLVM under the address-space limit of "
                  f"{int(settings.PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES)} bytes, PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES, "
                  "aborts so)")
    return words


def remove_stale(older_than_s: float = 3600.0) -> list[Path]:
    """Remove this host's reports of processes that no longer exist, unchanged for ``older_than_s``
    (long after the reaper has read them: a run is found gone within ``PRISM_STALE_AFTER_S``)."""
    removed = []
    host = socket.gethostname()
    for p in (Path(settings.VAR_DIR) / "faults").glob(f"{host}-*.log"):
        pid = p.stem.rsplit("-", 1)[1]
        if not pid.isdigit() or pid_alive(int(pid)):
            continue
        try:
            if time.time() - p.stat().st_mtime >= older_than_s:
                p.unlink()
                removed.append(p)
        except OSError:
            pass
    return removed
