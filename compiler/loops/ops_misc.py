"""Lowering of further elementwise ops (bitwise, Mod, Round, IsInf/IsNaN, Sign, inverse and
hyperbolic trigonometry, Softsign, Softplus (computed as ``max(x, 0) + log1p(exp(-|x|))``), Shrink, Selu, Celu,
ThresholdedRelu), Clip with runtime bounds, Gelu with
``approximate='tanh'``, Hardmax, TopK, CumProd, LpNormalization, Dropout and BitCast.

Semantics: the ONNX operator specs. ``Mod`` with ``fmod=0`` is floor modulo (the result takes
the divisor's sign, numpy's ``mod``), with ``fmod=1`` C's ``fmod`` (the dividend's sign).
``BitShift``: a shift by the bit width or more, or by a negative amount, gives 0 (-1 for a negative
signed value shifted right), as onnx.reference does (LLVM's shift would be poison). ``atan`` is computed by range reduction to [0, 1] and the minimax polynomial of
Abramowitz & Stegun 4.4.49 (|error| <= 1e-5 rad), and ``asin``/``acos`` from it; ``asinh``,
``acosh``, ``atanh``, ``sinh``, ``cosh`` from ``exp``/``log`` by their definitions. TopK ranks
each element by counting the elements before it in the order (value, then lower index first, as
the spec breaks ties) and picks rank ``r`` for output ``r``: quadratic in the axis length; a NaN
ranks above every number and NaNs tie (as ``onnx.reference``'s numpy ``lexsort`` orders them), so
``largest=1`` puts NaNs first and ``largest=0`` last. ``Sign`` of NaN is NaN (numpy's ``sign``);
``Hardmax`` of a row holding NaN marks its first NaN (numpy's ``argmax``).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import Node
from . import ops_elementwise  # noqa: F401  (registers first: Pow, Softplus, Clip, Gelu, Dropout here replace its)
from .ir import Bin, Cast, Expr, Float, Int, Reduce, add, call, emax, emin, mul, select, sub
from .ops_reduce import red
from .registry import LowerCtx, bad, const_input, divide_message, register
from .tensor import Tensor, broadcast_to, fconst, norm_axis

FLOATS = ("f32", "f64")



def _binary(comb):  # type: ignore[no-untyped-def]
    def low(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
        shape = ctx.out_shape(node)
        a, b = (broadcast_to(t, shape) for t in ins[:2] if t is not None)

        def fn(i: list[Expr]) -> Expr:
            y, d = a[i], b[i]
            r = comb(y, d, node)
            if node.op_type == "Mod" and d.dtype not in FLOATS:  # the spec: undefined; ORT: an error
                r = ctx.checked(node, "divide", r, Bin("==", d, Int(0, d.dtype)), divide_message(node, d.dtype))
            return r
        return [Tensor(shape, ctx.out_dtype(node), fn)]
    return low


def _fmod_float(a: Expr, b: Expr) -> Expr:
    """C fmod: ``a - b * trunc(a / b)``; ``a`` itself when ``b`` is infinite and ``a`` finite."""
    dt = a.dtype
    q = Bin("/", a, b)
    t = select(Bin("<", q, fconst(0, dt)), call("ceil", q), call("floor", q))
    inf = fconst(float("inf"), dt)
    keep_a = Bin("and", Bin("==", call("abs", b), inf), Bin("<", call("abs", a), inf))
    return select(keep_a, a, sub(a, mul(b, t)))


def _mod(a: Expr, b: Expr, node: Node) -> Expr:
    fl = a.dtype in FLOATS
    if node.attr("fmod", 0):
        return _fmod_float(a, b) if fl else Bin("%", a, b)  # srem is C fmod on integers
    if a.dtype in ("u8", "u16", "u32", "u64"):
        return Bin("%", a, b)
    r = _fmod_float(a, b) if fl else Bin("%", a, b)
    z = fconst(0, a.dtype) if fl else Int(0, a.dtype)
    fix = Bin("and", Bin("!=", r, z), Bin("!=", Bin("<", r, z), Bin("<", b, z)))
    return select(fix, add(r, b), r)


def _shift(a: Expr, b: Expr, node: Node) -> Expr:
    """Out-of-range shifts (negative or >= the bit width) give 0, or -1 for a negative signed
    value shifted right (onnx.reference's BitShift)."""
    width = {"u8": 8, "u16": 16, "u32": 32, "u64": 64, "i8": 8, "i16": 16, "i32": 32, "i64": 64}[a.dtype]
    left = node.attr_str("direction", "LEFT") == "LEFT"
    shifted = Bin("<<" if left else ">>", a, b)
    out = Bin(">=", b, Int(width, b.dtype))
    if b.dtype.startswith("i"):
        out = Bin("or", out, Bin("<", b, Int(0, b.dtype)))
    fill: Expr = Int(0, a.dtype)
    if not left and a.dtype.startswith("i"):
        fill = select(Bin("<", a, Int(0, a.dtype)), Int(-1, a.dtype), Int(0, a.dtype))
    return select(out, fill, shifted)


def _pow(a: Expr, b: Expr, node: Node) -> Expr:
    """Pow keeps the base's type; an integer base is raised in double and truncated back. A float
    base with a constant exponent 1, 2, 3 or 4 (``Pow(d, 2)`` of a layer norm, ``x^3`` of GELU's
    tanh form) is multiplied out: x*x is pow's correctly rounded square; x^3 and x^4 differ from
    pow by at most one rounding (1 ulp)."""
    if a.dtype in FLOATS and isinstance(b, Float | Int) and float(b.value) in (1.0, 2.0, 3.0, 4.0):
        sq = mul(a, a)
        return {1.0: a, 2.0: sq, 3.0: mul(sq, a), 4.0: mul(sq, sq)}[float(b.value)]
    if a.dtype in FLOATS:
        return call("pow", a, b if b.dtype == a.dtype else Cast(a.dtype, b))
    return Cast(a.dtype, call("pow", Cast("f64", a), b if b.dtype == "f64" else Cast("f64", b)))


for _name, _comb in {"Pow": _pow, "Xor": lambda a, b, n: Bin("!=", a, b), "BitwiseAnd": lambda a, b, n: Bin("&", a, b),
                     "BitwiseOr": lambda a, b, n: Bin("|", a, b), "BitwiseXor": lambda a, b, n: Bin("^", a, b),
                     "Mod": _mod, "BitShift": _shift}.items():
    register(_name)(_binary(_comb))


def _atan(x: Expr) -> Expr:
    """Abramowitz & Stegun 4.4.49 on [0, 1] with atan(x) = pi/2 - atan(1/x) above 1, odd symmetry."""
    dt = x.dtype
    ax = call("abs", x)
    big = Bin(">", ax, fconst(1, dt))
    t = select(big, Bin("/", fconst(1, dt), ax), ax)
    t2 = mul(t, t)
    poly = fconst(0.0208351, dt)
    for c in (-0.0851330, 0.1801410, -0.3302995, 0.9998660):
        poly = add(mul(poly, t2), fconst(c, dt))
    r = mul(poly, t)
    r = select(big, sub(fconst(math.pi / 2, dt), r), r)
    return select(Bin("<", x, fconst(0, dt)), call("neg", r), r)


def _asin(x: Expr) -> Expr:
    dt = x.dtype
    den = call("sqrt", sub(fconst(1, dt), mul(x, x)))
    at = _atan(Bin("/", x, den))
    return select(Bin(">=", call("abs", x), fconst(1, dt)), mul(fconst(math.pi / 2, dt), Bin("/", x, call("abs", x))), at)


def _unary(fn):  # type: ignore[no-untyped-def]
    def low(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
        x = ins[0]
        assert x is not None
        dt = ctx.out_dtype(node)
        return [Tensor(x.shape, dt, lambda i: fn(x[i], node))]
    return low


def _is_inf(x: Expr, node: Node) -> Expr:
    pos, neg = bool(node.attr("detect_positive", 1)), bool(node.attr("detect_negative", 1))
    c_pos = Bin("==", x, fconst(float("inf"), x.dtype))
    c_neg = Bin("==", x, fconst(float("-inf"), x.dtype))
    if pos and neg:
        return Bin("or", c_pos, c_neg)
    return c_pos if pos else c_neg if neg else Bin("!=", Int(0), Int(0))


def _sign(x: Expr, node: Node) -> Expr:
    z = fconst(0, x.dtype) if x.dtype in FLOATS else Int(0, x.dtype)
    one = fconst(1, x.dtype) if x.dtype in FLOATS else Int(1, x.dtype)
    neg = fconst(-1, x.dtype) if x.dtype in FLOATS else Int(-1, x.dtype)
    out = select(Bin(">", x, z), one, select(Bin("<", x, z), neg, z))
    return select(Bin("!=", x, x), x, out) if x.dtype in FLOATS else out  # Sign(NaN) is NaN (numpy's sign)


def _shrink(x: Expr, node: Node) -> Expr:
    lam, bias = float(node.attr("lambd", 0.5)), float(node.attr("bias", 0.0))
    dt = x.dtype
    if dt not in FLOATS:
        lo, hi = Int(int(-lam), dt), Int(int(lam), dt)
        return select(Bin("<", x, lo), add(x, Int(int(bias), dt)), select(Bin(">", x, hi), sub(x, Int(int(bias), dt)),
                                                                         Int(0, dt)))
    return select(Bin("<", x, fconst(-lam, dt)), add(x, fconst(bias, dt)),
                  select(Bin(">", x, fconst(lam, dt)), sub(x, fconst(bias, dt)), fconst(0, dt)))


def _log1p(e: Expr) -> Expr:
    """log(1 + e) without cancellation for small ``e`` (Kahan: ``log(u) * e / (u - 1)``, ``u = 1 + e``)."""
    u = add(fconst(1, e.dtype), e)
    d = sub(u, fconst(1, e.dtype))
    return select(Bin("==", d, fconst(0, e.dtype)), e, Bin("/", mul(call("log", u), e), d))


def _softplus(x: Expr, node: Node) -> Expr:
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)): no overflow, no cancellation."""
    return add(emax(x, fconst(0, x.dtype)), _log1p(call("exp", call("neg", call("abs", x)))))


_UNARY = {
    "Softplus": _softplus,
    "BitwiseNot": lambda x, n: Bin("^", x, Int(-1 if x.dtype.startswith("i") else (1 << int(x.dtype[1:])) - 1,
                                              x.dtype)),
    "Round": lambda x, n: call("round", x),
    "IsInf": _is_inf,
    "IsNaN": lambda x, n: Bin("!=", x, x),
    "Sign": _sign,
    "Atan": lambda x, n: _atan(x),
    "Asin": lambda x, n: _asin(x),
    "Acos": lambda x, n: sub(fconst(math.pi / 2, x.dtype), _asin(x)),
    "Sinh": lambda x, n: mul(fconst(0.5, x.dtype), sub(call("exp", x), call("exp", call("neg", x)))),
    "Cosh": lambda x, n: mul(fconst(0.5, x.dtype), add(call("exp", x), call("exp", call("neg", x)))),
    "Tan": lambda x, n: Bin("/", call("sin", x), call("cos", x)),
    "Asinh": lambda x, n: call("log", add(x, call("sqrt", add(mul(x, x), fconst(1, x.dtype))))),
    "Acosh": lambda x, n: call("log", add(x, call("sqrt", sub(mul(x, x), fconst(1, x.dtype))))),
    "Atanh": lambda x, n: mul(fconst(0.5, x.dtype), call("log", Bin("/", add(fconst(1, x.dtype), x), sub(fconst(1, x.dtype), x)))),
    "Softsign": lambda x, n: Bin("/", x, add(fconst(1, x.dtype), call("abs", x))),
    "Shrink": _shrink,
    "Selu": lambda x, n: mul(fconst(n.attr("gamma", 1.0507009873554805), x.dtype), select(
        Bin("<=", x, fconst(0, x.dtype)), mul(fconst(n.attr("alpha", 1.6732632423543772), x.dtype),
                                          sub(call("exp", x), fconst(1, x.dtype))), x)),
    "Celu": lambda x, n: add(emax(fconst(0, x.dtype), x), emin(fconst(0, x.dtype), mul(fconst(n.attr("alpha", 1.0), x.dtype), sub(
        call("exp", Bin("/", x, fconst(n.attr("alpha", 1.0), x.dtype))), fconst(1, x.dtype))))),
    "ThresholdedRelu": lambda x, n: select(Bin(">", x, fconst(n.attr("alpha", 1.0), x.dtype)), x, fconst(0, x.dtype)),
}
for _name, _fn in _UNARY.items():
    register(_name)(_unary(_fn))


@register("Clip")
def _clip(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    """Clip with bounds as attributes (before 11) or inputs, constant or not."""
    x = ins[0]
    assert x is not None
    dt = x.dtype
    lo: Tensor | None = None
    hi: Tensor | None = None
    if ctx.opset < 11:
        lo_v, hi_v = node.attr("min", None), node.attr("max", None)
        lo = Tensor((), dt, lambda i: fconst(lo_v, dt)) if lo_v is not None else None
        hi = Tensor((), dt, lambda i: fconst(hi_v, dt)) if hi_v is not None else None
    else:
        lo = ins[1] if len(ins) > 1 else None
        hi = ins[2] if len(ins) > 2 else None

    def fn(i: list[Expr]) -> Expr:
        v = x[i]
        if lo is not None:
            v = emax(v, lo[[]])
        if hi is not None:
            v = emin(v, hi[[]])
        return v
    return [Tensor(x.shape, dt, fn)]


@register("Gelu")
def _gelu(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    approx = node.attr_str("approximate", "none")
    dt = x.dtype
    if approx == "tanh":
        c = math.sqrt(2 / math.pi)
        return [Tensor(x.shape, dt, lambda i: mul(mul(fconst(0.5, dt), x[i]), add(fconst(1, dt), call("tanh", mul(
            fconst(c, dt), add(x[i], mul(fconst(0.044715, dt), mul(x[i], mul(x[i], x[i])))))))))]
    if approx != "none":
        raise bad(node, "approximate", f"approximate={approx!r} is not defined")
    return [Tensor(x.shape, dt, lambda i: mul(mul(fconst(0.5, dt), x[i]),
                                            add(fconst(1, dt), call("erf", mul(x[i], fconst(1 / math.sqrt(2), dt))))))]


def _axis_ops(ctx: LowerCtx, node: Node, x: Tensor, default: int):  # type: ignore[no-untyped-def]
    ax = norm_axis(node, int(node.attr("axis", default)), x.rank)
    return list(range(ax, x.rank)) if ctx.opset < 13 else [ax]


@register("Hardmax", complex_op=True)
def _hardmax(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    axes = _axis_ops(ctx, node, x, 1 if ctx.opset < 13 else -1)
    lw = ctx.lowering
    sizes = [x.shape[a] for a in axes]
    total = int(np.prod(sizes))

    def flat(idx: list[Expr]) -> Expr:
        f: Expr = Int(0)
        for a in axes:
            f = add(mul(f, x.shape[a]), idx[a])
        return f

    def fn(idx: list[Expr]) -> Expr:
        m_ax = {a: lw.axis("rm", x.shape[a]) for a in axes}
        j_ax = {a: lw.axis("rj", x.shape[a]) for a in axes}
        at = lambda mp: x[[mp[k][0] if k in mp else idx[k] for k in range(x.rank)]]  # noqa: E731
        mx = red("max", [m_ax[a] for a in axes], at(m_ax))
        jf = flat([j_ax[k][0] if k in j_ax else idx[k] for k in range(x.rank)])
        xj = at(j_ax)
        hit = Bin("==", xj, mx)
        if x.dtype in FLOATS:  # max is NaN when a NaN is there: the first NaN (numpy's argmax, onnx.reference)
            hit = Bin("or", hit, Bin("!=", xj, xj))
        first = red("min", [j_ax[a] for a in axes], select(hit, jf, Int(total)))
        one, zero = (fconst(1, x.dtype), fconst(0, x.dtype)) if x.dtype in FLOATS else (Int(1, x.dtype), Int(0, x.dtype))
        return select(Bin("==", flat(idx), first), one, zero)
    return [Tensor(x.shape, x.dtype, fn)]


@register("TopK", complex_op=True)
def _topk(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    ax = norm_axis(node, int(node.attr("axis", -1)), x.rank)
    largest = bool(node.attr("largest", 1))
    n = x.shape[ax]
    lw = ctx.lowering
    out_shape = ctx.out_shape(node)

    def index(idx: list[Expr]) -> Expr:
        rj, rk = lw.axis("rj", n), lw.axis("rk", n)
        at = lambda v: x[idx[:ax] + [v] + idx[ax + 1:]]  # noqa: E731
        xj, xk = at(rj[0]), at(rk[0])
        better = Bin(">", xk, xj) if largest else Bin("<", xk, xj)
        same = Bin("==", xk, xj)
        if x.dtype in FLOATS:  # NaN orders above every number, NaNs equal (onnx.reference: numpy's lexsort)
            nan_k, nan_j = Bin("!=", xk, xk), Bin("!=", xj, xj)
            better = Bin("or", better, Bin("and", nan_k, Bin("==", xj, xj)) if largest
                         else Bin("and", nan_j, Bin("==", xk, xk)))
            same = Bin("or", same, Bin("and", nan_k, nan_j))
        before = Bin("or", better, Bin("and", same, Bin("<", rk[0], rj[0])))
        rank = Reduce("sum", (rk,), select(before, Int(1), Int(0)), Int(0))
        return Reduce("min", (rj,), select(Bin("==", rank, idx[ax]), rj[0], Int(n - 1)), Int(n - 1))

    values = Tensor(out_shape, x.dtype, lambda i: x[i[:ax] + [index(i)] + i[ax + 1:]])
    return [values, Tensor(out_shape, "i64", index)]


@register("CumProd", complex_op=True)
def _cumprod(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    ax = norm_axis(node, int(const_input(node, ins[1], "axis").reshape(-1)[0]), x.rank)
    excl, rev = bool(node.attr("exclusive", 0)), bool(node.attr("reverse", 0))
    rk = ctx.lowering.axis("rc", x.shape[ax])
    one = fconst(1, x.dtype) if x.dtype in FLOATS else Int(1, x.dtype)

    def fn(i: list[Expr]) -> Expr:
        j = rk[0]
        op = (">" if excl else ">=") if rev else ("<" if excl else "<=")
        return red("prod", [rk], select(Bin(op, j, i[ax]), x[i[:ax] + [j] + i[ax + 1:]], one))
    return [Tensor(x.shape, x.dtype, fn)]


@register("LpNormalization", complex_op=True)
def _lp_norm(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    ax = norm_axis(node, int(node.attr("axis", -1)), x.rank)
    p = int(node.attr("p", 2))
    if p not in (1, 2):
        raise bad(node, "p", f"p={p}: only 1 and 2 are defined")

    def fn(i: list[Expr]) -> Expr:
        rk = ctx.lowering.axis("rn", x.shape[ax])
        v = x[i[:ax] + [rk[0]] + i[ax + 1:]]
        s = red("sum", [rk], call("abs", v) if p == 1 else mul(v, v))
        norm = s if p == 1 else call("sqrt", s)
        return select(Bin("==", norm, fconst(0, x.dtype)), fconst(0, x.dtype), Bin("/", x[i], norm))
    return [Tensor(x.shape, x.dtype, fn)]


@register("Dropout")
def _dropout(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    """Inference Dropout (or training mode with ratio 0): the output is the input, the mask all true.
    Training mode with a ratio above 0 draws random numbers and is refused."""
    x = ins[0]
    assert x is not None
    ratio = float(node.attr("ratio", 0.5))
    if len(ins) > 1 and ins[1] is not None:
        ratio = float(const_input(node, ins[1], "ratio").reshape(-1)[0])
    training = bool(node.attr("is_test", 1) == 0) if ctx.opset < 7 else False
    if len(ins) > 2 and ins[2] is not None:
        training = bool(const_input(node, ins[2], "training_mode").reshape(-1)[0])
    if training and ratio > 0:
        raise bad(node, "training_mode", "training-mode Dropout with ratio > 0 draws random numbers")
    outs = [Tensor(x.shape, x.dtype, lambda i: x[i])]
    if len(node.outputs) > 1:
        outs.append(Tensor(x.shape, "bool", lambda i: Bin("==", Int(0), Int(0))))
    return outs
