"""The parallel axis of every kernel, and the work threshold below which a kernel stays serial.

Applied after a kernel's own schedule (``compiler.driver.lower.lower_graph``), to each kernel:

- Kernels whose schedule already names a parallel axis keep it: the micro-kernel GEMM's row tiles
  (``mo``: Conv output-channel blocks, MatMul/Gemm M tiles; ``compiler.schedule.gemm``) or column
  tiles (``nt``: the cache-blocked dense Conv, ``compiler.schedule.conv_blocked``), the row
  kernels' rows (Softmax, LayerNormalization: ``compiler.schedule.rows``), depthwise Conv's groups.
- Every other compute (elementwise, broadcast, injective, pooling, reductions: ``attrs["computes"]``,
  the output loops of each compute of ``compiler.loops.compute``) gets its outermost output loop with
  at least :data:`MIN_EXTENT` iterations, provided the loops around it run at most
  :data:`MAX_LAUNCHES` times (each outer iteration is one launch); else its outermost loop of 2 or
  more. Output loops are independent by construction (each iteration writes its own output
  elements; reductions are inner loops), so this reorders nothing.
- A GEMM's per-column-block prologue (the im2col of a Conv, the packing of a MatMul's B: the
  statements before the parallel row-tile loop in the column block's body) runs its outermost loop
  in parallel too: each iteration fills its own rows of the block (input channel and tap, or k), so
  the block is ready when the launch returns, before the row tiles read it. Its work is estimated
  as one read and one write of a float per innermost iteration.
- A parallel loop stays serial when one launch would carry less than :data:`MIN_TASK_US` µs of
  work: the kernel's estimated single-thread time, ``flops / FLOP_RATE + bytes / BYTE_RATE``
  (conservative rates for this kind of machine: ``../shared/PERFORMANCE.md``), divided by the
  launches; a launch costs about a microsecond (waking a worker, the barrier).

Each decision is a line of ``attrs["schedule"]`` (the explorer shows it with the kernel). The thread
count is not fixed here: the generated code splits a parallel loop into as many tasks as the
runtime's pool has threads (``compiler.codegen.parallel``), so one compiled kernel runs at any count.
"""

from __future__ import annotations

from ..loops.ir import Allocate, For, If, PrimFunc, Seq, Stmt
from .knobs import choose

MIN_TASK_US = 10.0  # work per launch below which a loop stays serial (µs, estimated single-thread)
FLOP_RATE = 50e3  # FLOP per µs assumed (50 GFLOP/s: vectorized but not register-tiled code)
BYTE_RATE = 20e3  # bytes per µs assumed (20 GB/s: one core's streaming bandwidth)
MIN_EXTENT = 8
GEMM_TILES = ("mo", "nt")  # the parallel tile loop of a GEMM column block: row tiles, or column tiles (conv_blocked)
MAX_LAUNCHES = 16


def estimated_us(func: PrimFunc) -> float:
    """The single-thread time estimate of ``func`` (µs) from ``attrs["flops"]`` and ``attrs["bytes"]``."""
    return float(func.attrs.get("flops", 0)) / FLOP_RATE + float(func.attrs.get("bytes", 0)) / BYTE_RATE


def _loops(s: Stmt, outer: int = 1):  # type: ignore[no-untyped-def]
    """``(For, product of the extents of the loops around it)`` for every loop, pre-order."""
    if isinstance(s, For):
        yield s, outer
        yield from _loops(s.body, outer * s.extent)
    elif isinstance(s, Seq):
        for x in s.stmts:
            yield from _loops(x, outer)
    elif isinstance(s, Allocate):
        yield from _loops(s.body, outer)
    elif isinstance(s, If):
        yield from _loops(s.then, outer)


def _pick(func: PrimFunc, out_loops: list[tuple[str, int]]) -> For | None:
    """The loop of one compute to run in parallel (module docstring), or None."""
    names = [v for v, _ in out_loops]
    found = {f.var.name: (f, n) for f, n in _loops(func.body) if f.kind == "serial"}
    cands = [found.get(v) or found.get(f"{v}_o") for v in names]
    cands_ok = [c for c in cands if c is not None and c[0].extent >= 2]
    for f, launches in cands_ok:
        if f.extent >= MIN_EXTENT and launches <= MAX_LAUNCHES:
            return f
    return cands_ok[0][0] if cands_ok else None


