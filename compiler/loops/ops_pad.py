"""Lowering of Pad in every mode (``constant``, ``reflect``, ``edge``, ``wrap``), with ``axes``
(opset 18+), negative pads (cropping) and pads as an attribute (before opset 11) or an input.

Semantics: the ONNX Pad spec. Output element ``i`` on axis ``k`` reads input position
``j = i - pad_begin[k]``: ``constant`` gives ``constant_value`` where ``j`` is outside ``[0, n)``,
``edge`` clamps ``j``, ``reflect`` mirrors it about the first and last element (without repeating
them), ``wrap`` takes ``j`` modulo ``n``. Every load stays inside the buffer.
"""

from __future__ import annotations

from ..ir import Node
from . import ops_elementwise  # noqa: F401  (registers first: Pad here replaces its)
from .ir import Bin, Expr, Float, Int, call, land, select, sub
from .registry import LowerCtx, bad, const_input, register
from .tensor import Tensor, clamp, norm_axis


@register("Pad")
def _pad(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    mode = node.attr_str("mode", "constant")
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise bad(node, "mode", f"mode {mode!r} is not defined")
    r = x.rank
    if ctx.opset < 11:
        pads = [int(p) for p in node.attr("pads")]
        value: Expr | None = Float(float(node.attr("value", 0.0)), x.dtype) if x.dtype in ("f32", "f64") \
            else Int(int(node.attr("value", 0.0)), x.dtype)
        axes = list(range(r))
    else:
        pads = [int(p) for p in const_input(node, ins[1], "pads").reshape(-1)]
        value = None
        if len(ins) > 2 and ins[2] is not None:
            cv = ins[2]
            value = cv[[Int(0)] * cv.rank]
        axes = list(range(r))
        if len(ins) > 3 and ins[3] is not None:
            axes = [norm_axis(node, int(a), r, "axes") for a in const_input(node, ins[3], "axes").reshape(-1)]
    if value is None:
        value = Float(0.0, x.dtype) if x.dtype in ("f32", "f64") else Int(0, x.dtype)
    before, after = [0] * r, [0] * r
    for k, a in enumerate(axes):
        before[a], after[a] = pads[k], pads[len(axes) + k]
    out = ctx.out_shape(node)

    def fn(idx: list[Expr]) -> Expr:
        cond: Expr | None = None
        src = []
        for k in range(r):
            n = x.shape[k]
            j = sub(idx[k], before[k])
            if before[k] > 0 or after[k] > 0:
                if mode == "constant":
                    cond = land(cond, land(Bin(">=", j, Int(0)), Bin("<", j, Int(n))))
                    j = clamp(j, 0, n - 1)
                elif mode == "edge":
                    j = clamp(j, 0, n - 1)
                elif mode == "wrap":
                    j = Bin("%", Bin("+", Bin("%", j, Int(n)), Int(n)), Int(n))
                elif n > 1:
                    j = clamp(sub(Int(n - 1), call("abs", sub(Int(n - 1), call("abs", j)))), 0, n - 1)
                else:
                    j = Int(0)
            src.append(j)
        v = x[src]
        return v if cond is None else select(cond, v, value)
    return [Tensor(out, x.dtype, fn)]
