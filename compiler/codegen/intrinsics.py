"""Math intrinsics for loop IR calls, on scalars or vectors.

``exp``, ``log``, ``sqrt``, ``abs``, ``floor``, ``ceil``, ``round`` (to nearest even, as ONNX
Round), ``pow``, ``sin``, ``cos``, ``fma`` map to the LLVM intrinsics of the same meaning
(``llvm.exp.v16f32`` ...), which LLVM lowers to instructions or libm calls. ``tanh`` and ``erf``
have no LLVM intrinsic and are expanded here: ``tanh(x) = copysign((1 - e) / (1 + e), x)`` with
``e = exp(-2|x|)`` (exact up to rounding), ``erf`` by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7).
``exp`` on f32 is expanded inline rather than called per lane from libm (LLVM scalarizes
``llvm.exp.v16f32`` into 16 ``expf`` calls): Cody-Waite range reduction ``x = n ln2 + r`` and the
Cephes ``expf`` polynomial, scaled by ``2^n`` built in the exponent bits; relative error within
2 ulp on [-87.3, 88.7], 0 below (IEEE underflow region, where expf returns denormals < 1.2e-38), +inf
above, NaN propagated. Sigmoid, Softmax, SiLU, Elu, tanh and erf use it.
``narrow.<format>[...]`` (rounding f32 to a narrow float format's grid) is built by
``compiler.codegen.narrow``.
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
        if fn.startswith("narrow."):  # rounding to a narrow float format (compiler.codegen.narrow)
            from .narrow import emit

            return emit(self, b, fn, args[0])
        if fn == "neg":
            return b.fneg(args[0]) if not isinstance(_elem(t), ir.IntType) else b.neg(args[0])
        if fn == "abs" and isinstance(_elem(t), ir.IntType):
            x = args[0]
            return b.select(b.icmp_signed("<", x, ir.Constant(t, None)), b.neg(x), x)
        if fn in ("tanh", "erf") or fn == "exp" and isinstance(_elem(t), ir.FloatType):
            return b.call(self._helper(fn, t), [args[0]])
        return b.call(self._decl(fn, t), args)

    def _helper(self, fn: str, t: ir.Type) -> ir.Function:
        """The expansion of ``fn`` as one internal ``alwaysinline`` function per type and module: built
        once in Python, inlined by LLVM's optimizer at every call."""
        name = f"prism.{fn}.{_suffix(t)}"
        if name in self.m.globals:
            return self.m.globals[name]
        f = ir.Function(self.m, ir.FunctionType(t, [t]), name)
        f.linkage = "internal"
        f.attributes.add("alwaysinline")
        hb = ir.IRBuilder(f.append_basic_block("entry"))
        hb.ret({"exp": self._exp, "tanh": self._tanh, "erf": self._erf}[fn](hb, f.args[0]))
        return f

    def _c(self, t: ir.Type, v: float) -> ir.Value:
        if isinstance(t, ir.VectorType):
            return ir.Constant(t, [ir.Constant(t.element, v)] * t.count)
        return ir.Constant(t, v)

    def _exp(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        t = x.type
        it = ir.VectorType(ir.IntType(32), t.count) if isinstance(t, ir.VectorType) else ir.IntType(32)

        def ci(v: int) -> ir.Value:
            return ir.Constant(it, [ir.IntType(32)(v)] * t.count) if isinstance(t, ir.VectorType) else ir.Constant(it, v)

        hi, lo = 88.72283935546875, -87.33654022216797
        xc = b.select(b.fcmp_ordered(">", x, self._c(t, hi)), self._c(t, hi), x)
        xc = b.select(b.fcmp_ordered("<", xc, self._c(t, lo)), self._c(t, lo), xc)
        n = self.call(b, "floor", [b.fadd(b.fmul(xc, self._c(t, 1.44269504088896341)), self._c(t, 0.5))])
        r = b.fsub(xc, b.fmul(n, self._c(t, 0.693359375)))
        r = b.fsub(r, b.fmul(n, self._c(t, -2.12194440e-4)))
        p = self._c(t, 1.9875691500e-4)
        for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
            p = b.fadd(b.fmul(p, r), self._c(t, c))
        y = b.fadd(b.fadd(b.fmul(p, b.fmul(r, r)), r), self._c(t, 1.0))
        ni = b.fptosi(n, it)
        # 2^n as two factors so that n = 128 (x near the top) does not overflow the exponent field
        half = b.ashr(ni, ci(1))
        s1 = b.bitcast(b.shl(b.add(half, ci(127)), ci(23)), t)
        s2 = b.bitcast(b.shl(b.add(b.sub(ni, half), ci(127)), ci(23)), t)
        y = b.fmul(b.fmul(y, s1), s2)
        y = b.select(b.fcmp_ordered("<", x, self._c(t, lo)), self._c(t, 0.0), y)
        y = b.select(b.fcmp_ordered(">", x, self._c(t, hi)), self._c(t, float("inf")), y)
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    def _tanh(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        t = x.type
        ax = self.call(b, "abs", [x])
        e = self._exp(b, b.fmul(ax, self._c(t, -2.0)))
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
        e = self._exp(b, b.fneg(b.fmul(ax, ax)))
        y = b.fsub(self._c(t, 1.0), b.fmul(poly, e))
        return b.call(self._decl("copysign", t), [y, x])


def _elem(t: ir.Type) -> ir.Type:
    return t.element if isinstance(t, ir.VectorType) else t
