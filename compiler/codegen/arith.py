"""The value layer of :mod:`compiler.codegen.llvm_codegen`: LLVM types of the loop IR's dtypes, the
lane-counted SSA value, and the instructions of one arithmetic step on operands already evaluated
(``Bin``, ``Cast``, float ``min``/``max``, integer division that cannot trap).

Nothing here reads memory or the loop environment; each function takes the ``ir.IRBuilder`` to emit
with and operands of equal lane count (scalars, or ``<L x T>`` vectors). Semantics: IEEE float
without fast-math flags; float ``min``/``max`` are numpy's ``minimum``/``maximum`` (what
``onnx.reference`` runs); integer ``//``, ``%`` and ``/`` truncate (``sdiv``/``srem``, ``udiv``/``urem``
for unsigned dtypes), a zero divisor dividing by 1 (undefined in ONNX; for an ONNX Div or Mod the
lowering's run-time check fails the run, ``compiler.runtime.faults``).
"""

from __future__ import annotations

from llvmlite import ir

from ..loops.ieee import never_nan
from ..loops.ir import Bin

I64 = ir.IntType(64)
PTR = ir.PointerType()
LTYPE = {"f32": ir.FloatType(), "f64": ir.DoubleType(), "i64": I64, "i32": ir.IntType(32),
         "i8": ir.IntType(8), "u8": ir.IntType(8), "bool": ir.IntType(1), "i16": ir.IntType(16),
         "u16": ir.IntType(16), "u32": ir.IntType(32), "u64": I64}
UNSIGNED = ("bool", "u8", "u16", "u32", "u64")  # compared, divided and widened as unsigned
MTYPE = dict(LTYPE, bool=ir.IntType(8))  # in memory a bool is a byte


def isf(dt: str) -> bool:
    """True for the float dtypes (``f32``, ``f64``)."""
    return dt in ("f32", "f64")


class V:
    """An SSA value with its lane count (1: scalar)."""

    __slots__ = ("val", "lanes")

    def __init__(self, val: ir.Value, lanes: int) -> None:
        self.val, self.lanes = val, lanes


def splat(B: ir.IRBuilder, x: ir.Value, lanes: int) -> ir.Value:
    """``x`` broadcast to ``<lanes x type(x)>`` (insertelement + zero shufflevector)."""
    vt = ir.VectorType(x.type, lanes)
    v = B.insert_element(ir.Constant(vt, ir.Undefined), x, I64(0))
    return B.shuffle_vector(v, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), lanes),
                                                                          [0] * lanes))


def binary(B: ir.IRBuilder, e: Bin, x: ir.Value, y: ir.Value) -> ir.Value:
    """The instructions of ``e.op`` on ``x`` (from ``e.a``) and ``y`` (from ``e.b``), both with the
    same lane count: comparisons give ``i1`` (``!=`` on floats unordered, the others ordered), the
    rest a value of the operands' type. Raises KeyError for an operator the loop IR does not have."""
    op = e.op
    fl = isf(e.a.dtype)
    if op in ("<", "<=", ">", ">=", "==", "!="):
        r = B.fcmp_ordered(op, x, y) if fl else (B.icmp_unsigned if e.a.dtype in UNSIGNED else B.icmp_signed)(
            op, x, y)
        if fl and op == "!=":
            r = B.fcmp_unordered(op, x, y)
    elif op in ("min", "max") and fl:
        r = fminmax(B, op, e, x, y)
    elif op in ("min", "max"):
        cmp = "<" if op == "min" else ">"
        icmp = B.icmp_unsigned if e.a.dtype in UNSIGNED else B.icmp_signed
        r = B.select(icmp(cmp, x, y), x, y)
    elif op == "and":
        r = B.and_(x, y)
    elif op == "or":
        r = B.or_(x, y)
    elif fl:
        r = {"+": B.fadd, "-": B.fsub, "*": B.fmul, "/": B.fdiv}[op](x, y)
    else:
        u = e.a.dtype in UNSIGNED
        if op in ("//", "%", "/") and not isinstance(y, ir.Constant):
            return safe_div(B, x, y, op, u)
        r = {"+": B.add, "-": B.sub, "*": B.mul, "//": B.udiv if u else B.sdiv, "%": B.urem if u else B.srem,
             "/": B.udiv if u else B.sdiv, "&": B.and_, "|": B.or_, "^": B.xor, "<<": B.shl,
             ">>": B.lshr if u else B.ashr}[op](x, y)
    return r


