"""Loop IR: a TensorIR-like program per kernel (buffers, loops, loads, stores, expressions).

A kernel is a :class:`PrimFunc`: parameters are :class:`Buffer` s (dense, row-major, with a dtype,
a static shape and a scope: ``arena`` for values placed by the memory plan, ``input``/``output``
for model inputs and outputs, ``const`` for constants, ``scratch`` for kernel-private memory given
by the runtime, ``local`` for stack/register temporaries made by :class:`Allocate`). The body is a
tree of statements: :class:`For` (kind ``serial``, ``vectorized``, ``unrolled``, ``parallel``; a
serial or parallel loop may run a run-time ``bound`` of its iterations), :class:`Store`, :class:`Seq`,
:class:`Allocate`, :class:`If`. Expressions are immutable and hashable: immediates, loop variables,
binary ops, ``select``, casts, intrinsic calls (``exp``, ``tanh``, ``erf``, ``sqrt`` ...) and loads.
:class:`Reduce` exists only in compute definitions (``compiler.loops.compute``), lowered before codegen.

dtypes are the graph IR's short names: ``f32``, ``f64``, ``i64``, ``i32``, ``i8``, ``u8``,
``bool``. Index arithmetic is ``i64``; ``//`` and ``%`` are floor division and floor modulo (as
Python, matching ONNX index arithmetic on non-negative indices). Model: TVM TensorIR (``tir.For``,
``tir.BufferStore``, ``tir.Select``). The builders :func:`add`, :func:`mul` ... fold constants.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

FLOAT_DTYPES = ("f32", "f64")
LOOP_KINDS = ("serial", "vectorized", "unrolled", "parallel")
CMP_OPS = ("<", "<=", ">", ">=", "==", "!=")
BIN_OPS = ("+", "-", "*", "/", "//", "%", "min", "max", "and", "or", "&", "|", "^", "<<", ">>") + CMP_OPS
INTRINSICS = ("exp", "log", "tanh", "erf", "sqrt", "abs", "floor", "ceil", "round", "pow", "neg", "sin", "cos",
              "fma", "dpbusd", "dpwssd", "dpbf16ps", "bf16lo", "bf16hi", "check")  # dot steps (compiler.codegen.dot); check: runtime.faults
I32_RESULT = ("bf16lo", "bf16hi")  # f32 -> the i32 word half holding its top 16 bits (compiler.codegen.dot)


@dataclass(frozen=True)
class Buffer:
    """A dense row-major tensor a kernel reads or writes. ``shape`` is a tuple of ints."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    scope: str = "arena"

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class Expr:
    """Base of expressions. ``dtype`` is a short dtype name."""

    dtype: str = "i64"

    def __add__(self, o: Any) -> Expr:
        return add(self, o)

    def __sub__(self, o: Any) -> Expr:
        return sub(self, o)

    def __mul__(self, o: Any) -> Expr:
        return mul(self, o)

    def __floordiv__(self, o: Any) -> Expr:
        return floordiv(self, o)

    def __mod__(self, o: Any) -> Expr:
        return floormod(self, o)


@dataclass(frozen=True, eq=True)
class Int(Expr):
    value: int
    dtype: str = "i64"


@dataclass(frozen=True, eq=True)
class Float(Expr):
    value: float
    dtype: str = "f32"


@dataclass(frozen=True, eq=True)
class Var(Expr):
    name: str
    dtype: str = "i64"


@dataclass(frozen=True, eq=True)
class Bin(Expr):
    op: str
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return "bool" if self.op in CMP_OPS or self.op in ("and", "or") else self.a.dtype


@dataclass(frozen=True, eq=True)
class Select(Expr):
    cond: Expr
    t: Expr
    f: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.t.dtype


@dataclass(frozen=True, eq=True)
class Cast(Expr):
    to: str
    value: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.to


@dataclass(frozen=True, eq=True)
class Call(Expr):
    fn: str
    args: tuple[Expr, ...]

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return "i32" if self.fn in I32_RESULT else self.args[0].dtype


@dataclass(frozen=True, eq=True)
class Load(Expr):
    buf: Buffer
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.buf.dtype


