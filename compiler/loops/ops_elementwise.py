"""Lowering of elementwise and injective ONNX ops to index functions (``Tensor``).

Semantics: the ONNX operator specs (onnx.ai/onnx/operators). Elementwise ops broadcast their inputs
to the output shape (multidirectional broadcasting) and combine the element expressions; injective
ops (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Slice, Split, Pad, Gather, Expand,
Tile, Resize nearest) only rewrite indices. Out-of-range reads (Pad, Concat) load at a clamped index
and select: every load stays inside its buffer. Unsupported attributes raise
``CompileError(stage="lowering")`` naming node, op and attribute.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..ir import Node
from .ir import (
    Bin,
    Cast,
    Expr,
    Float,
    Int,
    add,
    call,
    emax,
    emin,
    floordiv,
    floormod,
    land,
    mul,
    select,
    sub,
)
from .registry import Lower, LowerCtx, bad, checked_index, const_input, divide_message, register
from .tensor import Tensor, broadcast_to, clamp, fconst, norm_axis, reshape


def _unary(fn: Callable[[Expr, Node], Expr]) -> Lower:
    def low(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
        x = ins[0]
        assert x is not None
        return [Tensor(x.shape, x.dtype, lambda idx: fn(x[idx], node))]
    return low


_UNARY: dict[str, Callable[[Expr, Node], Expr]] = {
    "Relu": lambda x, n: emax(x, fconst(0, x.dtype)),
    "Neg": lambda x, n: call("neg", x),
    "Abs": lambda x, n: call("abs", x),
    "Exp": lambda x, n: call("exp", x),
    "Log": lambda x, n: call("log", x),
    "Sqrt": lambda x, n: call("sqrt", x),
    "Tanh": lambda x, n: call("tanh", x),
    "Erf": lambda x, n: call("erf", x),
    "Floor": lambda x, n: call("floor", x),
    "Ceil": lambda x, n: call("ceil", x),
    "Sin": lambda x, n: call("sin", x),
    "Cos": lambda x, n: call("cos", x),
    "Reciprocal": lambda x, n: Bin("/", fconst(1, x.dtype), x),
    "Sigmoid": lambda x, n: Bin("/", fconst(1, x.dtype), add(fconst(1, x.dtype), call("exp", call("neg", x)))),
    "Softplus": lambda x, n: call("log", add(call("exp", x), fconst(1, x.dtype))),
    "LeakyRelu": lambda x, n: select(Bin("<", x, fconst(0)), mul(x, fconst(n.attr("alpha", 0.01))), x),
    "Elu": lambda x, n: select(Bin("<", x, fconst(0)), mul(fconst(n.attr("alpha", 1.0)), sub(call("exp", x), fconst(1))), x),
    "HardSigmoid": lambda x, n: emin(emax(add(mul(fconst(n.attr("alpha", 0.2)), x), fconst(n.attr("beta", 0.5))),
                                          fconst(0)), fconst(1)),
    "HardSwish": lambda x, n: mul(x, emin(emax(add(mul(fconst(1 / 6), x), fconst(0.5)), fconst(0)), fconst(1))),
    "Identity": lambda x, n: x,
    "Dropout": lambda x, n: x,
    "Not": lambda x, n: Bin("==", x, Int(0, x.dtype)),
}
for _name, _fn in _UNARY.items():
    register(_name)(_unary(_fn))


@register("Gelu")
def _gelu(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    if node.attr("approximate", "none") != "none":
        raise bad(node, "approximate", "only approximate='none' is supported")
    x = ins[0]
    assert x is not None
    return [Tensor(x.shape, x.dtype, lambda i: mul(mul(fconst(0.5), x[i]),
                                                     add(fconst(1), call("erf", mul(x[i], fconst(1 / math.sqrt(2)))))))]


_BINARY: dict[str, Callable[[Expr, Expr], Expr]] = {
    "Add": lambda a, b: Bin("+", a, b), "Sub": lambda a, b: Bin("-", a, b), "Mul": lambda a, b: Bin("*", a, b),
    "Div": lambda a, b: Bin("/", a, b) if a.dtype in ("f32", "f64") else floordiv(a, b),
    "Pow": lambda a, b: call("pow", a, Cast(a.dtype, b) if b.dtype != a.dtype else b),
    "Max": lambda a, b: emax(a, b), "Min": lambda a, b: emin(a, b), "Sum": lambda a, b: Bin("+", a, b),
    "Mean": lambda a, b: Bin("+", a, b),
    "Equal": lambda a, b: Bin("==", a, b), "Less": lambda a, b: Bin("<", a, b),
    "Greater": lambda a, b: Bin(">", a, b), "LessOrEqual": lambda a, b: Bin("<=", a, b),
    "GreaterOrEqual": lambda a, b: Bin(">=", a, b), "And": lambda a, b: Bin("and", a, b),
    "Or": lambda a, b: Bin("or", a, b), "PRelu": lambda x, s: select(Bin("<", x, fconst(0)), mul(x, s), x),
}


def _nary(op: str) -> Lower:
    comb = _BINARY[op]

    def low(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
        shape = ctx.out_shape(node)
        xs = [broadcast_to(t, shape) for t in ins if t is not None]

        def fn(idx: list[Expr]) -> Expr:
            acc = xs[0][idx]
            for t in xs[1:]:
                b = t[idx]
                acc = comb(acc, b)
                if op == "Div" and acc.dtype not in ("f32", "f64"):  # the spec: undefined; ORT: an error
                    acc = ctx.checked(node, "divide", acc, Bin("==", b, Int(0, b.dtype)), divide_message(node, b.dtype))
            if op == "Mean":
                acc = mul(acc, fconst(1.0 / len(xs)))
            return acc
        return [Tensor(shape, ctx.out_dtype(node), fn)]
    return low


for _name in _BINARY:
    register(_name)(_nary(_name))


@register("Clip")
def _clip(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    lo = node.attr("min", None)
    hi = node.attr("max", None)
    if len(ins) > 1 and ins[1] is not None:
        lo = float(const_input(node, ins[1], "min").reshape(-1)[0])
    if len(ins) > 2 and ins[2] is not None:
        hi = float(const_input(node, ins[2], "max").reshape(-1)[0])

    def fn(idx: list[Expr]) -> Expr:
        v = x[idx]
        if lo is not None:
            v = emax(v, fconst(lo, x.dtype))
        if hi is not None:
            v = emin(v, fconst(hi, x.dtype))
        return v
    return [Tensor(x.shape, x.dtype, fn)]


@register("Where")
def _where(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    shape = ctx.out_shape(node)
    c, a, b = (broadcast_to(t, shape) for t in ins if t is not None)
    return [Tensor(shape, a.dtype, lambda i: select(Bin("!=", c[i], Int(0, c.dtype)), a[i], b[i]))]


@register("Cast")
def _cast(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    dt = ctx.out_dtype(node)
    return [Tensor(x.shape, dt, lambda i: x[i] if x.dtype == dt else Cast(dt, x[i]))]


@register("BatchNormalization")
def _batchnorm(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    if len(node.outputs) > 1 and any(o.consumers() for o in node.outputs[1:]):
        raise bad(node, "training_mode", "only inference BatchNormalization is supported")
    x, s, b, m, v = ins[:5]
    assert x is not None and s is not None and b is not None and m is not None and v is not None
    eps = float(node.attr("epsilon", 1e-5))
    for t, nm in ((s, "scale"), (b, "B"), (m, "mean"), (v, "var")):
        const_input(node, t, nm)
    sc = s.const / np.sqrt(v.const.astype(np.float64) + eps)  # type: ignore[union-attr, operator, attr-defined]
    sh = b.const - m.const * sc  # type: ignore[union-attr, operator]
    st = ctx.const_tensor(np.asarray(sc, np.float32).reshape(-1), f"{node.label}_scale")
    bt = ctx.const_tensor(np.asarray(sh, np.float32).reshape(-1), f"{node.label}_shift")
    return [Tensor(x.shape, x.dtype, lambda i: add(mul(x[i], st[[i[1]]]), bt[[i[1]]]))]


@register("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def _reshape(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    return [reshape(x, ctx.out_shape(node))]


@register("Expand")
def _expand(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    return [broadcast_to(x, ctx.out_shape(node))]


@register("Transpose")
def _transpose(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    perm = node.attr("perm") or list(range(x.rank))[::-1]
    inv = [perm.index(k) for k in range(x.rank)]
    return [Tensor(ctx.out_shape(node), x.dtype, lambda i: x[[i[inv[k]] for k in range(x.rank)]])]


@register("Concat")
def _concat(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    xs = [t for t in ins if t is not None]
    shape = ctx.out_shape(node)
    ax = norm_axis(node, int(node.attr("axis")), len(shape))
    starts = np.cumsum([0] + [t.shape[ax] for t in xs]).tolist()

    def fn(idx: list[Expr]) -> Expr:
        i = idx[ax]
        val: Expr | None = None
        for k in range(len(xs) - 1, -1, -1):
            t = xs[k]
            if t.shape[ax] == 0:
                continue
            local = clamp(sub(i, starts[k]), 0, t.shape[ax] - 1)
            v = t[idx[:ax] + [local] + idx[ax + 1:]]
            val = v if val is None else select(Bin("<", i, Int(starts[k + 1])), v, val)
        assert val is not None
        return val
    return [Tensor(shape, xs[0].dtype, fn)]


@register("Split")
def _split(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    ax = norm_axis(node, int(node.attr("axis", 0)), x.rank)
    outs, start = [], 0
    for k in range(len(node.outputs)):
        shp = ctx.out_shape(node, k)
        outs.append(_offset_view(x, shp, ax, start))
        start += shp[ax]
    return outs


def _offset_view(x: Tensor, shape: tuple[int, ...], ax: int, start: int) -> Tensor:
    return Tensor(shape, x.dtype, lambda i: x[i[:ax] + [add(i[ax], start)] + i[ax + 1:]])


@register("Slice")
def _slice(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    if ctx.opset < 10:
        starts, ends = node.attr("starts"), node.attr("ends")
        axes = node.attr("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = const_input(node, ins[1], "starts").tolist()
        ends = const_input(node, ins[2], "ends").tolist()
        axes = const_input(node, ins[3], "axes").tolist() if len(ins) > 3 and ins[3] is not None \
            else list(range(len(starts)))
        steps = const_input(node, ins[4], "steps").tolist() if len(ins) > 4 and ins[4] is not None \
            else [1] * len(starts)
    first = [0] * x.rank
    step = [1] * x.rank
    for s, _e, a, st in zip(starts, ends, axes, steps, strict=True):
        a = norm_axis(node, int(a), x.rank, "axes")
        d = x.shape[a]
        s = s + d if s < 0 else s
        first[a] = max(0, min(s, d)) if st > 0 else max(-1, min(s, d - 1))
        step[a] = int(st)
    shape = ctx.out_shape(node)
    return [Tensor(shape, x.dtype, lambda i: x[[add(mul(i[k], step[k]), first[k]) for k in range(x.rank)]])]


@register("Pad")
def _pad(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    mode = node.attr_str("mode", "constant")
    pads = node.attr("pads") if ctx.opset < 11 else const_input(node, ins[1], "pads").tolist()
    value = float(node.attr("value", 0.0))
    if ctx.opset >= 11 and len(ins) > 2 and ins[2] is not None:
        value = float(const_input(node, ins[2], "constant_value").reshape(-1)[0])
    if len(ins) > 3 and ins[3] is not None:
        raise bad(node, "axes", "Pad with an axes input is not supported")
    if mode not in ("constant", "edge", "reflect"):
        raise bad(node, "mode", f"mode {mode!r} is not supported")
    r = x.rank
    before = pads[:r]

    def fn(idx: list[Expr]) -> Expr:
        cond = None
        src = []
        for k in range(r):
            j = sub(idx[k], before[k])
            n = x.shape[k]
            if mode == "reflect" and before[k] or mode == "reflect" and pads[r + k]:
                j = sub(Int(n - 1), call("abs", sub(Int(n - 1), call("abs", j))))  # type: ignore[arg-type]
            elif before[k] or pads[r + k]:
                if mode == "constant":
                    cond = land(cond, land(Bin(">=", j, Int(0)), Bin("<", j, Int(n))))
                j = clamp(j, 0, n - 1)
            src.append(j)
        v = x[src]
        return v if cond is None else select(cond, v, Float(value, x.dtype) if x.dtype in ("f32", "f64")
                                             else Int(int(value), x.dtype))
    return [Tensor(ctx.out_shape(node), x.dtype, fn)]


@register("Gather")
def _gather(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, ind = ins[0], ins[1]
    assert x is not None and ind is not None
    ax = norm_axis(node, int(node.attr("axis", 0)), x.rank)
    q = ind.rank
    n = x.shape[ax]

    def fn(i: list[Expr]) -> Expr:
        j = checked_index(ctx, node, ind[i[ax:ax + q]], n, ax)
        return x[i[:ax] + [j] + i[ax + q:]]
    return [Tensor(ctx.out_shape(node), x.dtype, fn)]


@register("Tile")
def _tile(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    return [Tensor(ctx.out_shape(node), x.dtype, lambda i: x[[floormod(i[k], x.shape[k]) for k in range(x.rank)]])]


@register("Resize", "Upsample", complex_op=True)
def _resize(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    mode = node.attr_str("mode", "nearest")
    ctm = node.attr_str("coordinate_transformation_mode", "half_pixel")
    nm = node.attr_str("nearest_mode", "round_prefer_floor")
    shape = ctx.out_shape(node)
    if mode != "nearest":
        raise bad(node, "mode", f"mode {mode!r} is not supported (nearest only)")
    for k in range(x.rank):
        if shape[k] % x.shape[k] and shape[k] != x.shape[k]:
            raise bad(node, "scales", "only integer nearest upsampling factors are supported")
    if ctm not in ("asymmetric", "half_pixel", "pytorch_half_pixel") or \
            (ctm != "asymmetric" and nm not in ("floor", "round_prefer_floor", "round_prefer_ceil")):
        raise bad(node, "coordinate_transformation_mode", f"{ctm} with nearest_mode {nm} is not supported")
    # integer factor f: asymmetric+floor -> i // f; half_pixel: (i + 0.5)/f - 0.5 rounds to i // f too
    # for round_prefer_floor/ceil only when f is even or odd respectively; verified exactly below.
    for k in range(x.rank):
        f = shape[k] // x.shape[k]
        for i in range(min(shape[k], 2 * f)):
            src = i / f if ctm == "asymmetric" else (i + 0.5) / f - 0.5
            want = _nearest(src, nm if ctm != "asymmetric" or nm != "floor" else "floor")
            if max(0, min(x.shape[k] - 1, want)) != i // f:
                raise bad(node, "nearest_mode", f"{ctm}/{nm} with factor {f} is not an integer repeat")
    fs = [shape[k] // x.shape[k] for k in range(x.rank)]
    return [Tensor(shape, x.dtype, lambda i: x[[floordiv(i[k], fs[k]) for k in range(x.rank)]])]


def _nearest(v: float, nm: str) -> int:
    if nm == "floor":
        return math.floor(v)
    if nm == "ceil":
        return math.ceil(v)
    if nm == "round_prefer_ceil":
        return math.floor(v + 0.5)
    return math.ceil(v - 0.5)
