"""The process's native thread pool (``compiler.runtime.pool_ir``), loaded once, and its Python handle.

:func:`load` compiles the pool module for the host (llvmlite, -O2), loads it into its own MCJIT
engine, kept for the life of the process, and registers ``prism_parallel_for`` as a process symbol
(``llvmlite.binding.add_symbol``) so that every kernel engine loaded after it
(``compiler.runtime.jit``) resolves its launches to this one pool: one set of workers per process,
however many models are bound. Generated code calls the pool directly; Python only sets the thread
count (:func:`set_threads`), between runs.

Thread counts: :func:`available_threads` is ``len(os.sched_getaffinity(0))`` (the CPUs this process
may run on, as ONNX Runtime's default); :func:`check_threads` is the one check every entry point
(CLI ``--threads``, API and explorer ``threads``) applies.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from ..errors import CompileError
from . import faults

_LOCK = threading.Lock()
_POOL: dict[str, Any] = {}


def available_threads() -> int:
    """The number of CPUs this process may run on (``os.sched_getaffinity(0)``)."""
    return len(os.sched_getaffinity(0))


def check_threads(threads: int | None, stage: str = "request") -> int:
    """``threads`` (None: :func:`available_threads`) if it is an integer in ``1..available_threads()``;
    otherwise raises CompileError(stage) with one line naming the value and the limit."""
    limit = available_threads()
    if threads is None:
        return limit
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= limit:
        raise CompileError(stage, f"threads must be an integer from 1 to {limit} (the CPUs this process may run "
                           f"on), got {threads!r}")
    return threads


def load() -> dict[str, Any]:
    """The loaded pool (idempotent, thread-safe): ``{"engine", "set_threads", "threads", "parallel_for"}``
    (ctypes functions; ``parallel_for`` is the address of ``prism_parallel_for``)."""
    with _LOCK:
        if _POOL:
            return _POOL
        import llvmlite.binding as llvm  # the JIT: loaded only where code runs

        # deferred with it (llvmlite.ir): importing compiler loads no llvmlite
        from .pool_ir import pool_ir

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(), opt=2)
        mod = llvm.parse_assembly(pool_ir(llvm.get_process_triple()))
        mod.verify()
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        addr = engine.get_function_address("prism_parallel_for")
        llvm.add_symbol("prism_parallel_for", addr)
        llvm.add_symbol(faults.SYMBOL, ctypes.addressof(faults.WORD))  # the kernels' run-time checks
        _POOL.update(engine=engine, parallel_for=addr,
                     set_threads=ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(
                         engine.get_function_address("prism_pool_set_threads")),
                     threads=ctypes.CFUNCTYPE(ctypes.c_int64)(engine.get_function_address("prism_pool_threads")))
        return _POOL


def set_threads(n: int) -> int:
    """Run parallel loops on ``n`` threads (the caller and ``n - 1`` persistent workers, started on
    first use). Returns the count set (``n`` clamped to 1..256). Call between runs, never during one."""
    return int(load()["set_threads"](int(n)))


def threads() -> int:
    """The pool's current thread count."""
    return int(load()["threads"]())
