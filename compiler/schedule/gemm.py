"""The register-tiled GEMM loop nest every micro-kernel schedule builds on, and its helpers.

``C[m, n] = sum_k A[m, k] * B[k, n]`` is computed tile by tile: MR rows (unrolled) x NR = NV x W
columns (NV vectors of the target's W f32 lanes, unrolled, each a vectorized loop of W lanes) of
accumulators held in registers across the whole k loop: per k step one scalar of A per row
(broadcast), NV vector loads of B, MR x NV ``llvm.fma`` (``../shared/PERFORMANCE.md``: this shape
reaches OpenBLAS speed; the loop vectorizer alone about 45%). Columns are processed in blocks so that
a K x block slice of B stays in L2; a schedule may fill each block first (``prologue``: an im2col, or a
runtime packing of a B operand that is not contiguous along n). M need not be a multiple of MR: the
rows left over form one more tile of ``M mod MR`` rows. N need not be a multiple of NR: the stores of
the last tile are masked (lanes past N are computed from slack memory and never stored).

The epilogue (bias, activation, scale, mask, residual add ...) is the group's own expression with
the anchor's value (a load of the virtual buffer :data:`VIRTUAL`) replaced by the accumulator, applied
before the one store. Summation over k is sequential per output element (no reassociation); products
are fused into the sum (``llvm.fma``).

Parallel axis: the loop over row tiles (``mo``) of a column block is marked ``parallel``: its
iterations write disjoint output rows and only read the block's packed operands.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..loops.ir import (
    Allocate,
    Bin,
    Buffer,
    Expr,
    Float,
    For,
    If,
    Int,
    Load,
    Reduce,
    Seq,
    Stmt,
    Store,
    Var,
    add,
    children,
    free_vars,
    map_children,
    mul,
    substitute,
    walk_stmts,
)
from ..loops.lower import KernelArg, LoweredKernel, finalize, lower_group
from ..loops.registry import LowerCtx
from ..loops.tensor import Tensor

L2_BLOCK_BYTES = 512 * 1024
VIRTUAL = "__anchor"

AAt = Callable[[Expr, Expr, Expr, Expr], Expr]  # (m, mo, mi, k) -> A[m, k], m = mo * MR + mi
# (k, tile, nv, lane, n_local, n) -> B[k, n]; tile: global tile index; n_local: column inside the block
BAt = Callable[[Expr, Expr, Expr, Expr, Expr, Expr], Expr]
# (m, n) -> (buffer, indices) of C[m, n]; n = n0 + nv * W + lane
StoreAt = Callable[[Expr, Expr], tuple[Buffer, tuple[Expr, ...]]]


@dataclass
class Tile:
    """The register tile: ``mr`` rows, ``nv`` vectors of ``width`` lanes (NR = nv * width)."""

    mr: int
    nv: int
    width: int

    @property
    def nr(self) -> int:
        return self.nv * self.width


def pick_tile(m: int, width: int) -> Tile:
    """MR x (NV x W): MR x NV accumulators + NV B vectors + a broadcast within the register file
    (32 vector registers with AVX-512: 8 x 2; 16 with AVX2/SSE/NEON here: 6 x 2). A GEMM of fewer
    rows than MR takes all its rows, and a one-row GEMM (a matrix-vector product) 4 vectors."""
    mr = 8 if width >= 16 else 6
    if m < mr:
        mr = m
    return Tile(mr, 4 if mr == 1 else 2, width)


def walk(e: Expr):  # type: ignore[no-untyped-def]
    """Pre-order iterator over an expression."""
    yield e
    for c in children(e):
        yield from walk(c)


def replace_anchor(e: Expr, acc: Expr) -> Expr:
    """``e`` with every load of :data:`VIRTUAL` replaced by ``acc``."""
    if isinstance(e, Load) and e.buf.name == VIRTUAL:
        return acc
    return map_children(e, lambda c: replace_anchor(c, acc), fold=False)


def lower_around(node: Any, kernel: str, opset: int, anchor: Any,
                 value: Callable[[LowerCtx, Any, list[Tensor | None]], list[Tensor]]
                 ) -> tuple[LoweredKernel, Buffer, Tensor, list[Tensor | None]] | None:
    """The group ``node`` lowered (not built) with ``anchor``'s results given by ``value(ctx, anchor,
    its input tensors)``: ``(kernel, output buffer, output tensor, the anchor's input tensors)``, or
    None when the group has several outputs or its output is not of ``anchor``'s output shape."""
    captured: dict[str, list[Tensor | None]] = {}

    def override(ctx: LowerCtx, n: Any, ins: list[Tensor | None]) -> list[Tensor]:
        captured["ins"] = ins
        return value(ctx, n, ins)

    lk = lower_group(node, kernel, opset, override={id(anchor): override}, build=False)
    if len(lk.pending) != 1 or "ins" not in captured:
        return None
    out_buf, out_t = lk.pending[0]
    if out_t.shape != tuple(anchor.outputs[0].type.shape):
        return None
    return lk, out_buf, out_t, captured["ins"]


def probe_buffer(t: Tensor) -> Buffer | None:
    """The buffer a tensor reads element-for-element, if it is a plain buffer read."""
    vs = [Var(f"__p{i}") for i in range(t.rank)]
    e = t.fn(list(vs))
    if isinstance(e, Load) and e.indices == tuple(vs) and e.buf.scope != "local":
        return e.buf
    return None


def epilogue(out_t: Tensor, rank: int, spatial: tuple[int, int] | None) -> tuple[Expr, list[Var]] | None:
    """The group output's expression over fresh variables, or None when it does not read the anchor
    element-for-element (a reduction, a shifted read) or, for Conv (``spatial`` = (OH, OW)), reads
    another tensor along the spatial axes other than at the output pixel."""
    vs = [Var(f"__e{i}") for i in range(rank)]
    e = out_t.fn(list(vs))
    for x in walk(e):
        if isinstance(x, Reduce):
            return None
        if isinstance(x, Load) and x.buf.name == VIRTUAL and any(
                i != v and not (d == 1 and i == Int(0)) for i, v, d in zip(x.indices, vs, x.buf.shape, strict=True)):
            return None
        if spatial is not None and isinstance(x, Load) and x.buf.name != VIRTUAL:
            names = {v.name for v in vs[-2:]}
            used = [free_vars(i) & names for i in x.indices]
            if any(used) and (x.indices[-2:] != tuple(vs[-2:]) or tuple(x.buf.shape[-2:]) != spatial
                              or any(used[:-2])):
                return None
    return e, vs


def add_const(lk: LoweredKernel, name: str, data: np.ndarray, label: str) -> Buffer:
    """A compile-time array (packed weights) as a ``const`` parameter of ``lk``."""
    buf = Buffer(name, "f32", tuple(data.shape), "const")
    lk.args.append(KernelArg("const", label, buf, np.ascontiguousarray(data, dtype=np.float32)))
    return buf


def add_scratch(lk: LoweredKernel, name: str, shape: tuple[int, ...]) -> Buffer:
    """Kernel-private f32 memory (an im2col or packing buffer) as a ``scratch`` parameter of ``lk``."""
    buf = Buffer(name, "f32", shape, "scratch")
    lk.args.append(KernelArg("scratch", f"{lk.name}.{name}", buf))
    return buf


def epilogue_flops(epi: Expr) -> int:
    return sum(1 for y in walk(epi) if isinstance(y, Bin) and y.dtype == "f32")


def _loads(s: Stmt) -> set[str]:
    """Names of the buffers ``s`` reads."""
    out: set[str] = set()
    for x in walk_stmts(s):
        exprs = [x.value, *x.indices] if isinstance(x, Store) else [x.cond] if isinstance(x, If) else []
        out.update(y.buf.name for e in exprs for y in walk(e) if isinstance(y, Load))
    return out


def finish(lk: LoweredKernel, stmts: list[Stmt], flops: int) -> LoweredKernel:
    """Build the kernel from the prelude and ``stmts``, dropping prelude computes whose result the
    statements never read and parameters no statement uses;
    ``flops`` are the useful FLOPs (2*M*N*K + epilogue), not the padded tiles."""
    needed = set().union(*(_loads(s) for s in stmts))
    kept: list[Stmt] = []
    for s in reversed(lk.prelude):  # a prelude compute stays when something after it reads its result
        if any(isinstance(x, Store) and x.buf.name in needed for x in walk_stmts(s)):
            kept.insert(0, s)
            needed |= _loads(s)
    lk.prelude = kept
    used: set[str] = set()
    for s in lk.prelude + stmts:
        for x in walk_stmts(s):
            exprs: list[Expr] = []
            if isinstance(x, Store):
                used.add(x.buf.name)
                exprs = [x.value, *x.indices]
            elif isinstance(x, If):
                exprs = [x.cond]
            for e in exprs:
                used.update(y.buf.name for y in walk(e) if isinstance(y, Load))
    lk.args = [a for a in lk.args if a.buffer.name in used]
    lk.lowering.out_loops = []
    sched = list(lk.func.attrs.get("schedule", []))
    finalize(lk, lk.prelude + stmts)
    lk.func.attrs["schedule"] = sched
    lk.func.attrs["flops"] = flops
    return lk


def _tile_body(t: Tile, k_n: int, mo: Expr, m0: Expr, a_at: AAt, b_at: BAt, tile: Expr, n_local0: Expr, n0: Expr,
               store_at: StoreAt, epi: Expr, epi_map: Callable[[Expr, Expr], dict[str, Expr]],
               conds: list[Callable[[Expr, Expr], Expr]], tag: str) -> Stmt:
    vk, vmi, vnv, vl = Var("k"), Var(f"mi{tag}"), Var("nv"), Var("ni")
    lane = add(mul(vnv, t.width), vl)
    acc = Buffer(f"acc{tag}", "f32", (t.mr, t.nv, t.width), "local")
    at = (vmi, vnv, vl)

    def lanes(body: Stmt) -> Stmt:
        return For(vmi, t.mr, For(vnv, t.nv, For(vl, t.width, body, "vectorized"), "unrolled"), "unrolled")

    m = add(m0, vmi)
    n_loc, n = add(n_local0, lane), add(n0, lane)
    init = lanes(Store(acc, at, Float(0.0)))
    upd = Store(acc, at, add(Load(acc, at), mul(a_at(m, mo, vmi, vk), b_at(vk, tile, vnv, vl, n_loc, n))))
    kloop = For(vk, k_n, lanes(upd))
    buf, idx = store_at(m, n)
    st: Stmt = Store(buf, idx, substitute(replace_anchor(epi, Load(acc, at)), epi_map(m, n)))
    cs = [c(n_loc, n) for c in conds]
    if cs:
        st = If(cs[0] if len(cs) == 1 else Bin("and", cs[0], cs[1]), st)
    return Allocate(acc, Seq([init, kloop, lanes(st)]))


def gemm_nest(lk: LoweredKernel, m_n: int, n_n: int, k_n: int, t: Tile, a_at: AAt, b_at: BAt, store_at: StoreAt,
              epi: Expr, epi_map: Callable[[Expr, Expr], dict[str, Expr]], block_cols: int | None = None,
              prologue: Callable[[Expr], Stmt] | None = None, what: str = "") -> Stmt:
    """The tiled loop nest of one GEMM (see the module docstring); records its schedule in
    ``lk.func.attrs["schedule"]``. ``block_cols`` defaults to whole tiles such that a K x block slice
    of B stays in L2; ``prologue(nb)``, if given, runs at the top of each column block."""
    nr = t.nr
    if block_cols is None:
        tiles = math.ceil(n_n / nr)
        block_cols = max(1, min(tiles, L2_BLOCK_BYTES // max(1, k_n * 4 * nr))) * nr
    tpb = math.ceil(block_cols / nr)
    nblocks = math.ceil(n_n / block_cols)
    vb, vmo, vt = Var("nb"), Var("mo"), Var("nt")
    tile = add(mul(vb, tpb), vt)
    n_local0 = mul(vt, nr)
    n0 = add(mul(vb, block_cols), n_local0)
    conds: list[Callable[[Expr, Expr], Expr]] = []
    if block_cols % nr:
        conds.append(lambda nl, n: Bin("<", nl, Int(block_cols)))
    if n_n % block_cols or (block_cols == tpb * nr and n_n % nr):
        conds.append(lambda nl, n: Bin("<", n, Int(n_n)))

    def row_tiles(tt: Tile, m_start: int, count: int, tag: str) -> Stmt:
        mo = vmo if count > 1 else Int(m_start // t.mr)
        body: Stmt = _tile_body(tt, k_n, mo, mul(mo, t.mr), a_at, b_at, tile, n_local0, n0, store_at, epi, epi_map, conds, tag)
        if n_n % block_cols:
            body = If(Bin("<", n0, Int(n_n)), body)
        body = For(vt, tpb, body)
        return For(vmo, count, body, "parallel") if count > 1 else body

    full, rest = divmod(m_n, t.mr)
    parts: list[Stmt] = [prologue(vb)] if prologue is not None else []
    if full:
        parts.append(row_tiles(t, 0, full, ""))
    if rest:
        parts.append(row_tiles(Tile(rest, t.nv, t.width), full * t.mr, 1, "t"))
    sched = lk.func.attrs.setdefault("schedule", [])
    sched += [f"tile(m={m_n}, n={n_n}; {t.mr}, {nr}) -> mo, nt, mi, nv, ni  # {t.mr}x{nr} register tile"
              + (f"{what}" if what else ""),
              f"split(n, {block_cols}) -> nb, n  # column block of B: {k_n}x{block_cols} floats stays in L2",
              "reorder(nb, mo, nt, k, mi, nv, ni)", "cache_write(acc, local)  # accumulators in registers across k",
              f"unroll(mi), unroll(nv), vectorize(ni)  # {t.nv} x <{t.width} x float> per row",
              "parallel(mo)  # row tiles of a column block write disjoint rows",
              "compute_at(epilogue, ni)  # applied to the accumulators before the store"]
    if rest:
        sched.append(f"# M = {m_n}: {full} tiles of {t.mr} rows and one of {rest}")
    if conds:
        sched.append("predicate(ni)  # masked store in partial column tiles")
    return For(vb, nblocks, parts[0] if len(parts) == 1 else Seq(parts))


__all__ = ["L2_BLOCK_BYTES", "VIRTUAL", "Tile", "add_const", "add_scratch", "epilogue", "epilogue_flops", "finish",
           "gemm_nest", "pick_tile", "probe_buffer", "replace_anchor", "walk"]
