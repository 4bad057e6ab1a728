"""Lowering of the remaining reductions: ReduceProd, ReduceL1, ReduceL2, ReduceLogSum,
ReduceLogSumExp, ReduceSumSquare, ArgMax, ArgMin, and ReduceSum/Max/Min/Mean of every type.

Semantics: the ONNX operator specs (``axes`` as attribute before opset 18 and as an input from 18
on; 13 for ReduceSum), ``keepdims`` (default 1) and ``noop_with_empty_axes``. A reduction over an
empty set gives the combiner's identity (0 for sums, 1 for products, -inf/+inf for max/min, and
so -inf for ReduceLogSum): the loop runs zero times. ReduceLogSumExp is computed as
``log(sum(exp(x - m))) + m`` with ``m`` the maximum of the finite values (the same value in exact
arithmetic, without overflow; ``onnx.reference``'s ``compute_log_sum_exp``, whose special values it
keeps: +inf gives +inf, NaN NaN, only -inf NaN). ArgMax/ArgMin return int64 indices of the first extreme value, or of the last with
``select_last_index=1``: first the extreme value is reduced, then the smallest (largest) index
holding it; a NaN counts as the extreme (``onnx.reference`` runs ``numpy.argmax``/``argmin``, which
return the first NaN). ReduceMax/ReduceMin propagate NaN (``numpy.maximum.reduce``: the float
``max``/``min`` of the loop IR are numpy's, ``compiler.codegen.llvm_codegen``). Every reduction is a :class:`~compiler.loops.ir.Reduce` over its axes (see
``compiler.loops.compute``); the accumulator starts at the identity of the output dtype.
"""

from __future__ import annotations

import numpy as np

from ..ir import Node
from .ir import Bin, Cast, Expr, Float, Int, Reduce, Var, call, mul, select, sub
from .registry import LowerCtx, const_input, register
from .tensor import Tensor, norm_axis

FLOATS = ("f32", "f64")
_NEW = ("ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax",
        "ArgMin")


def identity(combiner: str, dtype: str) -> Expr:
    """The identity of ``combiner`` (sum, prod, max, min) in ``dtype``."""
    if dtype in FLOATS:
        return Float({"sum": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}[combiner], dtype)
    np_dt = {"i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8, "u8": np.uint8, "u16": np.uint16,
             "u32": np.uint32, "u64": np.uint64, "bool": np.bool_}[dtype]
    if combiner in ("sum", "prod"):
        return Int(0 if combiner == "sum" else 1, dtype)
    info = np.iinfo(np_dt) if dtype != "bool" else None
    lo, hi = (0, 1) if info is None else (int(info.min), int(info.max))
    return Int(lo if combiner == "max" else hi, dtype)


def red(combiner: str, axes: list[tuple[Var, int]], body: Expr) -> Expr:
    """A reduction with a dtype-correct identity as its initial value."""
    return Reduce(combiner, tuple(axes), body, identity(combiner, body.dtype))


def reduce_axes(ctx: LowerCtx, node: Node, ins: list[Tensor | None], rank: int) -> list[int] | None:
    """The normalized, sorted reduction axes; None for a no-op (empty axes, noop_with_empty_axes=1)."""
    axes = node.attr("axes", None)
    if len(ins) > 1 and ins[1] is not None:
        axes = const_input(node, ins[1], "axes").reshape(-1).tolist()
    if axes is None or len(axes) == 0:
        if node.attr("noop_with_empty_axes", 0):
            return None
        return list(range(rank))
    return sorted({norm_axis(node, int(a), rank, "axes") for a in axes})


def _reduction(ctx: LowerCtx, node: Node, x: Tensor, axes: list[int], keep: bool,
               combiner: str, pre, post) -> Tensor:  # type: ignore[no-untyped-def]
    rk = {a: ctx.lowering.axis("rr", x.shape[a]) for a in axes}

    def src(idx: list[Expr]) -> list[Expr]:
        out, j = [], 0
        for k in range(x.rank):
            if k in rk:
                out.append(rk[k][0])
                j += keep
            else:
                out.append(idx[j])
                j += 1
        return out

    def fn(idx: list[Expr]) -> Expr:
        return post(red(combiner, [rk[a] for a in axes], pre(x[src(idx)], idx)), idx, src)
    return Tensor(ctx.out_shape(node), ctx.out_dtype(node), fn)


