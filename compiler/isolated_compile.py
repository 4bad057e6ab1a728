"""``compiler.compile`` in a child process under memory and CPU-time limits, its events streamed to the
caller as they happen: a crash, an rlimit hit or a SIGKILL (the kernel's OOM killer) in the import, the
passes or LLVM's code generation fails that one compilation, and the calling process (a Celery pool
process) lives on.

:func:`compile_isolated` starts ``python -m compiler.isolated_compile`` (``subprocess``: Celery's prefork
workers are daemonic and ``multiprocessing`` refuses to start children there), sends the request as the
first line of its stdin, and reads one JSON object a line from its stdout:

- ``{"event": {...}}``: an event of ``compiler.compile``, passed to ``on_event`` at once (the event log
  stays the one seam: the caller sees the same events, in the same order, as in process);
- ``{"call": "best", "id": n, "workload": key, "target": {triple, cpu, features}}``: a look-up in the
  caller's tuning database (``compiler.tune.database.TuningDatabase.best``), answered on the child's
  stdin as ``{"id": n, "result": record | null}`` (the database stays in the caller: the explorer's is a
  table of its own database);
- ``{"ceilings": [...]}``: the roofline ceilings the child measured (``compiler.runtime.ceilings``), kept
  by the caller; the request carries the caller's, so that a worker measures them once, not per child;
- ``{"done": true}``: ``compiler.compile`` returned (after its terminal event).

The child sets, before it reads the model: ``RLIMIT_AS`` = ``PRISM_COMPILE_MAX_ADDRESS_SPACE_BYTES``
(default ``max(M/2, 4 GiB)``, ``M`` the machine's memory or its cgroup's limit:
``compiler.runtime.limits.machine_memory_bytes``), ``RLIMIT_CPU`` = ``PRISM_COMPILE_MAX_CPU_S`` (default
1800 s of its own CPU time), ``PR_SET_PDEATHSIG`` = SIGKILL (it dies with the caller), and
``faulthandler`` on stderr (a fatal signal names the Python frame it struck in). The measuring child
of ``compiler.runtime`` is its own child, under its own limits (``compiler.runtime.limits``).
``PRISM_COMPILE_CHILD_IMPORTS`` (comma-separated module names) are imported by the child before it
compiles: plug-ins that a worker would import at start (tests plant kernels this way).

When the child ends without a terminal event, :func:`compile_isolated` ends the log itself: one
``compile.failed`` (next ``seq``, reason ``compiler_lost``) in the stage of the last event the child sent
(``compiler.events.EVENT_STAGE``; ``codegen`` after the ``kernel.lowered`` burst, ``run`` once every
lowered kernel is compiled), naming the last event
and its kernel, how the child died and its peak resident memory (``wait4(2)``), and the limit it most
likely hit: its CPU-time limit (SIGXCPU), its address-space limit (a MemoryError, ``bad_alloc`` or LLVM's
"out of memory" on stderr; SIGSEGV/SIGABRT/SIGBUS with a resident peak over half the limit: native code
faults when an allocation fails unchecked), or for SIGKILL (no limit of Prism's sends it) the kernel's OOM killer, said as
certain when the cgroup's ``memory.events`` ``oom_kill`` count rose during the run.

Cost: one interpreter start with onnx, numpy and LLVM (about 0.5 s of CPU), and the in-process kernel
cache (``compiler.codegen.cache``) is the child's, so it starts empty for every compilation; the on-disk
kernel cache under it (``compiler.codegen.disk_cache``) is shared by every child, so a kernel an earlier
child compiled is read, not compiled again.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .errors import one_line
from .events import EVENT_STAGE, TERMINAL_EVENT_TYPES
from .runtime.ceilings import add_known_ceilings, known_ceilings
from .runtime.limits import GIB, apply_parent_death_signal, machine_memory_bytes

__all__ = ["CompileLimits", "compile_isolated"]

ENV_AS = "PRISM_COMPILE_MAX_ADDRESS_SPACE_BYTES"
ENV_CPU = "PRISM_COMPILE_MAX_CPU_S"
ENV_IMPORTS = "PRISM_COMPILE_CHILD_IMPORTS"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
_SIGNAL_AS_OOM = (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS)
# what Python, C++ and LLVM (llvm::report_bad_alloc_error) write to stderr when an allocation fails
_OUT_OF_MEMORY = ("MemoryError", "bad_alloc", "LLVM ERROR: out of memory", "Allocation failed")


@dataclass(frozen=True)
class CompileLimits:
    """The compiling child's ``RLIMIT_AS`` (bytes: its whole virtual memory, Python, onnx, LLVM) and
    ``RLIMIT_CPU`` (seconds of its own CPU time); :meth:`from_env` reads the settings."""

    address_space_bytes: int
    cpu_s: int

    @classmethod
    def from_env(cls) -> CompileLimits:
        def env_int(name: str, default: int) -> int:
            raw = os.environ.get(name, "").strip()
            return int(raw) if raw else default
        return cls(env_int(ENV_AS, max(machine_memory_bytes() // 2, 4 * GIB)), env_int(ENV_CPU, 1800))


@dataclass
class _Started:
    """A child started and waiting for its request (imports done, limits set), its stderr's file."""

    proc: subprocess.Popen[str]
    err: IO[str]
    env: dict[str, str]


