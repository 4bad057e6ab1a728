"""IEEE special values in the loop IR: what may be NaN, and numpy's NaN-propagating max/min.

The loop IR's float ``min``/``max`` are numpy's ``minimum``/``maximum`` (``onnx.reference`` computes
Max, Min, Relu, Clip, ReduceMax ... with them): ``maximum(a, b) = (a >= b or isnan(a)) ? a : b``, so a
NaN in either operand is the result (``compiler.codegen.llvm_codegen`` emits that). A fast form that
lets a NaN through only one operand is used where the other is proven not NaN by
:func:`never_nan`; nothing is ever assumed about values read from memory.
"""

from __future__ import annotations

from .ir import Bin, Call, Cast, Expr, Float, Select

FLOATS = ("f32", "f64")


def never_nan(e: Expr) -> bool:
    """True where ``e`` cannot be NaN whatever the inputs: a non-NaN float immediate, an integer or
    bool converted to float, the ``min``/``max``/``abs``/``neg`` of such values, a ``select`` of two
    such values, or ``select(... and v == v, v, c)`` (``v == v`` is false for a NaN ``v``) with ``c``
    such a value. Anything else read from a buffer may be NaN; a non-float expression never is."""
    if e.dtype not in FLOATS:
        return True
    if isinstance(e, Float):
        return e.value == e.value
    if isinstance(e, Cast):
        return e.value.dtype not in FLOATS or never_nan(e.value)
    if isinstance(e, Bin) and e.op in ("min", "max"):
        return never_nan(e.a) and never_nan(e.b)
    if isinstance(e, Call) and e.fn in ("abs", "neg"):
        return never_nan(e.args[0])
    if isinstance(e, Select):
        if not never_nan(e.f):
            return False
        return never_nan(e.t) or _checks_not_nan(e.cond, e.t)
    return False


def _checks_not_nan(cond: Expr, v: Expr) -> bool:
    """``cond`` implies ``v == v`` (a conjunction one of whose terms is ``v == v``)."""
    if isinstance(cond, Bin) and cond.op == "and":
        return _checks_not_nan(cond.a, v) or _checks_not_nan(cond.b, v)
    return isinstance(cond, Bin) and cond.op == "==" and cond.a == v and cond.b == v


def is_nan(v: Expr) -> Expr:
    """``v != v``: true exactly for a NaN (an unordered comparison)."""
    return Bin("!=", v, v)