@dataclass(frozen=True, eq=True)
class Reduce(Expr):
    """``combiner`` (``sum``/``max``/``min``) of ``body`` over ``axes`` ((var, extent) pairs), from ``init``."""

    combiner: str
    axes: tuple[tuple[Var, int], ...]
    body: Expr
    init: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.body.dtype


class Stmt:  # base of statements
    pass


@dataclass(eq=False)
class For(Stmt):
    var: Var
    extent: int
    body: Stmt
    kind: str = "serial"
    bound: Expr | None = None  # i64, 0 <= bound <= extent at entry: the iterations run (compiler.schedule.batch)

    def __post_init__(self) -> None:
        if self.kind not in LOOP_KINDS:
            raise ValueError(f"unknown loop kind {self.kind}")


@dataclass(eq=False)
class Store(Stmt):
    buf: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(eq=False)
class Seq(Stmt):
    stmts: list[Stmt]


@dataclass(eq=False)
class Allocate(Stmt):
    buf: Buffer
    body: Stmt


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then: Stmt


@dataclass(eq=False)
class PrimFunc:
    """One kernel. ``params`` in call order; ``attrs`` holds ``kind``, ``flops``, ``bytes``, ``schedule``."""

    name: str
    params: list[Buffer]
    body: Stmt
    attrs: dict[str, Any] = field(default_factory=dict)


# builders with constant folding -------------------------------------------------------------
def const(x: Any, dtype: str = "i64") -> Expr:
    if isinstance(x, Expr):
        return x
    if dtype in FLOAT_DTYPES or isinstance(x, float):
        return Float(float(x), dtype if dtype in FLOAT_DTYPES else "f32")
    return Int(int(x), dtype)


def _c(a: Any, like: Expr | None = None) -> Expr:
    return a if isinstance(a, Expr) else const(a, like.dtype if like is not None else "i64")


def binary(op: str, a: Any, b: Any) -> Expr:
    a = _c(a, b if isinstance(b, Expr) else None)
    b = _c(b, a)
    if isinstance(a, Int) and isinstance(b, Int):
        x, y = a.value, b.value
        folded = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y, "min": lambda: min(x, y),
                  "max": lambda: max(x, y), "//": lambda: x // y if y else None, "%": lambda: x % y if y else None}
        if op in folded and (r := folded[op]()) is not None:
            return Int(r, a.dtype)
    if isinstance(b, Int):
        if op in ("+", "-") and b.value == 0 or op in ("*", "//") and b.value == 1:
            return a
        if op == "*" and b.value == 0 or op == "%" and b.value == 1:
            return Int(0, a.dtype)
    if isinstance(a, Int):
        if op == "+" and a.value == 0 or op == "*" and a.value == 1:
            return b
        if op == "*" and a.value == 0:
            return Int(0, b.dtype)
    if op == "+" and isinstance(b, Int) and isinstance(a, Bin) and a.op == "+" and isinstance(a.b, Int):
        return binary("+", a.a, a.b.value + b.value)
    return Bin(op, a, b)


def add(a: Any, b: Any) -> Expr:
    return binary("+", a, b)


def sub(a: Any, b: Any) -> Expr:
    return binary("-", a, b)


def mul(a: Any, b: Any) -> Expr:
    return binary("*", a, b)


def floordiv(a: Any, b: Any) -> Expr:
    return binary("//", a, b)


def floormod(a: Any, b: Any) -> Expr:
    return binary("%", a, b)


def emin(a: Any, b: Any) -> Expr:
    return binary("min", a, b)


def emax(a: Any, b: Any) -> Expr:
    return binary("max", a, b)


def select(c: Expr, t: Expr, f: Expr) -> Expr:
    if isinstance(c, Int):
        return t if c.value else f
    return Select(c, t, f)


def land(a: Expr | None, b: Expr | None) -> Expr | None:
    """Logical and of optional conditions (``None`` means true)."""
    return b if a is None else a if b is None else Bin("and", a, b)


def call(fn: str, *args: Expr) -> Expr:
    if fn not in INTRINSICS:
        raise ValueError(f"unknown intrinsic {fn}")
    return Call(fn, tuple(args))


def flat_index(buf: Buffer, indices: tuple[Expr, ...] | list[Expr]) -> Expr:
    """Row-major element offset of ``indices`` in ``buf``."""
    off: Expr = Int(0)
    for d, i in zip(buf.shape, indices, strict=True):
        off = add(mul(off, d), i)
    return off