_SPARE: list[_Started] = []
_SPARE_LOCK = threading.Lock()


def _child_env(lim: CompileLimits) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
            ENV_AS: str(lim.address_space_bytes), ENV_CPU: str(lim.cpu_s), "PRISM_PARENT_PID": str(os.getpid())}


def _spawn(env: dict[str, str]) -> _Started:
    err = tempfile.TemporaryFile("w+", prefix="prism-compile-stderr-")  # noqa: SIM115 - kept with the child
    proc = subprocess.Popen([sys.executable, "-m", "compiler.isolated_compile"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=err, env=env, cwd=str(Path(__file__).resolve().parents[1]),
                            text=True, bufsize=1)
    return _Started(proc, err, env)


def _take(env: dict[str, str]) -> _Started:
    """The spare child if it is alive and was started with this environment, else a new one."""
    with _SPARE_LOCK:
        spares, _SPARE[:] = list(_SPARE), []
    for s in spares:
        if s.env == env and s.proc.poll() is None:
            return s
        s.proc.kill()
        _wait(s.proc)
        s.err.close()
    return _spawn(env)


def prestart(limits: CompileLimits | None = None) -> None:
    """Start a spare child now, so that the next :func:`compile_isolated` finds its interpreter started and
    the compiler imported (about 1 s of CPU, several seconds on a loaded machine) instead of waiting for it.
    Call it from the thread that will compile: a child dies with the thread that started it
    (``PR_SET_PDEATHSIG``); a spare found dead, or started under other limits or another environment, is
    replaced. At most one spare per process (about 150 MiB resident while it waits)."""
    env = _child_env(limits or CompileLimits.from_env())
    with _SPARE_LOCK:
        if _SPARE:
            return
        _SPARE.append(_spawn(env))


def compile_isolated(model: str | os.PathLike[str], *, on_event: Callable[[dict[str, Any]], None],
                     tuning_db: Any = None, limits: CompileLimits | None = None, spare: bool = True,
                     **request: Any) -> dict[str, Any]:
    """``compiler.compile(model, on_event=on_event, tuning_db=tuning_db, **request)`` in a child process
    (module docstring). ``model``: a path; ``request``: ``compile``'s other keyword arguments, JSON-able
    (``calibration_data`` as a path); ``tuning_db``: None, a JSON-lines path, or an object with
    ``best(workload, target)`` answered here. ``on_event`` is called in this thread, as each event
    arrives; if it raises, the child is killed and the exception propagates (a time limit).

    ``spare``: start the next compilation's child (:func:`prestart`) once this one has ended.

    Returns ``{"returncode", "peak_rss_bytes", "events", "wall_s", "ended_by_child"}`` (``ended_by_child``
    False: the log was ended here with a ``compile.failed``). Never raises for a failure of the child.
    """
    lim = limits or CompileLimits.from_env()
    db_spec: Any = None
    if tuning_db is not None:
        db_spec = os.fspath(tuning_db) if isinstance(tuning_db, str | os.PathLike) else \
            {"name": str(getattr(tuning_db, "name", "database")), "label": str(getattr(tuning_db, "label", ""))}
    first = json.dumps({"model": os.fspath(model), "tuning_db": db_spec, "kwargs": request,
                        "ceilings": known_ceilings()}, default=str)
    oom_before = _oom_kills()
    started = time.monotonic()
    child = _take(_child_env(lim))
    proc, err = child.proc, child.err
    assert proc.stdin is not None and proc.stdout is not None
    seen = _Seen()
    try:
        try:
            proc.stdin.write(first + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died while it waited: reported below from its status
        _serve(proc.stdout, proc.stdin, on_event, tuning_db, seen)
    except BaseException:
        proc.kill()
        _wait(proc)
        err.close()
        raise
    rc, peak = _wait(proc)
    err.seek(0)
    stderr = err.read()
    err.close()
    if spare:
        prestart(lim)
    ended = seen.terminal
    if not ended:
        fail = {"seq": seen.next_seq, "type": "compile.failed", "ts": time.time(), "stage": seen.stage(),
                "message": _death_message(rc, peak, stderr, seen, lim, oom_before), "reason": "compiler_lost"}
        on_event(fail)
    return {"returncode": rc, "peak_rss_bytes": peak, "events": seen.count, "wall_s": time.monotonic() - started,
            "ended_by_child": ended}


class _Seen:
    """What the caller has received: the count, the last event, the kernels lowered and compiled."""

    def __init__(self) -> None:
        self.count = 0
        self.next_seq = 0
        self.last: str | None = None
        self.kernel: str | None = None
        self.lowered = self.compiled = 0
        self.terminal = False

    def add(self, event: dict[str, Any]) -> None:
        self.count += 1
        self.next_seq = int(event.get("seq", self.next_seq)) + 1
        self.last = str(event.get("type"))
        self.kernel = event.get("kernel") if isinstance(event.get("kernel"), str) else self.kernel
        self.lowered += self.last == "kernel.lowered"
        self.compiled += self.last == "kernel.compiled"
        self.terminal = self.terminal or self.last in TERMINAL_EVENT_TYPES

    def stage(self) -> str:
        if self.last == "kernel.compiled" and self.compiled >= self.lowered:
            return "run"  # every kernel compiled: linking and the measuring child
        if self.last == "kernel.lowered":
            return "codegen"  # the driver emits kernel.lowered once every kernel is lowered: LLVM is next
        return EVENT_STAGE.get(self.last or "", "import")


def _serve(out: IO[str], inp: IO[str], on_event: Callable[[dict[str, Any]], None], db: Any, seen: _Seen) -> None:
    for line in out:
        try:
            msg = json.loads(line)
        except ValueError:
            continue  # a stray line (the child's stdout is its stderr once it has started)
        if not isinstance(msg, dict):
            continue
        if "event" in msg:
            seen.add(msg["event"])
            on_event(msg["event"])
        elif msg.get("call") == "best":
            try:
                answer: dict[str, Any] = {"id": msg["id"], "result": db.best(msg["workload"], msg["target"])}
            except Exception as exc:  # noqa: BLE001 - the child reports it as its database's error
                answer = {"id": msg["id"], "error": one_line(f"{type(exc).__name__}: {exc}")[:300]}
            inp.write(json.dumps(answer, default=str) + "\n")
            inp.flush()
        elif "ceilings" in msg:  # measured by the child: the next one need not measure them again
            add_known_ceilings(msg["ceilings"])
        elif msg.get("done"):
            break
    with contextlib.suppress(OSError):
        inp.close()


def _wait(proc: subprocess.Popen[str]) -> tuple[int, int]:
    """The child's exit status (negative: the signal) and its peak resident memory in bytes."""
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:  # already reaped
        return int(proc.wait()), 0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return int(proc.returncode), int(usage.ru_maxrss) * 1024


def _oom_kills(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """This cgroup's ``oom_kill`` count (cgroup v2 ``memory.events``, v1 ``memory/memory.oom_control``),
    None where there is none."""
    for path in (root / "memory.events", root / "memory" / "memory.oom_control"):
        try:
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            continue
    return None


def _where(stderr: str) -> str:
    """`` in compiler/<file> line N (<function>)``: the innermost Prism frame of faulthandler's report."""
    frames = [m for line in stderr.splitlines() if (m := _FRAME.match(line)) and "/compiler/" in m["file"]]
    if not frames:
        return ""
    m = frames[0]  # faulthandler lists the most recent call first
    return f" in compiler/{m['file'].split('/compiler/', 1)[1]} line {m['line']} ({m['func']})"


def _death_message(rc: int, peak: int, stderr: str, seen: _Seen, lim: CompileLimits, oom_before: int | None) -> str:
    how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with status {rc}"
    after = f"after {seen.last}" + (f" of kernel {seen.kernel}" if seen.kernel and seen.last and
                                    seen.last.startswith("kernel.") else "") if seen.last else "before its first event"
    head = f"the compiler process was {how} in stage {seen.stage()} ({after}, peak resident memory {peak >> 20} MiB)"
    as_limit = f"its address-space limit of {lim.address_space_bytes} bytes ({ENV_AS})"
    if rc == -signal.SIGXCPU:
        return f"{head}: it exceeded its CPU-time limit of {lim.cpu_s} s ({ENV_CPU})"
    if any(word in stderr for word in _OUT_OF_MEMORY):
        return f"{head}{_where(stderr)}: it ran out of memory under {as_limit}"
    if rc == -signal.SIGKILL:
        now = _oom_kills()
        if oom_before is not None and now is not None and now > oom_before:
            return (f"{head}: the kernel's OOM killer ended it (the machine ran out of memory: this cgroup's "
                    f"oom_kill count rose from {oom_before} to {now}); {as_limit} was not reached")
        return (f"{head}: not by Prism (none of its limits sends SIGKILL), most likely the kernel's OOM killer "
                "or an operator")
    where = _where(stderr)
    if rc < 0 and signal.Signals(-rc) in _SIGNAL_AS_OOM and peak >= lim.address_space_bytes // 2:
        return f"{head}{where}: most likely out of memory under {as_limit} (native code dies so when an allocation fails)"
    tail = next((one_line(x) for x in reversed(stderr.splitlines()) if one_line(x) and not _FRAME.match(x)), "")
    return f"{head}{where}" + (f": {tail[:300]}" if tail and not where else "")


class _Channel:
    """The child's end of the protocol: one JSON object a line to the caller, from any thread."""

    def __init__(self, out: IO[str]) -> None:
        self._out, self.lock = out, threading.RLock()

    def send(self, msg: dict[str, Any]) -> None:
        line = json.dumps(msg, default=_jsonable)
        with self.lock:
            self._out.write(line + "\n")
            self._out.flush()


class _RemoteDatabase:
    """The caller's tuning database, seen from the child: ``best`` asks over the pipes (thread-safe:
    one question at a time, the answer read from stdin before the next is sent)."""

    def __init__(self, spec: Mapping[str, str], channel: _Channel) -> None:
        self.name, self.label = spec.get("name", "database"), spec.get("label", "")
        self._channel, self._lock, self._next = channel, threading.Lock(), 0

    def best(self, workload: str, target: Any) -> dict[str, Any] | None:
        machine = {k: str(getattr(target, k, "") or "") for k in ("triple", "cpu", "features")}
        with self._lock:
            self._next += 1
            self._channel.send({"call": "best", "id": self._next, "workload": workload, "target": machine})
            answer = json.loads(sys.stdin.readline() or "{}")
        if "error" in answer or answer.get("id") != self._next:
            raise OSError(answer.get("error") or "the caller did not answer the look-up")
        return answer.get("result")

    def add(self, record: dict[str, Any]) -> None:
        raise OSError("a compilation in a child process does not add tuning records")

    def records(self) -> Any:
        return iter(())


def _jsonable(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else str(value)


def _child() -> int:
    """``python -m compiler.isolated_compile``: limits first, the compiler imported, then the request read
    from stdin (a spare child waits there: :func:`prestart`)."""
    lim = CompileLimits.from_env()
    for res, value in ((resource.RLIMIT_AS, lim.address_space_bytes), (resource.RLIMIT_CPU, lim.cpu_s)):
        _, hard = resource.getrlimit(res)
        resource.setrlimit(res, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))
    apply_parent_death_signal(int(os.environ.get("PRISM_PARENT_PID", os.getppid())))
    os.environ["PRISM_ADDRESS_SPACE_SETTING"] = ENV_AS  # named by a MemoryError's message (runtime.limits)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed (Python or native) goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    for name in filter(None, (m.strip() for m in os.environ.get(ENV_IMPORTS, "").split(","))):
        importlib.import_module(name)
    from . import api  # deferred: the compiler loads under the limits
    from .codegen.compile import target_machine  # deferred: as above
    from .targets import get_target  # deferred: as above

    target_machine(get_target("host"))  # LLVM loaded and its host target made while a spare waits

    line = sys.stdin.readline()
    if not line:
        return 0  # a spare nobody asked for: its caller ended
    request = json.loads(line)
    add_known_ceilings(request.get("ceilings") or [])  # the caller's: the roofline is not measured again
    known = {(c["target"], c["threads"]) for c in request.get("ceilings") or []}
    channel = _Channel(out)
    spec = request.get("tuning_db")
    db = _RemoteDatabase(spec, channel) if isinstance(spec, dict) else spec
    kwargs = dict(request["kwargs"])
    if kwargs.get("dim_ranges"):
        kwargs["dim_ranges"] = {k: tuple(v) for k, v in kwargs["dim_ranges"].items()}
    api.compile(request["model"], on_event=lambda event: channel.send({"event": event}), tuning_db=db, **kwargs)
    channel.send({"ceilings": [c for c in known_ceilings() if (c["target"], c["threads"]) not in known]})
    channel.send({"done": True})
    return 0


if __name__ == "__main__":
    sys.exit(_child())
