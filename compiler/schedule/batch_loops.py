"""The batch loops of any kernel bounded by the run-time batch size, where that is proven (issue 13 item 3).

``compiler.schedule.batch`` lets a GEMM-class schedule bound its own row loops by ``N``. Every other
kernel (Conv on any schedule, pooling, normalization, row kernels, elementwise) lowered at the range's
maximum ``N = hi`` already has the batch in its loops: an outer ``for n in 0..hi`` (the Conv
schedules), or a loop fused over samples and rows (``for r in 0..hi*C``: GlobalAveragePool, Softmax
rows). :func:`bound_batch_loops` finds those loops in the finished kernel and gives each a run-time
``bound`` of ``N * (extent / hi)`` iterations, so one call of the kernel computes ``N`` samples with
the schedule made for one sample (no per-sample relaunch, the samples inside the kernel's own loops).

It does so only where it proves it correct, from the loop IR alone (anything it cannot read is a
refusal, and the kernel keeps its per-sample call):

* every load and store of a per-sample buffer (``S`` elements per sample at ``N = hi``) lies in such
  a loop ``L`` (extent ``E = hi * per``, serial or parallel, no bound yet) whose variable ``v`` enters
  the access's row-major offset linearly with coefficient ``c = S / per``, and the rest of the offset
  (``offset - c*v``) is, by interval arithmetic over the extents of the loops around it (the clamps,
  selects, ``//`` and ``%`` the schedules emit included), within ``[0, c)``: iteration ``v`` touches
  only sample ``v // per``, so the iterations run (``v < N * per``) touch exactly samples ``< N``, and
  samples at or past ``N`` (not in the caller's buffers) are never read or written;
* only the outermost such loops are bounded, and each access inside one is checked against it;
* a scratch or ``local`` buffer used inside a bounded loop is used nowhere outside it (the skipped
  iterations leave nothing that code after the loop reads).

Skipping a suffix of a loop's iterations is then exact: samples are independent (the caller checked
that no node computes across samples: ``compiler.frontend.batch_split``), each kept iteration does
what it did at ``N = hi``, and a serial loop's kept iterations never read what a skipped (later) one
writes. Results are bitwise those of the ``N = hi`` kernel for the samples computed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..loops.ir import (
    CMP_OPS,
    Allocate,
    Bin,
    Call,
    Cast,
    Expr,
    For,
    If,
    Int,
    Load,
    Reduce,
    Select,
    Seq,
    Stmt,
    Store,
    Var,
    add,
    binary,
    children,
    free_vars,
    linear_coeff,
    mul,
    select,
    substitute,
    substitute_stmt,
    walk_stmts,
)
from ..loops.printer import expr_str
from .batch import BATCH_N, BatchDim, mark
from .parallel import MIN_TASK_US, _loops, estimated_us

Span = tuple[int, int]  # inclusive integer interval
Facts = Mapping[Expr, Span]  # intervals the guards give some subexpressions


def conjuncts(c: Expr) -> frozenset[Expr]:
    """The terms of ``c``'s top-level ``and`` chain."""
    if isinstance(c, Bin) and c.op == "and":
        return conjuncts(c.a) | conjuncts(c.b)
    return frozenset({c})


def facts_of(conds: frozenset[Expr]) -> dict[Expr, Span]:
    """``{e: interval}`` from guard terms ``e < k``, ``e <= k``, ``e >= k``, ``e > k`` (``k`` an integer)."""
    out: dict[Expr, Span] = {}
    inf = 1 << 62
    for c in conds:
        if isinstance(c, Bin) and isinstance(c.b, Int) and c.op in ("<", "<=", ">=", ">"):
            k = c.b.value
            lo, hi = {"<": (-inf, k - 1), "<=": (-inf, k), ">=": (k, inf), ">": (k + 1, inf)}[c.op]
            was = out.get(c.a, (-inf, inf))
            out[c.a] = (max(was[0], lo), min(was[1], hi))
    return out


def span(e: Expr, env: Mapping[str, Span], facts: Facts | None = None) -> Span | None:
    """The interval of the integer expression ``e`` with each loop variable in ``env``'s interval
    (narrowed where ``facts`` bound a subexpression; a load of a constant buffer is within its
    values' interval when ``env`` holds one for ``"@" + its name``, the ``check`` intrinsic is its
    checked value, ``abs`` the absolute values of its argument's interval), or None when ``e`` reads
    other memory, calls another intrinsic or uses a variable ``env`` lacks."""
    got = _span(e, env, facts or {})
    fact = (facts or {}).get(e)
    if got is None or fact is None:
        return got
    return max(got[0], fact[0]), min(got[1], fact[1])


