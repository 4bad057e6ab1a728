"""Rounding float32 values to the value set of a narrow float format, in LLVM IR.

The loop IR calls ``narrow.<format>`` (optionally ``.sat``, and for ``float8e8m0`` a rounding mode
``.up`` / ``.down`` / ``.nearest``) on f32 scalars or vectors; the result is an f32 that lies exactly
on the format's grid, so storing it in the format is exact (see ``compiler.frontend.narrow_types``).
The conversion is the one ``onnx.reference`` performs for ``Cast`` (``op_cast.py``: ``ml_dtypes``
``astype`` for bfloat16, float16, float8 without saturation and float4e2m1; ``numpy_helper.
saturate_cast`` (clip to +-max, then round) for float8 with ``saturate=1``; ``numpy_helper.
to_float8e8m0`` for float8e8m0), i.e. the ONNX Cast spec (opset 19, 23, 24 tables):

- round to nearest, ties to even, at the format's mantissa width ``m``; below the smallest normal
  ``2^emin`` the quantum stays ``2^(emin - m)`` (subnormals), so tiny values round to +-0;
- a rounded magnitude above the largest finite ``max`` overflows: to +-inf (float16, bfloat16,
  float8e5m2), to NaN (float8e4m3fn, the fnuz formats, which have no inf), or to +-max when
  saturating (``.sat``; float4e2m1 always saturates: it has neither inf nor NaN);
- NaN stays NaN (float4e2m1: NaN gives a zero whose sign is the opposite of the NaN's sign bit, as
  ``ml_dtypes`` does); the fnuz formats have no -0, so -0 and negative values that round to zero
  give +0;
- float8e8m0 (powers of two 2^-127 .. 2^127, no sign) keeps the f32 exponent field and rounds it by
  the ``round_mode`` rule of ``to_float8e8m0`` (``up``: any nonzero mantissa bumps it; ``nearest``:
  the guard/round/sticky rule of the reference; ``down``: truncation); the sign is ignored; NaN and
  inf give NaN; with saturation the exponent is never bumped past 2^127.

Everything is integer and bit manipulation on the f32 encoding plus one ``llvm.roundeven`` for the
subnormal range; no libm call. Each format is one internal ``alwaysinline`` function per vector
width, inlined by LLVM's optimizer at every call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

if TYPE_CHECKING:
    from .intrinsics import Intrinsics


@dataclass(frozen=True)
class FloatFormat:
    """Parameters of a narrow float format: ``m`` explicit mantissa bits, ``emin`` the exponent of
    the smallest normal, ``max`` the largest finite value, ``overflow`` (``inf``, ``nan`` or ``max``),
    ``nan`` (``nan``, or ``zero`` for float4e2m1), ``neg_zero`` (False for the fnuz formats)."""

    m: int
    emin: int
    max: float
    overflow: str
    nan: str = "nan"
    neg_zero: bool = True


FLOAT_FORMATS: dict[str, FloatFormat] = {
    "float16": FloatFormat(10, -14, 65504.0, "inf"),
    "bfloat16": FloatFormat(7, -126, 3.3895313892515355e38, "inf"),
    "float8e4m3fn": FloatFormat(3, -6, 448.0, "nan"),
    "float8e4m3fnuz": FloatFormat(3, -7, 240.0, "nan", neg_zero=False),
    "float8e5m2": FloatFormat(2, -14, 57344.0, "inf"),
    "float8e5m2fnuz": FloatFormat(2, -15, 57344.0, "nan", neg_zero=False),
    "float4e2m1": FloatFormat(1, 0, 6.0, "max", nan="zero"),
}
E8M0_MODES = ("up", "down", "nearest")


def parse(fn: str) -> tuple[str, bool, str]:
    """``narrow.<format>[.<mode>][.sat]`` -> (format, saturate, mode). Raises ValueError."""
    parts = fn.split(".")
    if len(parts) < 2 or parts[0] != "narrow":
        raise ValueError(f"not a narrowing call: {fn!r}")
    fmt, flags = parts[1], parts[2:]
    sat = "sat" in flags
    modes = [f for f in flags if f != "sat"]
    mode = modes[0] if modes else "up"
    if fmt not in FLOAT_FORMATS and fmt != "float8e8m0" or mode not in E8M0_MODES or len(modes) > 1:
        raise ValueError(f"unknown narrowing call {fn!r}")
    return fmt, sat, mode


def emit(intr: Intrinsics, b: ir.IRBuilder, fn: str, x: ir.Value) -> ir.Value:
    """Call (declaring on first use) the helper for ``fn`` on ``x`` (f32 or a vector of f32)."""
    t = x.type
    el = t.element if isinstance(t, ir.VectorType) else t
    if not isinstance(el, ir.FloatType):
        raise ValueError(f"{fn} takes f32 values, got {t}")
    suffix = f"v{t.count}f32" if isinstance(t, ir.VectorType) else "f32"
    name = f"prism.{fn}.{suffix}"
    f = intr.m.globals.get(name)
    if f is None:
        f = ir.Function(intr.m, ir.FunctionType(t, [t]), name)
        f.linkage = "internal"
        f.attributes.add("alwaysinline")
        hb = ir.IRBuilder(f.append_basic_block("entry"))
        fmt, sat, mode = parse(fn)
        body = _Body(intr, hb, t)
        hb.ret(body.e8m0(f.args[0], sat, mode) if fmt == "float8e8m0" else
               body.round(f.args[0], FLOAT_FORMATS[fmt], sat))
    return b.call(f, [x])


class _Body:
    """Builders for one helper: constants of the right (vector) type and the two algorithms."""

    def __init__(self, intr: Intrinsics, b: ir.IRBuilder, t: ir.Type) -> None:
        self.intr, self.b, self.t = intr, b, t
        self.n = t.count if isinstance(t, ir.VectorType) else 0
        self.it = ir.VectorType(ir.IntType(32), self.n) if self.n else ir.IntType(32)

    def f(self, v: float) -> ir.Constant:
        return ir.Constant(self.t, [ir.Constant(ir.FloatType(), v)] * self.n) if self.n else ir.Constant(self.t, v)

    def i(self, v: int) -> ir.Constant:
        v &= 0xFFFFFFFF
        v = v - (1 << 32) if v >= 1 << 31 else v
        return ir.Constant(self.it, [ir.IntType(32)(v)] * self.n) if self.n else ir.Constant(self.it, v)

    def bits(self, x: ir.Value) -> ir.Value:
        return self.b.bitcast(x, self.it)

    def flt(self, u: ir.Value) -> ir.Value:
        return self.b.bitcast(u, self.t)

    def round(self, x: ir.Value, fm: FloatFormat, sat: bool) -> ir.Value:
        """RNE to ``fm``'s grid, then overflow, NaN, sign and -0 handling (module docstring)."""
        b = self.b
        u = self.bits(x)
        a = b.and_(u, self.i(0x7FFFFFFF))
        sign = b.and_(u, self.i(0x80000000))
        shift = 23 - fm.m
        # normal range: round the f32 encoding at bit `shift` (a carry moves into the exponent)
        odd = b.and_(b.lshr(a, self.i(shift)), self.i(1))
        r = b.add(b.add(a, self.i((1 << (shift - 1)) - 1)), odd)
        r = self.flt(b.and_(r, self.i(~((1 << shift) - 1))))
        af = self.flt(a)
        if fm.emin > -126:  # below 2^emin the quantum is fixed: scale, round to integer, scale back
            k = fm.m - fm.emin
            sub = b.fmul(self.intr.call(b, "round", [b.fmul(af, self.f(2.0 ** k))]), self.f(2.0 ** -k))
            r = b.select(b.fcmp_ordered("<", af, self.f(2.0 ** fm.emin)), sub, r)
        over = self.f(fm.max if sat or fm.overflow == "max" else float("inf") if fm.overflow == "inf"
                      else float("nan"))
        r = b.select(b.fcmp_ordered(">", r, self.f(fm.max)), over, r)
        ru = self.bits(r)
        if not fm.neg_zero:  # no -0: a result of zero keeps sign +
            sign = b.select(b.icmp_signed("==", ru, self.i(0)), self.i(0), sign)
        out = b.or_(ru, sign)
        nan = self.i(0x7FC00000) if fm.nan == "nan" else b.xor(sign, self.i(0x80000000))
        return self.flt(b.select(b.icmp_unsigned(">", a, self.i(0x7F800000)), nan, out))

    def e8m0(self, x: ir.Value, sat: bool, mode: str) -> ir.Value:
        """``onnx.numpy_helper.to_float8e8m0``: exponent field of |x| rounded by ``mode``; 2^(e-127)."""
        b = self.b
        u = self.bits(x)
        e = b.and_(b.lshr(u, self.i(23)), self.i(0xFF))
        special = b.icmp_signed("==", e, self.i(0xFF))
        if mode == "up":
            bump = b.icmp_signed("!=", b.and_(u, self.i(0x7FFFFF)), self.i(0))
        elif mode == "nearest":
            g = b.icmp_signed("!=", b.and_(u, self.i(0x400000)), self.i(0))
            rest = b.icmp_signed("!=", b.and_(u, self.i(0x3FFFFF)), self.i(0))  # round or sticky bit
            bump = b.and_(g, b.or_(rest, b.icmp_signed(">", e, self.i(0))))
        else:
            bump = None
        if bump is not None:
            if sat:
                bump = b.and_(bump, b.icmp_signed("!=", e, self.i(0xFE)))
            e = b.add(e, b.zext(bump, self.it))
        # e in 0..255: 255 is NaN, 0 is 2^-127 (an f32 subnormal), else the f32 with that exponent
        v = b.select(b.icmp_signed("==", e, self.i(0)), self.i(0x00400000), b.shl(e, self.i(23)))
        v = b.select(b.or_(special, b.icmp_signed("==", e, self.i(0xFF))), self.i(0x7FC00000), v)
        return self.flt(v)
