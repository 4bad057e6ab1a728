"""Lowering of indexing and layout ops: GatherElements, GatherND, ScatterND, ScatterElements,
Trilu, CumSum, DepthToSpace, SpaceToDepth, OneHot, Range, EyeLike, ReverseSequence, TensorScatter.

Semantics: the ONNX operator specs. Indices may be negative (counted from the end of the axis);
every load clamps its index into the buffer, so an out-of-range index reads a valid element
instead of faulting (ONNX leaves out-of-range indices undefined). Scatter ops are written as
gathers over the updates: each output element finds the last update position whose index tuple
names it (``reduction='none'``: later updates win, as the reference applies them in order) or
combines all of them (``add``, ``mul``, ``max``, ``min``); an element no update names keeps
``data``. That costs one pass over the updates per element, fine for the index counts of
inference graphs. CumSum is a sum over the prefix (``exclusive``, ``reverse`` as the spec says).
"""

from __future__ import annotations

import numpy as np

from ..ir import Node
from .ir import Bin, Cast, Expr, Float, Int, Reduce, add, land, mul, select, sub
from .ops_reduce import identity, red
from .registry import LowerCtx, bad, checked_index, const_input, register
from .tensor import Tensor, clamp, norm_axis


def _zero(dt: str) -> Expr:
    return Float(0.0, dt) if dt in ("f32", "f64") else Int(0, dt)


