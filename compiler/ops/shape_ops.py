"""Shape and data-movement ops (kind ``injective`` unless noted): Reshape, Flatten, Transpose,
Squeeze, Unsqueeze, Concat, Split, Slice, Gather*, Scatter*, Expand, Tile, Pad, Resize, Upsample,
DepthToSpace, SpaceToDepth (ONNX operator spec, per op, at the model's opset). Shape producers are
in ``compiler.ops.generators``.

Data-dependent output shapes use the input's value when it is known at compile time (a constant
or a propagated value); otherwise the dims become symbolic names derived from the output.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from ..ir import TensorType
from ..ir.types import Dim
from .indices import check_indices
from .registry import InferContext, broadcast, mul_dims, op

I64 = TensorProto.INT64


@op("Reshape", kind="injective")
def infer_reshape(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    target = ctx.ints(1) if ctx.opset >= 5 and ctx.has(1) else ctx.attr("shape")
    if target is None:
        n = ctx.shape(1)[0]
        if not isinstance(n, int):
            return [ctx.type(0).with_shape(None)]
        return [ctx.type(0).with_shape([ctx.sym(i) for i in range(n)])]
    allowzero = int(ctx.attr("allowzero", 0))
    out: list[Dim] = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if i >= len(x):
                raise ctx.fail(f"shape {target} copies dim {i} (0) but the input has rank {len(x)}")
            out.append(x[i])
        else:
            out.append(d)
    if out.count(-1) > 1:
        raise ctx.fail(f"shape {target} has more than one -1")
    if any(isinstance(d, int) and d < -1 for d in out):
        raise ctx.fail(f"shape {target} has a negative dim other than -1")
    total = mul_dims(x)
    if -1 in out:
        known = mul_dims([d for d in out if d != -1])
        if isinstance(total, int) and isinstance(known, int):
            if known == 0 or total % known:
                raise ctx.fail(f"cannot reshape {list(x)} ({total} elements) to {target}")
            out[out.index(-1)] = total // known
        else:
            out[out.index(-1)] = ctx.sym(out.index(-1))
    elif isinstance(total, int) and isinstance(mul_dims(out), int) and mul_dims(out) != total:
        raise ctx.fail(f"cannot reshape {list(x)} ({total} elements) to {target}")
    return [ctx.type(0).with_shape(out)]


@op("Flatten", kind="injective")
def infer_flatten(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    axis = int(ctx.attr("axis", 1))
    if not -len(x) <= axis <= len(x):
        raise ctx.fail(f"axis {axis} out of range for rank {len(x)}", attribute="axis")
    axis = axis + len(x) if axis < 0 else axis
    return [ctx.type(0).with_shape((mul_dims(x[:axis]), mul_dims(x[axis:])))]


@op("Transpose", kind="injective")
def infer_transpose(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    perm = ctx.attr("perm") or list(reversed(range(len(x))))
    if sorted(perm) != list(range(len(x))):
        raise ctx.fail(f"perm {perm} is not a permutation of {len(x)} axes", attribute="perm")
    return [ctx.type(0).with_shape([x[p] for p in perm])]


def _axes(ctx: InferContext, input_index: int, since: int) -> list[int] | None:
    if ctx.opset >= since:
        return ctx.ints(input_index) if ctx.has(input_index) else None
    a = ctx.attr("axes")
    return None if a is None else list(a)


@op("Squeeze", kind="injective")
def infer_squeeze(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    axes = _axes(ctx, 1, 13)
    if axes is None:
        if ctx.opset >= 13 and ctx.has(1):
            return [ctx.type(0).with_shape(None)]
        return [ctx.type(0).with_shape([d for d in x if d != 1])]
    norm = {ctx.axis(a, len(x), "axes") for a in axes}
    for a in norm:
        if isinstance(x[a], int) and x[a] != 1:
            raise ctx.fail(f"cannot squeeze axis {a} of size {x[a]}", attribute="axes")
    return [ctx.type(0).with_shape([d for i, d in enumerate(x) if i not in norm])]


@op("Unsqueeze", kind="injective")
def infer_unsqueeze(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    axes = _axes(ctx, 1, 13)
    if axes is None:
        n = ctx.shape(1)[0] if ctx.opset >= 13 and ctx.has(1) else None
        if not isinstance(n, int):
            raise ctx.fail("axes are required", attribute="axes")
        return [ctx.type(0).with_shape([ctx.sym(i) for i in range(len(x) + n)])]  # axes known at run time only
    r = len(x) + len(axes)
    norm = sorted(ctx.axis(a, r, "axes") for a in axes)
    if len(set(norm)) != len(norm):
        raise ctx.fail(f"axes {axes} repeat an axis", attribute="axes")
    out: list[Dim] = list(x)
    for a in norm:
        out.insert(a, 1)
    return [ctx.type(0).with_shape(out)]


@op("Concat", kind="injective")
def infer_concat(ctx: InferContext) -> list[TensorType]:
    shapes = [ctx.shape(i) for i in range(ctx.n_inputs) if ctx.has(i)]
    r = len(shapes[0])
    axis = ctx.axis(int(ctx.attr("axis", 1 if ctx.opset < 4 else 0)), r)
    total: Dim = 0
    out = list(shapes[0])
    for s in shapes:
        if len(s) != r:
            raise ctx.fail(f"inputs have different ranks: {[list(x) for x in shapes]}")
        for k in range(r):
            if k != axis and isinstance(s[k], int) and isinstance(out[k], int) and s[k] != out[k]:
                raise ctx.fail(f"inputs differ on dim {k}: {[list(x) for x in shapes]}")
        sa = s[axis]
        total = total + sa if isinstance(total, int) and isinstance(sa, int) else ctx.sym(axis)
    out[axis] = total
    return [ctx.type(0).with_shape(out)]


@op("Split", kind="injective")
def infer_split(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    axis = ctx.axis(int(ctx.attr("axis", 0)), len(x))
    n = len(ctx.node.outputs)
    split = (ctx.ints(1) if ctx.has(1) else None) if ctx.opset >= 13 else ctx.attr("split")
    d = x[axis]
    if split is None:
        if not isinstance(d, int):
            sizes: list[Dim] = [ctx.sym(axis, k) for k in range(n)]
        else:
            chunk = -(-d // n) if ctx.opset >= 18 else d // n
            if ctx.opset < 18 and d % n:
                raise ctx.fail(f"axis {axis} of size {d} does not split evenly into {n} outputs")
            sizes = [min(chunk, max(d - k * chunk, 0)) for k in range(n)]
    else:
        if len(split) != n:
            raise ctx.fail(f"split {split} has {len(split)} parts for {n} outputs")
        if isinstance(d, int) and sum(split) != d:
            raise ctx.fail(f"split {split} sums to {sum(split)}, axis {axis} has size {d}")
        sizes = list(split)
    return [ctx.type(0).with_shape([*x[:axis], s, *x[axis + 1:]]) for s in sizes]


@op("Slice", kind="injective")
def infer_slice(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    if ctx.opset < 10:
        starts, ends, axes, steps = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes"), None
    else:
        starts, ends = ctx.ints(1), ctx.ints(2)
        axes = ctx.ints(3) if ctx.has(3) else None
        steps = ctx.ints(4) if ctx.has(4) else None
        if (ctx.has(3) and axes is None) or (ctx.has(4) and steps is None):
            starts = None
    if starts is None or ends is None:
        n = ctx.shape(1)[0] if ctx.opset >= 10 else len(x)
        if ctx.has(3) and ctx.ints(3) is not None:
            sliced = {ctx.axis(a, len(x), "axes") for a in ctx.ints(3)}  # type: ignore[union-attr]
        elif ctx.has(3) or not isinstance(n, int) or n != len(x):
            return [ctx.type(0).with_shape([ctx.sym(i) for i in range(len(x))])]
        else:
            sliced = set(range(len(x)))
        return [ctx.type(0).with_shape([ctx.sym(i) if i in sliced else d for i, d in enumerate(x)])]
    axes = list(axes) if axes is not None else list(range(len(starts)))
    steps = list(steps) if steps is not None else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.fail(f"starts {starts}, ends {ends}, axes {axes}, steps {steps} differ in length")
    normalized = [ctx.axis(a, len(x), "axes") for a in axes]
    if len(set(normalized)) != len(normalized):
        raise ctx.fail(f"axes {axes} name an axis more than once (the ONNX spec forbids repeated axes)",
                       attribute="axes")
    out = list(x)
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        a = ctx.axis(a, len(x), "axes")
        d = x[a]
        if st == 0:
            raise ctx.fail("a step is 0", attribute="steps")
        if not isinstance(d, int):
            out[a] = ctx.sym(a)
            continue
        # ONNX Slice: clamp negative-adjusted starts/ends, INT64 limits included
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
            out[a] = max(0, math.ceil((e - s) / st))
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
            out[a] = max(0, math.ceil((e - s) / st))
    return [ctx.type(0).with_shape(out)]


@op("Gather", kind="injective")
def infer_gather(ctx: InferContext) -> list[TensorType]:
    x, idx = ctx.shape(0), ctx.shape(1)
    axis = ctx.axis(int(ctx.attr("axis", 0)), len(x))
    check_indices(ctx, 1, [x[axis]], axis)
    return [ctx.type(0).with_shape([*x[:axis], *idx, *x[axis + 1:]])]


@op("GatherElements", kind="injective")
def infer_gather_elements(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    axis = ctx.axis(int(ctx.attr("axis", 0)), len(x))
    check_indices(ctx, 1, [x[axis]], axis)
    return [ctx.type(0).with_shape(ctx.shape(1))]


@op("GatherND", kind="injective")
def infer_gather_nd(ctx: InferContext) -> list[TensorType]:
    x, idx = ctx.shape(0), ctx.shape(1)
    b = int(ctx.attr("batch_dims", 0))
    last = idx[-1]
    if not isinstance(last, int):
        return [ctx.type(0).with_shape(None)]
    check_indices(ctx, 1, list(x[b:b + last]), b)
    return [ctx.type(0).with_shape([*idx[:-1], *x[b + last:]])]


@op("ScatterND", "ScatterElements", "Scatter", kind="opaque")
def infer_scatter(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    if ctx.node.op_type == "ScatterND":
        last = ctx.shape(1)[-1] if ctx.rank(1) else None
        if isinstance(last, int):
            check_indices(ctx, 1, list(x[:last]), 0)
    else:
        axis = ctx.axis(int(ctx.attr("axis", 0)), len(x))
        check_indices(ctx, 1, [x[axis]], axis)
    return [ctx.type(0)]


@op("Expand", kind="broadcast")
def infer_expand(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    shape = ctx.ints(1)
    if shape is None:
        n = ctx.shape(1)[0]
        if not isinstance(n, int):
            return [ctx.type(0).with_shape(None)]
        return [ctx.type(0).with_shape([ctx.sym(i) for i in range(max(n, len(x)))])]
    return [ctx.type(0).with_shape(broadcast(ctx, x, tuple(shape)))]


@op("Tile", kind="injective")
def infer_tile(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    reps = ctx.ints(1)
    if reps is None:
        return [ctx.type(0).with_shape([ctx.sym(i) for i in range(len(x))])]
    if len(reps) != len(x):
        raise ctx.fail(f"repeats {reps} must have one entry per input dim ({len(x)})")
    return [ctx.type(0).with_shape([d * r if isinstance(d, int) else ctx.sym(i)
                                    for i, (d, r) in enumerate(zip(x, reps, strict=True))])]


@op("Pad", kind="injective")
def infer_pad(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    pads = ctx.attr("pads") if ctx.opset < 11 else ctx.ints(1)
    if pads is None:
        return [ctx.type(0).with_shape([ctx.sym(i) for i in range(len(x))])]
    axes = list(range(len(x)))
    if ctx.opset >= 18 and ctx.has(3):
        given = ctx.ints(3)
        if given is None:
            return [ctx.type(0).with_shape([ctx.sym(i) for i in range(len(x))])]
        axes = [ctx.axis(a, len(x), "axes") for a in given]
    n = len(axes)
    if len(pads) != 2 * n:
        raise ctx.fail(f"pads {pads} must have 2 x {n} entries", attribute="pads")
    reflect = ctx.attr("mode", "constant") in ("reflect", b"reflect")
    out = list(x)
    for k, a in enumerate(axes):
        d = out[a]
        if reflect and isinstance(d, int) and max(pads[k], pads[k + n]) >= d:
            # ONNX Runtime refuses it; a reflection that long would read outside the input
            raise ctx.fail(f"pads {pads} reflect {max(pads[k], pads[k + n])} values of dim {a} of size {d} (mode "
                           "reflect needs every pad < the dim's size)", attribute="pads")
        if isinstance(d, int):
            out[a] = d = d + pads[k] + pads[k + n]
            if d < 0:
                raise ctx.fail(f"pads {pads} make dim {a} negative", attribute="pads")
    return [ctx.type(0).with_shape(out)]


def _floats(ctx: InferContext, i: int) -> list[float] | None:
    if not ctx.has(i):
        return None
    v = ctx.value(i)
    if v is None:
        return None
    return [float(f) for f in np.asarray(v).reshape(-1)]


@op("Resize", "Upsample", kind="injective")
def infer_resize(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    r = len(x)
    if ctx.node.op_type == "Upsample":
        scales = ctx.attr("scales") if ctx.opset < 9 else _floats(ctx, 1)
        sizes = None
    elif ctx.opset < 11:
        scales, sizes = _floats(ctx, 1), None
    else:
        scales, sizes = _floats(ctx, 2), ctx.ints(3) if ctx.has(3) else None
        if scales is not None and not scales:
            scales = None  # an empty scales tensor means "use sizes"
    axes = ctx.attr("axes") if ctx.opset >= 18 else None
    axes = [ctx.axis(a, r, "axes") for a in axes] if axes else list(range(r))
    out: list[Dim] = list(x)
    if sizes is not None and sizes:
        if len(sizes) != len(axes):
            raise ctx.fail(f"sizes {sizes} do not match {len(axes)} axes")
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch" and all(isinstance(x[a], int) for a in axes):
            ratios = [s / x[a] for s, a in zip(sizes, axes, strict=True)]  # type: ignore[operator]
            scale = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:
                out[a] = int(x[a] * scale + 0.5)  # type: ignore[operator]
        else:
            for s, a in zip(sizes, axes, strict=True):
                out[a] = s
        return [ctx.type(0).with_shape(out)]
    if scales is None:
        return [ctx.type(0).with_shape([ctx.sym(i) for i in range(r)])]
    if len(scales) != len(axes):
        raise ctx.fail(f"scales {scales} do not match {len(axes)} axes")
    for s, a in zip(scales, axes, strict=True):
        d = x[a]
        out[a] = int(math.floor(d * s)) if isinstance(d, int) else ctx.sym(a)
    return [ctx.type(0).with_shape(out)]


@op("DepthToSpace", kind="injective")
def infer_depth_to_space(ctx: InferContext) -> list[TensorType]:
    n, c, h, w = ctx.shape(0)
    b = int(ctx.attr("blocksize"))
    mode = ctx.attr("mode", "DCR")
    if (mode.decode() if isinstance(mode, bytes) else mode) not in ("DCR", "CRD"):
        raise ctx.fail(f"mode {mode!r} is neither 'DCR' nor 'CRD'", attribute="mode")
    if isinstance(c, int) and c % (b * b):
        raise ctx.fail(f"channels {c} are not divisible by blocksize^2 = {b * b}", attribute="blocksize")
    f = lambda d, k: d * k if isinstance(d, int) else "?"  # noqa: E731
    return [ctx.type(0).with_shape((n, c // (b * b) if isinstance(c, int) else "?", f(h, b), f(w, b)))]


@op("SpaceToDepth", kind="injective")
def infer_space_to_depth(ctx: InferContext) -> list[TensorType]:
    n, c, h, w = ctx.shape(0)
    b = int(ctx.attr("blocksize"))
    for name, d in (("height", h), ("width", w)):
        if isinstance(d, int) and d % b:
            raise ctx.fail(f"{name} {d} is not divisible by blocksize {b}", attribute="blocksize")
    g = lambda d: d // b if isinstance(d, int) else "?"  # noqa: E731
    return [ctx.type(0).with_shape((n, c * b * b if isinstance(c, int) else "?", g(h), g(w)))]
