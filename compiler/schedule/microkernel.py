"""Register-tiled micro-kernel schedule for Conv, Gemm and MatMul groups (with their epilogue).

The anchor is computed as a GEMM ``C[m, n] = sum_k A[m, k] * B[k, n]`` by an explicit register
tile: MR rows (unrolled) x NR columns (NR = 2 vectors at the target's f32 width: 2 x <16 x float>
on AVX-512; 4 vectors when MR = 1) of accumulators held across the whole k loop, one broadcast of
A and NR/width vector loads of B per row and step, ``llvm.fma`` per accumulator vector
(``../shared/PERFORMANCE.md``: this shape reaches OpenBLAS speed where the loop vectorizer alone
reaches about 45%). Columns are blocked so that a block of B (K x NB floats) stays in L2.

* Conv (group = 1, 2-D): m = output channel, n = output pixel (oh * OW + ow), k = (ci, kh, kw).
  Weights are packed at compile time to ``[Co/MR, K, MR]`` (the broadcast operand). B is the input
  viewed as ``[C, H*W]`` for a 1x1, stride-1, unpadded Conv, else an im2col scratch buffer
  ``[K, OH*OW (+NR)]`` filled by the same kernel (padding as zeros).
* Gemm / 2-D MatMul with a constant B: m = row of A (broadcast from the activation), n = output
  feature; B is packed at compile time to ``[ceil(N/NR), K, NR]`` panels (zero-padded).

The group's epilogue (bias, folded BatchNormalization, Relu/Clip/Sigmoid, residual Add ...) is the
group's own lowered expression with the anchor's value read from the accumulators, applied before
the one store; the last column tile stores with a lane mask. The last tile may read up to NR - 1
elements past a row of B or of a residual input: the runtime gives every buffer slack for that,
and those lanes are never stored. Summation order over k is sequential per output (no
reassociation); products are fused into the sum with ``llvm.fma``. Returns None when a group
does not fit (the default schedule then applies).
"""

from __future__ import annotations

import math
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
    emax,
    emin,
    mul,
    select,
    substitute,
)
from ..loops.lower import KernelArg, LoweredKernel, finalize, lower_group
from ..loops.ops_elementwise import LowerCtx
from ..loops.ops_nn import _geom, _window
from ..loops.tensor import Tensor, broadcast_to
from ..targets import Target

ANCHORS = ("Conv", "Gemm", "MatMul")
L2_BLOCK_BYTES = 512 * 1024
VIRTUAL = "__anchor"


def _probe_buffer(t: Tensor) -> Buffer | None:
    """The buffer a tensor reads element-for-element, if it is a plain buffer read."""
    vs = [Var(f"__p{i}") for i in range(t.rank)]
    e = t.fn(list(vs))
    if isinstance(e, Load) and e.indices == tuple(vs) and e.buf.scope != "local":
        return e.buf
    return None


def _walk(e: Expr):  # type: ignore[no-untyped-def]
    yield e
    for c in children(e):
        yield from _walk(c)


def _replace_anchor(e: Expr, acc: Expr) -> Expr:
    if isinstance(e, Load) and e.buf.name == VIRTUAL:
        return acc
    if isinstance(e, Bin):
        return Bin(e.op, _replace_anchor(e.a, acc), _replace_anchor(e.b, acc))
    from ..loops.ir import Call, Cast, Select

    if isinstance(e, Select):
        return Select(_replace_anchor(e.cond, acc), _replace_anchor(e.t, acc), _replace_anchor(e.f, acc))
    if isinstance(e, Cast):
        return Cast(e.to, _replace_anchor(e.value, acc))
    if isinstance(e, Call):
        return Call(e.fn, tuple(_replace_anchor(a, acc) for a in e.args))
    if isinstance(e, Load):
        return Load(e.buf, tuple(_replace_anchor(i, acc) for i in e.indices))
    return e


