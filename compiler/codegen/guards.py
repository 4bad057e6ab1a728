"""Index clamps that a select's condition makes no-ops (for masked loads in
``compiler.codegen.llvm_codegen``)."""

from __future__ import annotations

from ..loops.ir import Bin, Expr, Int


def unclamp(e: Expr) -> Expr:
    """``e`` without outer ``min``/``max`` with a constant bound."""
    while isinstance(e, Bin) and e.op in ("min", "max") and isinstance(e.b, Int):
        e = e.a
    return e


def conjuncts(c: Expr) -> set[Expr]:
    if isinstance(c, Bin) and c.op == "and":
        return conjuncts(c.a) | conjuncts(c.b)
    return {c}


def guarded(index: Expr, conds: set[Expr]) -> bool:
    """True when every clamp on ``index`` is implied by the conjuncts: ``max(u, lo)`` needs
    ``u >= lo`` and ``min(u, hi)`` needs ``u < hi + 1`` (so the clamp is a no-op where the
    condition holds and the unclamped address is in bounds)."""
    e = index
    while isinstance(e, Bin) and e.op in ("min", "max") and isinstance(e.b, Int):
        u = unclamp(e.a)
        need = Bin(">=", u, Int(e.b.value)) if e.op == "max" else Bin("<", u, Int(e.b.value + 1))
        if need not in conds:
            return False
        e = e.a
    return True
