"""The fused epilogue of the INT8 micro-kernels (``compiler.schedule.int8_nest``): the requantize-then-
dequantize round trip of a QuantizeLinear inside a fused group computed without the 8-bit conversions."""

from __future__ import annotations

from ..loops.ir import Bin, Call, Cast, Expr, Float, Int, map_children

Q8_RANGE = {"u8": (0, 255), "i8": (-128, 127)}


def _integral_in(c: Expr, dt: str) -> bool:
    """True when ``c`` is ``min(max(round(v) [+ integer], lo), hi)`` with ``[lo, hi]`` inside ``dt``'s range: an
    integer-valued float32 that the 8-bit cast holds exactly (the form of ``ops_qlinear.requantize*``)."""
    if not (isinstance(c, Bin) and c.op == "min" and isinstance(c.b, Float) and isinstance(c.a, Bin)
            and c.a.op == "max" and isinstance(c.a.b, Float)):
        return False
    lo, hi = Q8_RANGE[dt]
    r = c.a.a
    if isinstance(r, Bin) and r.op == "+" and (isinstance(r.b, Cast) and isinstance(r.b.value, Int)
                                                or isinstance(r.b, Float) and float(r.b.value).is_integer()):
        r = r.a
    return (isinstance(r, Call) and r.fn == "round" and lo <= c.a.b.value and c.b.value <= hi
            and float(c.a.b.value).is_integer() and float(c.b.value).is_integer())


def exact_dequantize(e: Expr) -> Expr:
    """``e`` with each requantize-then-dequantize round trip inside a fused group (a QuantizeLinear's 8-bit
    value read back by the next integer op: ``f32(i32(u8(C)) - z)``) computed as ``C - z`` in float32, where
    ``C`` is the saturated, rounded value (:func:`_integral_in`): the same number (an integer within the
    8-bit range, converted exactly both ways), two vector conversions and an integer add fewer per output
    (a residual QLinearAdd epilogue)."""
    e = map_children(e, exact_dequantize, fold=False)
    if not (isinstance(e, Cast) and e.to == "f32"):
        return e
    inner, z = e.value, 0
    if isinstance(inner, Bin) and inner.op == "-":
        zc = inner.b.value if isinstance(inner.b, Cast) else inner.b
        if not isinstance(zc, Int):
            return e
        inner, z = inner.a, zc.value
    if not (isinstance(inner, Cast) and inner.to == "i32" and isinstance(inner.value, Cast)
            and inner.value.to in Q8_RANGE and _integral_in(inner.value.value, inner.value.to)):
        return e
    c = inner.value.value
    return Bin("-", c, Float(float(z))) if z else c


__all__ = ["exact_dequantize"]
