"""The machine's roofline ceilings, measured by code Prism generates: peak FP32 FLOP/s and memory bandwidth.

The roofline model (Williams, Waterman and Patterson, "Roofline", CACM 2009) bounds a kernel of
arithmetic intensity I (FLOP/byte) by ``min(peak FLOP/s, I x bandwidth)``. Both ceilings are measured
here, not read from a data sheet, the way the Empirical Roofline Toolkit (ERT) and STREAM do:

- **peak FP32 FLOP/s**: ``prism_ceiling_fma(ptr acc, ptr n)`` runs ``n`` rounds of
  :func:`fma_chains` independent vector fused multiply-adds (``llvm.fma`` on ``<L x float>``, L the
  target's f32 lanes: 16 with AVX-512, 8 with AVX2), enough independent chains to cover the FMA latency
  of every pipe (:data:`MIN_CHAINS`) and few enough that every chain and both constants stay in vector
  registers (16 ``ymm`` on AVX2, 32 ``zmm`` with AVX-512); each FMA is 2 FLOP per lane. More chains than
  registers is not more work in flight: LLVM spills the accumulators to the stack and shuffles the rest
  between registers every round, which on AVX2 measured 14 GFLOP/s where 12 chains reach the FMA pipes'
  peak.
- **memory bandwidth**: ``prism_ceiling_copy(ptr dst, ptr src, ptr n, ptr s, ptr reps)`` streams ``n``
  floats, ``dst[i] = src[i] + s`` (STREAM's Copy, with ``s = 0`` passed at run time so that LLVM cannot
  turn the loop into a ``memcpy`` call) over two arrays of :data:`COPY_BYTES` each, far larger than the
  last-level cache; bytes counted as STREAM counts them, 4 read + 4 written per element.
- **cache bandwidths** (L2, L3): the same copy, ``reps`` passes with the arrays swapping roles, over
  arrays that together fill half of each thread's share of that cache (sizes from Linux's cacheinfo,
  ``compiler.runtime.caches``), as ERT sweeps its working set through the cache levels. A kernel whose
  data stays in a cache is bounded by that level's line, not by memory's.

Both are emitted with llvmlite by the target's own machine (``compiler.codegen.compile.target_machine``,
-O3) and loaded into this process (``compiler.runtime.jit``); ``threads`` Python threads call them at
once on disjoint parts (a ctypes call releases the GIL), so the figures are those of the thread count
the kernels are timed at. Each is the best of :data:`REPEATS` runs (STREAM and ERT report the best).

A worker measures once, in a child interpreter (generated code never runs in the worker itself,
as ``compiler.runtime.process`` runs every measurement), and keeps the figures for its lifetime:
:func:`worker_ceilings`.
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from ..codegen.compile import _llvm, target_machine
from ..errors import CompileError
from ..targets import Target, get_target
from .caches import data_caches
from .jit import JitModule

log = logging.getLogger(__name__)

MAX_CHAINS = 16  # independent FMA chains at most (the count that reached one core's peak with AVX-512)
MIN_CHAINS = 8  # FMA latency (4 cycles on Zen 3/4/5, Skylake-X, Sapphire Rapids) x 2 FMA pipes
FMA_ROUNDS = 1 << 21  # rounds of fma_chains() vector FMAs per call (about 10 ms at 300 GFLOP/s)
COPY_BYTES = 64 << 20  # bytes per array of the streaming copy (two arrays; larger than any L3 here)
CACHE_PASS_BYTES = 256 << 20  # bytes each thread moves per call of the in-cache copies (a few ms)
REPEATS = 7
CHILD_TIMEOUT_S = 120.0

F32 = ir.FloatType()
I64 = ir.IntType(64)
PTR = ir.PointerType()


@dataclass(frozen=True)
class Ceilings:
    """Measured ceilings of this machine for ``target`` at ``threads`` threads.

    Attributes:
        peak_gflops: FP32 GFLOP/s of the FMA kernel (1e9 FLOP per second).
        peak_gbps: GB/s of the streaming copy (1e9 bytes per second, read + written).
        threads: the threads both ran on at once.
        target: the target name the kernels were generated for.
        lanes: f32 lanes per vector of the FMA kernel.
        copy_bytes: bytes per array of the copy.
        method: one line saying how they were measured (shown beside the chart).
        l2_gbps, l3_gbps: GB/s of the same copy with its arrays inside the L2 / the L3 (None: Linux did
            not report that cache); l2_bytes, l3_bytes: the size of one such cache.
        host: the machine's host name; cpu: LLVM's name for its CPU and the model it reports.
    """

    peak_gflops: float
    peak_gbps: float
    threads: int
    target: str
    lanes: int
    copy_bytes: int
    method: str
    l2_gbps: float | None = None
    l2_bytes: int | None = None
    l3_gbps: float | None = None
    l3_bytes: int | None = None
    host: str = ""
    cpu: str = ""

    def payload(self) -> dict[str, Any]:
        """The event payload (``model.timed`` ``ceilings``; cache figures left out where unknown)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def vector_registers(target: Target) -> int:
    """The architectural vector registers of ``target``: 32 with AVX-512 (``zmm0-31``), on AArch64
    (``v0-31``) and RISC-V V (``v0-31``); 16 on x86-64 without AVX-512 (``xmm``/``ymm0-15``)."""
    if target.triple.startswith("x86_64"):
        return 32 if "avx512f" in target.features else 16
    return 32