def linear_coeff(e: Expr, v: str) -> int | None:
    """Coefficient c when ``e == c * v + (terms free of v)``, else None (a ``//``, ``%``, ``min`` ...
    of ``v``): c = 1 in a flat index means consecutive ``v`` are consecutive elements."""
    if isinstance(e, Var):
        return 1 if e.name == v else 0
    if isinstance(e, Int):
        return 0
    if isinstance(e, Bin) and e.op in ("+", "-"):
        a, b = linear_coeff(e.a, v), linear_coeff(e.b, v)
        if a is None or b is None:
            return None
        return a + b if e.op == "+" else a - b
    if isinstance(e, Bin) and e.op == "*":
        a, b = linear_coeff(e.a, v), linear_coeff(e.b, v)
        if a == 0 and isinstance(e.a, Int) and b is not None:
            return e.a.value * b
        if b == 0 and isinstance(e.b, Int) and a is not None:
            return e.b.value * a
        return 0 if a == 0 and b == 0 else None
    return 0 if v not in free_vars(e) else None


# traversal -------------------------------------------------------------------------------------
def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Bin):
        return (e.a, e.b)
    if isinstance(e, Select):
        return (e.cond, e.t, e.f)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Load):
        return e.indices
    if isinstance(e, Reduce):
        return (e.body, e.init)
    return ()


def free_vars(e: Expr, acc: set[str] | None = None) -> set[str]:
    """Names of loop variables ``e`` reads (a Reduce's own axes excluded)."""
    acc = set() if acc is None else acc
    if isinstance(e, Var):
        acc.add(e.name)
    elif isinstance(e, Reduce):
        inner = free_vars(e.body) | free_vars(e.init)
        acc |= inner - {v.name for v, _ in e.axes}
    else:
        for c in children(e):
            free_vars(c, acc)
    return acc


def map_children(e: Expr, f: Callable[[Expr], Expr], fold: bool = True) -> Expr:
    """``e`` with each child ``c`` (:func:`children`) as ``f(c)``; ``fold``: through binary/select."""
    if isinstance(e, Bin):
        return binary(e.op, f(e.a), f(e.b)) if fold else Bin(e.op, f(e.a), f(e.b))
    if isinstance(e, Select):
        return select(f(e.cond), f(e.t), f(e.f)) if fold else Select(f(e.cond), f(e.t), f(e.f))
    if isinstance(e, Cast):
        return Cast(e.to, f(e.value))
    if isinstance(e, Call):
        return Call(e.fn, tuple(f(a) for a in e.args))
    if isinstance(e, Load):
        return Load(e.buf, tuple(f(i) for i in e.indices))
    if isinstance(e, Reduce):
        return Reduce(e.combiner, e.axes, f(e.body), f(e.init))
    return e


def substitute(e: Expr, mapping: dict[str, Expr]) -> Expr:
    """``e`` with variables replaced by ``mapping`` (name -> expr); folds constants again."""
    if isinstance(e, Var):
        return mapping.get(e.name, e)
    return map_children(e, lambda c: substitute(c, mapping))


def substitute_stmt(s: Stmt, mapping: dict[str, Expr]) -> Stmt:
    if isinstance(s, For):
        return For(s.var, s.extent, substitute_stmt(s.body, mapping), s.kind, s.bound and substitute(s.bound, mapping))
    if isinstance(s, Store):
        return Store(s.buf, tuple(substitute(i, mapping) for i in s.indices), substitute(s.value, mapping))
    if isinstance(s, Seq):
        return Seq([substitute_stmt(x, mapping) for x in s.stmts])
    if isinstance(s, Allocate):
        return Allocate(s.buf, substitute_stmt(s.body, mapping))
    if isinstance(s, If):
        return If(substitute(s.cond, mapping), substitute_stmt(s.then, mapping))
    raise TypeError(type(s))


def walk_stmts(s: Stmt):  # type: ignore[no-untyped-def]
    """Pre-order iterator over statements."""
    yield s
    if isinstance(s, For | Allocate):
        yield from walk_stmts(s.body)
    elif isinstance(s, If):
        yield from walk_stmts(s.then)
    elif isinstance(s, Seq):
        for x in s.stmts:
            yield from walk_stmts(x)
