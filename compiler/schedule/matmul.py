"""MatMul of any rank >= 2 on the register-tiled GEMM nest (``compiler.schedule.gemm``), with
broadcast batch dims and operands read in place through the injective ops fused before it.

Semantics: ONNX MatMul (numpy ``matmul``): ``Y[b..., m, n] = sum_k A[b..., m, k] * B[b..., k, n]``
with the batch dims broadcast (numpy rules). An operand may be any index function of a buffer: a
``Transpose``/``Reshape``/``Split``/``Slice`` that ``fuse-ops`` merged into the group as the anchor's
operand access is read in place, with no materialized copy (so ``Q K^T`` reads K where the projection
wrote it).

* B constant without batch dims (a projection ``[.., S, K] x [K, N]``): A's leading dims fold into
  M = prod(A.shape[:-1]) (one GEMM of M rows), B is packed at compile time into ``[N/NR, K, NR]``.
* Otherwise one GEMM per batch index (loops over the broadcast batch dims, outermost first). A
  constant B is packed at compile time per batch index (``[batch, N/NR, K, NR]``); a runtime B that
  is contiguous along n (``P V``: V's d axis) is read directly with vector loads; any other runtime
  B (``K^T``: n is K's token axis, strided) is packed per column block into a scratch ``[K, block]``
  by the kernel itself before the block's tiles (a copy of K x N floats against 2 x M x N x K FLOPs).
* A (the broadcast operand, one scalar per row and k step) is read through its index function
  whatever its layout.
* Parallel axis of the per-batch GEMMs: where each batch index's GEMM is small (at most
  :data:`BATCH_PARALLEL_FLOPS`, and a packed B's per-batch scratch at most :data:`BATCH_SCRATCH_BYTES`
  in all; as attention's ``Q K^T`` and ``P V`` per head) and there are at least
  two, the batch loop (all batch dims as one) is the parallel loop and each task runs whole GEMMs,
  its row tiles serial: one launch for the kernel instead of one per batch index, and the per-head
  packing of B and the leftover row tile run in parallel too (each batch index then packs into its
  own slice of the scratch). Larger per-batch GEMMs keep their row tiles parallel, batch by batch.
Rank-1 operands (a matrix-vector product with a 1-D input) and non-f32 types return None: the
default schedule applies.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..loops.ir import (
    Buffer,
    Expr,
    For,
    Int,
    Load,
    Stmt,
    Store,
    Var,
    add,
    emin,
    flat_index,
    linear_coeff,
    mul,
    walk_stmts,
)
from ..loops.lower import LoweredKernel
from ..loops.printer import expr_str
from ..loops.tensor import Tensor, unravel
from ..targets import Target
from .batch import active, batch_rows, mark
from .gemm import (
    L2_BLOCK_BYTES,
    add_scratch,
    epilogue,
    epilogue_flops,
    finish,
    gemm_nest,
    probe_buffer,
    tuned_tile,
)
from .microkernel import pack_b, packed_b

BATCH_PARALLEL_FLOPS = 4e6  # per-batch GEMM FLOP at most which the batch loop is the parallel one (~80 us at 50 GFLOP/s)
BATCH_SCRATCH_BYTES = 4 << 20  # at most this much per-batch packing scratch (bytes) for the batch-parallel form


def _bcast(t: Tensor, bv: list[Expr], rank: int) -> list[Expr]:
    """``t``'s batch indices for the output batch indices ``bv`` (numpy broadcasting, right-aligned)."""
    lead = t.shape[:-2]
    off = len(bv) - len(lead)
    return [Int(0) if d == 1 else bv[off + q] for q, d in enumerate(lead)]


def contiguous_along(t: Tensor, idx: list[Expr], var: str) -> bool:
    """True when ``t`` at ``idx`` is a plain load whose flat offset steps by 1 with ``var``."""
    e = t.fn(idx)
    return isinstance(e, Load) and e.buf.scope != "local" and linear_coeff(flat_index(e.buf, e.indices), var) == 1