@register(*_NEW[:6], complex_op=True)
def _reduce_more(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    axes = reduce_axes(ctx, node, ins, x.rank)
    op = node.op_type
    if axes is None:  # identity, but the elementwise part still applies (spec: reduce over no axis)
        f = {"ReduceL1": lambda v: call("abs", v), "ReduceSumSquare": lambda v: mul(v, v),
             "ReduceL2": lambda v: call("abs", v), "ReduceLogSum": lambda v: call("log", v),
             "ReduceLogSumExp": lambda v: v}.get(op, lambda v: v)
        return [Tensor(x.shape, x.dtype, lambda i: f(x[i]))]
    keep = bool(node.attr("keepdims", 1))
    ident = lambda v, i: v  # noqa: E731
    done = lambda r, i, s: r  # noqa: E731
    if op == "ReduceProd":
        return [_reduction(ctx, node, x, axes, keep, "prod", ident, done)]
    if op == "ReduceL1":
        return [_reduction(ctx, node, x, axes, keep, "sum", lambda v, i: call("abs", v), done)]
    if op == "ReduceSumSquare":
        return [_reduction(ctx, node, x, axes, keep, "sum", lambda v, i: mul(v, v), done)]
    if op == "ReduceL2":
        if x.dtype not in FLOATS:
            return [_reduction(ctx, node, x, axes, keep, "sum", lambda v, i: mul(v, v),
                               lambda r, i, s: Cast(x.dtype, call("sqrt", Cast("f64", r))))]
        return [_reduction(ctx, node, x, axes, keep, "sum", lambda v, i: mul(v, v), lambda r, i, s: call("sqrt", r))]
    if op == "ReduceLogSum":
        return [_reduction(ctx, node, x, axes, keep, "sum", ident, lambda r, i, s: call("log", r))]
    # ReduceLogSumExp: m + log(sum(exp(x - m))); m over the same axes (a second reduction) is the
    # maximum of the finite values and NaN, as onnx.reference computes it (+-inf count as -inf, so a
    # +inf gives +inf, a row of -inf NaN, an empty set -inf)
    ninf = Float(float("-inf"), x.dtype)
    mx = _reduction(ctx, node, x, axes, keep, "max",
                    lambda v, i: select(Bin("==", call("abs", v), Float(float("inf"), x.dtype)), ninf, v), done)

    def fn(idx: list[Expr]) -> Expr:
        m = mx[idx]
        inner = _reduction(ctx, node, x, axes, keep, "sum", lambda v, i: call("exp", sub(v, m)), done)
        return Bin("+", call("log", inner[idx]), m)
    return [Tensor(ctx.out_shape(node), x.dtype, fn)]


@register("ArgMax", "ArgMin", complex_op=True)
def _arg(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    ax = norm_axis(node, int(node.attr("axis", 0)), x.rank)
    keep = bool(node.attr("keepdims", 1))
    last = bool(node.attr("select_last_index", 0))
    comb = "max" if node.op_type == "ArgMax" else "min"
    lw = ctx.lowering
    n = x.shape[ax]
    rv, rj = lw.axis("ra", n), lw.axis("rj", n)

    def at(idx: list[Expr], r: Var) -> Expr:
        base = idx[:ax] + ([] if not keep else [])
        rest = idx[ax + 1:] if keep else idx[ax:]
        return x[base + [r] + rest]

    def fn(idx: list[Expr]) -> Expr:
        ext = red(comb, [rv], at(idx, rv[0]))
        v = at(idx, rj[0])
        hit = Bin("==", v, ext)
        if x.dtype in FLOATS:  # a NaN is the extreme (numpy's argmax/argmin): ext is NaN iff one is
            hit = Bin("or", hit, Bin("!=", v, v))
        if last:
            return red("max", [rj], select(hit, rj[0], Int(-1)))
        return red("min", [rj], select(hit, rj[0], Int(n)))
    return [Tensor(ctx.out_shape(node), "i64", fn)]


@register("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", complex_op=True)
def _reduce_basic(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    """Each accumulator starts at the identity of the input's own type. ReduceMean: floats sum and
    multiply by 1/count; integers sum in double, divide by the count and truncate back."""
    x = ins[0]
    assert x is not None
    axes = reduce_axes(ctx, node, ins, x.rank)
    if axes is None:
        return [x]
    keep = bool(node.attr("keepdims", 1))
    done = lambda r, i, s: r  # noqa: E731
    if node.op_type == "ReduceMean" and x.dtype in FLOATS:
        count = float(np.prod([x.shape[a] for a in axes]))
        return [_reduction(ctx, node, x, axes, keep, "sum", lambda v, i: v,
                           lambda r, i, s: mul(r, Float(1.0 / count, x.dtype)))]
    if node.op_type == "ReduceMean":
        count = float(np.prod([x.shape[a] for a in axes]))
        return [_reduction(ctx, node, x, axes, keep, "sum", lambda v, i: Cast("f64", v),
                           lambda r, i, s: Cast(x.dtype, mul(r, Float(1.0 / count, "f64"))))]
    comb = {"ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min"}[node.op_type]
    if x.dtype == "bool":  # max = any, min = all: reduce as u8
        return [_reduction(ctx, node, x, axes, keep, comb, lambda v, i: Cast("u8", v),
                           lambda r, i, s: Bin("!=", r, Int(0, "u8")))]
    return [_reduction(ctx, node, x, axes, keep, comb, lambda v, i: v, done)]