def try_microkernel(node: Any, kernel: str, opset: int, target: Target) -> LoweredKernel | None:
    """The micro-kernel version of a group whose anchor is Conv/Gemm/MatMul, or None if it does not fit."""
    from ..ir import FusedGroup

    nodes = list(node.body.nodes) if isinstance(node, FusedGroup) else [node]
    anchors = [n for n in nodes if n.op_type in ANCHORS]
    if len(anchors) != 1 or len(node.outputs) != 1:
        return None
    anchor = anchors[0]
    t = anchor.outputs[0].type
    if t is None or t.short != "f32" or not t.is_static:
        return None
    captured: dict[str, Any] = {}

    def override(ctx: LowerCtx, n: Any, ins: list[Tensor | None]) -> list[Tensor]:
        captured["ins"] = ins
        shape = ctx.out_shape(n)
        vbuf = Buffer(VIRTUAL, "f32", shape, "virtual")
        bias = ins[2] if len(ins) > 2 else None
        if bias is None:
            return [Tensor(shape, "f32", lambda idx: Load(vbuf, tuple(idx)))]
        if n.op_type == "Conv":
            return [Tensor(shape, "f32", lambda idx: add(Load(vbuf, tuple(idx)), bias[[idx[1]]]))]
        beta = float(n.attr("beta", 1.0))
        cb = broadcast_to(bias, shape)
        return [Tensor(shape, "f32", lambda idx: add(Load(vbuf, tuple(idx)),
                                                     cb[idx] if beta == 1.0 else mul(cb[idx], Float(beta))))]

    lk = lower_group(node, kernel, opset, override={id(anchor): override}, build=False)
    if len(lk.pending) != 1 or "ins" not in captured:
        return None
    out_buf, out_t = lk.pending[0]
    if out_t.shape != tuple(t.shape):
        return None
    if anchor.op_type == "Conv":
        return _conv(lk, anchor, captured["ins"], out_buf, out_t, target)
    return _gemm(lk, anchor, captured["ins"], out_buf, out_t, target)


def _epilogue(out_t: Tensor, rank: int, spatial: tuple[int, int] | None) -> tuple[Expr, list[Var]] | None:
    vs = [Var(f"__e{i}") for i in range(rank)]
    e = out_t.fn(list(vs))
    for x in _walk(e):
        if isinstance(x, Reduce):
            return None
        if isinstance(x, Load) and x.buf.name == VIRTUAL and any(
                i != v and not (d == 1 and i == Int(0)) for i, v, d in zip(x.indices, vs, x.buf.shape, strict=True)):
            return None
        if spatial is not None and isinstance(x, Load) and x.buf.name != VIRTUAL:
            from ..loops.ir import free_vars

            names = {v.name for v in vs[-2:]}
            used = [free_vars(i) & names for i in x.indices]
            if any(used):
                if (x.indices[-2:] != tuple(vs[-2:]) or tuple(x.buf.shape[-2:]) != spatial
                        or any(used[:-2])):
                    return None
    return e, vs


def _pick_mr(m: int, width: int) -> int:
    """Rows of the register tile: with NR = 2 vectors, MR x 2 accumulators plus 2 B vectors and a
    broadcast must fit the register file (32 vector registers with AVX-512: 8 rows; 16 with AVX2, SSE
    and the 128-bit targets here: 6 rows), and MR must divide M."""
    choices = (8, 6, 4, 2, 1) if width >= 16 else (6, 4, 3, 2, 1)
    return next(r for r in choices if m % r == 0)


def _add_const(lk: LoweredKernel, name: str, data: np.ndarray, label: str) -> Buffer:
    buf = Buffer(name, "f32", tuple(data.shape), "const")
    lk.args.append(KernelArg("const", label, buf, np.ascontiguousarray(data, dtype=np.float32)))
    return buf


