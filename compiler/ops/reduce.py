"""Reductions: ``Reduce*`` (axes as attribute before opset 18 — ReduceSum before 13 — and as an
input after), ``ArgMax``/``ArgMin``, ``TopK`` (ONNX operator spec). Kind ``reduction``."""

from __future__ import annotations

from onnx import TensorProto

from ..ir import TensorType
from ..ir.types import Dim
from .registry import InferContext, op

REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


def _reduced(ctx: InferContext, x: tuple[Dim, ...], axes: list[int] | None, keep: bool) -> list[Dim]:
    norm = set(range(len(x))) if axes is None else {ctx.axis(a, len(x), "axes") for a in axes}
    out: list[Dim] = []
    for i, d in enumerate(x):
        if i in norm:
            if keep:
                out.append(1)
        else:
            out.append(d)
    return out


@op(*REDUCE, kind="reduction")
def infer_reduce(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    keep = bool(ctx.attr("keepdims", 1))
    as_input = ctx.opset >= 18 or (ctx.node.op_type == "ReduceSum" and ctx.opset >= 13)
    if as_input:
        if ctx.has(1):
            axes = ctx.ints(1)
            if axes is None:
                return [ctx.type(0).with_shape(None if not keep else [ctx.sym(i) for i in range(len(x))])]
            if not axes and ctx.attr("noop_with_empty_axes", 0):
                return [ctx.type(0)]
            axes = axes or None
        else:
            if ctx.attr("noop_with_empty_axes", 0):
                return [ctx.type(0)]
            axes = None
    else:
        axes = ctx.attr("axes")
    return [ctx.type(0).with_shape(_reduced(ctx, x, axes, keep))]


@op("ArgMax", "ArgMin", kind="reduction")
def infer_arg(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    axis = int(ctx.attr("axis", 0))
    return [TensorType(TensorProto.INT64, tuple(_reduced(ctx, x, [axis], bool(ctx.attr("keepdims", 1)))))]


@op("TopK", kind="opaque")
def infer_topk(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    axis = ctx.axis(int(ctx.attr("axis", -1)), len(x))
    k = ctx.attr("k") if ctx.opset < 10 else ctx.ints(1)
    kd: Dim = (k if isinstance(k, int) else k[0]) if k is not None else f"{ctx.node.outputs[0].name}_k"
    size = x[axis]
    if not isinstance(kd, str) and (int(kd) < 0 or (isinstance(size, int) and int(kd) > size)):
        # ONNX TopK: "K ... must be a positive value (<= the size of the axis)"
        raise ctx.fail(f"K = {int(kd)} is {'negative' if kd < 0 else 'larger than'} axis {axis} of size "
                       f"{size} (TopK needs 0 <= K <= the axis size)", attribute="k" if ctx.opset < 10 else None)
    out = list(x)
    out[axis] = kd
    return [ctx.type(0).with_shape(out), TensorType(TensorProto.INT64, tuple(out))]