def fminmax(B: ir.IRBuilder, op: str, e: Bin, x: ir.Value, y: ir.Value) -> ir.Value:
    """Float ``min``/``max`` as numpy's ``minimum``/``maximum`` (what ``onnx.reference`` runs for
    Max, Min, Relu, Clip, ReduceMax ...): ``(a >= b or isnan(a)) ? a : b`` for max (``<=`` for
    min), so a NaN in either operand is the result and ``max(-0, 0)`` is ``-0``. Emitted as
    ``select(b > a, b, a)`` (x86 ``maxps b, a``) plus a select on ``isnan(b)``; the NaN select is
    left out only where ``b`` is proven not NaN (:func:`never_nan`: an immediate, an integer cast
    ...), and a proven ``a`` compares once: ``select(a >= b, a, b)``."""
    gt = ">" if op == "max" else "<"
    if never_nan(e.a) and not never_nan(e.b):
        return B.select(B.fcmp_ordered(gt + "=", x, y), x, y)
    r = B.select(B.fcmp_ordered(gt, y, x), y, x)
    return r if never_nan(e.b) else B.select(B.fcmp_unordered("uno", y, y), y, r)


def safe_div(B: ir.IRBuilder, x: ir.Value, y: ir.Value, op: str, unsigned: bool) -> ir.Value:
    """Integer division that cannot trap: a zero divisor (undefined in ONNX; also the garbage tail
    lanes of a masked vector loop) divides by 1 instead, and signed ``x / -1`` is ``-x`` (no
    INT_MIN / -1 overflow trap)."""

    def c(v: int) -> ir.Value:
        t = y.type
        return ir.Constant(t, [t.element(v)] * t.count) if isinstance(t, ir.VectorType) else ir.Constant(t, v)

    d = B.select(B.icmp_unsigned("==", y, c(0)), c(1), y)
    if unsigned:
        return (B.udiv if op != "%" else B.urem)(x, d)
    neg1 = B.icmp_signed("==", d, c(-1))
    d = B.select(neg1, c(1), d)
    if op == "%":
        return B.select(neg1, c(0), B.srem(x, d))
    return B.select(neg1, B.sub(c(0), x), B.sdiv(x, d))


def cast(B: ir.IRBuilder, v: V, src: str, dst: str) -> V:
    """``v`` (dtype ``src``) converted to ``dst``: to ``bool`` is ``!= 0`` (NaN is true), float to
    integer truncates toward zero (``fptosi``/``fptoui``), integers are truncated or sign-/zero-extended
    by the source's signedness."""
    if src == dst:
        return v
    t = LTYPE[dst] if v.lanes == 1 else ir.VectorType(LTYPE[dst], v.lanes)
    if dst == "bool":
        zero = ir.Constant(v.val.type, None)
        return V(B.fcmp_unordered("!=", v.val, zero) if isf(src) else B.icmp_signed("!=", v.val, zero), v.lanes)
    if isf(src) and isf(dst):
        return V(B.fpext(v.val, t) if dst == "f64" else B.fptrunc(v.val, t), v.lanes)
    if isf(src):
        return V(B.fptoui(v.val, t) if dst in UNSIGNED else B.fptosi(v.val, t), v.lanes)
    if isf(dst):
        return V(B.uitofp(v.val, t) if src in UNSIGNED else B.sitofp(v.val, t), v.lanes)
    sw, dw = LTYPE[src].width, LTYPE[dst].width
    if sw == dw:
        return v
    if sw > dw:
        return V(B.trunc(v.val, t), v.lanes)
    return V(B.zext(v.val, t) if src in UNSIGNED else B.sext(v.val, t), v.lanes)
