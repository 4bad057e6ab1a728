"""Lowering of QuantizeLinear, DequantizeLinear and the integer and quantized linear algebra ops:
MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv.

Semantics: the ONNX specs. The integer ops accumulate ``(a - a_zero_point) * (b - b_zero_point)``
in int32 (zero points per tensor, or per row of A / per column of B, per output channel of W).
The QLinear ops take that int32 accumulator and requantize it: ``y = saturate(round_half_even(acc
* a_scale * b_scale / y_scale) + y_zero_point)`` to the output's 8-bit type (QLinearConv adds its
int32 bias to the accumulator first). The products are exact in int32 for 8-bit inputs; the
multiplier is applied in float32 as ONNX Runtime does (``compiler.loops.ops_qlinear.requantize``). QuantizeLinear divides in the input's precision (as the reference does),
rounds half to even and saturates to the output type (uint8, int8, uint16, int16, int32); the scale and zero point are per tensor, per axis (``axis``) or per block (``block_size``).
"""

from __future__ import annotations

import numpy as np

from ..ir import Node
from .ir import (
    Bin,
    Buffer,
    Cast,
    Expr,
    Int,
    Load,
    Var,
    add,
    call,
    emax,
    emin,
    floordiv,
    mul,
    select,
    sub,
)
from .ops_nn import _geom, _window
from .ops_qlinear import multiplier, requantize
from .ops_reduce import red
from .registry import LowerCtx, bad, register
from .tensor import Tensor, fconst, norm_axis


def _i32(e: Expr) -> Expr:
    return e if e.dtype == "i32" else Cast("i32", e)


def _zp(t: Tensor | None, idx: Expr) -> Expr:
    """A zero point: per tensor (scalar or 1 element) or indexed by ``idx``."""
    if t is None:
        return Int(0, "i32")
    if t.rank == 0 or t.shape == (1,):
        return _i32(t[[Int(0)] * t.rank])
    return _i32(t[[idx]])


def _matmul_acc(ctx: LowerCtx, out: tuple[int, ...], a: Tensor, b: Tensor, azp: Tensor | None,
                bzp: Tensor | None):  # type: ignore[no-untyped-def]
    a2 = a if a.rank > 1 else Tensor((1,) + a.shape, a.dtype, lambda i: a[i[1:]])
    b2 = b if b.rank > 1 else Tensor(b.shape + (1,), b.dtype, lambda i: b[i[:-1]])
    k_n = a2.shape[-1]
    nb = len(out) - 2 if a.rank > 1 and b.rank > 1 else max(a2.rank, b2.rank) - 2

    def acc(i: list[Expr]) -> Expr:
        full = i if a.rank > 1 and b.rank > 1 else (i + [Int(0)] if b.rank == 1 else i[:-1] + [Int(0), i[-1]])
        bi, r, c = full[:nb], full[nb], full[nb + 1]
        rk = ctx.lowering.axis("rq", k_n)
        ai = [Int(0) if d == 1 else bi[nb - (a2.rank - 2) + q] for q, d in enumerate(a2.shape[:-2])]
        bj = [Int(0) if d == 1 else bi[nb - (b2.rank - 2) + q] for q, d in enumerate(b2.shape[:-2])]
        av = sub(_i32(a2[ai + [r, rk[0]]]), _zp(azp, r))
        bv = sub(_i32(b2[bj + [rk[0], c]]), _zp(bzp, c))
        return red("sum", [rk], mul(av, bv))
    return acc


def _requant(acc: Expr, mult: Expr, y_zp: Tensor | None, dt: str) -> Expr:
    """``acc`` requantized with the float32 multiplier ``mult`` (``compiler.loops.ops_qlinear.requantize``)."""
    zp = Int(0, "i32") if y_zp is None else y_zp[[Int(0)] * y_zp.rank]
    return requantize(acc, mult, zp, dt)


def _scalar(t: Tensor, idx: Expr | None = None) -> Expr:
    if t.rank == 0 or t.shape == (1,) or idx is None:
        return t[[Int(0)] * t.rank]
    return t[[idx]]


