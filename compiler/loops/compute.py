"""Compute definitions (TE-like) lowered to loop IR.

A compute definition says what each element of an output buffer is: ``out[i0, ..] = f(i0, ..)``,
where ``f`` builds an :class:`~compiler.loops.ir.Expr` that may contain :class:`Reduce` nodes
(sum/max/min over extra axes). :meth:`Lowering.compute` turns it into a loop nest: one loop per
output axis, and each reduction becomes a local accumulator with its own loop, placed at the
outermost output loop it depends on (loop-invariant placement, as TVM's ``compute_at`` to the
deepest dependent loop). So a softmax row maximum is computed once per row, not per element, and an
elementwise epilogue is applied to the accumulator before the one store: no intermediate buffer.
Identical reductions in one expression share one accumulator.
"""

from __future__ import annotations

from collections.abc import Callable

from .ieee import FLOATS, is_nan, never_nan
from .ir import (
    Allocate,
    Buffer,
    Expr,
    Float,
    For,
    Int,
    Load,
    Reduce,
    Select,
    Seq,
    Stmt,
    Store,
    Var,
    binary,
    children,
    free_vars,
    map_children,
)
from .ir import (
    Bin as _Bin,
)
from .ir import (
    Cast as _Cast,
)

INIT = {"sum": 0.0, "max": float("-inf"), "min": float("inf"), "prod": 1.0}


def reduce_(combiner: str, axes: list[tuple[Var, int]], body: Expr) -> Expr:
    """A reduction expression over ``axes``; init from the combiner (0, -inf, +inf)."""
    return Reduce(combiner, tuple(axes), body, Float(INIT[combiner], body.dtype))


def _combine(combiner: str, acc: Expr, x: Expr) -> Expr:
    return binary({"sum": "+", "max": "max", "min": "min", "prod": "*"}[combiner], acc, x)


class Lowering:
    """Fresh names and the lowering of compute definitions of one kernel."""

    def __init__(self) -> None:
        self._n = 0
        self._acc_deps: dict[str, set[str]] = {}
        self.out_loops: list[list[tuple[str, int]]] = []  # output loop (var, extent) of each compute

    def fresh(self, base: str) -> Var:
        self._n += 1
        return Var(f"{base}{self._n}")

    def axis(self, base: str, extent: int) -> tuple[Var, int]:
        return (self.fresh(base), extent)

    # ---------------------------------------------------------------------------------------
    def compute(self, out: Buffer, fn: Callable[[list[Expr]], Expr], names: str = "i") -> Stmt:
        """The loop nest that stores ``fn(indices)`` into every element of ``out``."""
        levels = [(self.fresh(names), n) for n in out.shape]
        idx: list[Expr] = [v for v, _ in levels]
        self.out_loops.append([(v.name, n) for v, n in levels])
        value = fn(idx)
        levels = _reduction_order(value, levels)
        self._memo: dict[Expr, Expr] = {}  # one accumulator per distinct reduction of this compute
        self._groups: dict[tuple, tuple[Allocate, For]] = {}  # reductions sharing one loop (see _emit)
        value, hoisted = self._place(value, levels)
        return _nest(levels, hoisted, Store(out, tuple(idx), value))

    def _deps(self, e: Expr) -> set[str]:
        out = free_vars(e)
        stack = [e]
        while stack:
            x = stack.pop()
            if isinstance(x, Load) and x.buf.scope == "local":
                out |= self._acc_deps.get(x.buf.name, set())
            stack.extend(children(x))
        return out

    def _place(self, e: Expr, levels: list[tuple[Var, int]]) -> tuple[Expr, dict[int, list[Stmt]]]:
        hoisted: dict[int, list[Stmt]] = {}
        memo = self._memo

        def rw(x: Expr) -> Expr:
            if isinstance(x, Reduce):
                if x in memo:
                    return memo[x]
                memo[x] = self._lower_reduce(x, levels, hoisted)
                return memo[x]
            return map_children(x, rw)

        return rw(e), hoisted

    def _lower_reduce(self, r: Reduce, levels: list[tuple[Var, int]], hoisted: dict[int, list[Stmt]]) -> Expr:
        inner_levels = levels + list(r.axes)
        body, inner = self._place(r.body, inner_levels)
        deps = (self._deps(body) | self._deps(r.init)) - {v.name for v, _ in r.axes}
        pos = {v.name: i for i, (v, _) in enumerate(levels)}
        k = max((pos[d] for d in deps if d in pos), default=-1)
        acc = Buffer(self.fresh("acc").name, r.dtype, (1,), "local")
        ld = Load(acc, (_zero(),))
        allocs = [Allocate(acc, Seq([Store(acc, (_zero(),), r.init)]))]
        stores: list[Stmt] = [Store(acc, (_zero(),), _combine(r.combiner, ld, body))]
        result: Expr = ld
        if r.combiner in ("max", "min") and r.dtype in FLOATS and not never_nan(body):
            # numpy's NaN-propagating max as two independent chains in the one loop: the ordered
            # max (x86 maxps, one instruction) and a NaN flag; the result is NaN where the flag is set
            flag = Buffer(self.fresh("nan").name, "u8", (1,), "local")
            fl = Load(flag, (_zero(),))
            stores = [Store(acc, (_zero(),), Select(_Bin(">" if r.combiner == "max" else "<", body, ld), body, ld)),
                      Store(flag, (_zero(),), _Bin("|", fl, _Cast("u8", is_nan(body))))]
            allocs.append(Allocate(flag, Seq([Store(flag, (_zero(),), Int(0, "u8"))])))
            result = Select(_Bin("!=", fl, Int(0, "u8")), Float(float("nan"), r.dtype), ld)
        for b in allocs:
            self._acc_deps[b.buf.name] = deps
        inside = {j - len(levels): s for j, s in inner.items() if j >= len(levels)}
        for j, s in inner.items():
            if j < len(levels):
                hoisted.setdefault(j, []).extend(s)
        self._emit(hoisted, k, r, allocs, stores, inside, not _reads_local(body) and not _reads_local(r.init))
        return result

    def _emit(self, hoisted: dict[int, list[Stmt]], k: int, r: Reduce, allocs: list[Allocate], stores: list[Stmt],
              inside: dict[int, list[Stmt]], independent: bool) -> None:
        """Place a reduction's accumulators and loop at level ``k``. A reduction over the same axes at
        the same level as an earlier one, neither of whose bodies reads an accumulator (AveragePool's
        sum and count), joins that loop: one pass over the data, each accumulator in its own order."""
        level = hoisted.setdefault(k, [])
        mergeable = independent and not inside and bool(r.axes)
        key = (id(hoisted), k, tuple((v.name, n) for v, n in r.axes))
        group = self._groups.get(key) if mergeable else None
        if group is not None and any(s is group[0] for s in level):
            first, innermost = group
            at = next(i for i, s in enumerate(level) if s is first)
            level[at:at] = allocs
            done = innermost.body.stmts if isinstance(innermost.body, Seq) else [innermost.body]
            innermost.body = Seq(done + stores)
            return
        loop = _nest(list(r.axes), inside, stores[0] if len(stores) == 1 else Seq(list(stores)))
        init = allocs[0].body
        allocs[0].body = Seq([*(init.stmts if isinstance(init, Seq) else [init]), loop])
        level.extend(allocs[1:] + allocs[:1])
        if mergeable and isinstance(loop, For):  # (mergeable: axes and nothing hoisted inside, so a For)
            innermost = loop
            while isinstance(innermost.body, For):
                innermost = innermost.body
            self._groups[key] = (allocs[0], innermost)


