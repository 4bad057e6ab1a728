"""A ``select`` whose condition is the same for every lane, emitted as a branch.

In a vectorized body ``select(c, t, f)`` normally evaluates both sides on every lane and picks per lane.
When ``c`` depends only on loop variables outside the vector lane (a Concat along an outer axis:
``select(channel < 24, branch A, select(channel < 48, branch B, ...))``, a padded border row), the choice
is one scalar per vector, so :func:`uniform_select` evaluates only the side taken, behind a conditional
branch (predicted well: the condition changes a few times per loop nest). A Concat of N computed inputs
then costs one input's work per element instead of N. Conditions that read memory (``Where`` on data)
keep the lane-wise ``select``: their branches would be unpredictable.

:func:`counted_loop` emits a serial loop (``for i in 0..extent``) as blocks, a phi and a branch back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir

from ..loops.ir import Expr, Float, Int, Load, Select, Var, children
from .arith import I64, V, splat


def _reads_memory(e: Expr) -> bool:
    return isinstance(e, Load) or any(_reads_memory(c) for c in children(e))


def wants_branch(e: Select, cond: V, vector_lanes: int | None) -> bool:
    """True for a lane-uniform, memory-free condition in a vectorized body with a non-trivial side."""
    if vector_lanes is None or cond.lanes != 1 or _reads_memory(e.cond):
        return False
    return not all(isinstance(x, Int | Float | Var) for x in (e.t, e.f))


def uniform_select(cg: Any, e: Select, cond: V, lanes: int) -> V:
    """``e`` evaluated as ``if cond: t else: f`` with a phi; both sides widened to ``lanes`` in their block.
    ``cg``: the :class:`~compiler.codegen.llvm_codegen.KernelCodegen` (its builder ``b`` and ``_ev``)."""
    b: ir.IRBuilder = cg.b

    def side(x: Expr) -> tuple[ir.Value, ir.Block]:
        v = cg._ev(x)
        val = v.val if v.lanes == lanes else splat(b, v.val, lanes)
        return val, b.block

    with b.if_else(cond.val) as (then, otherwise):
        with then:
            tv, tb = side(e.t)
        with otherwise:
            fv, fb = side(e.f)
    phi = b.phi(tv.type)
    phi.add_incoming(tv, tb)
    phi.add_incoming(fv, fb)
    return V(phi, lanes)


def counted_loop(b: ir.IRBuilder, fn: ir.Function, extent: int | ir.Value, body: Callable[[ir.Value], object],
                 name: str) -> None:
    """``for (i = 0; i < extent; i++) body(i)`` at ``b``'s position in ``fn`` (``i`` named ``name``;
    ``extent`` an int or an ``i64`` value computed before the loop)."""
    pre = b.block
    head = fn.append_basic_block(f"{name}.head")
    loop = fn.append_basic_block(f"{name}.body")
    done = fn.append_basic_block(f"{name}.end")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64, name=name)
    i.add_incoming(I64(0), pre)
    b.cbranch(b.icmp_signed("<", i, I64(extent) if isinstance(extent, int) else extent), loop, done)
    b.position_at_end(loop)
    body(i)
    nxt = b.add(i, I64(1), flags=["nsw", "nuw"])
    i.add_incoming(nxt, b.block)
    b.branch(head)
    b.position_at_end(done)
