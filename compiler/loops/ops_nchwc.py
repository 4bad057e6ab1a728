"""Lowering of the NCHWc layout ops (``compiler.ops.nchwc`` gives their semantics).

``ReorderInput`` and ``ReorderOutput`` are index remaps (the lanes past C are zeros);
``NchwcConv`` is the ONNX Conv sum over the blocked operands, the block (the channels) innermost so
that the default schedule puts the channels in vector lanes: per output pixel the reduction runs over
input blocks, taps and input lanes (``depthwise = 1``: over the taps only, lane by lane), serial per
output element (no reassociation). Padding reads zeros (a select on the tap's position).
"""

from __future__ import annotations

from ..ir import Node
from .compute import reduce_
from .ir import Bin, Expr, Float, Int, add, emin, floordiv, floormod, mul, select
from .ops_nn import _window
from .registry import LowerCtx, register
from .tensor import Tensor


@register("prism.ReorderInput")
def _reorder_input(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    b, c = int(node.attr("block")), x.shape[1]

    def fn(i: list[Expr]) -> Expr:
        k = add(mul(i[1], b), i[4])
        if c % b == 0:
            return x[[i[0], k, i[2], i[3]]]
        return select(Bin("<", k, Int(c)), x[[i[0], emin(k, c - 1), i[2], i[3]]], Float(0.0, x.dtype))
    return [Tensor(ctx.out_shape(node), x.dtype, fn)]


@register("prism.ReorderOutput")
def _reorder_output(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    b = int(node.attr("block"))
    return [Tensor(ctx.out_shape(node), x.dtype,
                   lambda i: x[[i[0], floordiv(i[1], b), i[2], i[3], floormod(i[1], b)]])]


@register("prism.NchwcConv", complex_op=True)
def _nchwc_conv(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    assert x is not None and w is not None
    out = ctx.out_shape(node)
    b = int(node.attr("block"))
    ks = [int(k) for k in node.attr("kernel_shape")]
    st = [int(s) for s in node.attr("strides", [1, 1])]
    dil = [int(d) for d in node.attr("dilations", [1, 1])]
    pb = [int(p) for p in node.attr("pads", [0, 0, 0, 0])][:2]
    dw = int(node.attr("depthwise", 0))
    lw = ctx.lowering
    rk = [lw.axis("rk", k) for k in ks]
    rc = [lw.axis("rc", x.shape[1]), lw.axis("ri", b)] if not dw else []

    def fn(idx: list[Expr]) -> Expr:
        n, cb, o, lane = idx[0], idx[1], idx[2:4], idx[4]
        pos, cond = _window(o, [v for v, _ in rk], st, dil, pb, list(x.shape[2:4]), list(out[2:4]), ks)
        if dw:
            xv, wv = x[[n, cb, *pos, lane]], w[[cb, rk[0][0], rk[1][0], lane]]
        else:
            xv, wv = x[[n, rc[0][0], *pos, rc[1][0]]], w[[cb, rc[0][0], rk[0][0], rk[1][0], rc[1][0], lane]]
        if cond is not None:
            xv = select(cond, xv, Float(0.0))
        red = reduce_("sum", rc + rk, mul(xv, wv))
        return add(red, bias[[add(mul(cb, b), lane)]]) if bias is not None else red
    return [Tensor(out, x.dtype, fn)]


__all__: list[str] = []