def _span(e: Expr, env: Mapping[str, Span], facts: Facts) -> Span | None:
    if isinstance(e, Int):
        return e.value, e.value
    if isinstance(e, Var):
        return env.get(e.name)
    if isinstance(e, Cast):
        return span(e.value, env, facts)
    if isinstance(e, Load):
        return env.get("@" + e.buf.name) if e.buf.scope == "const" else None
    if isinstance(e, Call) and e.fn == "abs" and len(e.args) == 1:  # reflect Pad's index
        a = span(e.args[0], env, facts)
        if a is None:
            return None
        return (0 if a[0] <= 0 <= a[1] else min(abs(a[0]), abs(a[1]))), max(abs(a[0]), abs(a[1]))
    if isinstance(e, Call):
        return span(e.args[0], env, facts) if e.fn == "check" else None
    if isinstance(e, Select):
        t, f = span(e.t, env, facts), span(e.f, env, facts)
        return None if t is None or f is None else (min(t[0], f[0]), max(t[1], f[1]))
    if not isinstance(e, Bin):
        return None
    if e.op in CMP_OPS or e.op in ("and", "or"):
        return 0, 1
    a, b = span(e.a, env, facts), span(e.b, env, facts)
    if a is None or b is None:
        return None
    if e.op == "+":
        return a[0] + b[0], a[1] + b[1]
    if e.op == "-":
        return a[0] - b[1], a[1] - b[0]
    if e.op == "*":
        ps = [x * y for x in a for y in b]
        return min(ps), max(ps)
    if e.op == "min":
        return min(a[0], b[0]), min(a[1], b[1])
    if e.op == "max":
        return max(a[0], b[0]), max(a[1], b[1])
    if e.op in ("//", "%") and b[0] == b[1] and b[0] > 0:
        d = b[0]
        if e.op == "//":
            return a[0] // d, a[1] // d
        return (a[0] % d, a[1] % d) if a[0] // d == a[1] // d else (0, d - 1)
    return None


@dataclass
class _Access:
    buf: str
    shape: tuple[int, ...]
    indices: tuple[Expr, ...]
    path: tuple[For, ...]  # enclosing loops, outermost first
    env: dict[str, Span]  # every loop variable in scope (loops and Reduce axes)
    facts: dict[Expr, Span]  # from the guards around it
    strict: bool  # a store, or a load whose value is an address or a trip count


class _Walk:
    """Every load and store of a kernel body with its loops and guards (:class:`_Access`)."""

    def __init__(self) -> None:
        self.out: list[_Access] = []

    def expr(self, e: Expr, path: tuple[For, ...], env: dict[str, Span], conds: frozenset[Expr], strict: bool) -> None:
        if isinstance(e, Reduce):
            env = dict(env, **{v.name: (0, n - 1) for v, n in e.axes})
        if isinstance(e, Load):
            self.out.append(_Access(e.buf.name, e.buf.shape, e.indices, path, env, facts_of(conds), strict))
            for i in e.indices:
                self.expr(i, path, env, conds, True)
        elif isinstance(e, Select):
            self.expr(e.cond, path, env, conds, strict)
            self.expr(e.t, path, env, conds | conjuncts(e.cond), strict)
            self.expr(e.f, path, env, conds, strict)
        else:
            for c in children(e):
                self.expr(c, path, env, conds, strict)

    def stmt(self, s: Stmt, path: tuple[For, ...] = (), env: dict[str, Span] | None = None,
             conds: frozenset[Expr] = frozenset()) -> None:
        env = env or {}
        if isinstance(s, For):
            if s.bound is not None:
                self.expr(s.bound, path, env, conds, True)
            self.stmt(s.body, (*path, s), dict(env, **{s.var.name: (0, s.extent - 1)}), conds)
        elif isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x, path, env, conds)
        elif isinstance(s, Allocate):
            self.stmt(s.body, path, env, conds)
        elif isinstance(s, If):
            self.expr(s.cond, path, env, conds, False)
            self.stmt(s.then, path, env, conds | conjuncts(s.cond))
        elif isinstance(s, Store):
            self.out.append(_Access(s.buf.name, s.buf.shape, s.indices, path, env, facts_of(conds), True))
            for i in s.indices:
                self.expr(i, path, env, conds, True)
            self.expr(s.value, path, env, conds, False)


