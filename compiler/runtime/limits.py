"""Resource limits of running a compiled model: sizes checked before anything is allocated, and the
rlimits of the child process that runs generated code.

Every limit is an environment variable with a default derived from the machine's memory ``M``
(:func:`machine_memory_bytes`: physical memory, or the cgroup's memory limit, v2 or v1, when lower):

==========================================  =================  ==========================================
variable                                    default            what it bounds
==========================================  =================  ==========================================
``PRISM_MAX_ARENA_BYTES``                   ``M / 4``          the memory plan's arena plus every buffer
                                                               outside it (heap values, scratch), bytes
``PRISM_MAX_INPUT_BYTES``                   ``M / 16``         each graph input, bytes
``PRISM_MAX_CONSTANT_BYTES``                ``M / 8``          all constants a program binds, bytes
``PRISM_CHILD_MAX_ADDRESS_SPACE_BYTES``     ``M / 2``, >= 4 G  the child's ``RLIMIT_AS`` (its whole
                                                               virtual memory: Python, LLVM, ONNX Runtime)
``PRISM_CHILD_MAX_CPU_S``                   ``900``            the child's ``RLIMIT_CPU``, seconds
==========================================  =================  ==========================================

:func:`check_program` raises ``CompileError(stage="run")`` naming the tensor, its size and the limit
before the child is started (``compiler.runtime.runner``, ``compiler.runtime.execute``);
``compiler.runtime.child`` applies :func:`apply_child_limits` to itself before it reads its job.
The sizes follow from the memory the child needs: the arena, the inputs (and one copy of each, bound
next to slack), the constants (and ONNX Runtime's own copy), ONNX Runtime's intermediate tensors.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CompileError

GIB = 1 << 30
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def machine_memory_bytes(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """Physical memory in bytes, or this process's cgroup memory limit when that is lower: cgroup v2's
    ``memory.max`` or cgroup v1's ``memory/memory.limit_in_bytes`` under ``cgroup_root`` (a container
    sees its own cgroup there; "max" and v1's unlimited value, near 2^63, leave the physical size)."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    for limit in (cgroup_root / "memory.max", cgroup_root / "memory" / "memory.limit_in_bytes"):
        try:
            raw = limit.read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) > 0:
            total = min(total, int(raw))
    return int(total)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


