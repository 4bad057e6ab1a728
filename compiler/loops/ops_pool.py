"""Lowering of MaxPool with its ``Indices`` output or of an integer type, and of MaxUnpool.

Semantics: the ONNX specs. MaxPool's values keep ``ops_nn``'s lowering; ``Indices`` (int64) is the
flat position of the first maximum of each window in the input tensor, row-major
(``((n * C + c) * H + h) * W + w``), or with ``storage_order=1`` column-major over the spatial dims
(``(n * C + c) * H * W + w * H + h``); padded taps never win. MaxUnpool scatters each input value
to the flat position its index names in the inferred shape ``(in - 1) * stride - pads + kernel``
(zero elsewhere); a larger ``output_shape`` holds that result in its leading corner, zero-padded
(as the reference implementation does).
"""

from __future__ import annotations

import numpy as np

from ..ir import Node
from .ir import Bin, Cast, Expr, Float, Int, Reduce, add, mul, select
from .ops_nn import _geom, _pool, _window, max_pool_tap
from .ops_reduce import red
from .registry import LowerCtx, register
from .tensor import Tensor, unravel


@register("MaxPool", complex_op=True)
def _max_pool(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    if len(node.outputs) < 2 and x.dtype in ("f32", "f64"):
        return _pool(ctx, node, ins)
    ks = list(node.attr("kernel_shape"))
    out = ctx.out_shape(node)
    st, dil, pb, in_sp, out_sp = _geom(node, x, out, ks)
    col_major = int(node.attr("storage_order", 0)) == 1
    dt = x.dtype
    lo = Float(float("-inf"), dt) if dt in ("f32", "f64") else Int(int(np.iinfo(np.dtype({"i8": "int8", "u8": "uint8",
        "i32": "int32", "i64": "int64"}.get(dt, "int64"))).min), dt)

    def windowed(i: list[Expr], rk: list) -> tuple[list[Expr], Expr | None]:  # type: ignore[type-arg]
        return _window(i[2:], [v for v, _ in rk], st, dil, pb, in_sp, out_sp, ks)

    def values(i: list[Expr]) -> Expr:
        rk = [ctx.lowering.axis("rk", k) for k in ks]
        pos, cond = windowed(i, rk)
        v = x[i[:2] + pos]
        if dt in ("f32", "f64"):  # NaN taps as in ops_nn's MaxPool (onnx.reference)
            return red("max", rk, max_pool_tap(v, cond, i[2:], [r for r, _ in rk], st, dil, pb))
        return red("max", rk, v if cond is None else select(cond, v, lo))

    def indices(i: list[Expr]) -> Expr:
        mx = values(i)
        rk = [ctx.lowering.axis("ri", k) for k in ks]
        pos, cond = windowed(i, rk)
        v = x[i[:2] + pos]
        base = add(mul(i[0], x.shape[1]), i[1])
        if col_major:
            flat: Expr = Int(0)
            for d in reversed(range(len(in_sp))):
                flat = add(mul(flat, in_sp[d]), pos[d])
            flat = add(mul(base, int(np.prod(in_sp))), flat)
        else:
            flat = base
            for d in range(len(in_sp)):
                flat = add(mul(flat, in_sp[d]), pos[d])
        hit = Bin("==", v, mx) if cond is None else Bin("and", cond, Bin("==", v, mx))
        big = Int(int(np.prod(x.shape)))
        return Reduce("min", tuple(rk), select(hit, flat, big), big)
    if len(node.outputs) < 2:  # integer MaxPool: the identity of max is the type's minimum
        return [Tensor(out, dt, values)]
    return [Tensor(out, dt, values), Tensor(ctx.out_shape(node, 1), "i64", indices)]


@register("MaxUnpool", complex_op=True)
def _max_unpool(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, ind = ins[0], ins[1]
    assert x is not None and ind is not None
    out = ctx.out_shape(node)
    n_in = int(np.prod(x.shape))
    dt = x.dtype
    ks = list(node.attr("kernel_shape"))
    nd = len(ks)
    st = list(node.attr("strides", [1] * nd))
    pads = list(node.attr("pads", [0] * 2 * nd))
    inferred = list(x.shape[:2]) + [(x.shape[2 + k] - 1) * st[k] - pads[k] - pads[nd + k] + ks[k] for k in range(nd)]

    def fn(i: list[Expr]) -> Expr:
        flat: Expr = Int(0)
        for d, n in zip(i, inferred, strict=True):
            flat = add(mul(flat, n), d)
        for d, n, m in zip(i, inferred, out, strict=True):  # beyond the inferred box: no index names it
            if m > n:
                flat = select(Bin("<", d, Int(n)), flat, Int(-2))
        rj = ctx.lowering.axis("ru", n_in)
        src = unravel(rj[0], x.shape)
        j = ind[src]
        j = j if j.dtype == "i64" else Cast("i64", j)
        last = Reduce("max", (rj,), select(Bin("==", j, flat), rj[0], Int(-1)), Int(-1))
        zero = Float(0.0, dt) if dt in ("f32", "f64") else Int(0, dt)
        rk = ctx.lowering.axis("rv", n_in)  # the winner's value, read at loop indices (no data-dependent address)
        v = Reduce("sum", (rk,), select(Bin("==", rk[0], last), x[unravel(rk[0], x.shape)], zero), zero)
        return select(Bin(">=", last, Int(0)), v, zero)
    return [Tensor(out, dt, fn)]