_Q, _U = "__sample", "__within"  # v = per * sample + within


def _split(e: Expr, v: str, per: int) -> Expr | None:
    """``e`` with loop variable ``v`` written ``per * sample + within`` (``within < per``), its ``//``
    and ``%`` by a constant ``k`` simplified where ``k`` divides the sample's coefficient
    (``(c*q + R) // k = (c/k)*q + R // k``, ``(c*q + R) % k = R % k``); None where ``v`` is used in a
    way this cannot follow (memory reads, intrinsics)."""
    if v not in free_vars(e):
        return e
    if isinstance(e, Var):
        return add(mul(Var(_Q), per), Var(_U))
    if isinstance(e, Cast):
        x = _split(e.value, v, per)
        return None if x is None else Cast(e.to, x)
    if isinstance(e, Select):
        c, t, f = (_split(x, v, per) for x in (e.cond, e.t, e.f))
        return None if c is None or t is None or f is None else select(c, t, f)
    if not isinstance(e, Bin):
        return None
    a, b = _split(e.a, v, per), _split(e.b, v, per)
    if a is None or b is None:
        return None
    if e.op in ("//", "%") and isinstance(b, Int) and b.value > 0:
        k = linear_coeff(a, _Q)
        if k is None or k % b.value:
            return None
        rest = binary(e.op, substitute(a, {_Q: Int(0)}), b)
        return add(mul(Var(_Q), k // b.value), rest) if e.op == "//" else rest
    return binary(e.op, a, b)


def _confines(loop: For, acc: _Access, sample: int, hi: int) -> bool:
    """Whether iteration ``v = per * q + u`` of ``loop`` (extent ``hi * per``) makes ``acc`` touch only
    sample ``q``: the row-major offset's coefficient of ``q`` is ``sample`` and the rest is within
    ``[0, sample)`` (a strict access), or within ``[-sample, 2 * sample)`` for a load whose value is
    data (module docstring)."""
    if loop.bound is not None or loop.kind not in ("serial", "parallel") or loop.extent % hi \
            or len(acc.indices) != len(acc.shape):
        return False
    per = loop.extent // hi
    env = {k: v for k, v in acc.env.items() if k != loop.var.name} | {_U: (0, per - 1)}
    lo = top = coeff = 0
    stride = 1
    for i, d in reversed(list(zip(acc.indices, acc.shape, strict=True))):
        x = _split(i, loop.var.name, per)
        c = None if x is None else linear_coeff(x, _Q)
        got = None if x is None or c is None else span(substitute(x, {_Q: Int(0)}), env, acc.facts)
        if c is None or got is None:
            return False
        lo, top, coeff = lo + stride * got[0], top + stride * got[1], coeff + stride * c
        stride *= d
    if acc.strict:
        return coeff == sample and 0 <= lo and top < sample
    return coeff == sample and -sample <= lo and top < 2 * sample


def bound_batch_loops(lk: Any, samples: Mapping[str, int], private: set[str], dim: BatchDim) -> str | None:
    """Bound the batch loops of ``lk`` (a LoweredKernel lowered at ``N = dim.hi``) by the run-time
    ``N`` in place, and mark it (``compiler.schedule.batch.mark``: a schedule line, the ``N``
    parameter); ``samples`` {buffer name: elements per sample} of its per-sample parameters,
    ``private`` the names of its scratch parameters. Returns None when done, else why not (nothing
    changed): the module docstring's conditions."""
    body = lk.func.body
    walk = _Walk()
    walk.stmt(body, env={"@" + a.buffer.name: (int(a.data.min()), int(a.data.max())) for a in lk.args
                         if a.kind == "const" and a.data is not None and a.data.size and a.data.dtype.kind in "iub"})
    accs = walk.out
    per = [a for a in accs if a.buf in samples]
    if not per:
        return "it reads or writes no per-sample buffer"
    chosen: dict[int, For] = {}
    for a in per:  # each access's outermost loop over samples
        loop = next((L for L in a.path if _confines(L, a, samples[a.buf], dim.hi)), None)
        if loop is None:
            return f"an access to {a.buf} is in no loop over samples alone"
        chosen[id(loop)] = loop
    outer = {k: L for k, L in chosen.items() if not any(id(M) in chosen for M in _around(body, L))}
    for a in per:
        inside = [L for L in a.path if id(L) in outer]
        if len(inside) != 1 or not _confines(inside[0], a, samples[a.buf], dim.hi):
            return f"an access to {a.buf} is not confined to one sample by its batch loop"
    inner = {id(st) for L in outer.values() for st in walk_stmts(L.body) if isinstance(st, Allocate)}
    allocs = [st for st in walk_stmts(body) if isinstance(st, Allocate)]
    scoped = {st.buf.name for st in allocs if id(st) in inner} - {st.buf.name for st in allocs if id(st) not in inner}
    for name in ({a.buf for a in accs} - set(samples) - scoped) & ({st.buf.name for st in allocs} | private):
        homes = {next((id(L) for L in a.path if id(L) in outer), None) for a in accs if a.buf == name}
        if len(homes) > 1:
            return f"the temporary {name} is used inside and outside its batch loop"
    for L in outer.values():
        L.bound = mul(dim.n(), L.extent // dim.hi)
    lk.func.attrs["batch_loops"] = [L.var.name for L in outer.values()]
    for L in outer.values():
        _parallel_from(lk, L, dim)
    mark(lk, ", ".join(f"{L.var.name} runs {expr_str(L.bound)} of its {L.extent} iterations"
                       for L in outer.values() if L.bound is not None) + " (samples < N, each kept iteration one sample's)")
    if not any(p.name == BATCH_N.name for p in lk.func.params):  # mark added the parameter after finish
        lk.func.params.append(BATCH_N)
    return None


def _parallel_from(lk: Any, loop: For, dim: BatchDim) -> None:
    """A bounded ``parallel`` loop whose launch carries less than the parallel threshold at small ``N``
    (``compiler.schedule.parallel``: it was judged at ``N = hi``, where a launch carries ``hi`` samples'
    work) runs serially below the ``N`` where a launch reaches it: ``if N >= m: loop (parallel)``, ``if
    N < m: a serial copy``. The threshold is then decided at run time from ``N``, not at the maximum."""
    if loop.kind != "parallel":
        return
    launches = next((outer for f, outer in _loops(lk.func.body) if f is loop), 1)
    per_sample = estimated_us(lk.func) / max(launches, 1) / dim.hi  # µs per launch per sample
    m = next((n for n in range(dim.lo, dim.hi + 1) if n * per_sample >= MIN_TASK_US), None)
    if m is None or m <= dim.lo:  # not even at hi (a tuned grain kept it parallel), or at every N
        return
    serial = For(loop.var, loop.extent, substitute_stmt(loop.body, {}), "serial", loop.bound)
    split = Seq([If(Bin(">=", dim.n(), Int(m)), For(loop.var, loop.extent, loop.body, "parallel", loop.bound)),
                 If(Bin("<", dim.n(), Int(m)), serial)])
    lk.func.body = _replace(lk.func.body, loop, split)
    lk.func.attrs.setdefault("schedule", []).append(
        f"# batch: {loop.var.name} parallel from N={m} (~{per_sample:.3g} us of work per sample per launch, "
        f"{MIN_TASK_US:g} us threshold), serial below")


def _replace(s: Stmt, target: For, new: Stmt) -> Stmt:
    """``s`` with the statement ``target`` (by identity) replaced by ``new``, in place where it can."""
    if s is target:
        return new
    if isinstance(s, For | Allocate):
        s.body = _replace(s.body, target, new)
    elif isinstance(s, If):
        s.then = _replace(s.then, target, new)
    elif isinstance(s, Seq):
        s.stmts = [_replace(x, target, new) for x in s.stmts]
    return s


def _around(s: Stmt, target: For, path: tuple[For, ...] = ()) -> tuple[For, ...]:
    """The loops strictly around ``target`` in ``s``."""
    if s is target:
        return path
    inner: list[Stmt] = []
    if isinstance(s, For):
        path, inner = (*path, s), [s.body]
    elif isinstance(s, Seq):
        inner = list(s.stmts)
    elif isinstance(s, Allocate | If):
        inner = [s.body if isinstance(s, Allocate) else s.then]
    for x in inner:
        got = _around(x, target, path)
        if got or x is target:
            return got
    return ()


__all__ = ["bound_batch_loops", "span"]