def fma_chains(target: Target) -> int:
    """Independent FMA chains of the peak kernel for ``target``: the registers less four (the two
    constant operands and room for the loop), at most :data:`MAX_CHAINS`: 12 on AVX2, 16 with AVX-512.
    Raises CompileError where that leaves fewer than :data:`MIN_CHAINS` (the pipes would idle)."""
    n = min(MAX_CHAINS, vector_registers(target) - 4)
    if n < MIN_CHAINS:
        raise CompileError("run", f"target {target.name}: {vector_registers(target)} vector registers hold "
                                  f"only {n} FMA chains, fewer than the {MIN_CHAINS} latency x pipes needs")
    return n


def ceilings_ir(lanes: int, triple: str, chains: int = MAX_CHAINS) -> str:
    """The LLVM IR text of ``prism_ceiling_fma`` (``chains`` independent ``<lanes x float>`` FMA
    chains) and ``prism_ceiling_copy`` (see the module docstring)."""
    mod = ir.Module(name="prism_ceilings")
    mod.triple = triple
    vec = ir.VectorType(F32, lanes)
    fma = ir.Function(mod, ir.FunctionType(vec, [vec, vec, vec]), f"llvm.fma.v{lanes}f32")
    _fma_kernel(mod, vec, fma, chains)
    _copy_kernel(mod, vec)
    return str(mod)


