"""Lowering of reducing ONNX ops: Conv, MatMul, Gemm, pooling, Reduce*, Softmax, LRN.

Semantics: the ONNX operator specs. Each op becomes a :class:`~compiler.loops.ir.Reduce` over its
window or contraction axes; padding reads a clamped index and selects the pad value (0 for Conv and
AveragePool, -inf for MaxPool), so every load stays in bounds. Conv supports groups (incl.
depthwise), strides, dilations, explicit pads and ``auto_pad``; pools support ``ceil_mode`` (the
output shape comes from shape inference; windows that run past the input are clipped as the spec's
reference does) and ``count_include_pad``. NaN in a pooling window follows ``onnx.reference``
(``ops/op_pool_common.py`` pads with NaN and drops the window's NaNs): MaxPool is the maximum of
the non-NaN taps (-inf if there is none), AveragePool with ``count_include_pad=0`` the mean of the
non-NaN taps; with ``count_include_pad=1`` a NaN propagates, as does GlobalMaxPool/GlobalAveragePool
(``numpy.max``/``numpy.average``). Softmax and LogSoftmax follow opset semantics: before 13
the input is coerced to 2-D at ``axis`` (the reduction covers every axis from ``axis`` on), from 13
on the reduction is over ``axis`` alone. Unsupported attributes raise CompileError(stage="lowering").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ir import Node
from .compute import reduce_
from .ir import Bin, Expr, Float, Int, Var, add, call, emax, emin, floordiv, land, mul, select, sub
from .ops_reduce import identity, red
from .registry import LowerCtx, bad, register
from .tensor import Tensor, broadcast_to, norm_axis, reshape


def _spatial_pads(node: Node, in_sp: list[int], out_sp: list[int], ks: list[int], st: list[int],
                  dil: list[int]) -> list[int]:
    nd = len(in_sp)
    ap = node.attr_str("auto_pad", "NOTSET")
    if ap in ("NOTSET", ""):
        return list(node.attr("pads", [0] * (2 * nd)))
    if ap == "VALID":
        return [0] * (2 * nd)
    if ap not in ("SAME_UPPER", "SAME_LOWER"):
        raise bad(node, "auto_pad", f"auto_pad {ap!r} is not supported")
    begin, end = [], []
    for d in range(nd):
        total = max(0, (out_sp[d] - 1) * st[d] + (ks[d] - 1) * dil[d] + 1 - in_sp[d])
        small = total // 2
        begin.append(small if ap == "SAME_UPPER" else total - small)
        end.append(total - begin[-1])
    return begin + end


def _window(o: list[Expr], r: list[Var], st: list[int], dil: list[int], pb: list[int], in_sp: list[int],
            out_sp: list[int], ks: list[int]) -> tuple[list[Expr], Expr | None]:
    """Input positions of window taps ``r`` for output position ``o``; the in-bounds condition (None: always)."""
    pos: list[Expr] = []
    cond: Expr | None = None
    for d in range(len(in_sp)):
        i = add(sub(mul(o[d], st[d]), pb[d]), mul(r[d], dil[d]))
        lo = pb[d] > 0
        hi = (out_sp[d] - 1) * st[d] - pb[d] + (ks[d] - 1) * dil[d] > in_sp[d] - 1
        if lo:
            cond = land(cond, Bin(">=", i, Int(0)))
        if hi:
            cond = land(cond, Bin("<", i, Int(in_sp[d])))
        if lo:
            i = emax(i, 0)
        if hi:
            i = emin(i, in_sp[d] - 1)
        pos.append(i)
    return pos, cond


def _geom(node: Node, x: Tensor, out: tuple[int, ...], ks: list[int]):  # type: ignore[no-untyped-def]
    nd = len(ks)
    st = list(node.attr("strides", [1] * nd))
    dil = list(node.attr("dilations", [1] * nd))
    in_sp, out_sp = list(x.shape[2:]), list(out[2:])
    pads = _spatial_pads(node, in_sp, out_sp, ks, st, dil)
    return st, dil, pads[:nd], in_sp, out_sp


@register("Conv", complex_op=True)
def _conv(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    assert x is not None and w is not None
    out = ctx.out_shape(node)
    co_n, cg = w.shape[0], w.shape[1]
    ks = list(w.shape[2:])
    group = int(node.attr("group", 1))
    if cg * group != x.shape[1] or co_n % group:
        raise bad(node, "group", f"group={group} does not divide channels {x.shape[1]} / {co_n}")
    st, dil, pb, in_sp, out_sp = _geom(node, x, out, ks)
    lw = ctx.lowering
    rc = lw.axis("rc", cg)
    rk = [lw.axis("rk", k) for k in ks]
    per_group = co_n // group

    def fn(idx: list[Expr]) -> Expr:
        n, co, o = idx[0], idx[1], idx[2:]
        ci = add(mul(floordiv(co, per_group), cg), rc[0]) if group > 1 else rc[0]
        pos, cond = _window(o, [v for v, _ in rk], st, dil, pb, in_sp, out_sp, ks)
        xv = x[[n, ci] + pos]
        if cond is not None:
            xv = select(cond, xv, Float(0.0))
        red = reduce_("sum", [rc] + rk, mul(xv, w[[co, rc[0]] + [v for v, _ in rk]]))
        return add(red, b[[co]]) if b is not None else red
    return [Tensor(out, x.dtype, fn)]


def _conv_transpose_same_pads(node: Node, auto_pad: str, in_sp: list[int], out_sp: list[int], ks: list[int],
                              st: list[int], dil: list[int]) -> list[int]:
    """Begin/end pads ``[b_0..b_n-1, e_0..e_n-1]`` of a ConvTranspose with auto_pad SAME_*.

    total_padding = stride * (in - 1) + output_padding + ((k - 1) * dilation + 1) - out, with ``out``
    the output spatial size (``in * stride``, or the ``output_shape`` attribute). SAME_UPPER puts
    ``total // 2`` at the beginning and the rest at the end; SAME_LOWER the opposite. This is the
    ONNX ConvTranspose spec (opset 11+) and onnx.reference's op_conv_transpose.py, whose outputs the
    conformance data holds (older spec text had the two halves swapped; the reference wins).
    Raises CompileError when total_padding is negative (output larger than the full transposed
    convolution)."""
    nd = len(ks)
    op_ = list(node.attr("output_padding", [0] * nd))
    total = [st[d] * (in_sp[d] - 1) + op_[d] + (ks[d] - 1) * dil[d] + 1 - out_sp[d] for d in range(nd)]
    if any(t < 0 for t in total):
        raise bad(node, "auto_pad", f"{auto_pad} needs negative total padding {total} for output {out_sp}")
    small = [t // 2 for t in total]
    big = [t - t // 2 for t in total]
    return small + big if auto_pad == "SAME_UPPER" else big + small


@register("ConvTranspose", complex_op=True)
def _conv_transpose(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    """out[n, co, o] = sum over (ci in co's group, k) of X[n, ci, i] * W[ci, co mod Cog, k] where
    o = i * stride - pad_begin + k * dilation (ONNX ConvTranspose); the output shape (incl.
    output_padding / output_shape) comes from shape inference. With auto_pad SAME_UPPER/SAME_LOWER
    the pads come from :func:`_conv_transpose_same_pads`."""
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    assert x is not None and w is not None
    out = ctx.out_shape(node)
    group = int(node.attr("group", 1))
    ks = list(w.shape[2:])
    nd = len(ks)
    st = list(node.attr("strides", [1] * nd))
    dil = list(node.attr("dilations", [1] * nd))
    ap = node.attr_str("auto_pad", "NOTSET") or "NOTSET"
    if ap in ("SAME_UPPER", "SAME_LOWER"):
        pads = _conv_transpose_same_pads(node, ap, list(x.shape[2:]), list(out[2:]), ks, st, dil)
    elif ap in ("NOTSET", "VALID"):
        pads = [0] * (2 * nd) if ap == "VALID" else list(node.attr("pads", [0] * (2 * nd)))
    else:
        raise bad(node, "auto_pad", f"unknown auto_pad {ap!r} (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)")
    cig = x.shape[1] // group
    cog = w.shape[1]
    lw = ctx.lowering
    rc = lw.axis("rc", cig)
    rk = [lw.axis("rk", k) for k in ks]

    co_in_of = (lambda co: Bin("%", co, Int(cog))) if group > 1 else (lambda co: co)
    if ks == st and dil == [1] * nd and not any(pads) and all(out[2 + d] == x.shape[2 + d] * st[d] for d in range(nd)):
        # non-overlapping windows (kernel == stride): each output reads exactly one tap, no reduction over k
        def one_tap(idx: list[Expr]) -> Expr:
            n, co, o = idx[0], idx[1], idx[2:]
            ci = add(mul(floordiv(co, cog), cig), rc[0]) if group > 1 else rc[0]
            term = mul(x[[n, ci] + [floordiv(o[d], st[d]) for d in range(nd)]],
                       w[[ci, co_in_of(co)] + [Bin("%", o[d], Int(st[d])) for d in range(nd)]])
            red = reduce_("sum", [rc], term)
            return add(red, b[[co]]) if b is not None else red
        return [Tensor(out, x.dtype, one_tap)]

    def fn(idx: list[Expr]) -> Expr:
        n, co, o = idx[0], idx[1], idx[2:]
        ci = add(mul(floordiv(co, cog), cig), rc[0]) if group > 1 else rc[0]
        cond: Expr | None = None
        pos: list[Expr] = []
        for d in range(nd):
            t = sub(add(o[d], pads[d]), mul(rk[d][0], dil[d]))
            i = floordiv(emax(t, 0), st[d])
            cond = land(cond, land(Bin(">=", t, Int(0)), Bin("<", i, Int(x.shape[2 + d]))))
            if st[d] > 1:
                cond = land(cond, Bin("==", Bin("%", emax(t, 0), Int(st[d])), Int(0)))
            pos.append(emin(i, x.shape[2 + d] - 1))
        co_in = Bin("%", co, Int(cog)) if group > 1 else co
        term = mul(x[[n, ci] + pos], w[[ci, co_in] + [r for r, _ in rk]])
        red = reduce_("sum", [rc] + rk, select(cond, term, Float(0.0)) if cond is not None else term)
        return add(red, b[[co]]) if b is not None else red
    return [Tensor(out, x.dtype, fn)]


def skip_nan(v: Expr, cond: Expr | None, other: Expr, pad: Expr | None = None) -> Expr:
    """``v`` where ``cond`` holds (None: always) and ``v`` is not NaN, else ``other``: a pooling tap
    that ``onnx.reference`` leaves out (it pads with NaN and drops every NaN of the window,
    ``ops/op_pool_common.py``). Written ``select(w == w, w, other)`` with ``w = select(cond, v, pad)``
    (``pad`` defaults to ``other``): ``w`` stays the padding form codegen emits as one masked vector
    load, and codegen's ``never_nan`` sees that the result cannot be NaN."""
    w = v if cond is None else select(cond, v, other if pad is None else pad)
    return select(Bin("==", w, w), w, other)


def max_pool_tap(xv: Expr, cond: Expr | None, o: list[Expr], r: Sequence[Expr], st: list[int], dil: list[int],
                 pb: list[int]) -> Expr:
    """The term of MaxPool's maximum for the tap ``xv`` (in bounds where ``cond``), as ``onnx.reference``
    treats NaN: with strides and dilations 1 (``op_pool_common``) NaN taps are left out (-inf); with
    another stride or dilation its ``_max_pool`` seeds the maximum with the window's first in-bounds
    tap (row-major) and replaces it only by a greater one, so a NaN there is kept (and is the result:
    the loop IR's max propagates NaN) and any other NaN is left out."""
    ninf = Float(float("-inf"))
    if all(v == 1 for v in st + dil):
        return skip_nan(xv, cond, ninf)
    first: Expr | None = None  # per axis: the first tap at or after position 0
    for d in range(len(r)):
        at0 = Bin("==", r[d], Int(0))
        if pb[d] > 0:
            at0 = Bin("or", at0, Bin("<", add(sub(mul(o[d], st[d]), pb[d]), mul(r[d], dil[d])), Int(dil[d])))
        first = land(first, at0)
    w = xv if cond is None else select(cond, xv, ninf)
    return select(Bin("or", Bin("==", w, w), first), w, ninf)  # type: ignore[arg-type]


@register("MaxPool", "AveragePool", complex_op=True)
def _pool(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    if len(node.outputs) > 1 and node.outputs[1].consumers():
        raise bad(node, "Indices", "MaxPool's Indices output is not supported")
    ks = list(node.attr("kernel_shape"))
    out = ctx.out_shape(node)
    st, dil, pb, in_sp, out_sp = _geom(node, x, out, ks)
    rk = [ctx.lowering.axis("rk", k) for k in ks]
    rv = [v for v, _ in rk]
    is_max = node.op_type == "MaxPool"
    include_pad = bool(node.attr("count_include_pad", 0))
    pe = _spatial_pads(node, in_sp, out_sp, ks, st, dil)[len(ks):]

    def fn(idx: list[Expr]) -> Expr:
        n, c, o = idx[0], idx[1], idx[2:]
        pos, cond = _window(o, rv, st, dil, pb, in_sp, out_sp, ks)
        xv = x[[n, c] + pos]
        if is_max and x.dtype not in ("f32", "f64"):  # an integer MaxPool (int8 after fold-qdq)
            low = identity("max", x.dtype)
            return red("max", rk, xv if cond is None else select(cond, xv, low))
        if is_max:
            return reduce_("max", rk, max_pool_tap(xv, cond, o, rv, st, dil, pb))
        if not include_pad:  # the mean of the window's non-NaN taps (onnx.reference)
            w = xv if cond is None else select(cond, xv, Float(float("nan")))  # padding as NaN, as the reference
            total = reduce_("sum", rk, select(Bin("==", w, w), w, Float(0.0)))
            count = reduce_("sum", rk, select(Bin("==", w, w), Float(1.0), Float(0.0)))
            return Bin("/", total, count)
        total = reduce_("sum", rk, xv if cond is None else select(cond, xv, Float(0.0)))
        cnt_cond = None  # taps inside the padded extent [-pad_begin, size + pad_end) count
        for d in range(len(ks)):
            i = add(sub(mul(o[d], st[d]), pb[d]), mul(rv[d], dil[d]))
            cnt_cond = land(cnt_cond, Bin("<", i, Int(in_sp[d] + pe[d])))
        if cond is None or cnt_cond is None:
            return mul(total, Float(1.0 / float(np.prod(ks))))
        return Bin("/", total, reduce_("sum", rk, select(cnt_cond, Float(1.0), Float(0.0))))
    return [Tensor(out, x.dtype, fn)]


@register("GlobalAveragePool", "GlobalMaxPool", complex_op=True)
def _global_pool(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    rk = [ctx.lowering.axis("rk", k) for k in x.shape[2:]]
    is_max = node.op_type == "GlobalMaxPool"
    size = float(np.prod(x.shape[2:]))

    def fn(idx: list[Expr]) -> Expr:
        v = x[idx[:2] + [r for r, _ in rk]]
        return reduce_("max", rk, v) if is_max else mul(reduce_("sum", rk, v), Float(1.0 / size))
    return [Tensor(ctx.out_shape(node), x.dtype, fn)]


@register("Softmax", "LogSoftmax", complex_op=True)
def _softmax(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    ax = norm_axis(node, int(node.attr("axis", 1 if ctx.opset < 13 else -1)), x.rank)
    axes = list(range(ax, x.rank)) if ctx.opset < 13 else [ax]
    lw = ctx.lowering
    m_ax = {a: lw.axis("rm", x.shape[a]) for a in axes}
    s_ax = {a: lw.axis("rs", x.shape[a]) for a in axes}

    def at(idx: list[Expr], ax_map: dict) -> Expr:  # type: ignore[type-arg]
        return x[[ax_map[k][0] if k in ax_map else idx[k] for k in range(x.rank)]]

    def fn(idx: list[Expr]) -> Expr:
        mx = reduce_("max", [m_ax[a] for a in axes], at(idx, m_ax))
        total = reduce_("sum", [s_ax[a] for a in axes], call("exp", sub(at(idx, s_ax), mx)))
        shifted = sub(x[idx], mx)
        if node.op_type == "LogSoftmax":
            return sub(shifted, call("log", total))
        return Bin("/", call("exp", shifted), total)
    return [Tensor(x.shape, x.dtype, fn)]


@register("LRN", complex_op=True)
def _lrn(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    size = int(node.attr("size"))
    alpha, beta, bias = float(node.attr("alpha", 1e-4)), float(node.attr("beta", 0.75)), float(node.attr("bias", 1.0))
    lo = (size - 1) // 2
    c_n = x.shape[1]
    rk = ctx.lowering.axis("rl", size)

    def fn(idx: list[Expr]) -> Expr:
        c = add(sub(idx[1], lo), rk[0])
        inside = land(Bin(">=", c, Int(0)), Bin("<", c, Int(c_n)))
        v = x[[idx[0], emin(emax(c, 0), c_n - 1)] + idx[2:]]
        sq = reduce_("sum", [rk], select(inside, mul(v, v), Float(0.0)))  # type: ignore[arg-type]
        den = call("pow", add(Float(bias), mul(Float(alpha / size), sq)), Float(beta))
        return Bin("/", x[idx], den)
    return [Tensor(x.shape, x.dtype, fn)]


@register("MatMul", complex_op=True)
def _matmul(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    a, b = ins[0], ins[1]
    assert a is not None and b is not None
    a2 = reshape(a, (1,) + a.shape) if a.rank == 1 else a
    b2 = reshape(b, b.shape + (1,)) if b.rank == 1 else b
    k_n = a2.shape[-1]
    if b2.shape[-2] != k_n:
        raise bad(node, "B", f"contraction mismatch {a.shape} x {b.shape}")
    batch = tuple(np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]))
    full = batch + (a2.shape[-2], b2.shape[-1])
    rk = ctx.lowering.axis("rk", k_n)
    nb = len(batch)

    def fn(idx: list[Expr]) -> Expr:
        bi, i, j = idx[:nb], idx[nb], idx[nb + 1]
        ai = [Int(0) if d == 1 else bi[nb - a2.rank + 2 + q] for q, d in enumerate(a2.shape[:-2])]
        bj = [Int(0) if d == 1 else bi[nb - b2.rank + 2 + q] for q, d in enumerate(b2.shape[:-2])]
        return reduce_("sum", [rk], mul(a2[ai + [i, rk[0]]], b2[bj + [rk[0], j]]))
    return [reshape(Tensor(full, a.dtype, fn), ctx.out_shape(node))]


@register("Gemm", complex_op=True)
def _gemm(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else None
    assert a is not None and b is not None
    ta, tb = int(node.attr("transA", 0)), int(node.attr("transB", 0))
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    out = ctx.out_shape(node)
    k_n = a.shape[0] if ta else a.shape[1]
    rk = ctx.lowering.axis("rk", k_n)
    cb = broadcast_to(c, out) if c is not None else None

    def fn(idx: list[Expr]) -> Expr:
        i, j = idx
        av = a[[rk[0], i] if ta else [i, rk[0]]]
        bv = b[[j, rk[0]] if tb else [rk[0], j]]
        r = reduce_("sum", [rk], mul(av, bv))
        if alpha != 1.0:
            r = mul(r, Float(alpha))
        if cb is not None:
            cv = cb[idx]
            r = add(r, cv if beta == 1.0 else mul(cv, Float(beta)))
        return r
    return [Tensor(out, a.dtype, fn)]