def _projection(lk: LoweredKernel, node: Any, a: Tensor, b: Tensor, out_buf: Buffer, out_t: Tensor, epi: Expr,
                vs: list[Var], width: int, epi_flops: int) -> LoweredKernel:
    """A constant B without batch dims: A's leading dims fold into M (module docstring)."""
    k_n, n_n = a.shape[-1], b.shape[-1]
    rows = out_t.shape[:-1]
    mm = math.prod(rows)
    t = tuned_tile(mm, n_n, width)
    bbuf = pack_b(lk, np.asarray(b.const, np.float32).reshape(k_n, n_n), t.nr, f"{node.label}.B")
    abuf = probe_buffer(a) if a.shape[:-1] == rows else None
    if abuf is not None:
        aview = Buffer(abuf.name, abuf.dtype, (mm, k_n), abuf.scope)

        def a_at(m: Expr, mo: Expr, mi: Expr, k: Expr) -> Expr:
            return Load(aview, (m, k))
    else:
        a_rows = a.shape[:-1]
        off = len(rows) - len(a_rows)

        def a_at(m: Expr, mo: Expr, mi: Expr, k: Expr) -> Expr:
            ri = unravel(m, rows)
            return a[[Int(0) if d == 1 else ri[off + q] for q, d in enumerate(a_rows)] + [k]]
    oview = Buffer(out_buf.name, out_buf.dtype, (mm, n_n), out_buf.scope)
    lk.func.attrs.setdefault("schedule", []).insert(0, f"fuse(batch, m) -> m  # {list(rows)} rows as one "
                                                       f"GEMM of M = {mm} against a constant B")

    def row_epi_map(m: Expr, n: Expr) -> dict[str, Expr]:
        return {v.name: i for v, i in zip(vs, [*unravel(m, rows), n], strict=True)}
    nest = gemm_nest(lk, mm, n_n, k_n, t, a_at, packed_b(bbuf, t), lambda m, n: (oview, (m, n)), epi,
                     row_epi_map, m_run=batch_rows(lk, mm, "the GEMM's M"), split_b=True)
    return finish(lk, [nest], 2 * mm * n_n * k_n + epi_flops)


