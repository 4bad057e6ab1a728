"""Planted failures for the stack tests, imported by the process that compiles: the pool process, or
the compiling child (`PRISM_COMPILE_CHILD_IMPORTS`, which tests/explorer/planted_app.py sets).

- A graph named `planted_<case>` (a case of tests/compiler/runtime/test_crash_kinds.py: `sigsegv`,
  `stack_overflow`) gets a crashing kernel right after its first kernel: generated code that crashes
  in the measuring child (stage run).
- A graph named `planted_codegen_<case>` fails in the codegen stage of the compiling process itself, as
  LLVM would: `sigsegv` (a native crash), `llvm_oom` (allocations of virtual memory until one fails
  under RLIMIT_AS, then LLVM's own words and abort(), as `llvm::report_bad_alloc_error` does),
  `memory_error` (a Python allocation over RLIMIT_AS), `sigkill` (what the kernel's OOM killer sends),
  `cpu` (a busy loop until RLIMIT_CPU).
Every other model compiles as usual."""

from __future__ import annotations

import ctypes
import os
import resource
import signal

import compiler.driver.lower as build
from compiler.loops.ir import Buffer, PrimFunc
from compiler.loops.lower import KernelArg, LoweredKernel
from tests.compiler.runtime.test_crash_kinds import CASES

CODEGEN_CASES = ("sigsegv", "llvm_oom", "memory_error", "sigkill", "cpu")
_real_lower, _real_compile_all = build.lower_graph, build.compile_all


def _planted(graph, target, schedule_for=None):  # type: ignore[no-untyped-def]
    kernels = _real_lower(graph, target, schedule_for)
    codegen = graph.name.startswith("planted_codegen_") and graph.name.removeprefix("planted_codegen_") in CODEGEN_CASES
    case = "sigsegv" if codegen else graph.name.removeprefix("planted_")
    if not graph.name.startswith("planted_") or case not in CASES:
        return kernels
    first_in = kernels[0].args[0]
    x = Buffer("x", "f32", (first_in.buffer.numel,), "arena")
    name = graph.name if codegen else f"planted_{case}"
    func = PrimFunc(name, [x], CASES[case][0](x))
    return kernels[:1] + [LoweredKernel(name, "planted", func, [KernelArg("value", first_in.name, x)])] + kernels[1:]


def _fail_in_codegen(case: str) -> None:
    libc = ctypes.CDLL(None)
    if case == "sigsegv":
        ctypes.string_at(0)
    elif case == "llvm_oom":
        libc.malloc.restype = ctypes.c_void_p
        while libc.malloc(ctypes.c_size_t(64 << 20)):  # mmap'd, never touched: address space, not memory
            pass
        os.write(2, b"LLVM ERROR: out of memory\nAllocation failed\n")
        libc.abort()
    elif case == "memory_error":
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        bytearray(2 * soft)
    elif case == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif case == "cpu":
        while True:
            pass


def _compile_all(kernels, target, threads=2):  # type: ignore[no-untyped-def]
    for k in kernels:
        if k.name.startswith("planted_codegen_"):
            _fail_in_codegen(k.name.removeprefix("planted_codegen_"))
    return _real_compile_all(kernels, target, threads)


build.lower_graph = _planted
build.compile_all = _compile_all
