"""Lowering of InstanceNormalization, and of BatchNormalization whose parameters are runtime
tensors (constant parameters keep the folded lowering of ``ops_elementwise``).

Semantics: the ONNX specs. InstanceNormalization: for each (n, c), ``mean`` and ``var``
(population variance) over the spatial axes, ``y = scale[c] * (x - mean) / sqrt(var + epsilon) +
B[c]``. BatchNormalization (inference): ``y = (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] +
B[c]``; its training-mode outputs (running statistics) are not supported. LayerNormalization,
GroupNormalization and MeanVarianceNormalization are ONNX functions and are compiled from their
function bodies (``compiler.frontend.expand``).
"""

from __future__ import annotations

import numpy as np

from ..ir import Node
from .ir import Bin, Expr, Float, add, call, mul, sub
from .ops_elementwise import LowerCtx, bad, register
from .ops_elementwise import _batchnorm as _folded_batchnorm
from .ops_nn import COMPLEX_OPS
from .ops_reduce import red
from .tensor import Tensor

COMPLEX_OPS.update({"InstanceNormalization"})


@register("InstanceNormalization")
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
