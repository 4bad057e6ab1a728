"""Features of a scheduled kernel for the cost model, read from its loop IR and its trace.

One fixed-length float vector per candidate (all logarithms base 2 of 1 + the quantity, so that
kernels of very different sizes share one model; TVM's Ansor extracts per-store features of the same
kinds: loop extents, vectorization, unrolling, parallelism, bytes touched, arithmetic intensity):

- the kernel: FLOPs, bytes (``attrs["flops"]``, ``attrs["bytes"]``), arithmetic intensity (FLOP/byte),
  the single-thread estimate (µs), scratch and constant bytes;
- the loop nest: loops, depth, innermost iterations, the widest vectorized loop (lanes), the largest
  unrolled body (product of the unrolled extents around a statement), the outermost parallel loop's
  extent and the work of one of its iterations (µs);
- per level of the main path (the first :data:`LEVELS` loops from the root along the heaviest child):
  its extent, its kind and the bytes touched by one of its iterations (innermost iterations below it x
  memory accesses per innermost iteration x 4 bytes);
- the trace's values: register tile rows and vectors, column block, row block, input-channel block,
  parallel grain, vector width, unroll (0 where the kernel has no such knob).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..loops.ir import Allocate, For, If, Load, Seq, Stmt, Store, walk_stmts
from ..schedule.gemm import walk
from ..schedule.parallel import estimated_us

LEVELS = 6
KINDS = {"serial": 1.0, "vectorized": 2.0, "unrolled": 3.0, "parallel": 4.0}
TRACE_SLOTS = ("tile_mr", "tile_nv", "block_tiles", "block_rows", "channel_block", "grain_us", "vector", "unroll")


def _lg(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


def _children(s: Stmt) -> list[Stmt]:
    if isinstance(s, For):
        return [s.body]
    if isinstance(s, Seq):
        return list(s.stmts)
    if isinstance(s, Allocate):
        return [s.body]
    if isinstance(s, If):
        return [s.then]
    return []


def _iters(s: Stmt) -> int:
    if isinstance(s, For):
        return s.extent * sum(_iters(c) for c in _children(s)) if _children(s) else s.extent
    kids = _children(s)
    return sum(_iters(c) for c in kids) if kids else 1


def _accesses(s: Stmt) -> int:
    n = 0
    for x in walk_stmts(s):
        if isinstance(x, Store):
            n += 1 + sum(1 for e in (x.value, *x.indices) for y in walk(e) if isinstance(y, Load))
    return max(n, 1)


def _nest(s: Stmt, unrolled: int, out: dict[str, float], depth: int) -> None:
    if isinstance(s, For):
        out["loops"] += 1
        out["depth"] = max(out["depth"], depth + 1)
        if s.kind == "vectorized":
            out["lanes"] = max(out["lanes"], s.extent)
        if s.kind == "unrolled":
            unrolled *= s.extent
            out["unrolled"] = max(out["unrolled"], unrolled)
        if s.kind == "parallel" and out["par_extent"] == 0:
            out["par_extent"] = s.extent
        depth += 1
    for c in _children(s):
        _nest(c, unrolled, out, depth)


def _main_path(s: Stmt) -> list[For]:
    path: list[For] = []
    node: Stmt | None = s
    while node is not None and len(path) < LEVELS:
        if isinstance(node, For):
            path.append(node)
        kids = _children(node)
        node = max(kids, key=_iters) if kids else None
    return path


def _trace_values(trace: dict[str, Any]) -> list[float]:
    vals = dict.fromkeys(TRACE_SLOTS, 0.0)
    tile = trace.get("tile")
    if isinstance(tile, str) and "x" in tile:
        mr, nv = tile.split("x")
        vals["tile_mr"], vals["tile_nv"] = float(mr), float(nv)
    for k in ("block_tiles", "block_rows", "channel_block", "vector", "unroll"):
        if isinstance(trace.get(k), int):
            vals[k] = float(trace[k])
    g = trace.get("grain_us")
    vals["grain_us"] = 1e6 if g == "serial" else float(g) if isinstance(g, int) else 0.0
    return [_lg(v) for v in vals.values()]


def features(lk: Any, trace: dict[str, Any]) -> np.ndarray:
    """The feature vector (module docstring) of kernel ``lk`` (a scheduled ``LoweredKernel``) lowered
    with ``trace``; float64, length :func:`n_features`."""
    func = lk.func
    flops, nbytes = float(func.attrs.get("flops", 0)), float(func.attrs.get("bytes", 0))
    scratch = sum(4 * math.prod(a.buffer.shape) for a in lk.args if a.kind == "scratch")
    const = sum(4 * math.prod(a.buffer.shape) for a in lk.args if a.kind == "const")
    nest = {"loops": 0.0, "depth": 0.0, "lanes": 1.0, "unrolled": 1.0, "par_extent": 0.0}
    _nest(func.body, 1, nest, 0)
    est = estimated_us(func)
    per_task = est / max(nest["par_extent"], 1.0)  # the work of one iteration of the parallel loop
    row = [_lg(flops), _lg(nbytes), _lg(flops / max(nbytes, 1.0)), _lg(est), _lg(scratch), _lg(const),
           _lg(nest["loops"]), nest["depth"], _lg(_iters(func.body)), _lg(nest["lanes"]), _lg(nest["unrolled"]),
           _lg(nest["par_extent"]), _lg(per_task)]
    path = _main_path(func.body)
    for i in range(LEVELS):
        if i < len(path):
            f = path[i]
            row += [_lg(f.extent), KINDS.get(f.kind, 0.0), _lg(4.0 * _iters(f.body) * _accesses(f.body))]
        else:
            row += [0.0, 0.0, 0.0]
    row += _trace_values(trace)
    return np.asarray(row, dtype=np.float64)


def n_features() -> int:
    return 13 + 3 * LEVELS + len(TRACE_SLOTS)


__all__ = ["features", "n_features"]
