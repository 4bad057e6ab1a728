"""Cache-blocked dense Conv (``group`` = 1, float32, any kernel size, stride, padding, dilation) on the
register-tiled GEMM micro-kernel, with the group's epilogue.

The Conv is the GEMM ``Y[co, p] = sum_k W[co, k] * col[k, p]`` (``k`` = (ci, kh, kw), ``p`` = oy * OW +
ox), blocked as GotoBLAS/BLIS block a GEMM (Goto & van de Geijn, "Anatomy of high-performance matrix
multiplication", TOMS 2008), with the im2col packing of B done per block by the kernel itself:

* per image, the output pixels are cut into column blocks of whole output rows, and the input
  channels into blocks of ``CB`` channels (``K_c = CB * kH * kW`` rows of B, at most ``k_block``, and
  small enough that the ``Co x K_c`` block of packed weights, ``a_block_bytes``, stays in L2: every
  column tile reads all of it);
* per (column block, channel block) the kernel fills ``col[K_c, block]`` (row stride a whole number of
  register tiles, so every vector load of B is aligned) with the im2col of those channels (padding
  as zeros); ``K_c x block`` floats are sized to stay in L2 (``block_bytes``);
* over the block's column tiles (NR = NV x W columns: the ``parallel`` axis, each task fills its own
  columns) and, inside, every row tile (MR output channels): the ``K_c x NR`` panel of B a column
  tile reads stays in L1 while all the output channels stream their packed weights (``[Co/MR, K,
  MR]``, packed at compile time) past it: per k step one vector load pair of B from L1, MR
  broadcasts of W and MR x NV ``llvm.fma``;
* the accumulators start from zero in the first channel block and from the partial sums of the
  tile (a kernel-private ``cpart[Co, block]``) in the others; the last channel block applies the
  group's epilogue (bias, folded BatchNormalization, Relu/Clip/..., residual Add) to the
  accumulators before the one store into Y (lanes past the end of the output are not stored).

Each output is summed over k in the order of the unblocked loop (channel, kernel row, kernel
column), one ``llvm.fma`` at a time; a partial sum is stored and reloaded exactly (f32), so the result
is bitwise that of the unblocked micro-kernel and does not depend on the thread count.
Semantics: the ONNX ``Conv`` operator (strides, pads/auto_pad, dilations). Not here: group > 1
(``compiler.schedule.microkernel`` / ``compiler.schedule.depthwise``) and 1x1 kernels (a strided 1x1's
im2col is a plain copy; ``compiler.schedule.microkernel``'s unblocked nest measured 10-20% faster on
ResNet-50's 1x1 stride-2 layers here, shared machine).
"""

from __future__ import annotations

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
    Seq,
    Stmt,
    Store,
    Var,
    add,
    mul,
    select,
    substitute,
    substitute_stmt,
)
from ..loops.lower import LoweredKernel
from ..loops.ops_nn import _window
from .gemm import Tile, add_const, add_scratch, epilogue_flops, finish, replace_anchor, tuned_tile
from .knobs import choose

K_BLOCK = 320  # rows of B (input channels x taps) per block, at most: a K_c x NR panel of B (40 KiB) in L1
BLOCK_BYTES = 512 * 1024  # a K_c x block slice of B (im2col) stays in L2 (2 MiB per core here)
A_BLOCK_BYTES = 1024 * 1024  # the Co x K_c block of packed weights every column tile reads stays in L2 too


def channel_block(cg: int, taps: int, k_block: int) -> int:
    """Input channels per block: the largest divisor of ``cg`` whose ``channels * taps`` is at most
    ``k_block`` (at least 1)."""
    return max((d for d in range(1, cg + 1) if cg % d == 0 and d * taps <= k_block), default=1)


def im2col_lanes(ow: int, width: int) -> int | None:
    """Vector lanes of the im2col fill along an output row of ``ow`` pixels: the target's f32 ``width``,
    8 or 4 where one divides ``ow``; else the largest divisor of ``ow`` from ``width`` down to 3 (a row of
    14 or 7 pixels fills as 7-lane masked loads, not one scalar select per pixel); None (scalar) when
    there is none."""
    lanes = next((v for v in (width, 8, 4) if v <= width and ow % v == 0), None)
    return lanes or next((v for v in range(min(width, ow), 2, -1) if ow % v == 0), None)


