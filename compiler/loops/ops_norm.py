"""Lowering of InstanceNormalization, and of BatchNormalization whose parameters are runtime
tensors (constant parameters keep the folded lowering of ``ops_elementwise``).

Semantics: the ONNX specs. InstanceNormalization: for each (n, c), ``mean`` and ``var``
(population variance) over the spatial axes, ``y = scale[c] * (x - mean) / sqrt(var + epsilon) +
B[c]``. BatchNormalization (inference): ``y = (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] +
B[c]``; its training-mode outputs (running statistics) are not supported. LayerNormalization
(opset 17): over the axes from ``axis`` on, ``Mean = E[X]``, ``InvStdDev = 1 / sqrt(E[(X - Mean)^2] +
epsilon)``, ``Y = (X - Mean) * InvStdDev * Scale + B`` (Scale and B broadcast), the statistics in the
``stash_type`` precision (float32 or float64) and Y in X's type; the back end runs it as one row
kernel (``compiler.schedule.rows``) when only Y is used. GroupNormalization and
MeanVarianceNormalization are ONNX functions and are compiled from their function bodies
(``compiler.frontend.expand``).
"""

from __future__ import annotations

import numpy as np

from ..ir import Node
from .ir import Bin, Cast, Expr, Float, add, call, mul, sub
from .ops_elementwise import _batchnorm as _folded_batchnorm
from .ops_reduce import red
from .registry import LowerCtx, bad, register
from .tensor import Tensor, broadcast_to, norm_axis


@register("InstanceNormalization", complex_op=True)
def _instance_norm(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, s, b = ins[0], ins[1], ins[2]
    assert x is not None and s is not None and b is not None
    eps = float(node.attr("epsilon", 1e-5))
    sp = x.shape[2:]
    count = float(np.prod(sp)) if sp else 1.0
    lw = ctx.lowering
    dt = x.dtype

    def fn(i: list[Expr]) -> Expr:
        ra = [lw.axis("rm", n) for n in sp]
        rb = [lw.axis("rv", n) for n in sp]
        mean = mul(red("sum", ra, x[i[:2] + [v for v, _ in ra]]), Float(1.0 / count, dt))
        d = sub(x[i[:2] + [v for v, _ in rb]], mean)
        var = mul(red("sum", rb, mul(d, d)), Float(1.0 / count, dt))
        norm = Bin("/", sub(x[i], mean), call("sqrt", add(var, Float(eps, dt))))
        return add(mul(norm, s[[i[1]]]), b[[i[1]]])
    return [Tensor(x.shape, dt, fn)]


@register("BatchNormalization")
def _batch_norm(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    if len(node.outputs) > 1 and any(o.consumers() or (o.graph is not None and o in o.graph.outputs)
                                     for o in node.outputs[1:]):
        raise bad(node, "training_mode", "only inference BatchNormalization is supported")
    if all(t is not None and t.const is not None for t in ins[1:5]):
        return _folded_batchnorm(ctx, node, ins)
    x, s, b, m, v = ins[:5]
    assert x is not None and s is not None and b is not None and m is not None and v is not None
    eps = float(node.attr("epsilon", 1e-5))
    dt = x.dtype

    def fn(i: list[Expr]) -> Expr:
        c = [i[1]]
        return add(mul(Bin("/", sub(x[i], m[c]), call("sqrt", add(v[c], Float(eps, dt)))), s[c]), b[c])
    return [Tensor(x.shape, dt, fn)]


@register("LayerNormalization", complex_op=True)
def _layer_norm(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, s = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    assert x is not None and s is not None
    axis = norm_axis(node, int(node.attr("axis", -1)), x.rank)
    eps = float(node.attr("epsilon", 1e-5))
    stash = {1: "f32", 11: "f64"}.get(int(node.attr("stash_type", 1)))
    if stash is None:
        raise bad(node, "stash_type", f"stash_type {node.attr('stash_type')} is not float or double")
    red_shape = x.shape[axis:]
    count = float(np.prod(red_shape)) if red_shape else 1.0
    lw, dt = ctx.lowering, x.dtype
    sb = broadcast_to(s, x.shape)
    bb = broadcast_to(b, x.shape) if b is not None else None

    def xs(i: list[Expr]) -> Expr:
        v = x[i]
        return v if dt == stash else Cast(stash, v)

    def mean(i: list[Expr]) -> Expr:
        ra = [lw.axis("rm", n) for n in red_shape]
        return mul(red("sum", ra, xs(i[:axis] + [v for v, _ in ra])), Float(1.0 / count, stash))

    def inv_std(i: list[Expr]) -> Expr:
        rb = [lw.axis("rv", n) for n in red_shape]
        d = sub(xs(i[:axis] + [v for v, _ in rb]), mean(i))
        var = mul(red("sum", rb, mul(d, d)), Float(1.0 / count, stash))
        return Bin("/", Float(1.0, stash), call("sqrt", add(var, Float(eps, stash))))

    def y(i: list[Expr]) -> Expr:
        norm = mul(sub(xs(i), mean(i)), inv_std(i))
        norm = norm if stash == dt else Cast(dt, norm)
        out = mul(norm, sb[i])
        return add(out, bb[i]) if bb is not None else out
    stat_shape = x.shape[:axis] + (1,) * len(red_shape)
    outs = [Tensor(x.shape, dt, y), Tensor(stat_shape, stash, mean), Tensor(stat_shape, stash, inv_std)]
    return outs[:len(node.outputs)]
