"""Ops that produce shapes or new tensors from shapes: Shape, Size, ConstantOfShape, Range,
OneHot, NonZero, EyeLike, and the same-type opaque ops CumSum, Trilu, ReverseSequence (ONNX
operator spec, per op). Data-dependent sizes use the known input value, else a symbolic dim.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from ..ir import TensorType
from ..ir.types import Dim
from .registry import InferContext, op

I64 = TensorProto.INT64


@op("Shape", kind="opaque")
def infer_shape(ctx: InferContext) -> list[TensorType]:
    r = ctx.rank(0)
    start, end = int(ctx.attr("start", 0)), ctx.attr("end")
    n = len(range(r)[slice(start, None if end is None else int(end))])
    return [TensorType(I64, (n,))]


@op("Size", kind="opaque")
def infer_size(ctx: InferContext) -> list[TensorType]:
    return [TensorType(I64, ())]


@op("ConstantOfShape", kind="injective")
def infer_constant_of_shape(ctx: InferContext) -> list[TensorType]:
    value = ctx.attr("value")
    elem = TensorType.of(value.dtype, ()).elem_type if isinstance(value, np.ndarray) else TensorProto.FLOAT
    shape = ctx.ints(0)
    if shape is None:
        n = ctx.shape(0)[0]
        return [TensorType(elem, None if not isinstance(n, int) else tuple(ctx.sym(i) for i in range(n)))]
    if any(d < 0 for d in shape):
        raise ctx.fail(f"shape {shape} has a negative dim")
    return [TensorType(elem, tuple(shape))]


@op("Range", kind="injective")
def infer_range(ctx: InferContext) -> list[TensorType]:
    vals = [ctx.value(i) for i in range(3)]
    elem = ctx.type(0).elem_type
    if any(v is None for v in vals):
        return [TensorType(elem, (ctx.sym(0),))]
    start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in vals)  # type: ignore[arg-type]
    if delta == 0:
        raise ctx.fail("delta is 0")
    return [TensorType(elem, (max(int(math.ceil((limit - start) / delta)), 0),))]


@op("OneHot", kind="injective")
def infer_one_hot(ctx: InferContext) -> list[TensorType]:
    idx = ctx.shape(0)
    depth = ctx.value(1)
    r = len(idx) + 1
    axis = ctx.axis(int(ctx.attr("axis", -1)), r)
    d: Dim = int(np.asarray(depth).reshape(-1)[0]) if depth is not None else ctx.sym(axis)
    if isinstance(d, int) and d < 1:
        raise ctx.fail(f"depth {d} is below 1 (OneHot needs depth >= 1)")
    v = ctx.shape(2) if ctx.has(2) else (2,)
    if len(v) != 1 or (isinstance(v[0], int) and v[0] != 2):
        raise ctx.fail(f"values has shape {list(v)}; OneHot needs [off_value, on_value] (shape [2])")
    out = list(idx)
    out.insert(axis, d)
    return [TensorType(ctx.type(2).elem_type, tuple(out))]


@op("NonZero", kind="opaque")
def infer_nonzero(ctx: InferContext) -> list[TensorType]:
    return [TensorType(I64, (ctx.rank(0), f"{ctx.node.outputs[0].name}_nnz"))]


@op("CumSum", "Trilu", "ReverseSequence", kind="opaque")
def infer_same_opaque(ctx: InferContext) -> list[TensorType]:
    """Same type as the input; ReverseSequence's ``batch_axis`` and ``time_axis`` must be 0 or 1 and differ
    (ONNX spec; ONNX Runtime refuses them otherwise)."""
    if ctx.node.op_type == "ReverseSequence":
        batch, time = int(ctx.attr("batch_axis", 1)), int(ctx.attr("time_axis", 0))
        if {batch, time} != {0, 1}:
            raise ctx.fail(f"batch_axis {batch} and time_axis {time} must be 0 and 1 (one each)",
                           attribute="time_axis")
    return [ctx.type(0)]


@op("EyeLike", kind="injective")
def infer_eye_like(ctx: InferContext) -> list[TensorType]:
    dtype = ctx.attr("dtype")
    if len(ctx.shape(0)) != 2:
        raise ctx.fail(f"input has rank {len(ctx.shape(0))}; EyeLike needs a 2-D input")
    return [TensorType.of(int(dtype), ctx.shape(0)) if dtype is not None else ctx.type(0)]
