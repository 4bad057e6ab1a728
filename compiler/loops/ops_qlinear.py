"""Requantization shared by every integer op, and the lowering of the ``com.microsoft`` quantized
ops ONNX Runtime's quantizer writes in QOperator form: ``QLinearAdd``, ``QLinearMul``, ``QGemm`` and
``QLinearGlobalAveragePool``.

Requantization (:func:`requantize`) follows ONNX Runtime's CPU kernels (MLAS ``MlasRequantizeOutput``
and ``qlinearconv.cc``): the int32 accumulator is converted to float32 and multiplied by the float32
multiplier ``M = (x_scale * w_scale) / y_scale`` (computed in float32, left to right), rounded half to
even (``roundeven``, the ONNX QuantizeLinear rounding), the output zero point added and the result
saturated to the output's 8-bit range. ``onnx.reference`` computes the same product in float64; the two
agree except where float32 rounding moves a value across a .5 boundary (one step, and only for
accumulators above 2^24 / M). Semantics of the ops: ONNX Runtime's contrib operator docs
(``docs/ContribOperators.md``): QLinearAdd/QLinearMul ``C = quantize(dequantize(A) op dequantize(B))``
with numpy broadcasting; QGemm ``Y = alpha * (A - a_zp) x (B - b_zp) + C`` (C int32 with scale
``a_scale * b_scale``, zero point 0), quantized with ``y_scale``/``y_zero_point`` when given, else float32;
QLinearGlobalAveragePool ``y = quantize(mean over H, W of dequantize(x))`` (NCHW only).
"""

from __future__ import annotations

import numpy as np

from ..ir import Node
from .ir import Bin, Cast, Expr, Float, Int, Load, add, call, emax, emin, mul, sub
from .ops_reduce import red
from .registry import LowerCtx, bad, register
from .tensor import Tensor, broadcast_to

QRANGE = {"u8": (0, 255), "i8": (-128, 127)}
DOMAIN = "com.microsoft"


def f32(e: Expr) -> Expr:
    """``e`` as float32 (a cast unless it already is)."""
    return e if e.dtype == "f32" else Cast("f32", e)


def i32(e: Expr) -> Expr:
    return e if e.dtype == "i32" else Cast("i32", e)


def scalar_at(t: Tensor | None, idx: Expr | None = None, default: Expr | None = None) -> Expr:
    """A per-tensor (rank 0 or one element) or per-axis (1-D, indexed by ``idx``) quantization parameter."""
    if t is None:
        assert default is not None
        return default
    if t.rank == 0 or int(np.prod(t.shape)) == 1:
        return t[[Int(0)] * t.rank]
    if idx is None:
        raise ValueError(f"a per-axis parameter of shape {t.shape} where a scalar is required")
    return t[[idx]]


def multiplier(x_scale: Expr, w_scale: Expr, y_scale: Expr) -> Expr:
    """``(x_scale * w_scale) / y_scale`` in float32 (folded when the scales are constants)."""
    xs, ws, ys = f32(x_scale), f32(w_scale), f32(y_scale)
    if isinstance(xs, Float) and isinstance(ws, Float) and isinstance(ys, Float):
        return Float(float(np.float32(np.float32(xs.value) * np.float32(ws.value)) / np.float32(ys.value)))
    return Bin("/", mul(xs, ws), ys)


def requantize(acc: Expr, mult: Expr, y_zp: Expr, dt: str) -> Expr:
    """``saturate(roundeven(float32(acc) * mult) + y_zp)`` as ``dt`` (u8 or i8); see the module docstring."""
    lo, hi = QRANGE.get(dt, (-128, 127))
    v = call("round", mul(f32(acc), mult))
    if not (isinstance(y_zp, Int) and y_zp.value == 0):
        v = add(v, f32(y_zp))
    return Cast(dt, emin(emax(v, Float(float(lo))), Float(float(hi))))


def _out_dt(node: Node, ctx: LowerCtx, zp: Tensor | None) -> str:
    dt = ctx.out_dtype(node)
    if dt not in QRANGE:
        raise bad(node, "C_zero_point", f"output type {dt} is not supported (uint8 or int8)")
    return dt