@register("GatherElements")
def _gather_elements(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, ind = ins[0], ins[1]
    assert x is not None and ind is not None
    ax = norm_axis(node, int(node.attr("axis", 0)), x.rank)
    return [Tensor(ind.shape, x.dtype, lambda i: x[i[:ax] + [checked_index(ctx, node, ind[i], x.shape[ax], ax)]
                                                    + i[ax + 1:]])]


@register("GatherND")
def _gather_nd(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, ind = ins[0], ins[1]
    assert x is not None and ind is not None
    b = int(node.attr("batch_dims", 0))
    k = ind.shape[-1]
    q = ind.rank

    def fn(i: list[Expr]) -> Expr:
        lead = i[:q - 1]
        src = list(i[:b]) + [checked_index(ctx, node, ind[lead + [Int(t)]], x.shape[b + t], b + t) for t in range(k)]
        return x[src + i[q - 1:]]
    return [Tensor(ctx.out_shape(node), x.dtype, fn)]


_COMB = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}


def _scatter(ctx: LowerCtx, node: Node, data: Tensor, upd_shape: tuple[int, ...], match, value) -> Tensor:  # type: ignore[no-untyped-def]
    """``out[i] = combine(data[i], value(j) for update positions j with match(j, i))``."""
    red_mode = node.attr_str("reduction", "none")
    if red_mode not in ("none", *_COMB):
        raise bad(node, "reduction", f"reduction {red_mode!r} is not supported")
    lw = ctx.lowering
    axes = [lw.axis("rs", n) for n in upd_shape]

    def fn(i: list[Expr]) -> Expr:
        j = [v for v, _ in axes]
        hit = match(j, i)
        if red_mode == "none":
            flat: Expr = Int(0)
            for v, n in axes:
                flat = add(mul(flat, n), v)
            last = Reduce("max", tuple(axes), select(hit, flat, Int(-1)), Int(-1))
            # the winning update's value, read at loop indices (no address computed from a reduction)
            axes2 = [lw.axis("rw", n) for n in upd_shape]
            j2 = [v for v, _ in axes2]
            flat2: Expr = Int(0)
            for v, n in axes2:
                flat2 = add(mul(flat2, n), v)
            zero = _zero(data.dtype)
            won = Reduce("sum", tuple(axes2), select(Bin("==", flat2, last), value(j2, i), zero), zero)
            return select(Bin(">=", last, Int(0)), won, data[i])
        comb = _COMB[red_mode]
        r = red(comb, axes, select(hit, value(j, i), identity(comb, data.dtype)))
        d = data[i]
        if comb == "sum":
            return add(d, r)
        if comb == "prod":
            return mul(d, r)
        found = Reduce("max", tuple(axes), select(hit, Int(1), Int(0)), Int(0))
        return select(Bin(">", found, Int(0)), Bin(comb, d, r), d)
    return Tensor(data.shape, data.dtype, fn)


@register("ScatterND", complex_op=True)
def _scatter_nd(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    data, ind, upd = ins[0], ins[1], ins[2]
    assert data is not None and ind is not None and upd is not None
    k = ind.shape[-1]
    q = ind.rank

    def match(j: list[Expr], i: list[Expr]) -> Expr:
        cond: Expr | None = None
        for t in range(k):
            cond = land(cond, Bin("==", checked_index(ctx, node, ind[j[:q - 1] + [Int(t)]], data.shape[t], t), i[t]))
        return cond if cond is not None else Bin("==", Int(0), Int(0))

    def value(j: list[Expr], i: list[Expr]) -> Expr:
        return upd[j[:q - 1] + i[k:]]
    # updates are indexed by the first q-1 index dims; the trailing dims follow the output's
    return [_scatter(ctx, node, data, tuple(ind.shape[:-1]), match, value)]


@register("ScatterElements", "Scatter", complex_op=True)
def _scatter_elements(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    data, ind, upd = ins[0], ins[1], ins[2]
    assert data is not None and ind is not None and upd is not None
    ax = norm_axis(node, int(node.attr("axis", 0)), data.rank)

    def match(j: list[Expr], i: list[Expr]) -> Expr:
        cond: Expr | None = Bin("==", checked_index(ctx, node, ind[j], data.shape[ax], ax), i[ax])
        for t in range(data.rank):
            if t != ax:
                cond = land(cond, Bin("==", j[t], i[t]))
        return cond  # type: ignore[return-value]

    return [_scatter(ctx, node, data, tuple(ind.shape), match, lambda j, i: upd[j])]


@register("Trilu")
def _trilu(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    k = int(const_input(node, ins[1], "k").reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None else 0
    upper = bool(node.attr("upper", 1))

    def fn(i: list[Expr]) -> Expr:
        r, c = i[-2], i[-1]
        keep = Bin(">=", sub(c, r), Int(k)) if upper else Bin("<=", sub(c, r), Int(k))
        return select(keep, x[i], _zero(x.dtype))
    return [Tensor(x.shape, x.dtype, fn)]


@register("CumSum", complex_op=True)
def _cumsum(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    ax = norm_axis(node, int(const_input(node, ins[1], "axis").reshape(-1)[0]), x.rank)
    excl, rev = bool(node.attr("exclusive", 0)), bool(node.attr("reverse", 0))
    n = x.shape[ax]
    rk = ctx.lowering.axis("rc", n)

    def fn(i: list[Expr]) -> Expr:
        j = rk[0]
        if rev:
            take = Bin(">", j, i[ax]) if excl else Bin(">=", j, i[ax])
        else:
            take = Bin("<", j, i[ax]) if excl else Bin("<=", j, i[ax])
        return red("sum", [rk], select(take, x[i[:ax] + [j] + i[ax + 1:]], _zero(x.dtype)))
    return [Tensor(x.shape, x.dtype, fn)]


@register("DepthToSpace")
def _depth_to_space(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    b = int(node.attr("blocksize"))
    mode = node.attr_str("mode", "DCR")
    c_out = x.shape[1] // (b * b)

    def fn(i: list[Expr]) -> Expr:
        n, c, h, w = i
        bh, bw = Bin("%", h, Int(b)), Bin("%", w, Int(b))
        if mode == "DCR":
            ci = add(mul(add(mul(bh, b), bw), c_out), c)
        else:
            ci = add(mul(c, b * b), add(mul(bh, b), bw))
        return x[[n, ci, Bin("//", h, Int(b)), Bin("//", w, Int(b))]]
    return [Tensor(ctx.out_shape(node), x.dtype, fn)]


@register("SpaceToDepth")
def _space_to_depth(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    b = int(node.attr("blocksize"))
    c_in = x.shape[1]
    crd = node.attr_str("mode", "DCR") == "CRD"

    def fn(i: list[Expr]) -> Expr:
        n, c, h, w = i
        if crd:  # c = ci * b * b + bh * b + bw
            blk, ci = Bin("%", c, Int(b * b)), Bin("//", c, Int(b * b))
        else:  # DCR: c = (bh * b + bw) * C + ci
            blk, ci = Bin("//", c, Int(c_in)), Bin("%", c, Int(c_in))
        bh, bw = Bin("//", blk, Int(b)), Bin("%", blk, Int(b))
        return x[[n, ci, add(mul(h, b), bh), add(mul(w, b), bw)]]
    return [Tensor(ctx.out_shape(node), x.dtype, fn)]


@register("OneHot")
def _one_hot(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    ind, vals = ins[0], ins[2]
    assert ind is not None and vals is not None
    depth = int(const_input(node, ins[1], "depth").reshape(-1)[0])
    out = ctx.out_shape(node)
    ax = norm_axis(node, int(node.attr("axis", -1)), len(out))

    def fn(i: list[Expr]) -> Expr:
        j = ind[i[:ax] + i[ax + 1:]]
        j = Cast("i64", Cast("f64", j) if j.dtype in ("f32", "f64") else j)
        j = select(Bin("<", j, Int(0)), add(j, depth), j)
        return select(Bin("==", j, i[ax]), vals[[Int(1)]], vals[[Int(0)]])
    return [Tensor(out, vals.dtype, fn)]


@register("Range")
def _range(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    start, delta = ins[0], ins[2]
    assert start is not None and delta is not None
    out = ctx.out_shape(node)
    dt = ctx.out_dtype(node)
    return [Tensor(out, dt, lambda i: add(start[[]], mul(Cast(dt, i[0]), delta[[]])))]


@register("EyeLike")
def _eye_like(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    k = int(node.attr("k", 0))
    dt = ctx.out_dtype(node)
    one = Float(1.0, dt) if dt in ("f32", "f64") else Int(1, dt)
    return [Tensor(ctx.out_shape(node), dt, lambda i: select(Bin("==", sub(i[1], i[0]), Int(k)), one, _zero(dt)))]


@register("ReverseSequence")
def _reverse_sequence(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    """``out[.., b, .., t, ..] = x[.., b, .., len[b] - 1 - t, ..]`` for ``t < len[b]``, else ``x`` itself."""
    x, lens = ins[0], ins[1]
    assert x is not None and lens is not None
    ba, ta = int(node.attr("batch_axis", 1)), int(node.attr("time_axis", 0))

    def fn(i: list[Expr]) -> Expr:
        n = lens[[i[ba]]]
        n = Cast("i64", n) if n.dtype != "i64" else n
        t = i[ta]
        src = select(Bin("<", t, n), sub(sub(n, Int(1)), t), t)
        return x[[clamp(src, 0, x.shape[ta] - 1) if k == ta else i[k] for k in range(x.rank)]]
    return [Tensor(x.shape, x.dtype, fn)]


@register("TensorScatter")
def _tensor_scatter(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    """``present[.., s, ..] = update[.., s - w[b], ..]`` where ``0 <= s - w[b] < seq_len`` (``circular``:
    ``(s - w[b]) mod max_len``), else ``past``; ``w`` = write_indices (0 when absent)."""
    past, upd = ins[0], ins[1]
    w = ins[2] if len(ins) > 2 else None
    assert past is not None and upd is not None
    ax = norm_axis(node, int(node.attr("axis", -2)), past.rank)
    circular = node.attr_str("mode", "linear") == "circular"
    max_len, seq = past.shape[ax], upd.shape[ax]

    def fn(i: list[Expr]) -> Expr:
        start: Expr = Int(0)
        if w is not None:
            start = w[[i[0]]]
            start = Cast("i64", start) if start.dtype != "i64" else start
        j = sub(i[ax], start)
        if circular:
            j = Bin("%", add(Bin("%", j, Int(max_len)), Int(max_len)), Int(max_len))
        hit = land(Bin(">=", j, Int(0)), Bin("<", j, Int(seq)))
        src = upd[i[:ax] + [clamp(j, 0, seq - 1)] + i[ax + 1:]]
        return select(hit, src, past[i])  # type: ignore[arg-type]
    return [Tensor(past.shape, past.dtype, fn)]


@register("ConstantOfShape")
def _constant_of_shape(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    """Every element is the ``value`` attribute's one element (float 0 when absent)."""
    val = node.attr("value", None)
    v = np.asarray(val).reshape(-1)[0] if val is not None else 0.0
    dt = ctx.out_dtype(node)
    c = Float(float(v), dt) if dt in ("f32", "f64") else Int(int(v), dt)
    return [Tensor(ctx.out_shape(node), dt, lambda i: c)]
