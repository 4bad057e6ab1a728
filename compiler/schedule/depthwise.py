"""Direct schedule for depthwise and narrow grouped 2-D Conv (float32), with the group's epilogue.

A Conv with ``group`` > 1 whose groups are narrow (fewer output channels per group than the GEMM
micro-kernel's register tile has rows, or ``C/group * kH * kW`` below :data:`MIN_GEMM_K`) wastes most
of a GEMM tile: a depthwise 3x3 is a GEMM with M = 1 and K = 9 per group. This schedule computes it
directly instead (the NCHW form of the depthwise kernels of ORT's MLAS and XNNPACK). So is a
group-1 Conv whose reduction is that short and would need an im2col buffer (a 3-channel stem):

* per image and group (the ``parallel`` axis: groups write disjoint output channels and each fills
  its own slice of the scratch), the group's ``C/group`` input channels are copied once into a
  zero-padded scratch plane ``xpad[G, C/group, S, Hp, Wq]`` split into ``S`` = stride-along-width
  column phases (``xpad[.., p, r, j] = X[.., r - pad_top, j * S + p - pad_left]``, zero outside), so
  that every tap of every output row reads ``W`` consecutive floats: output column ``ox`` of tap
  ``kw`` reads phase ``(kw * dilation) mod S`` at ``ox + (kw * dilation) div S``. No padding, stride 1:
  X is read in place.
* per output channel and output row, output columns in vector lanes (``NV`` vectors of the target's
  ``W`` f32 lanes, accumulators in registers), the ``C/group x kH x kW`` taps unrolled (when there
  are at most :data:`MAX_UNROLLED_TAPS`), each a multiply-add of a broadcast weight; the group's
  epilogue (bias, HardSwish, HardSigmoid, Relu, Clip, residual Add ...) is applied to the
  accumulators before the one store; the last column vector stores with a lane mask.

In NCHW the channels cannot be the vector lanes without a gather per tap; in the NCHWc layout
(``convert-layout``) they are. The summation order is the ONNX spec's (over input channel, then
kernel row, then kernel column), one product at a time (``llvm.fma``), with no reassociation.
Semantics: the ONNX ``Conv`` operator (group, strides, pads/auto_pad, dilations).
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
    land,
    mul,
    select,
    sub,
    substitute,
)
from ..loops.lower import LoweredKernel
from ..loops.tensor import Tensor
from .gemm import add_const, add_scratch, epilogue_flops, finish, replace_anchor
from .knobs import choose

MIN_GEMM_K = 32  # a GEMM with a shorter reduction spends more time loading and storing tiles than in FMAs
MAX_UNROLLED_TAPS = 64


def prefers_direct(groups: int, mg: int, k_n: int, mr: int, im2col: bool) -> bool:
    """Whether a Conv (``mg`` output channels and ``k_n`` = C/group*kH*kW per group) runs this
    schedule rather than the GEMM micro-kernel with an ``mr``-row register tile: narrow groups, or
    (any group count) a reduction shorter than :data:`MIN_GEMM_K` that would need an im2col buffer,
    whose filling costs more than the short GEMM saves (a 3-channel stem, K = 27: 3->16 channels 3x3/2
    at 224x224 measured 76 us here against 143 us on the micro-kernel, shared machine)."""
    return k_n < MIN_GEMM_K and (groups > 1 or im2col) or groups > 1 and mg < mr


def direct_conv(lk: LoweredKernel, node: Any, xbuf: Buffer, w: Tensor, out_buf: Buffer, ep: tuple[Expr, list[Var]],
                geom: Any, width: int) -> LoweredKernel:
    """Schedule the grouped Conv ``node`` of kernel ``lk`` directly (module docstring). ``xbuf`` is X
    ``[N, C, H, W]``, ``w`` the constant weight ``[Co, C/group, kH, kW]``, ``ep`` the group's epilogue
    (``compiler.schedule.gemm.epilogue``), ``geom`` the strides, dilations and begin pads from
    ``compiler.loops.ops_nn._geom``, ``width`` the target's f32 vector width."""
    n_b, c_n, h, wd = xbuf.shape
    co, cg, kh, kw = w.shape
    groups = c_n // cg
    mg = co // groups
    _, _, oh, ow = out_buf.shape
    st, dil, pb = geom[0], geom[1], geom[2]
    sched = lk.func.attrs.setdefault("schedule", [])
    kind = "depthwise" if cg == 1 and groups > 1 else "grouped" if groups > 1 else f"small-K (K = {cg * kh * kw})"
    sched.append(f"# {kind} Conv {node.label}: group={groups}, {mg} output and {cg} input channels per group, "
                 f"{kh}x{kw} taps: direct schedule (a GEMM tile would have {mg} rows and K = {cg * kh * kw})")
    wbuf = add_const(lk, "wdw", np.asarray(w.const, np.float32), f"{node.label}.W [{co}, {cg}, {kh}, {kw}]")
    vn, vg, vm, vy = Var("n"), Var("g"), Var("mo"), Var("oy")
    s = st[1]
    nv = max(1, min(4, -(-ow // width)))
    tile_w = nv * width
    budget = 16 if width >= 16 else 8  # accumulator registers (32 vector registers with AVX-512, 16 else)
    mc = next(c for c in (4, 2, 1) if mg % c == 0 and c * nv <= budget)
    # the knob dw_tile (compiler.schedule.knobs, "MCxNV"): output channels x vectors of output columns
    # per tile; choices within the accumulator budget, no vector wholly past OW
    mc, nv = (int(x) for x in str(choose("dw_tile", f"{mc}x{nv}", [
        f"{c}x{v}" for c in (1, 2, 4, 8) for v in (1, 2, 3, 4)
        if mg % c == 0 and c * v <= budget and (v - 1) * width < ow])).split("x"))
    tile_w = nv * width
    if any(pb) or s > 1:
        hp = (oh - 1) * st[0] + (kh - 1) * dil[0] + 1
        # the last tile reads up to its full width past OW: those columns are zeros
        wq = -(-(-(-ow // tile_w) * tile_w + (kw - 1) * dil[1] // s) // width) * width
        xp = add_scratch(lk, "xpad", (groups, cg, s, hp, wq))
        fill = fill_phases(xbuf, xp, vn, vg, cg, (h, wd), pb, s, width)
        sched.append(f"pad(X -> xpad[{groups}, {cg}, {s}, {hp}, {wq}]) compute_at g  # zero-padded, "
                     f"{s} column phase(s) of stride {s}: every tap reads consecutive floats")

        def x_at(ci: Expr, r: Expr, col: int, ox: Expr) -> Expr:
            return Load(xp, (vg, ci, Int(col % s), r, add(ox, col // s)))
    else:
        fill = None

        def x_at(ci: Expr, r: Expr, col: int, ox: Expr) -> Expr:
            return Load(xbuf, (vn, add(mul(vg, cg), ci), r, add(ox, col)))
        sched.append("# no padding, stride 1 along width: X read in place")
    c_base = add(mul(vg, mg), mul(vm, mc))
    row = _row(wbuf, x_at, out_buf, ep, (vn, c_base, vy), (cg, kh, kw, st[0], dil), ow, (mc, nv), width)
    body: Stmt = For(vm, mg // mc, For(vy, oh, row), "parallel" if groups == 1 else "serial")
    body = Seq([fill, body]) if fill is not None else body
    taps = cg * kh * kw
    sched += [f"vectorize(ox, {width}) x {nv}  # output columns in lanes, {nv} vector(s) of accumulators",
              f"split(co, {mc}), unroll  # {mc} output channel(s) per tile share each input vector",
              f"unroll(ci, kh, kw)  # {taps} taps, broadcast weight" if taps <= MAX_UNROLLED_TAPS
              else f"# {taps} taps: ci loop serial, kh and kw unrolled",
              "parallel(g)  # groups write disjoint output channels" if groups > 1
              else "parallel(mo)  # output channel blocks write disjoint channels",
              "compute_at(epilogue, ox)  # applied to the accumulators before the one store"]
    nest = For(vn, n_b, For(vg, groups, body, "parallel" if groups > 1 else "serial"))
    flops = n_b * co * oh * ow * (2 * taps + epilogue_flops(ep[0]))
    return finish(lk, [nest], flops)


def fill_phases(xbuf: Buffer, xp: Buffer, vn: Var, vg: Var, cg: int, hw: tuple[int, int], pb: list[int], s: int,
                width: int, pad: float | Expr = 0.0) -> Stmt:
    """``xpad[g, ci, p, r, j] = X[n, g*cg + ci, r - pt, j*s + p - pl]`` (``pad`` outside X), vectorized along j
    (``Wq`` is a multiple of ``width``). Rows above and below X are zero stores; in a row of X, the
    vectors of j that lie inside X (per phase, known at compile time) are plain (strided) copies and
    only the vectors at the left and right edges test each lane."""
    h, wd = hw
    _, _, _, hp, wq = xp.shape
    nvec = wq // width
    vc, vr, vo, vi = Var("pci"), Var("pr"), Var("pj_o"), Var("pj_i")
    rows = max(0, min(h, hp - pb[0]))  # rows of X that xpad holds (a stride may leave the last ones out)
    ci = add(mul(vg, cg), vc)
    pad_value = pad if isinstance(pad, Expr) else Float(pad)

    def vectors(lo: int, hi: int, body: Any) -> list[Stmt]:
        if hi <= lo:
            return []
        j = add(mul(add(vo, lo), width), vi)
        return [For(vo, hi - lo, For(vi, width, body(j), "vectorized"))]

    def zero_rows(r0: int, r1: int) -> list[Stmt]:
        if r1 <= r0:
            return []
        zero = vectors(0, nvec, lambda j: Store(xp, (vg, vc, Var("zp"), add(vr, r0), j), pad_value))
        return [For(Var("zp"), s, For(vr, r1 - r0, zero[0]))]

    phases: list[Stmt] = []
    for p in range(s):
        j_lo = max(0, -(-(pb[1] - p) // s))  # first j whose column is inside X
        j_hi = (wd - 1 + pb[1] - p) // s  # last one
        v_lo, v_hi = min(nvec, -(-j_lo // width)), max(0, min(nvec, (j_hi + 1) // width))
        v_hi = max(v_hi, v_lo)

        def col(j: Expr, p: int = p) -> Expr:
            return sub(add(mul(j, s), p), Int(pb[1]))

        def copy(j: Expr, col: Any = col, p: int = p) -> Stmt:
            return Store(xp, (vg, vc, Int(p), add(vr, pb[0]), j), Load(xbuf, (vn, ci, vr, col(j))))

        def edge(j: Expr, col: Any = col, p: int = p) -> Stmt:
            x = col(j)
            cond = land(Bin(">=", x, Int(0)), Bin("<", x, Int(wd)))
            assert cond is not None
            return Store(xp, (vg, vc, Int(p), add(vr, pb[0]), j), select(cond, Load(xbuf, (vn, ci, vr, x)), pad_value))
        phases += vectors(0, v_lo, edge) + vectors(v_lo, v_hi, copy) + vectors(v_hi, nvec, edge)
    body = zero_rows(0, pb[0]) + [For(vr, rows, Seq(phases) if len(phases) > 1 else phases[0])] \
        + zero_rows(pb[0] + rows, hp)
    return For(vc, cg, Seq(body) if len(body) > 1 else body[0])


def _row(wbuf: Buffer, x_at: Any, out_buf: Buffer, ep: tuple[Expr, list[Var]], at: tuple[Expr, Expr, Var],
         taps: tuple[int, int, int, int, list[int]], ow: int, tile: tuple[int, int], width: int) -> Stmt:
    """One output row of ``mc`` output channels from ``c_base`` on: ``ceil(OW / (nv*W))`` tiles of
    ``mc x nv`` accumulator vectors (each input vector is loaded once for the ``mc`` channels)."""
    vn, c_base, vy = at
    cg, kh, kw, sy, dil = taps
    mc, nv = tile
    epi, vs = ep
    vt, vmi, vv, vl = Var("ot"), Var("mi"), Var("nv"), Var("ni")
    tile_w = nv * width
    ox = add(mul(vt, tile_w), add(mul(vv, width), vl))
    acc = Buffer("acc", "f32", (mc, nv, width), "local")
    lane = (vmi, vv, vl)
    c_out = add(c_base, vmi)

    def lanes(b: Stmt) -> Stmt:
        return For(vv, nv, For(vmi, mc, For(vl, width, b, "vectorized"), "unrolled"), "unrolled")

    vci = Var("ci")
    unroll = cg * kh * kw <= MAX_UNROLLED_TAPS
    upd: list[Stmt] = []
    for ci in range(cg) if unroll else [None]:
        c: Expr = Int(ci) if ci is not None else vci
        for dy in range(kh):
            r = add(mul(vy, sy), dy * dil[0])
            for dx in range(kw):
                prod = mul(Load(wbuf, (c_out, c, Int(dy), Int(dx))), x_at(c, r, dx * dil[1], ox))
                upd.append(lanes(Store(acc, lane, add(Load(acc, lane), prod))))
    taps_s: Stmt = Seq(upd) if len(upd) > 1 else upd[0]
    if not unroll:
        taps_s = For(vci, cg, taps_s)
    mapping = {vs[0].name: vn, vs[1].name: c_out, vs[2].name: vy, vs[3].name: ox}
    st: Stmt = Store(out_buf, (vn, c_out, vy, ox), substitute(replace_anchor(epi, Load(acc, lane)), mapping))
    if ow % tile_w:
        st = If(Bin("<", ox, Int(ow)), st)
    body = Allocate(acc, Seq([lanes(Store(acc, lane, Float(0.0))), taps_s, lanes(st)]))
    return For(vt, -(-ow // tile_w), body)


def grouped_conv_missed(nodes: list[Any]) -> tuple[Any, str] | None:
    """``(node, why)`` when a kernel of ``nodes`` holds a grouped Conv and got the default schedule
    instead of this one or the micro-kernel (None when there is no grouped Conv)."""
    convs = [n for n in nodes if n.op_type == "Conv" and int(n.attr("group", 1)) > 1]
    if not convs:
        return None
    n = convs[0]
    x, w, y = n.inputs[0], n.inputs[1], n.outputs[0]
    if len([m for m in nodes if m.op_type in ("Conv", "Gemm", "MatMul")]) > 1:
        why = "the group has more than one Conv/Gemm/MatMul"
    elif w is None or w.const is None:
        why = "the weight W is not a constant (it is computed at run time)"
    elif x is None or x.type is None or len(x.type.shape) != 4:
        why = f"only 2-D Conv has these schedules (X is {None if x is None else x.type})"
    elif y.type is None or y.type.short != "f32" or not y.type.is_static:
        why = f"the output {y.type} is not a static float32 tensor"
    else:
        why = "the group's output is not elementwise in the Conv's output (a reduction, a shifted read or a " \
              "second output)"
    return n, why


__all__ = ["MAX_UNROLLED_TAPS", "MIN_GEMM_K", "direct_conv", "fill_phases", "grouped_conv_missed", "prefers_direct"]
