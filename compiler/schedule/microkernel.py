"""Register-tiled micro-kernel schedule for Conv, Gemm and MatMul groups (with their epilogue),
and the entry that picks every special schedule of a kernel.

:func:`try_microkernel` tries, in order, the row kernel of a Softmax/LogSoftmax/LayerNormalization
group (``compiler.schedule.rows``) and the GEMM micro-kernel of a group anchored by Conv, Gemm or
MatMul; None means the default schedule applies. The anchor is computed as a GEMM ``C[m, n] = sum_k
A[m, k] * B[k, n]`` by the register-tiled nest of ``compiler.schedule.gemm`` (MR x NV vectors of
accumulators held across the whole k loop, M and N tails handled).

* Conv (2-D, any group): m = output channel of a group, n = output pixel (oh * OW + ow), k = (ci, kh,
  kw). Weights are packed at compile time to ``[G, ceil(Co/G/MR), K, MR]`` (the broadcast operand,
  zero-padded). B is the input viewed as ``[C, H*W]`` for a 1x1, stride-1, unpadded Conv, else an
  im2col scratch buffer ``[K, rows*OW (+NR)]`` filled by the same kernel per column block (padding as
  zeros).
* Gemm with a constant B: m = row of A, n = output feature; B (``transB``, ``alpha`` applied) is
  packed at compile time to ``[ceil(N/NR), K, NR]`` panels (zero-padded); C (``beta``) and any
  residual Add are the epilogue.
* MatMul of any rank >= 2 (``compiler.schedule.matmul``): batch dims broadcast, transposed operands
  read in place.

The group's epilogue (bias, folded BatchNormalization, Relu/Clip/Sigmoid/GELU, scale, mask, residual
Add ...) is the group's own lowered expression with the anchor's value read from the accumulators,
applied before the one store; the last column tile stores with a lane mask. The last tile may read
up to NR - 1 elements past a row of B or of a residual input: the runtime gives every buffer slack
for that, and those lanes are never stored. Summation order over k is sequential per output (no
reassociation); products are fused into the sum with ``llvm.fma``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import FusedGroup
from ..loops.ir import (
    Buffer,
    Expr,
    Float,
    For,
    Int,
    Load,
    Var,
    add,
    mul,
)
from ..loops.lower import LoweredKernel
from ..loops.ops_nn import _geom
from ..loops.registry import LowerCtx
from ..loops.tensor import Tensor, broadcast_to
from ..targets import Target
from .batch import batch_rows
from .conv_blocked import blocked_conv, im2col, im2col_lanes
from .conv_nchwc import nchwc_conv
from .conv_se import channel_scale, try_global_pool
from .depthwise import direct_conv, prefers_direct
from .gemm import (
    VIRTUAL,
    Tile,
    add_const,
    add_scratch,
    column_block_bytes,
    epilogue,
    epilogue_flops,
    finish,
    gemm_nest,
    lower_around,
    pick_tile,
    probe_buffer,
    tuned_tile,
)
from .knobs import choose
from .pool import try_pool
from .rows import try_row_kernel

ANCHORS = ("Conv", "Gemm", "MatMul", "NchwcConv")


def try_microkernel(node: Any, kernel: str, opset: int, target: Target) -> LoweredKernel | None:
    """The micro-kernel version of a group whose anchor is Conv/Gemm/MatMul, the row kernel of a
    Softmax/LogSoftmax/LayerNormalization group (``compiler.schedule.rows``), or None if none fits."""

    rk = (try_row_kernel(node, kernel, opset, target) or try_global_pool(node, kernel, opset, target)
          or try_pool(node, kernel, opset, target))
    if rk is not None:
        return rk

    nodes = list(node.body.nodes) if isinstance(node, FusedGroup) else [node]
    anchors = [n for n in nodes if n.op_type in ANCHORS]
    if len(anchors) != 1 or len(node.outputs) != 1:
        return None
    anchor = anchors[0]
    t = anchor.outputs[0].type
    if t is None or t.short != "f32" or not t.is_static:
        return None
    def override(ctx: LowerCtx, n: Any, ins: list[Tensor | None]) -> list[Tensor]:
        shape = ctx.out_shape(n)
        vbuf = Buffer(VIRTUAL, "f32", shape, "virtual")
        bias = ins[2] if len(ins) > 2 else None
        if bias is None:
            return [Tensor(shape, "f32", lambda idx: Load(vbuf, tuple(idx)))]
        if n.op_type == "Conv":
            return [Tensor(shape, "f32", lambda idx: add(Load(vbuf, tuple(idx)), bias[[idx[1]]]))]
        if n.op_type == "NchwcConv":  # bias [Co/c * c] of the blocked output [N, Co/c, OH, OW, c]
            return [Tensor(shape, "f32", lambda idx: add(Load(vbuf, tuple(idx)),
                                                         bias[[add(mul(idx[1], shape[4]), idx[4])]]))]
        beta = float(n.attr("beta", 1.0))
        cb = broadcast_to(bias, shape)
        return [Tensor(shape, "f32", lambda idx: add(Load(vbuf, tuple(idx)),
                                                     cb[idx] if beta == 1.0 else mul(cb[idx], Float(beta))))]

    lowered = lower_around(node, kernel, opset, anchor, override)
    if lowered is None:
        return None
    lk, out_buf, out_t, ins = lowered
    if anchor.op_type == "Conv":
        return _conv(lk, anchor, ins, out_buf, out_t, target)
    if anchor.op_type == "NchwcConv":
        return nchwc_conv(lk, anchor, ins, out_buf, out_t, target)
    if anchor.op_type == "MatMul":
        # deferred: a cycle, compiler.schedule.matmul imports pack_b from this module
        from .matmul import lower_matmul

        return lower_matmul(lk, anchor, ins, out_buf, out_t, target)
    return _gemm(lk, anchor, ins, out_buf, out_t, target)


def _conv(lk: LoweredKernel, node: Any, ins: list[Tensor | None], out_buf: Buffer, out_t: Tensor,
          target: Target) -> LoweredKernel | None:
    x, w = ins[0], ins[1]
    if x is None or w is None or w.const is None or x.rank != 4:
        return None
    xbuf, scale = probe_buffer(x), None
    if xbuf is None and channel_scale(x) is not None:
        xbuf, scale = channel_scale(x)  # type: ignore[misc]
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
    ep = epilogue(out_t, 4, (oh, ow))
    if ep is None:
        return None
    epi, vs = ep
    st, dil, pb, in_sp, out_sp = _geom(node, x, oshape, [kh, kw])
    k_n, n_n = cg * kh * kw, oh * ow
    width = target.vector_width_f32
    direct = kh == kw == 1 and st == [1, 1] and pb == [0, 0] and h * wd == n_n
    if scale is not None and (not direct or groups > 1):
        return None
    if prefers_direct(groups, mg, k_n, pick_tile(co, width).mr, not direct):
        return direct_conv(lk, node, xbuf, w, out_buf, ep, (st, dil, pb), width)
    if groups == 1 and kh * kw > 1 and scale is None:  # a strided 1x1 keeps the GEMM nest: measured faster
        return blocked_conv(lk, node, xbuf, w, out_buf, ep, (st, dil, pb, in_sp, out_sp), width)
    t = tuned_tile(mg, n_n, width, nv=conv_vectors(n_n, width))
    mr, nr = t.mr, t.nr
    tiles_m = -(-mg // mr)
    wp = np.zeros((groups, tiles_m * mr, k_n), np.float32)
    wp[:, :mg] = np.asarray(w.const, np.float32).reshape(groups, mg, k_n)
    wpack = wp.reshape(groups, tiles_m, mr, k_n).transpose(0, 1, 3, 2)
    wbuf = add_const(lk, "wpack", wpack, f"{node.label}.W packed [G, Co/G/{mr}, K, {mr}]")
    vn, vg = Var("n"), Var("g")
    sched = lk.func.attrs.setdefault("schedule", [])
    sched.append(f"pack(W: [{co}, {cg}, {kh}, {kw}] -> [{groups}, {tiles_m}, {k_n}, {mr}])  # at compile time")
    if groups > 1:
        sched.append(f"split(co, {mg}) -> g, m  # group={groups}: one GEMM per group")
    block_cols, prologue = None, None
    if direct:
        bsrc = Buffer(xbuf.name, xbuf.dtype, (nb_, c_n, n_n), xbuf.scope)

        def b_at(k: Expr, tile: Expr, nv: Expr, lane: Expr, n_local: Expr, n: Expr) -> Expr:
            b = Load(bsrc, (vn, add(mul(vg, cg), k), n))
            return b if scale is None else mul(b, Load(scale, (vn if scale.shape[0] > 1 else Int(0), k, Int(0), Int(0))))
        sched.append(f"view(X as [{c_n}, {n_n}])  # 1x1 stride 1: no im2col")
        if scale is not None:
            sched.append(f"prologue(B row k *= {scale.name}[k])  # the excitation's per-channel scale, applied as "
                         "each row is read: the scaled activation is never stored")
    else:
        budget = column_block_bytes(target.l2_bytes, 4 * mg * k_n, 4 * k_n * n_n, 4 * mr * k_n)
        rows = max(1, min(oh, budget // max(1, k_n * 4 * ow)))
        rows = int(choose("block_rows", rows, sorted({oh, *(1 << i for i in range(10) if 1 << i < oh)})))
        block_cols = rows * ow
        col = add_scratch(lk, "col", (k_n, block_cols + nr))
        prologue = im2col(xbuf, col, vn, vg, cg, rows, (kh, kw), (oh, ow), width, (st, dil, pb, in_sp, out_sp))
        lanes = im2col_lanes(ow, width)
        sched.append(f"im2col(X -> col[{k_n}, {block_cols}]) compute_at nb  # {rows} output rows per block, "
                     "padding as zeros (masked loads)" + (f", vectorize(ox, {lanes})" if lanes else ""))

        def b_at(k: Expr, tile: Expr, nv: Expr, lane: Expr, n_local: Expr, n: Expr) -> Expr:
            return Load(col, (k, n_local))

    ov = Buffer(out_buf.name, out_buf.dtype, (nb_, co, n_n), out_buf.scope)
    g = gemm_nest(lk, mg, n_n, k_n, t, lambda m, mo, mi, k: Load(wbuf, (vg, mo, k, mi)), b_at,
                  lambda m, n: (ov, (vn, add(mul(vg, mg), m), n)), epi,
                  lambda m, n: {vs[0].name: vn, vs[1].name: add(mul(vg, mg), m), vs[2].name: Int(0),
                                vs[3].name: n}, block_cols, prologue,
                  block_bytes=column_block_bytes(target.l2_bytes, 4 * mg * k_n, 4 * k_n * n_n, 4 * mr * k_n))
    body = For(vg, groups, g)
    return finish(lk, [For(vn, nb_, body)], nb_ * (2 * co * n_n * k_n + epilogue_flops(epi) * co * n_n))


def conv_vectors(n_n: int, width: int) -> int:
    """NV, the vectors of ``width`` f32 lanes in the default register tile of a micro-kernel Conv over ``n_n``
    output pixels: 2, except where the pixels fit one tile of 3 or 4 vectors but not one of 2 (33-64 with
    AVX-512's 16 lanes: a 7x7 map) and the register file has 32 vectors: that one tile (6x4 or 8x3). 8x2
    pads 49 pixels to two 32-column tiles and reads the weights twice; 6x4 reads them once, with 24 FMAs
    per 10 loads/broadcasts for 16. ResNet-50's 1x1 Convs at 7x7, 1 thread, CPU time (``scripts/conv_ab.py``,
    Emerald Rapids): 512->2048 1.86 -> 1.41 ms, 2048->512 1.98 -> 1.48 ms (ORT 1.57, 1.52); at 14x14 (196
    pixels) 6x4 measured even with 8x2, so larger maps keep 2."""
    return -(-n_n // width) if width >= 16 and 2 * width < n_n <= 4 * width else 2


def _gemm(lk: LoweredKernel, node: Any, ins: list[Tensor | None], out_buf: Buffer, out_t: Tensor,
          target: Target) -> LoweredKernel | None:
    a, b = ins[0], ins[1]
    if a is None or b is None or b.const is None or a.rank != 2 or b.rank != 2 or out_t.rank != 2:
        return None
    abuf = probe_buffer(a)
    if abuf is None:
        return None
    ta = int(node.attr("transA", 0)) if node.op_type == "Gemm" else 0
    tb = int(node.attr("transB", 0)) if node.op_type == "Gemm" else 0
    alpha = float(node.attr("alpha", 1.0)) if node.op_type == "Gemm" else 1.0
    bm = np.asarray(b.const, np.float32)
    bm = bm.T if tb else bm  # [K, N]
    m_n, n_n = out_t.shape
    k_n = bm.shape[0]
    ep = epilogue(out_t, 2, None)
    if ep is None:
        return None
    epi, vs = ep
    t = tuned_tile(m_n, n_n, target.vector_width_f32)
    bbuf = pack_b(lk, bm * alpha, t.nr, f"{node.label}.B", "(transB)" if tb else "", alpha)

    def a_at(m: Expr, mo: Expr, mi: Expr, k: Expr) -> Expr:
        return Load(abuf, (k, m) if ta else (m, k))

    g = gemm_nest(lk, m_n, n_n, k_n, t, a_at, packed_b(bbuf, t), lambda m, n: (out_buf, (m, n)), epi,
                  lambda m, n: {vs[0].name: m, vs[1].name: n}, m_run=None if ta else batch_rows(lk, m_n, "Gemm's M"),
                  split_b=True)
    return finish(lk, [g], 2 * m_n * n_n * k_n + epilogue_flops(epi) * m_n * n_n)


def pack_b(lk: LoweredKernel, bm: np.ndarray, nr: int, label: str, how: str = "", alpha: float = 1.0) -> Buffer:
    """A constant B (``[..., K, N]``) packed at compile time into zero-padded column panels
    ``[..., ceil(N/NR), K, NR]`` (the vector operand of the tile), as a const parameter."""
    *lead, k_n, n_n = bm.shape
    tiles = -(-n_n // nr)
    padded = np.zeros((*lead, k_n, tiles * nr), np.float32)
    padded[..., :n_n] = bm
    bp = np.ascontiguousarray(np.moveaxis(padded.reshape(*lead, k_n, tiles, nr), -2, -3))
    sched = lk.func.attrs.setdefault("schedule", [])
    sched.append(f"pack(B: {list(bm.shape)}{' ' + how if how else ''}{' x alpha' if alpha != 1 else ''} -> "
                 f"{list(bp.shape)})  # at compile time, zero-padded")
    return add_const(lk, "bpack", bp, f"{label} packed [N/{nr}, K, {nr}]")


def packed_b(bbuf: Buffer, t: Tile, batch: list[Expr] | None = None):  # type: ignore[no-untyped-def]
    """``b_at`` of a compile-time packed B (:func:`pack_b`), at batch index ``batch`` if it has one."""
    lead = batch or []
    return lambda k, tile, nv, lane, n_local, n: Load(bbuf, (*lead, tile, k, add(mul(nv, t.width), lane)))


__all__ = ["try_microkernel"]
