"""Lowering of ``prism.NarrowCast`` (``compiler.ops.narrow``): conversion to a narrow storage format.

Float formats become one loop-IR call ``narrow.<format>[.<round_mode>][.sat]`` on an f32 value,
which ``compiler.codegen.narrow`` emits as integer/bit operations in LLVM IR (round to nearest
even at the format's precision, subnormals, overflow, NaN, -0). Integer formats are expressed
with loop-IR integer ops: a float input is truncated toward zero to int32 (values of magnitude
>= 2^31, inf and NaN give INT32_MIN, whose low bits are 0, as ``ml_dtypes``' conversion on x86);
then the value wraps to the format's bits (two's complement: ``((v & mask) ^ half) - half`` for
int4/int2, ``v & mask`` for uint4/uint2; ONNX Cast as ``onnx.reference`` computes it) or, with
``saturate=1``, is clipped to the range (QuantizeLinear's saturation).
"""

from __future__ import annotations

from ..ir import Node
from ..ops.narrow import INT_BITS
from .ir import FLOAT_DTYPES, Bin, Call, Cast, Expr, Float, Int, call, emax, emin, select, sub
from .registry import LowerCtx, bad, register
from .tensor import Tensor


def _to_int(node: Node, x: Tensor, dt: str, sat: bool) -> Tensor:
    bits, signed = INT_BITS[str(node.attr("to"))]
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    half, mask = 1 << (bits - 1), (1 << bits) - 1

    def fn(i: list[Expr]) -> Expr:
        v = x[i]
        if v.dtype in FLOAT_DTYPES:
            ok = Bin("<", call("abs", v), Float(2.0 ** 31, v.dtype))
            v = select(ok, Cast("i32", v), Int(-(1 << 31), "i32"))
        elif v.dtype != "i32":
            v = Cast("i32", v)
        if sat:
            v = emin(emax(v, Int(lo, "i32")), Int(hi, "i32"))
        elif signed:
            v = sub(Bin("^", Bin("&", v, Int(mask, "i32")), Int(half, "i32")), Int(half, "i32"))
        else:
            v = Bin("&", v, Int(mask, "i32"))
        return Cast(dt, v)
    return Tensor(x.shape, dt, fn)


@register("prism.NarrowCast")
def _narrow_cast(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    to = str(node.attr("to"))
    sat = bool(node.attr("saturate", 0))
    dt = ctx.out_dtype(node)
    if to in INT_BITS:
        return [_to_int(node, x, dt, sat)]
    if x.dtype not in FLOAT_DTYPES:
        raise bad(node, "to", f"format {to} takes a float input, got {x.dtype}")
    mode = str(node.attr("round_mode", "up"))
    fn = "narrow." + to + (f".{mode}" if to == "float8e8m0" else "") + (".sat" if sat else "")
    return [Tensor(x.shape, "f32", lambda i: Call(fn, (x[i] if x.dtype == "f32" else Cast("f32", x[i]),)))]
