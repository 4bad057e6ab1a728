"""Schedule primitives on loop IR: split, reorder, vectorize, unroll, tile, fuse.

Each primitive rewrites a :class:`~compiler.loops.ir.PrimFunc` body in place, finds loops by
variable name, and appends its text form to ``func.attrs["schedule"]`` (what the explorer prints
with the kernel). Model: TVM's ``tir.Schedule`` (``split``, ``reorder``, ``vectorize``,
``unroll``, ``tile`` = split + split + reorder). A loop that is not found, or a split factor that does
not divide the extent, raises ``ScheduleError``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..loops.ir import (
    Allocate,
    Bin,
    For,
    If,
    Int,
    PrimFunc,
    Seq,
    Stmt,
    Store,
    Var,
    add,
    mul,
    substitute_stmt,
)


class ScheduleError(ValueError):
    """A primitive cannot apply (unknown loop, bad factor, loops not perfectly nested)."""


def _rewrite(s: Stmt, fn: Callable[[For], Stmt | None]) -> tuple[Stmt, bool]:
    if isinstance(s, For):
        r = fn(s)
        if r is not None:
            return r, True
        body, hit = _rewrite(s.body, fn)
        return For(s.var, s.extent, body, s.kind, s.bound), hit
    if isinstance(s, Seq):
        out, hit = [], False
        for x in s.stmts:
            y, h = _rewrite(x, fn)
            out.append(y)
            hit = hit or h
        return Seq(out), hit
    if isinstance(s, Allocate):
        b, h = _rewrite(s.body, fn)
        return Allocate(s.buf, b), h
    if isinstance(s, If):
        b, h = _rewrite(s.then, fn)
        return If(s.cond, b), h
    return s, False


def _apply(func: PrimFunc, var: str, fn: Callable[[For], Stmt], text: str) -> None:
    body, hit = _rewrite(func.body, lambda f: fn(f) if f.var.name == var else None)
    if not hit:
        raise ScheduleError(f"{func.name}: no loop over {var}")
    func.body = body
    func.attrs.setdefault("schedule", []).append(text)


def split(func: PrimFunc, var: str, factor: int) -> tuple[str, str]:
    """``for v in N`` -> ``for v_o in N/factor: for v_i in factor`` (v = v_o*factor + v_i)."""
    outer, inner = f"{var}_o", f"{var}_i"

    def fn(f: For) -> Stmt:
        if f.bound is not None:
            raise ScheduleError(f"{func.name}: {var} has a run-time bound; it is not split")
        if f.extent % factor:
            raise ScheduleError(f"{func.name}: split factor {factor} does not divide {var}'s extent {f.extent}")
        vo, vi = Var(outer), Var(inner)
        body = substitute_stmt(f.body, {var: add(mul(vo, factor), vi)})
        return For(vo, f.extent // factor, For(vi, factor, body, f.kind), f.kind)

    _apply(func, var, fn, f"split({var}, factor={factor}) -> {outer}, {inner}")
    return outer, inner


def split_guarded(func: PrimFunc, var: str, factor: int) -> tuple[str, str]:
    """Split by a factor that need not divide the extent: ``ceil(N/factor)`` outer iterations, and
    every store to a non-local buffer inside is guarded by ``v_o*factor + v_i < N`` (in a vectorized
    loop the guard becomes a lane mask on the store). Reads in the tail may fall past the row; the
    runtime leaves slack after every buffer and those lanes are never stored."""
    outer, inner = f"{var}_o", f"{var}_i"

    def guard(s: Stmt, cond) -> Stmt:  # type: ignore[no-untyped-def]
        if isinstance(s, Store):
            return s if s.buf.scope == "local" else If(cond, s)
        if isinstance(s, For):
            return For(s.var, s.extent, guard(s.body, cond), s.kind, s.bound)
        if isinstance(s, Seq):
            return Seq([guard(x, cond) for x in s.stmts])
        if isinstance(s, Allocate):
            return Allocate(s.buf, guard(s.body, cond))
        if isinstance(s, If):
            return If(s.cond, guard(s.then, cond))
        return s

    def fn(f: For) -> Stmt:
        if f.bound is not None:
            raise ScheduleError(f"{func.name}: {var} has a run-time bound; it is not split")
        vo, vi = Var(outer), Var(inner)
        idx = add(mul(vo, factor), vi)
        body = substitute_stmt(f.body, {var: idx})
        if f.extent % factor:
            body = guard(body, Bin("<", idx, Int(f.extent)))
        return For(vo, -(-f.extent // factor), For(vi, factor, body, f.kind), f.kind)

    _apply(func, var, fn, f"split({var}, factor={factor}, guarded) -> {outer}, {inner}")
    return outer, inner


def _kind(func: PrimFunc, var: str, kind: str) -> None:
    verb = {"vectorized": "vectorize", "unrolled": "unroll", "parallel": "parallel", "serial": "serial"}[kind]
    _apply(func, var, lambda f: For(f.var, f.extent, f.body, kind, f.bound), f"{verb}({var})")


def vectorize(func: PrimFunc, var: str) -> None:
    """Mark loop ``var`` vectorized: its body is evaluated lane-wise (codegen)."""
    _kind(func, var, "vectorized")


def unroll(func: PrimFunc, var: str) -> None:
    """Mark loop ``var`` unrolled: codegen repeats the body per value."""
    _kind(func, var, "unrolled")


def parallel(func: PrimFunc, var: str) -> None:
    _kind(func, var, "parallel")


def reorder(func: PrimFunc, outer: str, inner: str) -> None:
    """Swap two perfectly nested loops ``outer`` (directly containing) ``inner``."""

    def fn(f: For) -> Stmt:
        if not isinstance(f.body, For) or f.body.var.name != inner:
            raise ScheduleError(f"{func.name}: {inner} is not directly nested in {outer}")
        g = f.body
        return For(g.var, g.extent, For(f.var, f.extent, g.body, f.kind, f.bound), g.kind, g.bound)

    _apply(func, outer, fn, f"reorder({inner}, {outer})")


def tile(func: PrimFunc, a: str, b: str, fa: int, fb: int) -> tuple[str, str, str, str]:
    """2-D tiling of nested loops ``a``, ``b``: a_o, b_o, a_i, b_i."""
    ao, ai = split(func, a, fa)
    bo, bi = split(func, b, fb)
    reorder(func, ai, bo)
    return ao, bo, ai, bi