def _reads_local(e: Expr) -> bool:
    """``e`` loads from a ``local`` buffer (an accumulator)."""
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Load) and x.buf.scope == "local":
            return True
        stack.extend(children(x))
    return False


def _reduction_order(value: Expr, levels: list[tuple[Var, int]]) -> list[tuple[Var, int]]:
    """Loop order for a compute: output axes that no reduction depends on go innermost, so that a
    reduction (a softmax row's max and sum over axis 1, say) is computed once per value of the axes it
    depends on and reused across the others. The last axis (the contiguous one) keeps its place
    relative to the other dependent axes; it is vectorized wherever it ends up."""
    reds: list[Reduce] = []
    stack = [value]
    while stack:
        x = stack.pop()
        if isinstance(x, Reduce):
            reds.append(x)
            continue
        stack.extend(children(x))
    if not reds:
        return levels
    dep = set().union(*(free_vars(r) for r in reds))
    used = [lv for lv in levels if lv[0].name in dep]
    free = [lv for lv in levels if lv[0].name not in dep]
    if not used or not free or levels[-1][0].name not in dep:
        return levels
    return used + free


def _zero() -> Expr:
    return Int(0)


def _nest(levels: list[tuple[Var, int]], hoisted: dict[int, list[Stmt]], leaf: Stmt) -> Stmt:
    """Loops over ``levels`` around ``leaf``; ``hoisted[j]`` runs at the top of loop j's body
    (``hoisted[-1]`` before the outermost loop). An accumulator's Allocate scopes over the rest."""
    body = leaf
    for j in range(len(levels) - 1, -2, -1):
        body = _scoped(hoisted.get(j, []), body)
        if j >= 0:
            v, n = levels[j]
            body = For(v, n, body)
    return body


def _scoped(pre: list[Stmt], rest: Stmt) -> Stmt:
    """``pre`` then ``rest``, with each Allocate in ``pre`` scoping over everything after it."""
    out = rest
    for s in reversed(pre):
        if isinstance(s, Allocate):
            out = Allocate(s.buf, _seq([s.body, out]))
        else:
            out = _seq([s, out])
    return out


def _seq(xs: list[Stmt]) -> Stmt:
    flat: list[Stmt] = []
    for x in xs:
        flat.extend(x.stmts if isinstance(x, Seq) else [x])
    return flat[0] if len(flat) == 1 else Seq(flat)
