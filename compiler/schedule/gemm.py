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
iterations write disjoint output rows and only read the block's packed operands; the tile of the
``M mod MR`` rows left over is its last iteration (at a fixed M), so it runs beside the others. The knob
``tile_order`` (``compiler.schedule.knobs``) may put the column tiles (``nt``) outside the row tiles
instead, so that a K x NR panel of B rather than an MR x K panel of A is reused from L1; ``nt`` is
then the parallel loop (its iterations write disjoint columns).
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
    floordiv,
    floormod,
    free_vars,
    map_children,
    mul,
    substitute,
    walk_stmts,
)
from ..loops.lower import KernelArg, LoweredKernel, finalize, lower_group
from ..loops.ops_qlinear import byte_index
from ..loops.printer import expr_str
from ..loops.registry import LowerCtx
from ..loops.tensor import Tensor
from .blocking import column_block_bytes, l2_block_bytes
from .knobs import choose

L2_BLOCK_BYTES = 512 * 1024  # a K x block slice of B: a quarter of a 2 MiB L2 (l2_block_bytes for the target's)
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


MR_CHOICES = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14)


def tuned_tile(m: int, n: int, width: int, nv: int | None = None) -> Tile:
    """:func:`pick_tile` (with ``nv`` vectors if given, MR lowered until the tile fits) as the default of the
    tunable knob ``tile`` (``compiler.schedule.knobs``: ``"MRxNV"``): the choices are every MR x NV whose MR x NV
    accumulators, NV B vectors and a broadcast fit the register file (32 vector registers with
    AVX-512, 16 otherwise), MR <= M, and no vector lies wholly past N."""
    t, regs = pick_tile(m, width), 32 if width >= 16 else 16
    if nv is not None:
        t.nv, t.mr = nv, min(t.mr, (regs - nv - 1) // nv)
    opts = [f"{r}x{v}" for r in MR_CHOICES if r <= m for v in (1, 2, 3, 4)
            if r * v + v + 1 <= regs and (v - 1) * width < n]
    mr, v = (int(x) for x in str(choose("tile", f"{t.mr}x{t.nv}", opts)).split("x"))
    return Tile(mr, v, width)


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


def virtual_result(shape: tuple[int, ...]) -> Callable[[LowerCtx, Any, list[Tensor | None]], list[Tensor]]:
    """A :func:`lower_around` ``value`` giving the anchor one f32 result of ``shape`` that reads the
    placeholder buffer :data:`VIRTUAL` (a schedule later puts its accumulator there)."""
    def value(ctx: LowerCtx, n: Any, ins: list[Tensor | None]) -> list[Tensor]:
        vbuf = Buffer(VIRTUAL, "f32", shape, "virtual")
        return [Tensor(shape, "f32", lambda idx: Load(vbuf, tuple(idx)))]
    return value


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
    another tensor along the spatial axes other than at the output pixel (a byte table read at the
    pixel's own value, ``prism.QLinearLookup``, is no such read)."""
    vs = [Var(f"__e{i}") for i in range(rank)]
    e = out_t.fn(list(vs))
    for x in walk(e):
        if isinstance(x, Reduce):
            return None
        if isinstance(x, Load) and x.buf.name == VIRTUAL and any(
                i != v and not (d == 1 and i == Int(0)) for i, v, d in zip(x.indices, vs, x.buf.shape, strict=True)):
            return None
        if spatial is not None and isinstance(x, Load) and x.buf.name != VIRTUAL and byte_index(x) is None:
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


def add_scratch(lk: LoweredKernel, name: str, shape: tuple[int, ...], dtype: str = "f32") -> Buffer:
    """Kernel-private memory of ``dtype`` (an im2col or packing buffer) as a ``scratch`` parameter of ``lk``."""
    buf = Buffer(name, dtype, shape, "scratch")
    lk.args.append(KernelArg("scratch", f"{lk.name}.{name}", buf))
    return buf


def epilogue_flops(epi: Expr) -> int:
    return sum(1 for y in walk(epi) if isinstance(y, Bin) and y.dtype == "f32")


def _loads(s: Stmt) -> set[str]:
    """Names of the buffers ``s`` reads."""
    out: set[str] = set()
    for x in walk_stmts(s):
        exprs = [x.value, *x.indices] if isinstance(x, Store) else [x.cond] if isinstance(x, If) else \
            [x.bound] if isinstance(x, For) and x.bound is not None else []
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
            elif isinstance(x, For) and x.bound is not None:
                exprs = [x.bound]
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
              prologue: Callable[[Expr], Stmt] | None = None, what: str = "",
              m_run: tuple[Expr, list[int]] | None = None, block_bytes: int = L2_BLOCK_BYTES,
              split_b: bool = False) -> Stmt:
    """The tiled loop nest of one GEMM (see the module docstring); records its schedule in
    ``lk.func.attrs["schedule"]``. ``block_cols`` defaults to whole tiles such that a K x block slice
    of B (at most ``block_bytes``: ``l2_block_bytes`` of the target) stays in L2, and at least two
    tiles (a one-tile block streams all of A from L3 for every NR columns: 2048->512 1x1 at 7x7
    measured 6% slower than with two); ``prologue(nb)``, if given, runs at the top of each column block.

    ``m_run`` = ``(rows, sizes)``: M is a run-time row count ``rows`` (an ``i64`` expression, one of
    ``sizes``, all <= ``m_n``; ``compiler.schedule.batch``): the row-tile loop runs ``rows // MR``
    tiles (its bound), and the leftover rows one tile of ``rows % MR`` rows, compiled for each
    leftover count some size in ``sizes`` has and chosen at run time.

    ``split_b``: B is a constant packed at compile time (weights) and the default ``tile_order`` is
    ``nt_mo`` (column tiles parallel) when a column block has more columns than M has rows: split by
    rows, every thread reads the whole K x block slice of B and 1/threads of A; split by columns,
    1/threads of the block and all of A, the smaller traffic when block > M (a transformer's
    64-token projections against 256x1024 weights: 2-thread CPU time 1.17x -> 1.05x the 1-thread)."""
    nr = t.nr
    if block_cols is None:
        tiles = math.ceil(n_n / nr)
        fit = tiles if block_bytes >= 4 * k_n * n_n else max(min(2, tiles), min(tiles, block_bytes // max(1, k_n * 4 * nr)))
        opts = sorted({tiles, *(1 << i for i in range(12) if 1 << i < tiles)})
        block_cols = int(choose("block_tiles", fit, opts)) * nr
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

    full, rest = divmod(m_n, t.mr)
    # loop order of a block's tiles: row tiles outer (an MR x K panel of A reused across its column tiles) or
    # column tiles outer (a K x NR panel of B reused across the row tiles); min(block, N): its real columns
    default = "nt_mo" if split_b and m_run is None and min(block_cols, n_n) > m_n else "mo_nt"
    order = str(choose("tile_order", default, ["mo_nt", "nt_mo"])) if full > 1 and tpb > 1 else "mo_nt"

    def row_tiles(tt: Tile, m_start: int | Expr, count: int, tag: str, bound: Expr | None = None,
                  bare: bool = False) -> Stmt:
        looped = count > 1 or bound is not None
        mo = vmo if looped else m_start if isinstance(m_start, Expr) else Int(m_start // t.mr)
        body: Stmt = _tile_body(tt, k_n, mo, mul(mo, t.mr), a_at, b_at, tile, n_local0, n0, store_at, epi, epi_map, conds, tag)
        if n_n % block_cols:
            body = If(Bin("<", n0, Int(n_n)), body)
        if bare:  # the row tiles of one column tile (nt_mo: the caller's parallel nt loop holds them)
            return For(vmo, count, body, "serial", bound) if looped else body
        if looped and order == "nt_mo":  # column tiles write disjoint columns of the block: parallel
            return For(vt, tpb, For(vmo, count, body, "serial", bound), "parallel")
        body = For(vt, tpb, body)
        return For(vmo, count, body, "parallel", bound) if looped else body

    parts: list[Stmt] = [prologue(vb)] if prologue is not None else []
    if m_run is not None:
        rows, sizes = m_run
        full_e, rest_e = floordiv(rows, t.mr), floormod(rows, t.mr)
        full, rests = max(s // t.mr for s in sizes), sorted({s % t.mr for s in sizes} - {0})
        if full:
            parts.append(row_tiles(t, 0, full, "", full_e))
        for r in rests:  # the leftover tile of each row count the run-time M can leave
            parts.append(If(Bin("==", rest_e, Int(r)), row_tiles(Tile(r, t.nv, t.width), full_e, 1, f"t{r}")))
        rest = 0
    if m_run is None and order == "nt_mo" and full and rest:  # the leftover row tile inside each column tile's task
        parts.append(For(vt, tpb, Seq([row_tiles(t, 0, full, "", bare=True),
                                       row_tiles(Tile(rest, t.nv, t.width), full * t.mr, 1, "t", bare=True)]), "parallel"))
    elif m_run is None:
        parts += _fixed_rows(t, full, rest, order == "mo_nt", vmo, row_tiles)
    _record(lk, t, (m_n, n_n, k_n), block_cols, order, (full, rest), m_run, bool(conds), what)
    return For(vb, nblocks, parts[0] if len(parts) == 1 else Seq(parts))


def _record(lk: LoweredKernel, t: Tile, mnk: tuple[int, int, int], block_cols: int, order: str,
            rows: tuple[int, int], m_run: tuple[Expr, list[int]] | None, masked: bool, what: str) -> None:
    """:func:`gemm_nest`'s lines of ``lk.func.attrs["schedule"]``."""
    (m_n, n_n, k_n), (full, rest), nr = mnk, rows, t.nr
    sched = lk.func.attrs.setdefault("schedule", [])
    sched += [f"tile(m={m_n}, n={n_n}; {t.mr}, {nr}) -> mo, nt, mi, nv, ni  # {t.mr}x{nr} register tile"
              + (f"{what}" if what else ""),
              f"split(n, {block_cols}) -> nb, n  # column block of B: {k_n}x{block_cols} floats stays in L2",
              f"reorder(nb, {'nt, mo' if order == 'nt_mo' else 'mo, nt'}, k, mi, nv, ni)",
              "cache_write(acc, local)  # accumulators in registers across k",
              f"unroll(mi), unroll(nv), vectorize(ni)  # {t.nv} x <{t.width} x float> per row",
              "parallel(nt)  # column tiles of a column block write disjoint columns" if order == "nt_mo" else
              "parallel(mo)  # row tiles of a column block write disjoint rows",
              "compute_at(epilogue, ni)  # applied to the accumulators before the store"]
    if rest:
        sched.append(f"# M = {m_n}: {full} tiles of {t.mr} rows and one of {rest}"
                     + (" (the last iteration of mo)" if m_run is None and order == "mo_nt" else
                        " (after the full ones, in each column tile)" if m_run is None else ""))
    if m_run is not None:
        left = sorted({s % t.mr for s in m_run[1]} - {0})
        sched.append(f"# M = {expr_str(m_run[0])} at run time (at most {m_n}): that // {t.mr} row tiles (the bound of "
                     f"mo), then a tile of that % {t.mr} rows" + (f" (compiled for {left})" if left else " (none left)"))
    if masked:
        sched.append("predicate(ni)  # masked store in partial column tiles")


def _fixed_rows(t: Tile, full: int, rest: int, rows_outer: bool, vmo: Var, row_tiles: Callable[..., Stmt]
                ) -> list[Stmt]:
    """The row tiles of a fixed M: ``full`` tiles of MR rows and one of ``rest``. With the row tiles
    outermost (``rows_outer``) and both kinds present, ``for mo in 0..full (parallel)`` with the
    leftover tile as its last iteration (``mo == full``), so that it runs beside the others rather
    than alone after the launch (on 2 threads, M = 64 in 6-row tiles: 5.33 of 10.67 tiles per thread
    instead of 5 + the 0.67 leftover on one); else the full tiles' loop, then the leftover tile."""
    if not (full and rest and rows_outer):
        return ([row_tiles(t, 0, full, "")] if full else []) + (
            [row_tiles(Tile(rest, t.nv, t.width), full * t.mr, 1, "t")] if rest else [])
    tiles = row_tiles(t, vmo, 1, "")  # one row tile (its column tiles) at row tile mo
    last = row_tiles(Tile(rest, t.nv, t.width), vmo, 1, "t")  # m0 = mo * MR = full * MR when mo == full
    return [For(vmo, full + 1, Seq([If(Bin("<", vmo, Int(full)), tiles), If(Bin("==", vmo, Int(full)), last)]),
                "parallel")]


__all__ = ["L2_BLOCK_BYTES", "VIRTUAL", "Tile", "column_block_bytes", "l2_block_bytes", "add_const", "add_scratch", "epilogue", "epilogue_flops", "finish",
           "gemm_nest", "pick_tile", "tuned_tile", "probe_buffer", "replace_anchor", "walk"]