def _iterations(s: Stmt) -> int:
    """Innermost iterations of a loop nest (the product of the extents along its deepest path)."""
    if isinstance(s, For):
        return s.extent * _iterations(s.body)
    if isinstance(s, Seq):
        return sum(_iterations(x) for x in s.stmts)
    if isinstance(s, Allocate | If):
        return _iterations(s.body if isinstance(s, Allocate) else s.then)
    return 1


def _prologues(func: PrimFunc, sched: list[str], grain: float) -> set[int]:
    """Mark the outermost loop of each GEMM column-block prologue parallel (module docstring); returns
    the ids of the loops marked."""
    marked: set[int] = set()
    for f, _ in list(_loops(func.body)):
        if not isinstance(f.body, Seq) or not any(isinstance(x, For) and x.kind == "parallel" and x.var.name in GEMM_TILES
                                                  for x in f.body.stmts):
            continue
        for pro in f.body.stmts:
            if isinstance(pro, For) and pro.kind == "parallel":
                break
            if isinstance(pro, For) and pro.kind == "serial" and pro.extent >= 2:
                per = 8 * _iterations(pro) / BYTE_RATE
                if per >= grain:
                    pro.kind = "parallel"
                    marked.add(id(pro))
                    sched.append(f"parallel({pro.var.name})  # the column block's prologue: each iteration fills "
                                 f"its own rows (~{per:.3g} us per launch)")
    return marked


GRAIN_CHOICES = (2, 5, 10, 20, 50, "serial")


def _grain(func: PrimFunc) -> float:
    """The work per launch (µs) below which a parallel loop stays serial: :data:`MIN_TASK_US`, the
    default of the tunable knob ``grain_us`` (``compiler.schedule.knobs``; ``"serial"``: no parallel
    loop), asked only of a kernel that has a candidate parallel loop."""
    if not any(f.kind == "parallel" for f, _ in _loops(func.body)) and not any(
            _pick(func, out) is not None for out in func.attrs.get("computes", [])) and not _has_prologue(func):
        return MIN_TASK_US
    g = choose("grain_us", int(MIN_TASK_US), GRAIN_CHOICES)
    return float("inf") if g == "serial" else float(g)


def _has_prologue(func: PrimFunc) -> bool:
    return any(isinstance(f.body, Seq) and any(isinstance(x, For) and x.var.name == "mo" for x in f.body.stmts)
               for f, _ in _loops(func.body))


def plan_parallel(func: PrimFunc) -> PrimFunc:
    """Choose ``func``'s parallel loops in place (module docstring); returns ``func``."""
    sched = func.attrs.setdefault("schedule", [])
    est = estimated_us(func)
    grain = _grain(func)
    pro = _prologues(func, sched, grain)
    if not any(f.kind == "parallel" for f, _ in _loops(func.body)):
        for out_loops in func.attrs.get("computes", []):
            f = _pick(func, out_loops)
            if f is not None:
                f.kind = "parallel"
                sched.append(f"parallel({f.var.name})  # outermost output loop: its iterations write disjoint outputs")
    for f, launches in list(_loops(func.body)):
        if f.kind != "parallel" or id(f) in pro:
            continue  # a prologue's loop was judged on its own work above
        per = est / max(launches, 1)
        if per < grain:
            f.kind = "serial"
            sched.append(f"serial({f.var.name})  # grain_us=serial: no parallel loop" if grain == float("inf") else
                         f"serial({f.var.name})  # ~{per:.3g} us of work per launch ({launches} launches), below the "
                         f"{grain:g} us parallel threshold")
        else:
            sched.append(f"# {f.var.name}: {f.extent} iterations split into tasks over the pool's threads "
                         f"(~{per:.3g} us per launch, {launches} launch{'es' if launches > 1 else ''})")
    return func
