"""The one text form of loop IR: TVMScript-like, deterministic, readable.

Example::

    @T.prim_func
    def relu_1(X: T.Buffer((1, 64), "f32", "arena"), Y: T.Buffer((1, 64), "f32", "arena")):
        # schedule: vectorize(i1, 16)
        for i0 in T.serial(1):
            for i1 in T.vectorized(64):
                Y[i0, i1] = T.max(X[i0, i1], T.f32(0.0))

Binary arithmetic prints infix and fully parenthesized below the top level; ``min``/``max``,
``select``, casts and intrinsics print as ``T.`` calls. The same text is the kernel's cache key
(with the target) and what the explorer shows.
"""

from __future__ import annotations

from .ir import (
    Allocate,
    Bin,
    Buffer,
    Call,
    Cast,
    Expr,
    Float,
    For,
    If,
    Int,
    Load,
    PrimFunc,
    Reduce,
    Select,
    Seq,
    Stmt,
    Store,
    Var,
)

ORIGIN_PREFIX = "# origin: "  # the loop-IR comment naming a kernel's ONNX nodes (not part of its cache key)
_INFIX = {"+", "-", "*", "/", "//", "%", "<", "<=", ">", ">=", "==", "!=", "and", "or", "&", "|", "^", "<<", ">>"}


def _float(v: float) -> str:
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return repr(float(v))


def expr_str(e: Expr, top: bool = True) -> str:
    """Text of one expression."""
    if isinstance(e, Int):
        return str(e.value)
    if isinstance(e, Float):
        return f"T.{e.dtype}({_float(e.value)})"
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Bin):
        if e.op in _INFIX:
            s = f"{expr_str(e.a, False)} {e.op} {expr_str(e.b, False)}"
            return s if top else f"({s})"
        return f"T.{e.op}({expr_str(e.a)}, {expr_str(e.b)})"
    if isinstance(e, Select):
        return f"T.Select({expr_str(e.cond)}, {expr_str(e.t)}, {expr_str(e.f)})"
    if isinstance(e, Cast):
        return f"T.Cast(\"{e.to}\", {expr_str(e.value)})"
    if isinstance(e, Call):
        return f"T.{e.fn}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, Load):
        return f"{e.buf.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, Reduce):
        axes = ", ".join(f"{v.name}:{n}" for v, n in e.axes)
        return f"T.reduce_{e.combiner}([{axes}], {expr_str(e.body)}, init={expr_str(e.init)})"
    raise TypeError(type(e))


def _buf_decl(b: Buffer) -> str:
    return f"T.Buffer({tuple(b.shape)!r}, \"{b.dtype}\", \"{b.scope}\")"


def _stmt_lines(s: Stmt, ind: str, out: list[str], where: dict[int, int] | None = None) -> None:
    """Append the lines of ``s`` to ``out``; ``where`` gets id(statement) -> its 1-based line in ``out``."""
    if where is not None and not isinstance(s, Seq):
        where[id(s)] = len(out) + 1
    if isinstance(s, For):
        bound = f", bound={expr_str(s.bound)}" if s.bound is not None else ""  # a run-time count (at most extent)
        out.append(f"{ind}for {s.var.name} in T.{s.kind}({s.extent}{bound}):")
        _stmt_lines(s.body, ind + "    ", out, where)
    elif isinstance(s, Store):
        idx = ", ".join(expr_str(i) for i in s.indices)
        out.append(f"{ind}{s.buf.name}[{idx}] = {expr_str(s.value)}")
    elif isinstance(s, Seq):
        for x in s.stmts:
            _stmt_lines(x, ind, out, where)
    elif isinstance(s, Allocate):
        out.append(f"{ind}{s.buf.name} = T.alloc_buffer({tuple(s.buf.shape)!r}, \"{s.buf.dtype}\", \"{s.buf.scope}\")")
        _stmt_lines(s.body, ind, out, where)
    elif isinstance(s, If):
        out.append(f"{ind}if {expr_str(s.cond)}:")
        _stmt_lines(s.then, ind + "    ", out, where)
    else:
        raise TypeError(type(s))


def print_body(s: Stmt, indent: str = "") -> str:
    out: list[str] = []
    _stmt_lines(s, indent, out)
    return "\n".join(out)


def _header(f: PrimFunc) -> list[str]:
    params = ", ".join(f"{b.name}: {_buf_decl(b)}" for b in f.params)
    lines = ["@T.prim_func", f"def {f.name}({params}):"]
    for bind in f.attrs.get("bindings", []):
        lines.append(f"    # bind: {bind}")
    if f.attrs.get("origin"):
        lines.append(f"    {ORIGIN_PREFIX}{', '.join(f.attrs['origin'])}")
    for step in f.attrs.get("schedule", []):
        lines.append(f"    # schedule: {step}")
    return lines


def print_func(f: PrimFunc) -> str:
    """The kernel's text: signature, what its parameters are bound to, its origin (the ONNX nodes of
    the fused group, ``attrs["origin"]``: every statement computes part of them), its schedule (one
    primitive a line), all as comments, then the body."""
    lines = _header(f)
    _stmt_lines(f.body, "    ", lines)
    return "\n".join(lines) + "\n"


def statement_lines(f: PrimFunc) -> dict[int, int]:
    """id(statement) -> its 1-based line in :func:`print_func`'s text, for every statement of
    ``f.body`` but :class:`Seq` (which prints no line of its own). Keyed by identity: equal
    statements at two places have two lines."""
    lines = _header(f)
    where: dict[int, int] = {}
    _stmt_lines(f.body, "    ", lines, where)
    return where


def print_schedule(f: PrimFunc) -> str:
    """The schedule primitives applied to ``f``, one a line (empty string for none)."""
    return "\n".join(f.attrs.get("schedule", []))
