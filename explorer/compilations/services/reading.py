"""Reading an uploaded model in the web server without its memory growing with the model.

The web server reads a model at upload (`compiler.inspect_model`: opset, inputs, outputs) and again
for every compile request (`compiler.validate_request`: the graph imported, its shapes checked).
Parsing holds the file and its tensors more than once (a 200 MiB model: several hundred MiB), so a
model larger than `PRISM_INSPECT_IN_PROCESS_MAX_BYTES` (default 4 MiB; below it the parse costs a
small multiple of the file, bounded) is read by a child process (`compiler.isolated`) under
`PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES` of address space (default max(M/8, 2 GiB), M the machine's
memory) and `PRISM_INSPECT_TIME_LIMIT_S` (default 120 s); so is every compile request with calibration
data (its arrays are read whole to check them against the inputs). A model that needs more is refused
with a message naming the limit; the web server's own memory stays where it was. At most
`PRISM_INSPECT_CONCURRENCY` (default 2) such children run at once per web process, so that together
they stay within that many times the limit; a request that waits longer than the time limit for one
gets `ReaderBusy` (the views answer 503 with Retry-After).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

import compiler  # thread-safe: tests/compiler/test_api_threads.py
from compiler import isolated

LIMITS = {"limit_name": "PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES", "time_limit_name": "PRISM_INSPECT_TIME_LIMIT_S"}


class ReaderBusy(Exception):
    """Every child that may read models is busy for longer than the time limit: retry later."""


_SLOTS: dict[int, threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


@contextmanager
def _slot() -> Iterator[None]:
    n = max(1, int(settings.PRISM_INSPECT_CONCURRENCY))
    with _SLOTS_LOCK:
        slots = _SLOTS.setdefault(n, threading.BoundedSemaphore(n))
    wait = float(settings.PRISM_INSPECT_TIME_LIMIT_S)
    if not slots.acquire(timeout=wait):
        raise ReaderBusy(f"the server is reading {n} other large model(s) (PRISM_INSPECT_CONCURRENCY) and none "
                         f"finished within {wait:g} s; retry in a moment")
    try:
        yield
    finally:
        slots.release()


def _in_process(path: str | os.PathLike[str]) -> bool:
    return os.path.getsize(path) <= int(settings.PRISM_INSPECT_IN_PROCESS_MAX_BYTES)


def _limits() -> dict[str, Any]:
    return {"max_address_space_bytes": int(settings.PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES),
            "timeout_s": float(settings.PRISM_INSPECT_TIME_LIMIT_S), **LIMITS}


def inspect_model(path: str | os.PathLike[str]) -> dict[str, Any]:
    """`compiler.inspect_model(path)`, in a child for a large file (see the module docstring).
    Raises compiler.CompileError(stage="import"): the model's errors, or a limit named; ReaderBusy."""
    if _in_process(path):
        return compiler.inspect_model(path)
    with _slot():
        return isolated.inspect_model(path, **_limits())


def validate_request(path: str | os.PathLike[str], **request: Any) -> dict[str, Any]:
    """`compiler.validate_request(path, **request)` (`calibration_data` a path or None), in a child for
    a large file or with calibration data. Raises compiler.CompileError: the request's errors, or a limit named
    (stage request); ReaderBusy."""
    if _in_process(path) and not request.get("calibration_data"):  # the arrays too are read whole
        return compiler.validate_request(path, **request)
    with _slot():
        return isolated.validate_request(path, **request, **_limits())