def lower_matmul(lk: LoweredKernel, node: Any, ins: list[Tensor | None], out_buf: Buffer, out_t: Tensor,
                 target: Target) -> LoweredKernel | None:
    """The micro-kernel MatMul (see the module docstring), or None where it does not apply."""
    a, b = ins[0], ins[1]
    if a is None or b is None or a.rank < 2 or b.rank < 2 or a.dtype != "f32" or b.dtype != "f32":
        return None
    m_n, k_n = a.shape[-2:]
    n_n = b.shape[-1]
    if b.shape[-2] != k_n or out_t.shape[-2:] != (m_n, n_n):
        return None
    ep = epilogue(out_t, out_t.rank, None)
    if ep is None:
        return None
    epi, vs = ep
    width = target.vector_width_f32
    batch = out_t.shape[:-2]
    nbatch = math.prod(batch)
    epi_flops = epilogue_flops(epi) * math.prod(out_t.shape)
    if b.const is not None and all(d == 1 for d in b.shape[:-2]):
        return _projection(lk, node, a, b, out_buf, out_t, epi, vs, width, epi_flops)
    t = tuned_tile(m_n, n_n, width)
    vbatch = Var("b")
    bv: list[Expr] = [Var(f"b{i}") for i in range(len(batch))]
    packed = b.const is None and not contiguous_along(b, [*_bcast(b, bv, len(batch)), Var("k"), Var("n")], "n")
    tiles = math.ceil(n_n / t.nr)
    pack_cols = max(1, min(tiles, L2_BLOCK_BYTES // max(1, k_n * 4 * t.nr))) * t.nr
    by_batch = nbatch >= 2 and active() is None and 2 * m_n * n_n * k_n <= BATCH_PARALLEL_FLOPS and (
        not packed or nbatch * k_n * pack_cols * 4 <= BATCH_SCRATCH_BYTES)
    if by_batch:
        bv = unravel(vbatch, batch)
    ab, bb = _bcast(a, bv, len(batch)), _bcast(b, bv, len(batch))
    sched = lk.func.attrs.setdefault("schedule", [])
    sched.append(f"# batch {list(batch)}: one GEMM [{m_n}x{k_n}] x [{k_n}x{n_n}] per batch index")
    block_cols, prologue = None, None
    if b.const is not None:
        bbuf = pack_b(lk, np.asarray(b.const, np.float32), t.nr, f"{node.label}.B")
        b_at = packed_b(bbuf, t, bb)
    elif not packed:
        sched.append("# B is contiguous along n: vector loads in place")

        def b_at(k: Expr, tile: Expr, nv: Expr, lane: Expr, n_local: Expr, n: Expr) -> Expr:
            return b[[*bb, k, n]]
    else:
        block_cols = pack_cols
        lead: tuple[Expr, ...] = (vbatch,) if by_batch else ()
        bs = add_scratch(lk, "bpanel", (nbatch, k_n, block_cols) if by_batch else (k_n, block_cols))
        prologue = _pack_prologue(b, bb, bs, n_n, block_cols, width, lead)
        sched.append(f"pack(B -> bpanel[{', '.join(str(d) for d in bs.shape)}]) compute_at nb  # B is strided "
                     "along n (a transposed operand): copied per column block, then vector loads")

        def b_at(k: Expr, tile: Expr, nv: Expr, lane: Expr, n_local: Expr, n: Expr) -> Expr:
            return Load(bs, (*lead, k, n_local))

    def epi_map(m: Expr, n: Expr) -> dict[str, Expr]:
        return {v.name: i for v, i in zip(vs, [*bv, m, n], strict=True)}

    m_run = batch_rows(lk, m_n, "the GEMM's M") if not batch else None
    g: Stmt = gemm_nest(lk, m_n, n_n, k_n, t, lambda m, mo, mi, k: a[[*ab, m, k]], b_at,
                        lambda m, n: (out_buf, (*bv, m, n)), epi, epi_map, block_cols, prologue, m_run=m_run)
    if by_batch:
        g = _parallel_batch(g, vbatch, nbatch, 2 * m_n * n_n * k_n, sched)
    else:
        g = _batch_loops(lk, g, [v for v in bv if isinstance(v, Var)], batch)
    return finish(lk, [g], 2 * nbatch * m_n * n_n * k_n + epi_flops)


def _batch_loops(lk: LoweredKernel, g: Stmt, bv: list[Var], batch: tuple[int, ...]) -> Stmt:
    """``g`` in the loops over the broadcast batch dims, outermost first; the outermost bounded by the
    run-time batch size when it is one (``compiler.schedule.batch``)."""
    dim = active()
    for q, (v, d) in reversed(list(enumerate(zip(bv, batch, strict=True)))):
        lead = dim.rows(d) if dim is not None and q == 0 else None
        g = For(v, d, g, bound=lead[1] if lead else None)
        if lead:
            mark(lk, f"the outer batch loop {v.name} runs {expr_str(lead[1])} of its {d} iterations "
                     f"(N at run time, {lead[0]} per sample)")
    return g


def _parallel_batch(g: Stmt, vbatch: Var, nbatch: int, flops: int, sched: list[str]) -> Stmt:
    """``for b in 0..nbatch (parallel): g`` with ``g``'s tile loops made serial (module docstring)."""
    for st in walk_stmts(g):
        if isinstance(st, For) and st.var.name in ("mo", "nt"):  # row or column tiles (tile_order)
            st.kind = "serial"
    sched[:] = [x for x in sched if not x.startswith(("parallel(mo)", "parallel(nt)"))]
    sched.append(f"fuse(batch) -> b, parallel(b)  # {nbatch} GEMMs of {flops} FLOP each "
                 f"(<= {BATCH_PARALLEL_FLOPS:g}): whole GEMMs per task, one launch, row tiles serial")
    return For(vbatch, nbatch, g, "parallel")


def _pack_prologue(b: Tensor, bb: list[Expr], bs: Buffer, n_n: int, block_cols: int, width: int,  # type: ignore[no-untyped-def]
                   lead: tuple[Expr, ...] = ()):
    """``bs[*lead, k, j] = B[k, nb * block + j]`` for one column block (columns past N read column
    N - 1: those lanes are never stored); ``lead`` indexes a per-batch slice of the scratch."""
    k_n = bs.shape[-2]
    vk, vjo, vji = Var("pk"), Var("pj_o"), Var("pj_i")

    def prologue(vb: Expr) -> Stmt:
        j = add(mul(vjo, width), vji)
        n = add(mul(vb, block_cols), j)
        src = b[[*bb, vk, emin(n, n_n - 1) if n_n % block_cols else n]]
        return For(vk, k_n, For(vjo, block_cols // width, For(vji, width, Store(bs, (*lead, vk, j), src),
                                                               "vectorized")))
    return prologue


__all__ = ["contiguous_along", "lower_matmul"]