@dataclass(frozen=True)
class Limits:
    """The limits in force (see the module docstring); :meth:`from_env` reads them."""

    arena_bytes: int
    input_bytes: int
    constant_bytes: int
    child_address_space_bytes: int
    child_cpu_s: int

    @classmethod
    def from_env(cls) -> Limits:
        m = machine_memory_bytes()
        return cls(
            arena_bytes=_env_int("PRISM_MAX_ARENA_BYTES", m // 4),
            input_bytes=_env_int("PRISM_MAX_INPUT_BYTES", m // 16),
            constant_bytes=_env_int("PRISM_MAX_CONSTANT_BYTES", m // 8),
            child_address_space_bytes=_env_int("PRISM_CHILD_MAX_ADDRESS_SPACE_BYTES", max(m // 2, 4 * GIB)),
            child_cpu_s=_env_int("PRISM_CHILD_MAX_CPU_S", 900),
        )

    def child_env(self) -> dict[str, str]:
        """The environment that gives a child process these limits."""
        return {"PRISM_CHILD_MAX_ADDRESS_SPACE_BYTES": str(self.child_address_space_bytes),
                "PRISM_CHILD_MAX_CPU_S": str(self.child_cpu_s)}


def _nbytes(dtype: str, shape: Any) -> int:
    return int(np.dtype(dtype).itemsize) * int(np.prod([int(d) for d in shape], dtype=object))


def _over(what: str, need: int, limit: int, variable: str, **where: str) -> CompileError:
    return CompileError("run", f"{what} needs {need} bytes, over the limit of {limit} bytes ({variable})",
                        **where)


def check_program(prog: Any, limits: Limits | None = None) -> None:
    """Check a linked ``compiler.runtime.program.Program`` against ``limits`` (default
    :meth:`Limits.from_env`) before anything of it is allocated.

    Raises CompileError(stage="run"), naming the tensor and both sizes: an input over
    ``PRISM_MAX_INPUT_BYTES``; the arena (the plan's ``arena_bytes``) with the buffers outside it
    (heap values, scratch) over ``PRISM_MAX_ARENA_BYTES`` (the largest buffer named); the constants
    together over ``PRISM_MAX_CONSTANT_BYTES`` (the largest named).
    """
    lim = limits or Limits.from_env()
    for name, dtype, shape in prog.inputs:
        n = _nbytes(dtype, shape)
        if n > lim.input_bytes:
            raise _over(f"input {name!r} ({dtype}{list(shape)})", n, lim.input_bytes, "PRISM_MAX_INPUT_BYTES")
    buffers = [(f"%{name}", _nbytes(b["dtype"], b["shape"])) for name, b in prog.values.items()
               if b["kind"] == "heap"]
    buffers += [(f"scratch of kernel {c['name']}", _nbytes(a["dtype"], a["shape"]))
                for c in prog.calls for a in c["args"] if a["kind"] == "scratch"]
    arena = [(f"%{name}", _nbytes(b["dtype"], b["shape"])) for name, b in prog.values.items()
             if b["kind"] == "arena"]
    total = int(prog.arena_bytes) + sum(n for _, n in buffers)
    if total > lim.arena_bytes:
        big, size = max(arena + buffers, key=lambda x: x[1], default=("none", 0))
        raise _over(f"the working memory (arena of {int(prog.arena_bytes)} bytes and {len(buffers)} buffers "
                    f"outside it; largest {big}, {size} bytes)", total, lim.arena_bytes, "PRISM_MAX_ARENA_BYTES")
    names = list(getattr(prog, "const_names", [])) + [""] * len(prog.consts)
    consts = [(f"constant {names[i]}" if names[i] else f"constant #{i}", int(c.nbytes))
              for i, c in enumerate(prog.consts)]
    consts += [(f"constant output {name!r}", int(np.asarray(p).nbytes)) for name, kind, p in prog.outputs
               if kind == "const"]
    total = sum(n for _, n in consts)
    if total > lim.constant_bytes:
        big, size = max(consts, key=lambda x: x[1])
        raise _over(f"the constants ({len(consts)}; largest {big}, {size} bytes)", total, lim.constant_bytes,
                    "PRISM_MAX_CONSTANT_BYTES")


def apply_child_limits(parent_pid: int | None = None) -> None:
    """In the child process that runs generated code, before it allocates anything: ``RLIMIT_AS`` and
    ``RLIMIT_CPU`` from ``PRISM_CHILD_MAX_ADDRESS_SPACE_BYTES`` / ``PRISM_CHILD_MAX_CPU_S`` (the
    parent's :meth:`Limits.child_env`), and ``PR_SET_PDEATHSIG`` = SIGKILL (Linux ``prctl(2)``) so that
    the child dies with the parent. ``parent_pid``: the parent that started it; when the parent is
    already gone (it died before the ``prctl``), the child exits at once."""
    lim = Limits.from_env()
    for res, value in ((resource.RLIMIT_AS, lim.child_address_space_bytes), (resource.RLIMIT_CPU, lim.child_cpu_s)):
        soft, hard = resource.getrlimit(res)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(res, (value, hard))
    os.environ["PRISM_ADDRESS_SPACE_SETTING"] = "PRISM_CHILD_MAX_ADDRESS_SPACE_BYTES"
    apply_parent_death_signal(parent_pid)


def apply_parent_death_signal(parent_pid: int | None = None) -> None:
    """``PR_SET_PDEATHSIG`` = SIGKILL (Linux ``prctl(2)``): this process dies with its parent (the
    thread that started it). ``parent_pid``: that parent; when it is already gone (it died before the
    ``prctl``), exit at once with status 70."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the reaper of compiler.runtime.process still helps
        pass
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(70)  # the parent died before the prctl: nobody will read the result


def limit_message(stderr: str, returncode: int) -> str | None:
    """The sentence for a child that hit one of its rlimits (``MemoryError`` under ``RLIMIT_AS``,
    ``SIGXCPU`` or ``SIGKILL`` at ``RLIMIT_CPU``), else None."""
    lim = Limits.from_env()
    if returncode == -signal.SIGXCPU:
        return f"the run exceeded its CPU-time limit of {lim.child_cpu_s} s (PRISM_CHILD_MAX_CPU_S)"
    if "MemoryError" in stderr or "std::bad_alloc" in stderr:
        return (f"the run ran out of memory under its address-space limit of {lim.child_address_space_bytes} "
                "bytes (PRISM_CHILD_MAX_ADDRESS_SPACE_BYTES)")
    return None


def memory_error_message(exc: MemoryError) -> str:
    """The one-line message for a MemoryError in the compiling process: what failed and this
    process's address-space limit (``RLIMIT_AS``, which the explorer's workers set), if any, and the
    setting it comes from (``PRISM_ADDRESS_SPACE_SETTING``, which the process that set it names)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    setting = os.environ.get("PRISM_ADDRESS_SPACE_SETTING", "")
    limit = "no address-space limit" if soft == resource.RLIM_INFINITY else \
        f"the process's address-space limit of {soft} bytes (RLIMIT_AS{', ' + setting if setting else ''})"
    what = " ".join(str(exc).split())[:200] or "an allocation failed"
    return f"out of memory: {what}; {limit}"
