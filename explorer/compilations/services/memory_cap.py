"""The aggregate memory cap of one worker: its concurrent compilations together reserve at most
`PRISM_WORKER_MEMORY_CAP_BYTES` (default 3/4 of the machine's memory, or of its cgroup's limit).

Each compilation reserves an estimate of its peak before it starts (`estimate_bytes`: the compiling
and measuring children's base, `PRISM_COMPILE_BASE_BYTES`, plus `PRISM_COMPILE_BYTES_PER_MODEL_BYTE`
times the model file: the protobuf, its numpy constants, folded copies and the measuring child's
copy), and raises it once the memory plan is known (`Reservation.grow`, from `memory.planned`'s
`arena_bytes`: the measuring child allocates that arena). The per-process limits (the compiling
child's `PRISM_COMPILE_MAX_ADDRESS_SPACE_BYTES`, the measuring child's
`PRISM_CHILD_MAX_ADDRESS_SPACE_BYTES`) bound each job; this cap bounds their sum, which per-process
rlimits cannot.

A compilation whose estimate alone is over the cap is refused at once; one that fits but not beside
what the others hold waits (its heartbeat goes on), at most `PRISM_WORKER_MEMORY_WAIT_S`, then is
refused. Both messages name the sizes and the settings.

The ledger is one JSON file per Celery node, `var/memory/<node>.json` (`{pid: {"bytes", "compilation",
"since"}}`), read and written under `flock(2)`: the pool processes of a prefork worker are separate
processes. Entries of processes that no longer exist (a pool process killed mid-run) are dropped at
every read, so a lost run never holds memory.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings

from compiler.runtime.process import pid_alive

CAP = "PRISM_WORKER_MEMORY_CAP_BYTES"


class MemoryRefused(Exception):  # noqa: N818 - it is a refusal, not a bug
    """A compilation that cannot reserve its memory under the worker's cap; `message` names both sizes."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def estimate_bytes(model_bytes: int) -> int:
    """The peak memory (bytes) a compilation of a model file of `model_bytes` bytes is expected to need
    across its children, before its memory plan is known (module docstring)."""
    return int(settings.PRISM_COMPILE_BASE_BYTES + settings.PRISM_COMPILE_BYTES_PER_MODEL_BYTE * model_bytes)


def ledger_path(node: str) -> Path:
    return Path(settings.VAR_DIR) / "memory" / (re.sub(r"[^A-Za-z0-9_.@-]", "_", node or "worker") + ".json")


@contextmanager
def _ledger(node: str) -> Iterator[dict[str, Any]]:
    """The node's entries, live ones only, locked; written back when the block ends."""
    p = ledger_path(node)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        try:
            entries = json.loads(f.read() or "{}")
        except ValueError:
            entries = {}
        entries = {pid: e for pid, e in entries.items() if pid.isdigit() and pid_alive(int(pid))}
        yield entries
        f.seek(0)
        f.truncate()
        f.write(json.dumps(entries))
        f.flush()


class Reservation:
    """This process's entry in its node's ledger (`reserve`)."""

    def __init__(self, node: str, compilation_id: str, need: int) -> None:
        self.node, self.compilation_id, self.bytes = node, compilation_id, need

    def grow(self, need: int) -> None:
        """Raise the reservation to `need` bytes (never lowers it). It is not refused: the run is under
        way; later compilations wait for the memory it now holds."""
        if need <= self.bytes:
            return
        self.bytes = need
        with _ledger(self.node) as entries:
            entries[str(os.getpid())] = self._entry()

    def _entry(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "compilation": self.compilation_id, "since": time.time()}


def held_bytes(node: str) -> dict[str, int]:
    """`{pid: bytes}` reserved now by the live processes of `node`."""
    with _ledger(node) as entries:
        return {pid: int(e["bytes"]) for pid, e in entries.items()}


@contextmanager
def reserve(node: str, compilation_id: str, need: int, poll_s: float = 0.25) -> Iterator[Reservation]:
    """Reserve `need` bytes for compilation `compilation_id` under `node`'s cap for the block.

    Raises MemoryRefused: at once when `need` alone is over the cap; after `PRISM_WORKER_MEMORY_WAIT_S`
    when the other compilations of the node held too much all that time."""
    cap, wait_s = int(settings.PRISM_WORKER_MEMORY_CAP_BYTES), float(settings.PRISM_WORKER_MEMORY_WAIT_S)
    if need > cap:
        raise MemoryRefused(f"this compilation needs an estimated {need} bytes of memory, over the worker's "
                            f"memory cap of {cap} bytes ({CAP})")
    me, res = str(os.getpid()), Reservation(node, compilation_id, need)
    deadline = time.monotonic() + wait_s
    while True:
        with _ledger(node) as entries:
            entries.pop(me, None)
            held = sum(int(e["bytes"]) for e in entries.values())
            if held + need <= cap:
                entries[me] = res._entry()
                break
        if time.monotonic() >= deadline:
            raise MemoryRefused(
                f"waited {wait_s:g} s (PRISM_WORKER_MEMORY_WAIT_S) for memory: this compilation needs an estimated "
                f"{need} bytes and the worker's {len(entries)} other compilation(s) hold {held} bytes of its memory "
                f"cap of {cap} bytes ({CAP})")
        time.sleep(poll_s)
    try:
        yield res
    finally:
        with _ledger(node) as entries:
            entries.pop(me, None)
