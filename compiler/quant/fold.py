"""The rewrites of ``fold-qdq`` (``compiler.passes.fold_qdq`` documents them): QDQ neighbourhoods of
the graph IR into integer ops. :func:`fold_graph` is also what ``quantize`` runs after inserting its
QuantizeLinear/DequantizeLinear pairs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir import Graph, Node, Value
from .lookup import tabulate
from .qdq import QParams, dequantized, only_consumer, qrange, quantized_by

MS = "com.microsoft"
ANCHORS = {"Conv": "QLinearConv", "MatMul": "QLinearMatMul", "Gemm": "QGemm"}
BINARY = {"Add": "QLinearAdd", "Sum": "QLinearAdd", "Mul": "QLinearMul"}
UNARY = {"GlobalAveragePool": "QLinearGlobalAveragePool"}
MOVEMENT = {"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Slice", "Resize"}


@dataclass
class FoldResult:
    """``folded`` rewrites, ``missed`` refusals, ``by_op`` {integer op: count}, ``remarks``
    ``[(kind, message, nodes, data)]``."""

    folded: int = 0
    missed: int = 0
    by_op: Counter = field(default_factory=Counter)
    remarks: list[tuple[str, str, list[str], dict[str, Any]]] = field(default_factory=list)


class _Refuse(Exception):
    """A neighbourhood that is not folded; the message is the reason."""


def fold_graph(graph: Graph) -> FoldResult:
    """Fold every QDQ neighbourhood of ``graph`` (top level) in place; see ``compiler.passes.fold_qdq``."""
    res = FoldResult()
    for node in [n for n in graph.nodes if n.op_type == "QuantizeLinear" or n.op_type == "DequantizeLinear"]:
        p = node.input(1)
        z = node.input(2)
        if (p is not None and p.const is None) or (z is not None and z.const is None):
            res.missed += 1
            res.remarks.append(("missed", f"not folded: {node.label} ({node.op_type}) has a scale or zero point that "
                                "is not a constant; it stays in float", [node.label], {}))
    for t in tabulate(graph):  # before the binary folds: YOLO's SiLU Mul is part of a chain
        res.folded += 1
        res.by_op["QLinearLookup"] += 1
        res.remarks.append(("applied", f"tabulated {' -> '.join(t.chain)} of %{t.source} into {t.node} "
                            f"(prism.QLinearLookup: a 256-entry {t.dtype} table evaluated by onnx.reference)",
                            [t.node], {"op": "QLinearLookup", "chain": t.chain}))
    for node in list(graph.nodes):
        if node.graph is not graph or node.domain:
            continue
        kind = "anchor" if node.op_type in ANCHORS else "binary" if node.op_type in BINARY else \
            "unary" if node.op_type in UNARY else "movement" if node.op_type in MOVEMENT else None
        if kind is None:
            continue
        if not any(isinstance(dequantized(v), tuple) for v in node.inputs[:2]):
            continue
        try:
            new, msg = {"anchor": _fold_anchor, "binary": _fold_binary, "unary": _fold_unary,
                        "movement": _fold_movement}[kind](graph, node)
        except _Refuse as why:
            if kind != "movement":
                res.missed += 1
                res.remarks.append(("missed", f"not folded: {node.label} ({node.op_type}): {why}; it stays in float",
                                    [node.label], {}))
            continue
        res.folded += 1
        res.by_op[new.op_type] += 1
        res.remarks.append(("applied", msg, [node.label, new.label], {"op": new.op_type}))
    _remove_dead_dq(graph)
    if res.by_op.keys() & {"QLinearAdd", "QLinearMul", "QGemm", "QLinearGlobalAveragePool"}:
        graph.opset_imports.setdefault(MS, 1)
    return res


# matching ---------------------------------------------------------------------------------------
def _dq(v: Value | None, what: str) -> tuple[Node, Value, QParams]:
    m = dequantized(v)
    if m is None:
        raise _Refuse(f"its {what} is not dequantized")
    if isinstance(m, str):
        raise _Refuse(m)
    return m


def _output_q(graph: Graph, node: Node) -> tuple[list[Node], Node, QParams, tuple[str, Any] | None]:
    """The nodes from ``node``'s result to its QuantizeLinear: ``(between, q, params, activation)``;
    ``between`` is ``[]`` or ``[Relu | Clip]`` and ``activation`` ("relu", None) or ("clip", (lo, hi))."""
    outs = {id(v) for v in graph.outputs}
    v = node.outputs[0]
    between: list[Node] = []
    act: tuple[str, Any] | None = None
    nxt = only_consumer(v, outs)
    if nxt is not None and nxt.op_type in ("Relu", "Clip") and not nxt.domain:
        if nxt.op_type == "Clip":
            lo, hi = (nxt.input(k) for k in (1, 2))
            lo_c, hi_c = (None if b is None else b.const for b in (lo, hi))
            if (lo is not None and lo_c is None) or (hi is not None and hi_c is None):
                raise _Refuse(f"{nxt.label} (Clip) has bounds that are not constants")
            act = ("clip", (None if lo_c is None else float(lo_c), None if hi_c is None else float(hi_c)))
        else:
            act = ("relu", None)
        between = [nxt]
        v = nxt.outputs[0]
    m = quantized_by(v, outs)
    if m is None:
        users = ", ".join(c.label for c in v.consumers()) or "none"
        raise _Refuse(f"its float result %{v.name} is not quantized by one QuantizeLinear (consumers: {users}"
                      f"{'; a graph output' if id(v) in outs else ''})")
    if isinstance(m, str):
        raise _Refuse(m)
    return between, m[0], m[1], act


def _per_tensor(p: QParams, what: str) -> None:
    if not p.per_tensor:
        raise _Refuse(f"its {what} is quantized per axis ({p.scale.size} scales); only weights may be")
    if p.dtype not in ("u8", "i8"):
        raise _Refuse(f"its {what} is {p.dtype}, not int8/uint8")


def _const(graph: Graph, base: str, data: np.ndarray) -> Value:
    return graph.add_constant(graph.fresh_name(base), np.asarray(data))


def _param_values(graph: Graph, dq: Node, p: QParams) -> tuple[Value, Value]:
    """The scale and zero-point values of a Q/DQ node (a zero point constant made when omitted)."""
    scale = dq.input(1)
    zp = dq.input(2)
    assert scale is not None
    if zp is None:
        zp = _const(graph, scale.name + "_zero_point", np.zeros(p.scale.shape, np.uint8 if p.dtype == "u8" else np.int8))
    return scale, zp


# rewrites ---------------------------------------------------------------------------------------
def _fold_anchor(graph: Graph, node: Node) -> tuple[Node, str]:
    op = node.op_type
    xdq, x, xp = _dq(node.input(0), "input A" if op != "Conv" else "input X")
    wdq, w, wp = _dq(node.input(1), "weight" if op != "MatMul" else "input B")
    _per_tensor(xp, "activation input")
    if wp.dtype not in ("u8", "i8"):
        raise _Refuse(f"its weight is {wp.dtype}, not int8/uint8")
    if op in ("Conv", "Gemm") and w.const is None:
        raise _Refuse("its weight is not a constant")
    if not wp.per_tensor:
        want = {"Conv": 0, "MatMul": ((w.type.rank if w.type is not None else None) or 2) - 1, "Gemm": 0 if node.attr("transB", 0) else 1}[op]
        if wp.axis != want or w.const is None:
            raise _Refuse(f"its weight is quantized along axis {wp.axis}; integer {ANCHORS[op]} takes axis {want} "
                          "(output channels) of a constant weight")
    if op == "Gemm" and float(node.attr("beta", 1.0)) != 1.0:
        raise _Refuse(f"beta={node.attr('beta')} (only 1 is folded)")
    try:
        between, q, yp, act = _output_q(graph, node)
    except _Refuse:
        if op != "Gemm":
            raise
        return _fold_gemm_float(graph, node, xdq, x, xp, wdq, w, wp)
    bias = _int32_bias(graph, node.input(2), xp, wp) if op in ("Conv", "Gemm") and node.input(2) is not None else None
    xs, xz = _param_values(graph, xdq, xp)
    ws, wz = _param_values(graph, wdq, wp)
    ys, yz = _param_values(graph, q, yp)
    y = q.outputs[0]
    _unlink(graph, [q, *between, node])
    if op == "Conv":
        ins: list[Value] = [x, xs, xz, w, ws, wz, ys, yz] + ([bias] if bias is not None else [])
        new = graph.add_node("QLinearConv", ins, [y], dict(node.attrs), name=node.name or None, before=None)
    elif op == "MatMul":
        new = graph.add_node("QLinearMatMul", [x, xs, xz, w, ws, wz, ys, yz], [y], {}, name=node.name or None)
    else:
        attrs = {k: v for k, v in node.attrs.items() if k in ("alpha", "transA", "transB")}
        new = graph.add_node("QGemm", [x, xs, xz, w, ws, wz, bias, ys, yz], [y], attrs, name=node.name or None,
                             domain=MS)
    _place(graph, new, node)
    extra = _activation(graph, new, act, yp)
    where = "per-channel" if not wp.per_tensor else "per-tensor"
    msg = (f"folded {xdq.label} -> {node.label} ({op}) -> {q.label} into {new.label} ({new.op_type}: "
           f"{xp.dtype} x {wp.dtype} {where}, int32 accumulation, requantized to {yp.dtype}"
           f"{', bias as int32' if bias is not None else ''}{extra})")
    return new, msg


def _fold_gemm_float(graph: Graph, node: Node, xdq: Node, x: Value, xp: QParams, wdq: Node, w: Value,
                     wp: QParams) -> tuple[Node, str]:
    """``Gemm(DQ(a), DQ(b), [c])`` whose result is not quantized (a graph output, a float consumer):
    ``QGemm`` without ``y_scale``, whose output is float32 ``a_scale * b_scale * (acc + c_int32)``."""
    bias = _int32_bias(graph, node.input(2), xp, wp) if node.input(2) is not None else None
    (xs, xz), (ws, wz) = _param_values(graph, xdq, xp), _param_values(graph, wdq, wp)
    y = node.outputs[0]
    _unlink(graph, [node])
    attrs = {k: v for k, v in node.attrs.items() if k in ("alpha", "transA", "transB")}
    new = graph.add_node("QGemm", [x, xs, xz, w, ws, wz, bias], [y], attrs, name=node.name or None, domain=MS)
    _place(graph, new, node)
    return new, (f"folded {xdq.label} -> {node.label} (Gemm) into {new.label} (QGemm: {xp.dtype} x {wp.dtype}, int32 "
                 "accumulation, float32 output)")


def _int32_bias(graph: Graph, b: Value | None, xp: QParams, wp: QParams) -> Value:
    """The bias as int32 at scale ``x_scale * w_scale`` (its own int32 data when it is dequantized at
    that scale with zero point 0; a float constant quantized, round half to even)."""
    want = (np.float32(xp.scale.reshape(-1)[0]) * wp.scale.astype(np.float32)).reshape(-1)
    m = dequantized(b)
    if isinstance(m, tuple):
        _, src, bp = m
        if bp.dtype == "i32" and src.const is not None and not np.any(bp.zero_point) and \
                np.allclose(bp.scale.reshape(-1), want, rtol=1e-6, atol=0):
            return src
        if src.const is None:
            raise _Refuse("its bias is not a constant")
        data = (np.asarray(src.const, np.float64) - bp.zero_point.astype(np.float64)) * bp.scale.astype(np.float64)
    elif b is not None and b.const is not None:
        data = np.asarray(b.const, np.float64)
    else:
        raise _Refuse("its bias is neither a constant nor a dequantized constant")
    q = np.clip(np.rint(data.reshape(-1) / want.astype(np.float64)), -2**31, 2**31 - 1).astype(np.int32)
    return _const(graph, (b.name if b is not None else "bias") + "_int32", q.reshape(np.shape(data)))


def _activation(graph: Graph, new: Node, act: tuple[str, Any] | None, yp: QParams) -> str:
    """A folded Relu/Clip as Max/Clip of the integer result with the quantized bounds."""
    if act is None:
        return ""
    y = new.outputs[0]
    lo_q, hi_q = qrange(yp.dtype)
    np_dt = np.uint8 if yp.dtype == "u8" else np.int8
    s, z = float(yp.scale.reshape(-1)[0]), int(yp.zero_point.reshape(-1)[0])

    def qv(x: float) -> int:
        return int(np.clip(np.rint(np.float32(x) / np.float32(s)) + z, lo_q, hi_q))

    kind, bounds = act
    lo = z if kind == "relu" else (qv(bounds[0]) if bounds[0] is not None else lo_q)
    hi = hi_q if kind == "relu" else (qv(bounds[1]) if bounds[1] is not None else hi_q)
    if lo <= lo_q and hi >= hi_q:
        return f", {kind} a no-op at this range"
    pre = graph.new_value(y.name + "_preact", y.type)
    new.outputs[0] = pre  # the integer op now writes pre; the activation writes y (same name, same users)
    pre.producer, y.producer = new, None
    ins = [pre, _const(graph, y.name + "_lo", np.array(lo, np_dt)), _const(graph, y.name + "_hi", np.array(hi, np_dt))]
    graph.add_node("Clip", ins, [y], {}, name=f"{new.name}_{kind}", after=new)
    return f", {kind} as Clip[{lo}, {hi}] of the integers"


def _fold_binary(graph: Graph, node: Node) -> tuple[Node, str]:
    if len(node.inputs) != 2:
        raise _Refuse(f"{len(node.inputs)} inputs (two are folded)")
    adq, a, ap = _dq(node.input(0), "input A")
    bdq, b, bp = _dq(node.input(1), "input B")
    _per_tensor(ap, "input A")
    _per_tensor(bp, "input B")
    between, q, yp, act = _output_q(graph, node)
    (as_, az), (bs, bz), (ys, yz) = (_param_values(graph, adq, ap), _param_values(graph, bdq, bp),
                                    _param_values(graph, q, yp))
    y = q.outputs[0]
    _unlink(graph, [q, *between, node])
    new = graph.add_node(BINARY[node.op_type], [a, as_, az, b, bs, bz, ys, yz], [y], {}, name=node.name or None,
                         domain=MS)
    _place(graph, new, node)
    extra = _activation(graph, new, act, yp)
    return new, (f"folded {node.label} ({node.op_type}) of {adq.label}, {bdq.label} -> {q.label} into {new.label} "
                 f"({new.op_type}: {ap.dtype} {node.op_type.lower()} {bp.dtype} -> {yp.dtype}{extra})")


def _fold_unary(graph: Graph, node: Node) -> tuple[Node, str]:
    xdq, x, xp = _dq(node.input(0), "input")
    _per_tensor(xp, "input")
    between, q, yp, act = _output_q(graph, node)
    if between:
        raise _Refuse("an activation between it and its QuantizeLinear")
    (xs, xz), (ys, yz) = _param_values(graph, xdq, xp), _param_values(graph, q, yp)
    y = q.outputs[0]
    _unlink(graph, [q, node])
    new = graph.add_node(UNARY[node.op_type], [x, xs, xz, ys, yz], [y], {}, name=node.name or None, domain=MS)
    _place(graph, new, node)
    return new, (f"folded {xdq.label} -> {node.label} ({node.op_type}) -> {q.label} into {new.label} "
                 f"({new.op_type}: int32 sum, requantized to {yp.dtype})")


def _fold_movement(graph: Graph, node: Node) -> tuple[Node, str]:
    data_inputs = list(node.inputs) if node.op_type == "Concat" else [node.input(0)]
    if node.op_type == "Resize" and node.attr("mode", "nearest") != "nearest":
        raise _Refuse("Resize is not nearest")
    if len(node.outputs) != 1:
        raise _Refuse("more than one output")
    ms = [_dq(v, "input") for v in data_inputs]
    between, q, yp, act = _output_q(graph, node)
    if between or any(not p.same(yp) for _, _, p in ms):
        raise _Refuse("its inputs and output are quantized differently")
    y = q.outputs[0]
    _unlink(graph, [q])
    for k, (_, src, _) in enumerate(ms):
        node.set_input(k, src)
    old = node.outputs[0]
    node.outputs[0], old.producer, y.producer = y, None, node
    graph._names.pop(old.name, None)
    return node, f"{node.label} ({node.op_type}) runs on the {yp.dtype} values (same scale and zero point in and out)"


def _unlink(graph: Graph, nodes: list[Node]) -> None:
    """Remove ``nodes`` (a chain ending at the Q whose output the new op takes over)."""
    for n in nodes:
        graph.remove_node(n, force=True)


def _place(graph: Graph, new: Node, old: Node) -> None:
    """Keep topological order: ``new`` (appended) moves to the end of its inputs' producers."""
    graph.topological_sort()


def _remove_dead_dq(graph: Graph) -> None:
    outs = {id(v) for v in graph.outputs}
    for n in reversed(list(graph.nodes)):
        if n.op_type == "DequantizeLinear" and not n.domain and not any(v.uses() or id(v) in outs for v in n.outputs):
            graph.remove_node(n)