def im2col(xbuf: Buffer, col: Buffer, vn: Var, vg: Var, cg: int, rows: int, ks: tuple[int, int],
           out_hw: tuple[int, int], width: int, geom: Any):  # type: ignore[no-untyped-def]
    """The im2col prologue of ``rows`` output rows per column block, for channels ``vg * cg + ci``
    (``ci < cg``): ``prologue(nb)`` fills ``col[(ci, kh, kw), oy * OW + ox]`` (zeros where a tap is in
    the padding); rows past the output's end are left unfilled (their columns are never stored)."""
    kh, kw = ks
    oh, ow = out_hw
    st, dil, pb, in_sp, out_sp = geom
    vc, vh, vw, vy, vx = (Var(s) for s in ("ci", "kh", "kw", "oy", "ox"))
    lanes = im2col_lanes(ow, width)

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
    return prologue


def tile_vectors(n_n: int, width: int) -> int:
    """NV of the default register tile of :func:`blocked_conv` over ``n_n`` output pixels: 4 (a 6x4 tile)
    with 32 vector registers (``width`` >= 16, AVX-512) where 4 vectors fit the pixels, else 2 (8x2, or
    6x2 with 16 registers). 6x4 does 24 FMAs per 10 loads/broadcasts, 8x2 16. ``scripts/conv_ab.py``, 1
    thread, CPU time, Emerald Rapids, quiet (load 0.8): 64->64 3x3 @56x56 2.79 -> 2.42 ms (ORT 2.23),
    128->128 @28x28 2.59 -> 2.35 (2.06), 512->512 @7x7 4.81 -> 4.19 (3.97), 64->192 @56x56 6.60 -> 5.35
    (4.99); 256->256 @14x14 even (2.78 / 2.80)."""
    return 4 if width >= 16 and n_n > 3 * width else 2


