"""Row kernels: Softmax, LogSoftmax and LayerNormalization as one loop nest per row of the reduced
axes, with the row statistics in vector registers.

A row is the ``N`` elements over the reduced axes (Softmax/LogSoftmax ``axis`` to the end before
opset 13, the last axis from 13 on; LayerNormalization ``axis`` to the end); rows are independent,
and the row loop is marked ``parallel``. Each row is swept with vectors of W lanes (the target's
f32 width; the last ``N mod W`` elements as one shorter vector, so no lane reads past the row):

* Softmax: sweep 1 keeps W running maxima, reduced across lanes to the row max ``m``; sweep 2 stores
  ``e = exp(x - m)`` into the output and keeps W partial sums; sweep 3 scales the row by ``1 / sum``.
  LogSoftmax: sweep 2 only sums, sweep 3 stores ``x - m - log(sum)``.
* LayerNormalization (the op, or the decomposed form ``fuse-layer-norm`` recognised): sweep 1 sums
  the row (mean), sweep 2 sums ``(x - mean)^2`` (variance: two-pass, as the ONNX function body
  computes it up to the order of the sums), sweep 3 stores ``(x - mean) * (1 / sqrt(var + epsilon))``
  through the epilogue (``* scale + bias`` and any elementwise op fused after it).

The knob ``row_vectors`` (``compiler.schedule.knobs``; default 1) widens the sweeps and the
partial statistics to 2 or 4 vectors of W lanes: as many independent chains of adds (or maxima)
per row, the rest of the row as one shorter vector.

Semantics: the ONNX operator specs. The partial sums are per lane and then added lane by lane: the
summation order differs from the sequential one (a reassociation), within float rounding (the
tests compare with ONNX Runtime at rtol 1e-5). Everything the group computes before the op (a fused
scale or mask) is re-evaluated per sweep from its inputs; anything after it is the epilogue of the
last sweep. Returns None where a group does not fit (the default schedule then applies).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..ir import FusedGroup
from ..loops.ir import (
    Allocate,
    Bin,
    Buffer,
    Expr,
    Float,
    For,
    Int,
    Load,
    Seq,
    Stmt,
    Store,
    Var,
    add,
    call,
    emax,
    mul,
    sub,
    substitute,
)
from ..loops.lower import LOWERINGS, LoweredKernel, lower_group
from ..loops.registry import LowerCtx
from ..loops.tensor import Tensor, broadcast_to, unravel
from ..targets import Target
from .gemm import VIRTUAL, epilogue, finish, replace_anchor
from .knobs import choose

ROW_OPS = ("Softmax", "LogSoftmax", "LayerNormalization")
ROW_VECTORS = (1, 2, 4)  # choices of the knob row_vectors: vectors of W lanes per sweep step
Sweep = Callable[[Expr, Var], Stmt]  # (column index j, lane var) -> statement of the vectorized body


def sweep(n_cols: int, width: int, body: Sweep, tag: str) -> Stmt:
    """Vectorized loops over the columns of a row: ``N // W`` vectors of W lanes, then one vector of
    ``N mod W`` lanes. ``body(j, lane)`` gets the column index and the lane variable."""
    full, rest = divmod(n_cols, width)
    vo, vl = Var(f"j{tag}"), Var(f"l{tag}")
    parts: list[Stmt] = []
    if full:
        parts.append(For(vo, full, For(vl, width, body(add(mul(vo, width), vl), vl), "vectorized")))
    if rest:
        parts.append(For(vl, rest, body(add(full * width, vl), vl), "vectorized"))
    return parts[0] if len(parts) == 1 else Seq(parts)


def _lanes(width: int, buf: Buffer, init: float, tag: str) -> Stmt:
    vl = Var(f"i{tag}")
    return For(vl, width, Store(buf, (vl,), Float(init)), "vectorized")


def _hreduce(op: str, width: int, src: Buffer, dst: Buffer, init: float, tag: str) -> Stmt:
    """``dst[0] = op(init, src[0], ..., src[W-1])`` lane by lane."""
    vl, z = Var(f"h{tag}"), (Int(0),)
    comb = emax if op == "max" else add
    return Seq([Store(dst, z, Float(init)), For(vl, width, Store(dst, z, comb(Load(dst, z), Load(src, (vl,)))))])


def try_row_kernel(node: Any, kernel: str, opset: int, target: Target) -> LoweredKernel | None:
    """The row kernel of a group whose one reducing op is Softmax, LogSoftmax or LayerNormalization
    (or a group ``fuse-layer-norm`` made), or None."""

    nodes = list(node.body.nodes) if isinstance(node, FusedGroup) else [node]
    pattern = node.attrs.get("pattern") if isinstance(node, FusedGroup) else None
    if len(node.outputs) != 1:
        return None
    if pattern == "LayerNormalization":
        return _layer_norm_group(node, nodes, kernel, opset, target)
    rows_ops = [n for n in nodes if n.op_type in ROW_OPS]
    if len(rows_ops) != 1 or isinstance(node, FusedGroup) and any(
            n.op_type in ("ReduceMean", "ReduceSum", "ReduceMax", "MatMul", "Conv", "Gemm") for n in nodes):
        return None
    op = rows_ops[0]
    t = op.outputs[0].type
    if t is None or t.short != "f32" or not t.is_static or t.rank == 0:
        return None
    shape = tuple(int(d) for d in t.shape)  # type: ignore[union-attr]
    rank = len(shape)
    if op.op_type == "LayerNormalization":
        if any(o.consumers() or o.graph is not None and o in o.graph.outputs for o in op.outputs[1:]):
            return None  # Mean / InvStdDev are used: the generic lowering computes them
        axis = int(op.attr("axis", -1))
    else:
        axis = int(op.attr("axis", -1 if opset >= 13 else 1))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank or (op.op_type != "LayerNormalization" and opset >= 13 and axis != rank - 1):
        return None
    captured: dict[str, Any] = {}

    def override(ctx: LowerCtx, n: Any, ins: list[Tensor | None]) -> list[Tensor]:
        captured["x"] = ins[0]
        vbuf = Buffer(VIRTUAL, "f32", shape, "virtual")
        anchor = Tensor(shape, "f32", lambda idx: Load(vbuf, tuple(idx)))
        if n.op_type != "LayerNormalization":
            return [anchor]
        sc = broadcast_to(ins[1], shape) if len(ins) > 1 and ins[1] is not None else None
        bi = broadcast_to(ins[2], shape) if len(ins) > 2 and ins[2] is not None else None

        def fn(idx: list[Expr]) -> Expr:
            v = anchor[idx]
            v = mul(v, sc[idx]) if sc is not None else v
            return add(v, bi[idx]) if bi is not None else v
        return [Tensor(shape, "f32", fn), anchor, anchor]

    lk = lower_group(node, kernel, opset, override={id(op): override}, build=False)
    if len(lk.pending) != 1 or captured.get("x") is None:
        return None
    eps = float(op.attr("epsilon", 1e-5)) if op.op_type == "LayerNormalization" else 0.0
    return _build(lk, op.op_type, captured["x"], shape, axis, eps, target, op.label)


def _layer_norm_group(node: Any, nodes: list[Any], kernel: str, opset: int, target: Target) -> LoweredKernel | None:
    """A decomposed LayerNormalization group (``fuse-layer-norm``): X is the first ReduceMean's input,
    the normalized value is the output of the ``Div`` (or ``Mul`` by the reciprocal) it names."""
    by_name = {n.name: n for n in nodes}
    mean, norm = by_name.get(str(node.attrs.get("mean"))), by_name.get(str(node.attrs.get("normalized")))
    if mean is None or norm is None:
        return None
    t = norm.outputs[0].type
    if t is None or t.short != "f32" or not t.is_static:
        return None
    shape = tuple(int(d) for d in t.shape)  # type: ignore[union-attr]
    captured: dict[str, Any] = {}

    def cap_mean(ctx: LowerCtx, n: Any, ins: list[Tensor | None]) -> list[Tensor]:
        captured["x"] = ins[0]
        return LOWERINGS[n.op_type](ctx, n, ins)

    def cap_norm(ctx: LowerCtx, n: Any, ins: list[Tensor | None]) -> list[Tensor]:
        vbuf = Buffer(VIRTUAL, "f32", shape, "virtual")
        return [Tensor(shape, "f32", lambda idx: Load(vbuf, tuple(idx)))]

    lk = lower_group(node, kernel, opset, override={id(mean): cap_mean, id(norm): cap_norm}, build=False)
    x = captured.get("x")
    if len(lk.pending) != 1 or x is None or x.shape != shape:
        return None
    axis = len(shape) + int(node.attrs.get("axis", -1)) if int(node.attrs.get("axis", -1)) < 0 \
        else int(node.attrs["axis"])
    return _build(lk, "LayerNormalization", x, shape, axis, float(node.attrs.get("epsilon", 1e-5)), target,
                  node.label)


def _build(lk: LoweredKernel, op: str, x: Tensor, shape: tuple[int, ...], axis: int, eps: float, target: Target,
           label: str) -> LoweredKernel | None:
    out_buf, out_t = lk.pending[0]
    if out_t.shape != shape:
        return None
    ep = epilogue(out_t, len(shape), None)
    if ep is None:
        return None
    epi, vs = ep
    rows_shape, cols_shape = shape[:axis], shape[axis:]
    n_rows, n_cols = math.prod(rows_shape), math.prod(cols_shape)
    # the row statistics as ROW_VECTORS x W lanes: that many independent add/max chains per sweep (one
    # chain is bound by the add's latency); the default keeps one vector (W lanes)
    width = target.vector_width_f32 * int(choose("row_vectors", 1, [v for v in ROW_VECTORS
                                                                    if v * target.vector_width_f32 <= n_cols]))
    vr = Var("r")
    ri = unravel(vr, rows_shape)

    def xv(j: Expr) -> Expr:
        return x[[*ri, *unravel(j, cols_shape)]]

    out2 = Buffer(out_buf.name, out_buf.dtype, (n_rows, n_cols), out_buf.scope)

    def store(j: Expr, value: Expr) -> Stmt:
        m = {v.name: i for v, i in zip(vs, [*ri, *unravel(j, cols_shape)], strict=True)}
        return Store(out2, (vr, j), substitute(replace_anchor(epi, value), m))

    body = (_softmax_row if op in ("Softmax", "LogSoftmax") else _layer_norm_row)(
        op, xv, store, out2, vr, n_cols, width, eps)
    sched = lk.func.attrs.setdefault("schedule", [])
    sched += [f"row kernel({op}: {n_rows} rows x {n_cols}) -> r, j  # {label}",
              "parallel(r)  # rows are independent",
              f"split(j, {width}) -> jo, l; vectorize(l)  # the last {n_cols % width} columns as one shorter vector"
              if n_cols % width else f"split(j, {width}) -> jo, l; vectorize(l)",
              f"cache_write(stats, local)  # {width} partial "
              + ("max/sum" if op != "LayerNormalization" else "sums") + " per row, reduced across lanes"]
    lk.prelude = []
    flops = n_rows * n_cols * (3 if op == "LayerNormalization" else 4)
    return finish(lk, [For(vr, n_rows, body, "parallel")], flops)


def _stats(width: int, names: list[str]) -> list[Buffer]:
    return [Buffer(n, "f32", (width,) if n.startswith("v") else (1,), "local") for n in names]


def _softmax_row(op: str, xv, store, out2: Buffer, vr: Var, n: int, width: int, eps: float) -> Stmt:  # type: ignore[no-untyped-def]
    vmax, mx, vsum, total = _stats(width, ["vmax", "mx", "vsum", "total"])
    z = (Int(0),)

    def amax(j: Expr, lane: Var) -> Stmt:
        return Store(vmax, (lane,), emax(Load(vmax, (lane,)), xv(j)))

    def aexp(j: Expr, lane: Var) -> Stmt:
        e = call("exp", sub(xv(j), Load(mx, z)))
        if op == "LogSoftmax":
            return Store(vsum, (lane,), add(Load(vsum, (lane,)), e))
        # the sum reads the stored value back (a store-to-load forward): exp is computed once
        return Seq([Store(out2, (vr, j), e), Store(vsum, (lane,), add(Load(vsum, (lane,)), Load(out2, (vr, j))))])

    def scale(j: Expr, lane: Var) -> Stmt:
        if op == "LogSoftmax":
            return store(j, sub(sub(xv(j), Load(mx, z)), call("log", Load(total, z))))
        return store(j, mul(Load(out2, (vr, j)), Load(total, z)))

    steps: list[Stmt] = [_lanes(width, vmax, float("-inf"), "m"), sweep(n, width, amax, "m"),
                         _hreduce("max", width, vmax, mx, float("-inf"), "m"),
                         _lanes(width, vsum, 0.0, "s"), sweep(n, width, aexp, "s"),
                         _hreduce("+", width, vsum, total, 0.0, "s")]
    if op == "Softmax":
        steps.append(Store(total, z, Bin("/", Float(1.0), Load(total, z))))
    steps.append(sweep(n, width, scale, "o"))
    return _alloc([vmax, mx, vsum, total], Seq(steps))


def _layer_norm_row(op: str, xv, store, out2: Buffer, vr: Var, n: int, width: int, eps: float) -> Stmt:  # type: ignore[no-untyped-def]
    vs1, mean, vs2, rstd = _stats(width, ["vsum", "mean", "vsq", "rstd"])
    z = (Int(0),)

    def s1(j: Expr, lane: Var) -> Stmt:
        return Store(vs1, (lane,), add(Load(vs1, (lane,)), xv(j)))

    def s2(j: Expr, lane: Var) -> Stmt:
        d = sub(xv(j), Load(mean, z))
        return Store(vs2, (lane,), add(Load(vs2, (lane,)), mul(d, d)))

    def s3(j: Expr, lane: Var) -> Stmt:
        return store(j, mul(sub(xv(j), Load(mean, z)), Load(rstd, z)))

    inv_n = Float(1.0 / n)
    steps = [_lanes(width, vs1, 0.0, "a"), sweep(n, width, s1, "a"), _hreduce("+", width, vs1, mean, 0.0, "a"),
             Store(mean, z, mul(Load(mean, z), inv_n)),
             _lanes(width, vs2, 0.0, "b"), sweep(n, width, s2, "b"), _hreduce("+", width, vs2, rstd, 0.0, "b"),
             Store(rstd, z, Bin("/", Float(1.0), call("sqrt", add(mul(Load(rstd, z), inv_n), Float(eps))))),
             sweep(n, width, s3, "c")]
    return _alloc([vs1, mean, vs2, rstd], Seq(steps))


def _alloc(bufs: list[Buffer], body: Stmt) -> Stmt:
    for b in reversed(bufs):
        body = Allocate(b, body)
    return body


__all__ = ["ROW_OPS", "sweep", "try_row_kernel"]
