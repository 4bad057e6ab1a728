"""Math intrinsics for loop IR calls, on scalars or vectors.

``exp``, ``log``, ``sqrt``, ``abs``, ``floor``, ``ceil``, ``round`` (to nearest even, as ONNX
Round), ``pow``, ``sin``, ``cos``, ``fma`` map to the LLVM intrinsics of the same meaning
(``llvm.exp.v16f32`` ...), which LLVM lowers to instructions or libm calls. ``tanh`` and ``erf``
have no LLVM intrinsic and are expanded here: ``tanh(x) = copysign((1 - e) / (1 + e), x)`` with
``e = exp(-2|x|)`` (exact up to rounding), ``erf`` by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7).
"""

from __future__ import annotations

from llvmlite import ir

_LLVM = {"exp": "llvm.exp", "log": "llvm.log", "sqrt": "llvm.sqrt", "abs": "llvm.fabs", "floor": "llvm.floor",
         "ceil": "llvm.ceil", "round": "llvm.roundeven", "pow": "llvm.pow", "sin": "llvm.sin", "cos": "llvm.cos",
         "fma": "llvm.fma", "copysign": "llvm.copysign"}
_ARITY = {"pow": 2, "fma": 3, "copysign": 2}


def _suffix(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_suffix(t.element)}"
    return "f32" if isinstance(t, ir.FloatType) else "f64" if isinstance(t, ir.DoubleType) else f"i{t.width}"


class Intrinsics:
    """Declares intrinsics in one module on first use."""

    def __init__(self, module: ir.Module) -> None:
        self.m = module

    def _decl(self, fn: str, t: ir.Type) -> ir.Function:
        name = f"{_LLVM[fn]}.{_suffix(t)}"
        if name in self.m.globals:
            return self.m.globals[name]
        return ir.Function(self.m, ir.FunctionType(t, [t] * _ARITY.get(fn, 1)), name)

    def call(self, b: ir.IRBuilder, fn: str, args: list[ir.Value]) -> ir.Value:
        t = args[0].type
        if fn == "neg":
            return b.fneg(args[0]) if not isinstance(_elem(t), ir.IntType) else b.neg(args[0])
        if fn == "abs" and isinstance(_elem(t), ir.IntType):
            x = args[0]
            return b.select(b.icmp_signed("<", x, ir.Constant(t, None)), b.neg(x), x)
        if fn == "tanh":
            return self._tanh(b, args[0])
        if fn == "erf":
            return self._erf(b, args[0])
        return b.call(self._decl(fn, t), args)

    def _c(self, t: ir.Type, v: float) -> ir.Value:
        if isinstance(t, ir.VectorType):
            return ir.Constant(t, [ir.Constant(t.element, v)] * t.count)
        return ir.Constant(t, v)

    def _tanh(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        t = x.type
        ax = self.call(b, "abs", [x])
        e = self.call(b, "exp", [b.fmul(ax, self._c(t, -2.0))])
        r = b.fdiv(b.fsub(self._c(t, 1.0), e), b.fadd(self._c(t, 1.0), e))
        return b.call(self._decl("copysign", t), [r, x])

    def _erf(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        t = x.type
        a1, a2, a3, a4, a5, p = 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429, 0.3275911
        ax = self.call(b, "abs", [x])
        k = b.fdiv(self._c(t, 1.0), b.fadd(self._c(t, 1.0), b.fmul(self._c(t, p), ax)))
        poly = self._c(t, a5)
        for a in (a4, a3, a2, a1):
            poly = b.fadd(b.fmul(poly, k), self._c(t, a))
        poly = b.fmul(poly, k)
        e = self.call(b, "exp", [b.fneg(b.fmul(ax, ax))])
        y = b.fsub(self._c(t, 1.0), b.fmul(poly, e))
        return b.call(self._decl("copysign", t), [y, x])


def _elem(t: ir.Type) -> ir.Type:
    return t.element if isinstance(t, ir.VectorType) else t