def _fma_kernel(mod: ir.Module, vec: ir.VectorType, fma: ir.Function, chains: int) -> None:
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR]), "prism_ceiling_fma")
    acc_p, n_p = fn.args
    entry, loop, done = (fn.append_basic_block(x) for x in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    n = b.load(n_p, typ=I64, name="n")
    start = [b.load(b.gep(acc_p, [ir.Constant(I64, j * vec.count)], source_etype=F32), typ=vec, align=4)
             for j in range(chains)]
    mul = ir.Constant(vec, [ir.Constant(F32, 0.999999)] * vec.count)
    add = ir.Constant(vec, [ir.Constant(F32, 1e-7)] * vec.count)
    b.branch(loop)
    b = ir.IRBuilder(loop)
    i = b.phi(I64, name="i")
    accs = [b.phi(vec, name=f"a{j}") for j in range(chains)]
    nxt = [b.call(fma, [a, mul, add]) for a in accs]
    i1 = b.add(i, ir.Constant(I64, 1))
    b.cbranch(b.icmp_unsigned("<", i1, n), loop, done)
    i.add_incoming(ir.Constant(I64, 0), entry)
    i.add_incoming(i1, loop)
    for a, s, x in zip(accs, start, nxt, strict=True):
        a.add_incoming(s, entry)
        a.add_incoming(x, loop)
    b = ir.IRBuilder(done)
    for j, x in enumerate(nxt):
        b.store(x, b.gep(acc_p, [ir.Constant(I64, j * vec.count)], source_etype=F32), align=4)
    b.ret_void()


def _copy_kernel(mod: ir.Module, vec: ir.VectorType) -> None:
    """``prism_ceiling_copy(dst, src, n, s, reps)``: ``reps`` passes of ``dst[i] = src[i] + s`` over ``n``
    floats, the two arrays swapping roles after each pass (so no pass repeats the last one's stores)."""
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, PTR, PTR]), "prism_ceiling_copy")
    dst, src, n_p, s_p, r_p = fn.args
    entry, outer, loop, latch, done = (fn.append_basic_block(x) for x in ("entry", "outer", "loop", "latch", "done"))
    b = ir.IRBuilder(entry)
    n = b.load(n_p, typ=I64, name="n")
    reps = b.load(r_p, typ=I64, name="reps")
    s = b.load(s_p, typ=F32, name="s")
    splat = b.insert_element(ir.Constant(vec, ir.Undefined), s, ir.Constant(ir.IntType(32), 0))
    splat = b.shuffle_vector(splat, ir.Constant(vec, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), vec.count), [0] * vec.count))
    b.branch(outer)
    b = ir.IRBuilder(outer)
    r, a, c = b.phi(I64, name="r"), b.phi(PTR, name="from"), b.phi(PTR, name="to")
    b.branch(loop)
    b = ir.IRBuilder(loop)
    i = b.phi(I64, name="i")
    v = b.load(b.gep(a, [i], source_etype=F32), typ=vec, align=64)
    b.store(b.fadd(v, splat), b.gep(c, [i], source_etype=F32), align=64)
    i1 = b.add(i, ir.Constant(I64, vec.count))
    b.cbranch(b.icmp_unsigned("<", i1, n), loop, latch)
    i.add_incoming(ir.Constant(I64, 0), outer)
    i.add_incoming(i1, loop)
    b = ir.IRBuilder(latch)
    r1 = b.add(r, ir.Constant(I64, 1))
    b.cbranch(b.icmp_unsigned("<", r1, reps), outer, done)
    r.add_incoming(ir.Constant(I64, 0), entry)
    r.add_incoming(r1, latch)
    a.add_incoming(src, entry)
    a.add_incoming(c, latch)
    c.add_incoming(dst, entry)
    c.add_incoming(a, latch)
    ir.IRBuilder(done).ret_void()


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo reports it ("AMD EPYC 7763 64-Core Processor"), or "unknown"."""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8", errors="replace"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _aligned(n: int) -> np.ndarray:
    """``n`` float32 zeros, 64-byte aligned."""
    raw = np.zeros(n + 16, np.float32)
    off = (-raw.ctypes.data % 64) // 4
    return raw[off:off + n]


def _best_wall_s(threads: int, call: Any) -> float:
    """The best of REPEATS (after one warm-up) wall times of ``call(t)`` run by ``threads`` threads at once."""

    def work(t: int, barrier: threading.Barrier, spans: list[tuple[float, float]]) -> None:
        barrier.wait()
        t0 = time.perf_counter()
        call(t)
        spans.append((t0, time.perf_counter()))

    best = float("inf")
    for rep in range(REPEATS + 1):
        barrier = threading.Barrier(threads + 1)
        spans: list[tuple[float, float]] = []
        pool = [threading.Thread(target=work, args=(t, barrier, spans)) for t in range(threads)]
        for th in pool:
            th.start()
        barrier.wait()
        for th in pool:
            th.join()
        if rep:
            best = min(best, max(e for _, e in spans) - min(s for s, _ in spans))
    return best


def measure(threads: int = 1, target: str = "host") -> Ceilings:
    """Generate, load and run both kernels on ``threads`` threads; the measured :class:`Ceilings`.
    Raises CompileError for a target this machine cannot run (its kernels cannot load here)."""
    t = get_target(target)
    if not t.runnable:
        raise CompileError("run", f"target {target} does not run on this machine: no ceilings to measure ({t.note})")
    lanes = max(1, t.vector_width_f32)
    llvm = _llvm()
    tm = target_machine(t)
    chains = fma_chains(t)
    mod = llvm.parse_assembly(ceilings_ir(lanes, t.triple, chains))
    mod.verify()
    jit = JitModule([bytes(tm.emit_object(mod))])
    fma, copy = jit.function("prism_ceiling_fma", 2), jit.function("prism_ceiling_copy", 5)
    accs = [_aligned(chains * lanes) + 1.0 for _ in range(threads)]
    rounds = np.array([FMA_ROUNDS], np.int64)
    fma_s = _best_wall_s(threads, lambda i: fma(accs[i].ctypes.data, rounds.ctypes.data))
    if not all(np.isfinite(a).all() for a in accs):
        raise CompileError("run", "the FMA ceiling kernel produced non-finite values")
    n, mem_s = _copy_s(copy, threads, lanes, COPY_BYTES // 4)
    flops = 2.0 * FMA_ROUNDS * chains * lanes * threads
    levels = _cache_ceilings(copy, threads, lanes)
    said = "".join(f", L{lv} {g} GB/s (a {b >> 10} KiB cache)" for lv, (g, b) in sorted(levels.items()))
    method = (f"measured on this worker by Prism-generated kernels ({t.name}): {chains} independent "
              f"<{lanes} x float> FMA chains, and a streaming copy of {COPY_BYTES >> 20} MiB (8 bytes per element "
              f"moved){', the same copy within each cache' + said if levels else ''}; best of {REPEATS}, "
              f"{threads} thread{'s' if threads > 1 else ''} at once")
    l2, l3 = levels.get(2), levels.get(3)
    return Ceilings(peak_gflops=round(flops / fma_s / 1e9, 2), peak_gbps=round(8.0 * n / mem_s / 1e9, 2),
                    threads=threads, target=t.name, lanes=lanes, copy_bytes=n * 4, method=method,
                    l2_gbps=l2[0] if l2 else None, l2_bytes=l2[1] if l2 else None,
                    l3_gbps=l3[0] if l3 else None, l3_bytes=l3[1] if l3 else None,
                    host=socket.gethostname(), cpu=f"{_llvm().get_host_cpu_name()} ({cpu_model()})")


def _copy_s(copy: Any, threads: int, lanes: int, floats: int, reps: int = 1) -> tuple[int, float]:
    """The best wall time of ``reps`` copy passes over ``floats`` floats split among ``threads`` threads:
    ``(floats copied per pass, seconds)``. Raises CompileError when the copy does not reproduce its input."""
    step = lanes * threads
    n = max(step, floats // step * step)
    src, dst = _aligned(n), _aligned(n)
    src += 1.0  # in place: a new array would lose the 64-byte alignment the vector loads assume
    part = n // threads
    counts, zero, passes = np.array([part], np.int64), np.zeros(1, np.float32), np.array([reps], np.int64)
    best = _best_wall_s(threads, lambda i: copy(dst[i * part:].ctypes.data, src[i * part:].ctypes.data,
                                                counts.ctypes.data, zero.ctypes.data, passes.ctypes.data))
    if not np.array_equal(dst[:part * threads], src[:part * threads]):
        raise CompileError("run", "the streaming-copy ceiling kernel did not copy its input")
    return n, best


def _cache_ceilings(copy: Any, threads: int, lanes: int) -> dict[int, tuple[float, int]]:
    """Level -> (GB/s, cache bytes) of the copy run within the L2 and the L3 (``compiler.runtime.caches``):
    both arrays together fill half of each thread's share of the level (a private L2: half of it per
    thread; a shared L3: half of it among all), passed over :data:`CACHE_PASS_BYTES` worth per call."""
    out: dict[int, tuple[float, int]] = {}
    for level, c in data_caches().items():
        if level not in (2, 3):
            continue
        share = c.size if c.shared_cpus <= 1 else c.size // max(1, min(threads, c.shared_cpus))
        floats = share // 4 // 4 * threads  # per thread: two arrays of a quarter of its share each
        per_thread = max(1, floats // threads) * 4 * 2
        reps = max(1, CACHE_PASS_BYTES // per_thread)
        n, s = _copy_s(copy, threads, lanes, floats, reps)
        out[level] = (round(8.0 * n * reps / s / 1e9, 2), c.size)
    return out


_CACHE: dict[tuple[str, int], Ceilings | None] = {}
_CACHE_LOCK = threading.Lock()


def worker_ceilings(threads: int, target: str = "host") -> Ceilings | None:
    """This process's ceilings at ``threads`` for ``target``: measured once (in a child interpreter,
    ``python -m compiler.runtime.ceilings``) and cached for the life of the process. None, with a
    warning in the log, when the measurement failed (the roofline then draws no measured ceilings)."""
    key = (target, threads)
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = _measure_in_child(threads, target)
        return _CACHE[key]


def known_ceilings() -> list[dict[str, Any]]:
    """Every ceiling this process has measured (:func:`worker_ceilings`' cache), as plain dicts: what a
    process that compiles in a child (``compiler.isolated_compile``) hands it, and takes back from it."""
    with _CACHE_LOCK:
        return [asdict(c) for c in _CACHE.values() if c is not None]


def add_known_ceilings(items: list[dict[str, Any]]) -> None:
    """Put ceilings measured elsewhere on this machine (:func:`known_ceilings` of another process) in
    this process's cache, so that :func:`worker_ceilings` does not measure them again."""
    with _CACHE_LOCK:
        for item in items:
            c = Ceilings(**item)
            _CACHE.setdefault((c.target, c.threads), c)


def _measure_in_child(threads: int, target: str) -> Ceilings | None:
    cmd = [sys.executable, "-m", "compiler.runtime.ceilings", "--threads", str(threads), "--target", target]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("measuring the roofline ceilings failed: %s", exc)
        return None
    if proc.returncode != 0:
        log.warning("measuring the roofline ceilings failed (exit %s): %s", proc.returncode,
                    (proc.stderr.strip().splitlines() or ["no output"])[-1])
        return None
    return Ceilings(**json.loads(proc.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    """``python -m compiler.runtime.ceilings [--threads N] [--target T]``: one JSON line of :class:`Ceilings`."""
    p = argparse.ArgumentParser(prog="python -m compiler.runtime.ceilings", description=main.__doc__)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--target", default="host")
    a = p.parse_args(argv)
    print(json.dumps(measure(a.threads, a.target).payload()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