def _binary(op: str):  # type: ignore[no-untyped-def]
    def low(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
        a, a_s, a_zp, b, b_s, b_zp, c_s, c_zp = (ins + [None] * 8)[:8]
        if a is None or b is None or a_s is None or b_s is None or c_s is None:
            raise bad(node, "A", "A, A_scale, B, B_scale and C_scale are required")
        out = ctx.out_shape(node)
        dt = _out_dt(node, ctx, c_zp)
        ab, bb = broadcast_to(a, out), broadcast_to(b, out)
        zero = Int(0, "i32")

        def fn(i: list[Expr]) -> Expr:
            za, zb = i32(scalar_at(a_zp, default=zero)), i32(scalar_at(b_zp, default=zero))
            fa, fb = f32(sub(i32(ab[i]), za)), f32(sub(i32(bb[i]), zb))
            cs = f32(scalar_at(c_s))
            if op == "add":  # as DequantizeLinear -> Add -> QuantizeLinear in float32: ((a-za)as + (b-zb)bs) / cs
                v: Expr = Bin("/", add(rounded_mul(fa, f32(scalar_at(a_s))), rounded_mul(fb, f32(scalar_at(b_s)))), cs)
            else:  # QLinearMul: (a - za)(b - zb) * (as * bs / cs)
                v = mul(mul(fa, fb), multiplier(scalar_at(a_s), scalar_at(b_s), scalar_at(c_s)))
            return requantize_float(v, scalar_at(c_zp, default=zero), dt)
        return [Tensor(out, dt, fn)]
    return low


def rounded_mul(a: Expr, b: Expr) -> Expr:
    """``a * b`` rounded to float32 on its own: written ``fma(a, b, -0.0)`` so that the code generator does
    not contract it with a following add (``compiler.codegen.llvm_codegen`` emits ``a * b + c`` as one
    ``llvm.fma``); LLVM simplifies it back to one ``fmul``. Used where the result must equal a separate
    DequantizeLinear (a product rounded) followed by an Add."""
    return call("fma", a, b, Float(-0.0))


def requantize_float(v: Expr, y_zp: Expr, dt: str) -> Expr:
    """``saturate(roundeven(v) + y_zp)`` for a float32 value already divided by the output scale."""
    lo, hi = QRANGE[dt]
    r = call("round", v)
    if not (isinstance(y_zp, Int) and y_zp.value == 0):
        r = add(r, f32(y_zp))
    return Cast(dt, emin(emax(r, Float(float(lo))), Float(float(hi))))


register(f"{DOMAIN}.QLinearAdd")(_binary("add"))
register(f"{DOMAIN}.QLinearMul")(_binary("mul"))


@register(f"{DOMAIN}.QGemm", complex_op=True)
def _qgemm(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    a, a_s, a_zp, b, b_s, b_zp, c, y_s, y_zp = (ins + [None] * 9)[:9]
    if a is None or b is None or a_s is None or b_s is None:
        raise bad(node, "A", "A, a_scale, B and b_scale are required")
    ta, tb = int(node.attr("transA", 0)), int(node.attr("transB", 0))
    alpha = float(node.attr("alpha", 1.0))
    out = ctx.out_shape(node)
    k_n = a.shape[0] if ta else a.shape[1]
    zero = Int(0, "i32")
    cb = broadcast_to(c, out) if c is not None else None
    dt = ctx.out_dtype(node)

    def fn(i: list[Expr]) -> Expr:
        m, n = i
        rk = ctx.lowering.axis("rq", k_n)
        k = rk[0]
        av = sub(i32(a[[k, m] if ta else [m, k]]), i32(scalar_at(a_zp, default=zero)))
        bv = sub(i32(b[[n, k] if tb else [k, n]]), i32(scalar_at(b_zp, n, zero)))
        acc = red("sum", [rk], mul(av, bv))
        if cb is not None:
            acc = add(acc, i32(cb[i]))
        scale = mul(Float(alpha), mul(f32(scalar_at(a_s)), f32(scalar_at(b_s, n))))
        if y_s is None:
            return mul(f32(acc), scale)
        return requantize(acc, Bin("/", scale, f32(scalar_at(y_s))), scalar_at(y_zp, default=zero), dt)
    return [Tensor(out, dt, fn)]


@register(f"{DOMAIN}.QLinearGlobalAveragePool", complex_op=True)
def _qgap(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, x_s, x_zp, y_s, y_zp = (ins + [None] * 5)[:5]
    if x is None or x_s is None or y_s is None:
        raise bad(node, "X", "X, x_scale and y_scale are required")
    if int(node.attr("channels_last", 0)):
        raise bad(node, "channels_last", "channels_last=1 is not supported (NCHW only)")
    dt = _out_dt(node, ctx, y_zp)
    size = int(np.prod(x.shape[2:]))
    zero = Int(0, "i32")

    def fn(i: list[Expr]) -> Expr:
        rk = [ctx.lowering.axis("rk", k) for k in x.shape[2:]]
        s = red("sum", rk, i32(x[i[:2] + [r for r, _ in rk]]))
        acc = sub(s, mul(i32(scalar_at(x_zp, default=zero)), Int(size, "i32")))
        mult = Bin("/", f32(scalar_at(x_s)), mul(f32(scalar_at(y_s)), Float(float(size))))
        return requantize(acc, mult, scalar_at(y_zp, default=zero), dt)
    return [Tensor(ctx.out_shape(node), dt, fn)]


def byte_index(e: Load) -> tuple[Expr, bool] | None:
    """``(x, signed)`` when ``e`` reads a 256-entry uint8/int8 table at ``i64(x)`` (uint8 ``x``) or
    ``i64(x) + 128`` (int8 ``x``), else None."""
    if e.buf.dtype not in ("u8", "i8") or e.buf.shape != (256,) or len(e.indices) != 1:
        return None
    i = e.indices[0]
    if isinstance(i, Cast) and i.to == "i64" and i.value.dtype == "u8":
        return i.value, False
    if (isinstance(i, Bin) and i.op == "+" and isinstance(i.b, Int) and i.b.value == 128
            and isinstance(i.a, Cast) and i.a.to == "i64" and i.a.value.dtype == "i8"):
        return i.a.value, True
    return None


@register("prism.QLinearLookup")
def _lookup(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, table = (ins + [None, None])[:2]
    if x is None or table is None or x.dtype not in QRANGE:
        raise bad(node, "X", "X (uint8 or int8) and table are required")
    if table.dtype not in QRANGE or table.shape != (256,):
        raise bad(node, "table", f"table is {table.dtype}{list(table.shape)}, not 256 uint8/int8 values")
    low = QRANGE[x.dtype][0]
    return [Tensor(x.shape, table.dtype, lambda i: table[[add(Cast("i64", x[i]), Int(-low))]])]