@register("MatMulInteger", complex_op=True)
def _matmul_integer(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    a, b = ins[0], ins[1]
    assert a is not None and b is not None
    out = ctx.out_shape(node)
    acc = _matmul_acc(ctx, out, a, b, ins[2] if len(ins) > 2 else None, ins[3] if len(ins) > 3 else None)
    return [Tensor(out, "i32", acc)]


@register("QLinearMatMul", complex_op=True)
def _qlinear_matmul(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (ins + [None] * 8)[:8]
    assert a is not None and b is not None and a_s is not None and b_s is not None and y_s is not None
    out = ctx.out_shape(node)
    acc = _matmul_acc(ctx, out, a, b, a_zp, b_zp)
    dt = ctx.out_dtype(node)

    def fn(i: list[Expr]) -> Expr:
        return _requant(acc(i), multiplier(_scalar(a_s), _scalar(b_s, i[-1]), _scalar(y_s)), y_zp, dt)
    return [Tensor(out, dt, fn)]


def _conv_acc(ctx: LowerCtx, node: Node, x: Tensor, w: Tensor, xzp: Tensor | None, wzp: Tensor | None):  # type: ignore[no-untyped-def]
    out = ctx.out_shape(node)
    ks = list(w.shape[2:])
    group = int(node.attr("group", 1))
    cg = w.shape[1]
    per_group = w.shape[0] // group
    st, dil, pb, in_sp, out_sp = _geom(node, x, out, ks)

    def acc(i: list[Expr]) -> Expr:
        rc = ctx.lowering.axis("rc", cg)
        rk = [ctx.lowering.axis("rk", k) for k in ks]
        n, co = i[0], i[1]
        ci = rc[0] if group == 1 else add(mul(floordiv(co, per_group), cg), rc[0])
        pos, cond = _window(i[2:], [v for v, _ in rk], st, dil, pb, in_sp, out_sp, ks)
        xv = sub(_i32(x[[n, ci] + pos]), _zp(xzp, Int(0)))
        if cond is not None:
            xv = select(cond, xv, Int(0, "i32"))
        wv = sub(_i32(w[[co, rc[0]] + [v for v, _ in rk]]), _zp(wzp, co))
        return red("sum", [rc] + rk, mul(xv, wv))
    return out, acc


@register("ConvInteger", complex_op=True)
def _conv_integer(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, w = ins[0], ins[1]
    assert x is not None and w is not None
    out, acc = _conv_acc(ctx, node, x, w, ins[2] if len(ins) > 2 else None, ins[3] if len(ins) > 3 else None)
    return [Tensor(out, "i32", acc)]


@register("QLinearConv", complex_op=True)
def _qlinear_conv(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, bias = (ins + [None] * 9)[:9]
    assert x is not None and w is not None and x_s is not None and w_s is not None and y_s is not None
    out, acc = _conv_acc(ctx, node, x, w, x_zp, w_zp)
    dt = ctx.out_dtype(node)

    def fn(i: list[Expr]) -> Expr:
        total = acc(i)
        if bias is not None:
            total = add(total, _i32(bias[[i[1]]]))
        return _requant(total, multiplier(_scalar(x_s), _scalar(w_s, i[1]), _scalar(y_s)), y_zp, dt)
    return [Tensor(out, dt, fn)]


_QRANGE = {"u8": (0, 255), "i8": (-128, 127), "u16": (0, 65535), "i16": (-32768, 32767),
           "i32": (-2 ** 31, 2 ** 31 - 1)}


def _param_at(ctx: LowerCtx, node: Node, t: Tensor, x: Tensor, i: list[Expr]) -> Expr:
    """A scale or zero point at element ``i`` of ``x``: per tensor, per axis or per block."""
    if t.rank == 0 or int(np.prod(t.shape)) == 1 and t.rank <= 1:
        return t[[Int(0)] * t.rank]
    ax = norm_axis(node, int(node.attr("axis", 1)), x.rank)
    bs = int(node.attr("block_size", 0))
    if t.rank == 1:
        return t[[i[ax]]]
    if bs:
        return t[i[:ax] + [Bin("//", i[ax], Int(bs))] + i[ax + 1:]]
    return t[i]


@register("QuantizeLinear")
def _quantize(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, scale = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 else None
    assert x is not None and scale is not None
    dt = ctx.out_dtype(node)
    if dt == "f32":  # a narrow float output (compiler.frontend.narrow_types): x / y_scale (+ zero point),
        def ffn(i: list[Expr]) -> Expr:  # rounded to the format by the NarrowCast that follows
            s = _param_at(ctx, node, scale, x, i)
            q = Bin("/", x[i] if x.dtype == dt else Cast(dt, x[i]), s if s.dtype == dt else Cast(dt, s))
            return add(q, _param_at(ctx, node, zp, x, i)) if zp is not None else q
        return [Tensor(x.shape, dt, ffn)]
    if dt not in _QRANGE:
        raise bad(node, "y_zero_point", f"output type {dt} is not supported")
    lo, hi = _QRANGE[dt]

    # an 8- or 16-bit result: rounded in x's float type, then the zero point added and saturated in it too:
    # exact (a rounded |q| < 2^24 plus a zero point of 16 bits is exact in float32, and a larger |q|
    # saturates either way); a 32-bit result needs float64
    wide = "f64" if dt in ("i32", "u32") or x.dtype not in ("f32", "f64") else x.dtype

    def fn(i: list[Expr]) -> Expr:
        s = _param_at(ctx, node, scale, x, i)
        q: Expr = call("round", Bin("/", x[i], s if s.dtype == x.dtype else Cast(x.dtype, s)))
        q = q if q.dtype == wide else Cast(wide, q)
        if zp is not None:
            q = add(q, Cast(wide, _param_at(ctx, node, zp, x, i)))
        return Cast(dt, emin(emax(q, fconst(lo, wide)), fconst(hi, wide)))
    return [Tensor(x.shape, dt, fn)]


@register("DequantizeLinear")
def _dequantize(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, scale = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 else None
    assert x is not None and scale is not None
    dt = ctx.out_dtype(node)

    def fn(i: list[Expr]) -> Expr:
        if x.dtype in ("f32", "f64"):  # float8/float4 data in float32 (compiler.frontend.narrow_types)
            s = _param_at(ctx, node, scale, x, i)
            return mul(x[i] if x.dtype == dt else Cast(dt, x[i]), s if s.dtype == dt else Cast(dt, s))
        it = "i32" if x.dtype in ("u8", "i8", "u16", "i16") else "i64"  # x - zero point exact in 32 bits
        v: Expr = Cast(it, x[i]) if x.dtype != it else x[i]
        if zp is not None:
            z = _param_at(ctx, node, zp, x, i)
            v = sub(v, Cast(it, z) if z.dtype != it else z)
        s = _param_at(ctx, node, scale, x, i)
        return mul(Cast(dt, v), s if s.dtype == dt else Cast(dt, s))
    return [Tensor(x.shape, dt, fn)]


@register("BitCast")
def _bitcast(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    """BitCast between types of the same width: the input buffer is read as the output type (a
    load of the same memory with another element type, as ``reinterpret_cast``)."""
    x = ins[0]
    assert x is not None
    dt = ctx.out_dtype(node)
    probe = [Var(f"_bc{k}") for k in range(x.rank)]
    e = x[probe]
    width = {"bool": 1, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "f32": 4, "i64": 8, "u64": 8, "f64": 8,
             "u32": 4}
    if not (isinstance(e, Load) and list(e.indices) == probe) or width.get(x.dtype) != width.get(dt):
        raise bad(node, "to", f"BitCast {x.dtype} -> {dt} needs a same-width input read straight from memory")
    buf = Buffer(e.buf.name, dt, e.buf.shape, e.buf.scope)
    return [Tensor(x.shape, dt, lambda i: Load(buf, tuple(i)))]