def blocked_conv(lk: LoweredKernel, node: Any, xbuf: Buffer, w: Any, out_buf: Buffer, ep: tuple[Expr, list[Var]],
                 geom: Any, width: int, *, k_block: int = K_BLOCK, block_bytes: int = BLOCK_BYTES,
                 a_block_bytes: int = A_BLOCK_BYTES, tile: Tile | None = None) -> LoweredKernel:
    """Schedule the group-1 Conv ``node`` of kernel ``lk`` (module docstring). ``xbuf`` is X ``[N, C,
    H, W]`` (f32), ``w`` the constant weight tensor ``[Co, C, kH, kW]``, ``out_buf`` Y ``[N, Co, OH,
    OW]``, ``ep`` the group's epilogue (``compiler.schedule.gemm.epilogue``), ``geom`` the strides,
    dilations, begin pads and spatial sizes (``compiler.loops.ops_nn._geom``), ``width`` the target's
    f32 lanes. ``k_block`` (rows of B per channel block, at most; lowered so that ``Co x K_c`` floats
    are at most ``a_block_bytes``) and ``block_bytes`` (bytes of one ``K_c x block`` slice of B) give the defaults of the tuner's knobs (``compiler.schedule.knobs``)
    ``channel_block`` (input channels per block: a divisor of C), ``block_rows`` (output rows per
    column block) and ``tile`` (``MRxNV``, ``compiler.schedule.gemm.tuned_tile``); ``tile`` given here
    overrides the knob (default NV: :func:`tile_vectors`)."""
    n_b, c_n, _, _ = xbuf.shape
    co, cg, kh, kw = w.shape
    oh, ow = out_buf.shape[2], out_buf.shape[3]
    k_n, n_n = cg * kh * kw, oh * ow
    t = tile or tuned_tile(co, n_n, width, nv=tile_vectors(n_n, width))
    mr, nr = t.mr, t.nr
    cb, rows = _blocks(cg, kh * kw, (oh, ow), max(kh * kw, min(k_block, a_block_bytes // (4 * co))), block_bytes)
    kc, nkb = cb * kh * kw, cg // cb
    bc = rows * ow
    tpb, nblocks = -(-bc // nr), -(-oh // rows)
    stride = tpb * nr
    tiles_m, rest = divmod(co, mr)
    mpad = -(-co // mr) * mr
    wbuf = _pack_weights(lk, f"{node.label}.W", np.asarray(w.const, np.float32), mr)
    col = add_scratch(lk, "col", (kc, stride))
    cpart = add_scratch(lk, "cpart", (mpad, stride)) if nkb > 1 else None
    vn, vb, vkb, vt, vmo = Var("n"), Var("nb"), Var("cb"), Var("nt"), Var("mo")
    prologue = im2col(xbuf, col, vn, vkb, cb, rows, (kh, kw), (oh, ow), width, geom)
    epi, vs = ep
    ov = Buffer(out_buf.name, out_buf.dtype, (n_b, co, n_n), out_buf.scope)
    n_local0 = mul(vt, nr)
    n0 = add(mul(vb, bc), n_local0)

    def tile_body(mo: Expr, m_rows: int, tag: str, phase: str) -> Stmt:
        vk, vmi, vnv, vl = Var("k"), Var(f"mi{tag}"), Var("nv"), Var("ni")
        acc = Buffer(f"acc{tag}", "f32", (m_rows, t.nv, t.width), "local")
        at = (vmi, vnv, vl)
        nl = add(n_local0, add(mul(vnv, t.width), vl))
        n, m = add(mul(vb, bc), nl), add(mul(mo, mr), vmi)

        def lanes(body: Stmt) -> Stmt:
            return For(vmi, m_rows, For(vnv, t.nv, For(vl, t.width, body, "vectorized"), "unrolled"), "unrolled")

        a = Load(wbuf, (mo, add(mul(vkb, kc), vk), vmi))
        upd = Store(acc, at, add(Load(acc, at), mul(a, Load(col, (vk, nl)))))
        out: Stmt = Store(ov, (vn, m, n),
                          substitute(replace_anchor(epi, Load(acc, at)),
                                     {vs[0].name: vn, vs[1].name: m, vs[2].name: Int(0), vs[3].name: n}))
        conds = [c for c in (Bin("<", nl, Int(bc)) if stride > bc else None,
                             Bin("<", n, Int(n_n)) if n_n % bc else None) if c is not None]
        if conds:
            out = If(conds[0] if len(conds) == 1 else Bin("and", conds[0], conds[1]), out)
        part = cpart if cpart is not None else col  # (cpart exists whenever a phase reads or writes it)
        init = Float(0.0) if phase in ("one", "first") else Load(part, (m, nl))
        last = lanes(out) if phase in ("one", "last") else lanes(Store(part, (m, nl), Load(acc, at)))
        return Allocate(acc, Seq([lanes(Store(acc, at, init)), For(vk, kc, lanes(upd)), last]))

    def kblock(phase: str, cb_at: Expr) -> Stmt:
        """One channel block's prologue and column tiles; the phase (only, first, a middle or the last
        block) fixes where the accumulators start and end, so no tile tests the block index."""
        per_tile: list[Stmt] = []
        if tiles_m:
            per_tile.append(For(vmo, tiles_m, tile_body(vmo, mr, "", phase)) if tiles_m > 1
                            else tile_body(Int(0), mr, "", phase))
        if rest:
            per_tile.append(tile_body(Int(tiles_m), rest, "t", phase))
        inner: Stmt = Seq(per_tile) if len(per_tile) > 1 else per_tile[0]
        if n_n % bc:
            inner = If(Bin("<", n0, Int(n_n)), inner)
        return substitute_stmt(Seq([prologue(vb), For(vt, tpb, inner, "parallel")]), {"cb": cb_at})

    vmid = Var("cbm")
    blocks = [kblock("one", Int(0))] if nkb == 1 else [kblock("first", Int(0))] + (
        [For(vmid, nkb - 2, kblock("mid", add(vmid, Int(1))))] if nkb > 2 else []) + [kblock("last", Int(nkb - 1))]
    nest = For(vn, n_b, For(vb, nblocks, blocks[0] if len(blocks) == 1 else Seq(blocks)))
    lk.func.attrs.setdefault("schedule", []).extend(_schedule_text(
        (co, cg, kh, kw), (oh, ow), t, (cb, kc, nkb, rows, bc, stride, mpad), k_block, block_bytes))
    return finish(lk, [nest], n_b * (2 * co * n_n * k_n + epilogue_flops(epi) * co * n_n))


def _blocks(cg: int, taps: int, out_hw: tuple[int, int], k_block: int, block_bytes: int) -> tuple[int, int]:
    """``(input channels per block, output rows per column block)``: the knobs ``channel_block`` and
    ``block_rows`` with their defaults from ``k_block`` and ``block_bytes``."""
    oh, ow = out_hw
    cb = int(choose("channel_block", channel_block(cg, taps, k_block),
                    [d for d in range(1, cg + 1) if cg % d == 0 and d * taps <= 4 * K_BLOCK]))
    rows = max(1, min(oh, block_bytes // max(1, cb * taps * 4 * ow)))
    return cb, int(choose("block_rows", rows, sorted({oh, *(1 << i for i in range(10) if 1 << i < oh)})))


def _pack_weights(lk: LoweredKernel, label: str, w: np.ndarray, mr: int) -> Buffer:
    """W ``[Co, C, kH, kW]`` packed at compile time to ``[ceil(Co/MR), K, MR]`` (zero rows past Co)."""
    co, k_n = w.shape[0], int(np.prod(w.shape[1:]))
    mpad = -(-co // mr) * mr
    wp = np.zeros((mpad, k_n), np.float32)
    wp[:co] = w.reshape(co, k_n)
    return add_const(lk, "wpack", wp.reshape(mpad // mr, mr, k_n).transpose(0, 2, 1), f"{label} packed [Co/{mr}, K, {mr}]")


def _schedule_text(ws: tuple[int, int, int, int], out_hw: tuple[int, int], t: Tile, blocks: tuple[int, ...],
                   k_block: int, block_bytes: int) -> list[str]:
    """The schedule lines of :func:`blocked_conv` (what the explorer shows with the kernel)."""
    co, cg, kh, kw = ws
    oh, ow = out_hw
    cb, kc, nkb, rows, bc, stride, mpad = blocks
    mr, nr, k_n = t.mr, t.nr, cg * kh * kw
    tail = [f"# Co = {co}: {co // mr} tiles of {mr} rows and one of {co % mr}"] if co % mr else []
    return [
        f"pack(W: [{co}, {cg}, {kh}, {kw}] -> [{mpad // mr}, {k_n}, {mr}])  # at compile time",
        f"split(k = {k_n}, {kc}) -> cb, k  # {cb} input channels x {kh * kw} taps per block (k_block={k_block})",
        f"split(p = {oh}x{ow}, {bc}) -> nb, p  # {rows} output rows per block (block_bytes={block_bytes}): "
        f"col[{kc}, {stride}] stays in L2",
        "im2col(X -> col) compute_at cb  # per channel block, padding as zeros",
        f"tile(co={co}, p; {mr}, {nr}) -> mo, nt, mi, nv, ni  # {mr}x{nr} register tile",
        "reorder(n, nb, cb, nt, mo, k, mi, nv, ni)  # a column tile's K_c x NR panel of B stays in L1 "
        "across the row tiles",
        "cache_write(acc, local)  # accumulators in registers across k" + (
            f"; partial sums in cpart[{mpad}, {stride}] between channel blocks" if nkb > 1 else ""),
        f"unroll(mi), unroll(nv), vectorize(ni)  # {t.nv} x <{t.width} x float> per row",
        "parallel(nt)  # column tiles of a block write disjoint columns",
        "compute_at(epilogue, ni)  # applied to the accumulators in the last channel block, before the store", *tail]


__all__ = ["BLOCK_BYTES", "K_BLOCK", "blocked_conv", "channel_block", "im2col", "im2col_lanes"]
