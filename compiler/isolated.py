"""The read-only API calls (:func:`inspect_model`, :func:`validate_request`) in a fresh interpreter
under an address-space and a time limit, so that the caller's memory does not grow with the model.

A long-lived service that reads models it is sent (the explorer's web server reads each upload,
and the model again for every compile request) calls these instead of ``compiler.inspect_model`` /
``compiler.validate_request``: the model is parsed by ``python -m compiler.isolated`` (started with
``subprocess``, the request as JSON on stdin, the result as JSON on stdout), which sets its own
``RLIMIT_AS`` (setrlimit(2)) to ``max_address_space_bytes`` and ``PR_SET_PDEATHSIG`` (prctl(2)) before
it reads anything, and is killed after ``timeout_s``. Parsing a protobuf holds the whole file and its
tensors at least once more (onnx's Python objects, then numpy arrays at import), so a 200 MiB model
costs the parser several hundred MiB; those come and go with the child.

The cost is one interpreter start with onnx and numpy imported, about 0.4 s of CPU (1.5–2.5 s wall on
a 2-core machine shared by 8 agents): the caller may keep small files in process (the explorer does below
``PRISM_INSPECT_IN_PROCESS_MAX_BYTES``).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import api
from .errors import CompileError, one_line
from .runtime.limits import PR_SET_PDEATHSIG
from .targets import host_features

__all__ = ["inspect_model", "validate_request"]

# the stage a failure of the child itself is reported in, per call
_STAGE = {"inspect_model": "import", "validate_request": "request"}


def inspect_model(path: str | os.PathLike[str], *, max_address_space_bytes: int, timeout_s: float,
                  limit_name: str = "max_address_space_bytes", time_limit_name: str = "timeout_s") -> dict[str, Any]:
    """``compiler.inspect_model(path)`` (same result, same CompileError) parsed in a child process.

    ``max_address_space_bytes``: the child's whole virtual memory (bytes; the interpreter with onnx
    and numpy takes about 0.25 GiB of it before the model, 0.33 GiB with LLVM for validate_request); ``timeout_s``: seconds. ``limit_name`` /
    ``time_limit_name``: what the caller calls those limits (a setting's name), for the messages.
    Raises CompileError(stage="import"): the model's own errors as the in-process call raises them;
    ``reading the model needs more memory than the limit of N bytes (<limit_name>)`` when the child
    runs out of address space; ``reading the model took longer than N s (<time_limit_name>)``;
    ``the model reader was killed by SIGSEGV, most likely out of memory under the limit of N bytes
    (<limit_name>)`` when native code (LLVM, protobuf) dies of a failed allocation (SIGSEGV, SIGABRT,
    SIGBUS: seen for validate_request under a 320 MiB limit); ``the model reader crashed (killed by
    SIG...)`` for any other death of the child.
    """
    return _call("inspect_model", {"model": str(path)}, max_address_space_bytes, timeout_s,
                 limit_name, time_limit_name)


def validate_request(path: str | os.PathLike[str], *, target: str, pipeline: str,
                     input_shapes: Mapping[str, Sequence[Any]] | None, calibration_data: str | None = None,
                     input_values: Mapping[str, Any] | None = None, threads: int | None = None,
                     dim_ranges: Mapping[str, tuple[int, int]] | None = None, max_address_space_bytes: int,
                     timeout_s: float, limit_name: str = "max_address_space_bytes",
                     time_limit_name: str = "timeout_s") -> dict[str, Any]:
    """``compiler.validate_request`` (same arguments, result and errors; ``calibration_data`` only as
    the path of an ``.npz``; ``input_values`` JSON-able) checked in a child process. The limits and
    their failures as :func:`inspect_model`, in stage ``request``."""
    kwargs = {"model": str(path), "target": target, "pipeline": pipeline,
              "input_shapes": {k: list(v) for k, v in input_shapes.items()} if input_shapes else input_shapes,
              "calibration_data": calibration_data, "input_values": dict(input_values) if input_values else None,
              "threads": threads, "dim_ranges": {k: list(v) for k, v in dim_ranges.items()} if dim_ranges else None}
    return _call("validate_request", kwargs, max_address_space_bytes, timeout_s, limit_name, time_limit_name)


def _call(name: str, kwargs: dict[str, Any], max_as: int, timeout_s: float, limit_name: str,
          time_limit_name: str) -> dict[str, Any]:
    stage = _STAGE[name]
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "PRISM_ISOLATED_MAX_AS": str(int(max_as)), "PRISM_PARENT_PID": str(os.getpid())}
    request = json.dumps({"call": name, "kwargs": kwargs})
    try:
        proc = subprocess.run([sys.executable, "-m", "compiler.isolated"], input=request, env=env, cwd=root,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise CompileError(stage, f"reading the model took longer than {timeout_s:g} s ({time_limit_name})") from None
    out = _last_json(proc.stdout)
    if proc.returncode == 0 and out is not None and "result" in out:
        return dict(out["result"])
    if out is not None and "error" in out:
        e = out["error"]
        raise CompileError(e["stage"], e["message"], node=e.get("node"), op=e.get("op"), pass_name=e.get("pass"),
                           kernel=e.get("kernel"), attribute=e.get("attribute"))
    if (out is not None and out.get("memory")) or "MemoryError" in proc.stderr or "bad_alloc" in proc.stderr:
        raise CompileError(stage, f"reading the model needs more memory than the limit of {int(max_as)} bytes "
                                  f"({limit_name})")
    how = (f"killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
           else f"exited with status {proc.returncode}")
    if proc.returncode in (-signal.SIGSEGV, -signal.SIGABRT, -signal.SIGBUS):
        # native code (LLVM, protobuf) whose allocation fails under RLIMIT_AS dies rather than raising
        raise CompileError(stage, f"the model reader was {how}, most likely out of memory under the limit of "
                                  f"{int(max_as)} bytes ({limit_name})")
    tail = one_line(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "")[:300]
    raise CompileError(stage, f"the model reader crashed ({how}){': ' + tail if tail else ''}")


def _last_json(stdout: str) -> dict[str, Any] | None:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None


def _child() -> int:
    """``python -m compiler.isolated``: limits first, then the call read from stdin."""
    request = json.loads(sys.stdin.read())  # read before the limit: it is the caller's, and small
    if request["call"] == "validate_request":
        host_features()  # LLVM's library and targets are loaded before the limit: the interpreter's memory
    max_as = int(os.environ["PRISM_ISOLATED_MAX_AS"])
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (max_as if hard == resource.RLIM_INFINITY else min(max_as, hard), hard))
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != int(os.environ.get("PRISM_PARENT_PID", os.getppid())):
        return 70  # the caller died before the prctl: nobody reads the answer
    try:
        kwargs = request["kwargs"]
        if kwargs.get("dim_ranges"):
            kwargs["dim_ranges"] = {k: tuple(v) for k, v in kwargs["dim_ranges"].items()}
        result = getattr(api, request["call"])(**kwargs)
        print(json.dumps({"result": result}))
    except CompileError as exc:
        # protobuf's arena could not grow ("Arena alloc failed"), or a pass module could not be imported
        if "alloc failed" in exc.message or "MemoryError" in exc.message:
            print(json.dumps({"memory": True}))
            return 2
        print(json.dumps({"error": exc.to_dict()}))
    except MemoryError:
        print(json.dumps({"memory": True}))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(_child())
