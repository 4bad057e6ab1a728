"""Math intrinsics for loop IR calls, on scalars or vectors.

``log``, ``sqrt``, ``abs``, ``floor``, ``ceil``, ``round`` (to nearest even, as ONNX Round), ``pow``,
``sin``, ``cos``, ``fma`` map to the LLVM intrinsics of the same meaning (``llvm.sqrt.v8f32`` ...),
which LLVM lowers to instructions or libm calls. ``exp``, ``tanh`` and ``erf`` on f32 are expanded
inline as vector polynomials (LLVM would scalarize ``llvm.exp.v16f32`` into 16 ``expf`` calls and has
no ``tanh``/``erf`` intrinsic), evaluated by Horner's rule with ``llvm.fma`` on targets with hardware
FMA. Maximum errors, measured against ``onnx.reference`` (numpy's float32 ``exp``/``tanh``, Python's
``math.erf`` rounded to float32) on 2.4 million float32 points over [-10, 10] and +-[1e-8, 10]
(``tests/compiler/codegen/test_intrinsics.py`` asserts these bounds):

* ``exp``: Cody-Waite range reduction ``x = n ln2 + r``, the Cephes ``expf`` polynomial of degree 5
  in r, scaled by ``2^n`` built in the exponent bits: relative error <= 3e-7 (2 ulp) on [-87.3, 88.7],
  0 below (the IEEE underflow region, where expf returns denormals < 1.2e-38), +inf above, NaN
  propagated. Sigmoid (``1 / (1 + exp(-x))``: relative error <= 5e-7), Softmax, SiLU, Elu use it.
* ``tanh``: the rational minimax approximation of Eigen's ``generic_fast_tanh_float``, ``x P(x^2) /
  Q(x^2)`` (degrees 13 and 6) on x clamped to +-7.9053 (where tanh rounds to +-1), x itself below
  |x| < 4e-4: absolute error <= 5e-7.
* ``erf``: a rational fit ``x P(x^2) / Q(x^2)`` (degrees 13 and 10, least squares on [0, 4], made
  for Prism) on x clamped to +-4 (where erf rounds to +-1): absolute error <= 4e-7.
* GELU (``compiler.loops.ops_elementwise``), Erf form ``0.5 x (1 + erf(x / sqrt 2))`` and Tanh form
  ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, built on these: absolute error <= 5e-7 max(1, |x|).
``narrow.<format>[...]`` (rounding f32 to a narrow float format's grid) is built by
``compiler.codegen.narrow``.
"""

from __future__ import annotations

from llvmlite import ir

from .checks import emit_check
from .dot import emit_dot
from .narrow import emit

_LLVM = {"exp": "llvm.exp", "log": "llvm.log", "sqrt": "llvm.sqrt", "abs": "llvm.fabs", "floor": "llvm.floor",
         "ceil": "llvm.ceil", "round": "llvm.roundeven", "pow": "llvm.pow", "sin": "llvm.sin", "cos": "llvm.cos",
         "fma": "llvm.fma", "copysign": "llvm.copysign"}
_ARITY = {"pow": 2, "fma": 3, "copysign": 2}


def _suffix(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_suffix(t.element)}"
    return "f32" if isinstance(t, ir.FloatType) else "f64" if isinstance(t, ir.DoubleType) else f"i{t.width}"


# erf(x) = x P(x^2) / Q(x^2) on [-4, 4], coefficients from the constant term up
ERF_P = (1.1283791828721301, 0.18464220541502482, 0.05432954517205279, 0.003837554529165254,
         0.00038289704274611187, 4.787274228933852e-06, -1.3694798156604904e-08)
ERF_Q = (1.0, 0.49696844846376675, 0.11380344296544523, 0.015450241626172031, 0.0013094599513795596,
         6.407436226783195e-05)
# tanh(x) = x P(x^2) / Q(x^2) on [-7.9053, 7.9053] (Eigen, generic_fast_tanh_float)
TANH_P = (4.89352455891786e-03, 6.37261928875436e-04, 1.48572235717979e-05, 5.12229709037114e-08,
          -8.60467152213735e-11, 2.00018790482477e-13, -2.76076847742355e-16)
TANH_Q = (4.89352518554385e-03, 2.26843463243900e-03, 1.18534705686654e-04, 1.19825839466702e-06)
TANH_CLAMP = 7.90531110763549805