def _gemm_nest(lk: LoweredKernel, m_n: int, n_n: int, k_n: int, mr: int, nr: int, a_at, b_at,  # type: ignore[no-untyped-def]
               store_at, epi: Expr, epi_map, width: int, block_cols: int | None = None,
               prologue=None) -> Stmt:
    """The tiled loop nest. ``a_at(mo, k, mi)`` and ``b_at(k, tile, ni, n_local, n)`` give the operands
    (``tile`` is the global tile index when blocks are whole tiles, ``ni`` the lane in the tile,
    ``n_local`` the column inside the block, ``n`` the global column), ``store_at = (buffer, (m, n) -> indices)``, ``epi_map(m, n)`` maps the epilogue's variables.
    Columns are processed in blocks of ``block_cols`` (default: whole tiles so that a K x block slice of
    B stays in L2); ``prologue(nb)``, if given, runs at the top of each block (e.g. its im2col)."""
    if block_cols is None:
        tiles = math.ceil(n_n / nr)
        tpb = max(1, min(tiles, L2_BLOCK_BYTES // max(1, k_n * 4 * nr)))
        block_cols = tpb * nr
    tpb = math.ceil(block_cols / nr)
    nblocks = math.ceil(n_n / block_cols)
    vb, vmo, vt, vk, vmi, vni = (Var(x) for x in ("nb", "mo", "nt", "k", "mi", "ni"))
    tile = add(mul(vb, tpb), vt)
    n_local = add(mul(vt, nr), vni)
    acc = Buffer("acc", "f32", (mr, nr), "local")
    init = For(vmi, mr, For(vni, nr, Store(acc, (vmi, vni), Float(0.0)), "vectorized"), "unrolled")
    n_glob = add(mul(vb, block_cols), n_local)
    upd = Store(acc, (vmi, vni), add(Load(acc, (vmi, vni)), mul(a_at(vmo, vk, vmi),
                                                                b_at(vk, tile, vni, n_local, n_glob))))
    kloop = For(vk, k_n, For(vmi, mr, For(vni, nr, upd, "vectorized"), "unrolled"))
    m = add(mul(vmo, mr), vmi)
    n = add(mul(vb, block_cols), n_local)
    value = substitute(_replace_anchor(epi, Load(acc, (vmi, vni))), epi_map(m, n))
    st: Stmt = Store(store_at[0], store_at[1](m, n), value)
    conds = []
    if block_cols % nr:
        conds.append(Bin("<", n_local, Int(block_cols)))
    if n_n % block_cols or (block_cols == tpb * nr and n_n % nr):
        conds.append(Bin("<", n, Int(n_n)))
    if conds:
        st = If(conds[0] if len(conds) == 1 else Bin("and", conds[0], conds[1]), st)
    store = For(vmi, mr, For(vni, nr, st, "vectorized"), "unrolled")
    body: Stmt = Allocate(acc, Seq([init, kloop, store]))
    if n_n % block_cols:
        body = If(Bin("<", add(mul(vb, block_cols), mul(vt, nr)), Int(n_n)), body)
    sched = lk.func.attrs.setdefault("schedule", [])
    sched += [f"tile(m={m_n}, n={n_n}; {mr}, {nr}) -> mo, nt, mi, ni  # {mr}x{nr} register tile",
              f"split(n, {block_cols}) -> nb, n  # column block of B: {k_n}x{block_cols} floats stays in L2",
              "reorder(nb, mo, nt, k, mi, ni)", "cache_write(acc, local)  # accumulators in registers across k",
              "unroll(mi)", f"vectorize(ni)  # {nr // width} x <{width} x float> per row",
              "compute_at(epilogue, ni)  # applied to the accumulators before the store"]
    if conds:
        sched.append("predicate(ni)  # masked store in partial column tiles")
    inner = For(vmo, m_n // mr, For(vt, tpb, body))
    if prologue is not None:
        inner = Seq([prologue(vb), inner])
    return For(vb, nblocks, inner)


def _finish(lk: LoweredKernel, stmts: list[Stmt], flops: int) -> LoweredKernel:
    used: set[str] = set()

    def visit(s: Stmt) -> None:
        from ..loops.ir import walk_stmts

        for x in walk_stmts(s):
            exprs: list[Expr] = []
            if isinstance(x, Store):
                used.add(x.buf.name)
                exprs = [x.value, *x.indices]
            elif isinstance(x, If):
                exprs = [x.cond]
            for e in exprs:
                for y in _walk(e):
                    if isinstance(y, Load):
                        used.add(y.buf.name)

    for s in lk.prelude + stmts:
        visit(s)
    lk.args = [a for a in lk.args if a.buffer.name in used]
    lk.lowering.out_loops = []
    sched = list(lk.func.attrs.get("schedule", []))
    finalize(lk, lk.prelude + stmts)
    lk.func.attrs["schedule"] = sched
    lk.func.attrs["flops"] = flops  # useful FLOPs (2*M*N*K + epilogue), not the padded tiles
    return lk


def _conv(lk: LoweredKernel, node: Any, ins: list[Tensor | None], out_buf: Buffer, out_t: Tensor,
          target: Target) -> LoweredKernel | None:
    x, w = ins[0], ins[1]
    if x is None or w is None or w.const is None or x.rank != 4:
        return None
    xbuf = _probe_buffer(x)
    if xbuf is None:
        return None
    nb_, c_n, h, wd = x.shape
    co, cg, kh, kw = w.shape
    groups = int(node.attr("group", 1))
    if cg * groups != c_n or co % groups:
        return None
    mg = co // groups
    oshape = out_t.shape
    oh, ow = oshape[2], oshape[3]
    ep = _epilogue(out_t, 4, (oh, ow))
    if ep is None:
        return None
    epi, vs = ep
    st, dil, pb, in_sp, out_sp = _geom(node, x, oshape, [kh, kw])
    k_n, n_n = cg * kh * kw, oh * ow
    mr = _pick_mr(mg, target.vector_width_f32)
    width = target.vector_width_f32
    nr = 2 * width
    wp = np.asarray(w.const, np.float32).reshape(groups, mg // mr, mr, k_n).transpose(0, 1, 3, 2)
    wbuf = _add_const(lk, "wpack", wp, f"{node.label}.W packed [G, Co/G/{mr}, K, {mr}]")
    vn, vg = Var("n"), Var("g")
    direct = kh == kw == 1 and st == [1, 1] and pb == [0, 0] and h * wd == n_n
    stmts: list[Stmt] = []
    sched = lk.func.attrs.setdefault("schedule", [])
    sched.append(f"pack(W: [{co}, {cg}, {kh}, {kw}] -> [{groups}, {mg // mr}, {k_n}, {mr}])  # at compile time")
    if groups > 1:
        sched.append(f"split(co, {mg}) -> g, m  # group={groups}: one GEMM per group")
    block_cols, prologue = None, None
    if direct:
        bsrc = Buffer(xbuf.name, xbuf.dtype, (nb_, c_n, n_n), xbuf.scope)

        def b_at(k: Expr, tile: Expr, ni: Expr, n_local: Expr, n: Expr) -> Expr:
            return Load(bsrc, (vn, add(mul(vg, cg), k), n))
        sched.append(f"view(X as [{c_n}, {n_n}])  # 1x1 stride 1: no im2col")
    else:
        rows = max(1, min(oh, L2_BLOCK_BYTES // max(1, k_n * 4 * ow)))
        block_cols = rows * ow
        col = Buffer("col", "f32", (k_n, block_cols + nr), "scratch")
        lk.args.append(KernelArg("scratch", f"{lk.name}.col", col))
        vc, vh, vw, vy, vx = (Var(s) for s in ("ci", "kh", "kw", "oy", "ox"))
        lanes = next((v for v in (width, 8, 4) if v <= width and ow % v == 0), None)

        def prologue(vb: Expr) -> Stmt:
            oy = add(mul(vb, rows), vy)
            pos, cond = _window([oy, vx], [vh, vw], st, dil, pb, in_sp, out_sp, [kh, kw])
            val: Expr = Load(xbuf, (vn, add(mul(vg, cg), vc), pos[0], pos[1]))
            if cond is not None:
                val = select(cond, val, Float(0.0))
            kidx = add(mul(add(mul(vc, kh), vh), kw), vw)
            inner: Stmt = Store(col, (kidx, add(mul(vy, ow), vx)), val)
            if lanes is not None and lanes < ow:
                vxo, vxi = Var("ox_o"), Var("ox_i")
                ox = add(mul(vxo, lanes), vxi)
                inner = For(vxo, ow // lanes, For(vxi, lanes, Store(col, (kidx, add(mul(vy, ow), ox)),
                                                                    substitute(val, {"ox": ox})), "vectorized"))
            else:
                inner = For(vx, ow, inner, "vectorized" if lanes == ow else "serial")
            if oh % rows:
                inner = If(Bin("<", oy, Int(oh)), inner)
            return For(vc, cg, For(vh, kh, For(vw, kw, For(vy, rows, inner))))

        sched.append(f"im2col(X -> col[{k_n}, {block_cols}]) compute_at nb  # {rows} output rows per block, "
                     "padding as zeros (masked loads)" + (f", vectorize(ox, {lanes})" if lanes else ""))

        def b_at(k: Expr, tile: Expr, ni: Expr, n_local: Expr, n: Expr) -> Expr:
            return Load(col, (k, n_local))

    ov = Buffer(out_buf.name, out_buf.dtype, (nb_, co, n_n), out_buf.scope)
    g = _gemm_nest(lk, mg, n_n, k_n, mr, nr, lambda mo, k, mi: Load(wbuf, (vg, mo, k, mi)), b_at,
                   (ov, lambda m, n: (vn, add(mul(vg, mg), m), n)), epi,
                   lambda m, n: {vs[0].name: vn, vs[1].name: add(mul(vg, mg), m), vs[2].name: Int(0),
                                 vs[3].name: n}, width, block_cols, prologue)
    stmts.append(g)
    epi_ops = sum(1 for y in _walk(epi) if isinstance(y, Bin) and y.dtype == "f32")
    body = For(vg, groups, Seq(stmts) if len(stmts) > 1 else stmts[0])
    return _finish(lk, [For(vn, nb_, body)], nb_ * (2 * co * n_n * k_n + epi_ops * co * n_n))


def _gemm(lk: LoweredKernel, node: Any, ins: list[Tensor | None], out_buf: Buffer, out_t: Tensor,
          target: Target) -> LoweredKernel | None:
    a, b = ins[0], ins[1]
    if a is None or b is None or b.const is None or a.rank != 2 or b.rank != 2 or out_t.rank != 2:
        return None
    abuf = _probe_buffer(a)
    if abuf is None:
        return None
    ta = int(node.attr("transA", 0)) if node.op_type == "Gemm" else 0
    tb = int(node.attr("transB", 0)) if node.op_type == "Gemm" else 0
    alpha = float(node.attr("alpha", 1.0)) if node.op_type == "Gemm" else 1.0
    bm = np.asarray(b.const, np.float32)
    bm = bm.T if tb else bm  # [K, N]
    m_n, n_n = out_t.shape
    k_n = bm.shape[0]
    ep = _epilogue(out_t, 2, None)
    if ep is None:
        return None
    epi, vs = ep
    mr = _pick_mr(m_n, target.vector_width_f32)
    width = target.vector_width_f32
    nr = (4 if mr == 1 else 2) * width
    tiles = math.ceil(n_n / nr)
    bp = np.zeros((tiles, k_n, nr), np.float32)
    padded = np.zeros((k_n, tiles * nr), np.float32)
    padded[:, :n_n] = bm * alpha
    bp[:] = padded.reshape(k_n, tiles, nr).transpose(1, 0, 2)
    bbuf = _add_const(lk, "bpack", bp, f"{node.label}.B packed [N/{nr}, K, {nr}]")
    sched = lk.func.attrs.setdefault("schedule", [])
    sched.append(f"pack(B: [{k_n}, {n_n}]{' (transB)' if tb else ''}{' x alpha' if alpha != 1 else ''} -> "
                 f"[{tiles}, {k_n}, {nr}])  # at compile time, zero-padded")

    def a_at(mo: Expr, k: Expr, mi: Expr) -> Expr:
        m = add(mul(mo, mr), mi)
        return Load(abuf, (k, m) if ta else (m, k))

    g = _gemm_nest(lk, m_n, n_n, k_n, mr, nr, a_at, lambda k, tile, ni, n_local, n: Load(bbuf, (tile, k, ni)),
                   (out_buf, lambda m, n: (m, n)), epi, lambda m, n: {vs[0].name: m, vs[1].name: n}, width)
    epi_ops = sum(1 for y in _walk(epi) if isinstance(y, Bin) and y.dtype == "f32")
    return _finish(lk, [g], 2 * m_n * n_n * k_n + epi_ops * m_n * n_n)


__all__ = ["try_microkernel", "emax", "emin"]