class Intrinsics:
    """Declares intrinsics in one module on first use; ``fma``: the target has fused multiply-add
    (the polynomials then use ``llvm.fma``)."""

    def __init__(self, module: ir.Module, fma: bool = False, features: frozenset[str] = frozenset()) -> None:
        self.m = module
        self.fma = fma
        self.features = features  # target features without '+' (the integer dot steps pick instructions)

    def _decl(self, fn: str, t: ir.Type) -> ir.Function:
        name = f"{_LLVM[fn]}.{_suffix(t)}"
        if name in self.m.globals:
            return self.m.globals[name]
        return ir.Function(self.m, ir.FunctionType(t, [t] * _ARITY.get(fn, 1)), name)

    def call(self, b: ir.IRBuilder, fn: str, args: list[ir.Value], mask: ir.Value | None = None) -> ir.Value:
        """``fn`` on ``args``; ``mask``: the lanes the store being emitted keeps (a ``check`` counts only those)."""
        t = args[0].type
        if fn == "check":  # a run-time check (compiler.codegen.checks, compiler.runtime.faults)
            return emit_check(self.m, b, args[0], args[1], args[2], mask)
        if fn.startswith("narrow."):  # rounding to a narrow float format (compiler.codegen.narrow)
            return emit(self, b, fn, args[0])
        if fn in ("dpbusd", "dpwssd", "dpbf16ps", "bf16lo", "bf16hi"):  # dot steps (compiler.codegen.dot)
            return emit_dot(self.m, b, fn, args, self.features)
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

    def _mad(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
        """``x * y + z``: one ``llvm.fma`` where the target has FMA, else fmul + fadd."""
        if self.fma:
            return b.call(self._decl("fma", x.type), [x, y, z])
        return b.fadd(b.fmul(x, y), z)

    def _horner(self, b: ir.IRBuilder, t: ir.Value, coeffs: tuple[float, ...]) -> ir.Value:
        """``sum coeffs[i] t^i`` (coefficients from the constant term up) by Horner's rule."""
        ty = t.type
        p = self._c(ty, coeffs[-1])
        for c in reversed(coeffs[:-1]):
            p = self._mad(b, p, t, self._c(ty, c))
        return p

    def _clamp(self, b: ir.IRBuilder, x: ir.Value, hi: float) -> ir.Value:
        t = x.type
        x = b.select(b.fcmp_ordered(">", x, self._c(t, hi)), self._c(t, hi), x)
        return b.select(b.fcmp_ordered("<", x, self._c(t, -hi)), self._c(t, -hi), x)

    def _exp(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        t = x.type
        it = ir.VectorType(ir.IntType(32), t.count) if isinstance(t, ir.VectorType) else ir.IntType(32)

        def ci(v: int) -> ir.Value:
            return ir.Constant(it, [ir.IntType(32)(v)] * t.count) if isinstance(t, ir.VectorType) else ir.Constant(it, v)

        hi, lo = 88.72283935546875, -87.33654022216797
        xc = b.select(b.fcmp_ordered(">", x, self._c(t, hi)), self._c(t, hi), x)
        xc = b.select(b.fcmp_ordered("<", xc, self._c(t, lo)), self._c(t, lo), xc)
        n = self.call(b, "floor", [self._mad(b, xc, self._c(t, 1.44269504088896341), self._c(t, 0.5))])
        r = self._mad(b, n, self._c(t, -0.693359375), xc)
        r = self._mad(b, n, self._c(t, 2.12194440e-4), r)
        p = self._horner(b, r, (5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3,
                                1.3981999507e-3, 1.9875691500e-4))
        y = b.fadd(self._mad(b, p, b.fmul(r, r), r), self._c(t, 1.0))
        ni = b.fptosi(n, it)
        # 2^n as two factors so that n = 128 (x near the top) does not overflow the exponent field
        half = b.ashr(ni, ci(1))
        s1 = b.bitcast(b.shl(b.add(half, ci(127)), ci(23)), t)
        s2 = b.bitcast(b.shl(b.add(b.sub(ni, half), ci(127)), ci(23)), t)
        y = b.fmul(b.fmul(y, s1), s2)
        y = b.select(b.fcmp_ordered("<", x, self._c(t, lo)), self._c(t, 0.0), y)
        y = b.select(b.fcmp_ordered(">", x, self._c(t, hi)), self._c(t, float("inf")), y)
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    def _odd_rational(self, b: ir.IRBuilder, x: ir.Value, clamp: float, pc: tuple[float, ...],
                      qc: tuple[float, ...]) -> ir.Value:
        """``xc P(xc^2) / Q(xc^2)`` with ``xc`` = x clamped to +-clamp, exactly +-1 from the clamp on
        (a function saturating there, whose float32 value is +-1); NaN propagates."""
        xc = self._clamp(b, x, clamp)
        t = b.fmul(xc, xc)
        y = b.fdiv(b.fmul(xc, self._horner(b, t, pc)), self._horner(b, t, qc))
        one = b.call(self._decl("copysign", x.type), [self._c(x.type, 1.0), x])
        y = b.select(b.fcmp_ordered(">=", self.call(b, "abs", [x]), self._c(x.type, clamp)), one, y)
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    def _tanh(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        y = self._odd_rational(b, x, TANH_CLAMP, TANH_P, TANH_Q)
        tiny = b.fcmp_ordered("<", self.call(b, "abs", [x]), self._c(x.type, 0.0004))
        return b.select(tiny, x, y)

    def _erf(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return self._odd_rational(b, x, 4.0, ERF_P, ERF_Q)


def _elem(t: ir.Type) -> ir.Type:
    return t.element if isinstance(t, ir.VectorType) else t
