"""Post-training quantization of the graph IR: which tensors and weights to quantize, their parameters,
and the QuantizeLinear/DequantizeLinear pairs inserted for them (QDQ form, as ONNX Runtime's
``quantize_static`` writes it), which ``compiler.quant.fold`` then turns into integer ops.

Quantized layers (:func:`plan_layers`): Conv (constant 4-D weight), MatMul and Gemm (constant 2-D weight),
Add and Mul of two activations, GlobalAveragePool; data movement (MaxPool, Reshape, Flatten, Transpose,
Squeeze, Unsqueeze) reading a quantized tensor follows it with the same parameters. A layer's output
point is its result, or the result of a Relu/Clip that is its only consumer (folded into the integer op).
Graph outputs stay float32 (the last layer's result is dequantized by it).

Parameters: activations asymmetric (``u8``: ``scale = (hi - lo) / 255``, ``zero_point = round(-lo /
scale)``; ``s8`` the same shifted by -128) from the calibrated range, which includes 0; weights symmetric
int8 per output channel (``per-channel``) or per tensor, ``scale = max|w| / 127``, values rounded half to
even and clipped to [-127, 127] (ONNX Runtime's symmetric weight scheme; with ``weight_qmax=64``, ORT's
``reduce_range``: 7 bits, ``scale = max|w| / 64``, clipped to [-64, 64]); biases are quantized by
``fold`` to int32 at ``x_scale * w_scale``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir import Graph, Node, Value
from ..ir.rewrite import set_constant
from ..ops import infer_node
from ..ops.infer import ShapeEnv

ANCHORS = ("Conv", "MatMul", "Gemm")
BINARY = ("Add", "Sum", "Mul")
UNARY = ("GlobalAveragePool",)
FOLLOW = ("MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze")


@dataclass
class Layer:
    """A quantized layer: ``node`` (name), ``op``, ``inputs`` (activation tensors it reads quantized),
    ``output`` (its output point), ``weight`` (the constant weight's name, if any)."""

    node: str
    op: str
    inputs: list[str]
    output: str | None
    weight: str | None = None


@dataclass
class Plan:
    """The layers, the activation tensors to calibrate, and tensors that copy another's parameters."""

    layers: list[Layer] = field(default_factory=list)
    tensors: list[str] = field(default_factory=list)
    follow: dict[str, str] = field(default_factory=dict)


def _output_point(node: Node, outs: set[int]) -> Value | None:
    v = node.outputs[0]
    users = v.consumers()
    if len(users) == 1 and users[0].op_type in ("Relu", "Clip") and id(v) not in outs:
        v = users[0].outputs[0]
    return None if id(v) in outs else v


def plan_layers(graph: Graph, exclude: set[str]) -> Plan:
    """The quantization plan of ``graph`` with the nodes named in ``exclude`` left in float."""
    outs = {id(v) for v in graph.outputs}
    plan = Plan()
    seen: set[str] = set()

    def want(v: Value | None) -> bool:
        return v is not None and v.const is None and v.type is not None and v.type.short == "f32"

    def add(t: str) -> None:
        if t not in seen:
            seen.add(t)
            plan.tensors.append(t)

    for n in graph.nodes:
        if n.domain or (n.name or n.label) in exclude:
            continue
        op = n.op_type
        acts: list[Value] = []
        weight = None
        if op in ANCHORS:
            w = n.input(1)
            rank = 4 if op == "Conv" else 2
            if not want(n.input(0)) or w is None or w.const is None or w.const.ndim != rank:
                continue
            if op == "Gemm" and (float(n.attr("beta", 1.0)) != 1.0 or int(n.attr("transA", 0))):
                continue
            acts, weight = [n.input(0)], w.name  # type: ignore[list-item]
        elif op in BINARY:
            if len(n.inputs) != 2 or not (want(n.input(0)) and want(n.input(1))) or n.input(0).type.shape != n.input(1).type.shape:  # type: ignore[union-attr]
                continue
            acts = [n.input(0), n.input(1)]  # type: ignore[list-item]
        elif op in UNARY:
            if not want(n.input(0)):
                continue
            acts = [n.input(0)]  # type: ignore[list-item]
        elif op in FOLLOW:
            src = n.input(0)
            if src is not None and (src.name in seen or src.name in plan.follow) and id(n.outputs[0]) not in outs:
                plan.follow[n.outputs[0].name] = plan.follow.get(src.name, src.name)
            continue
        else:
            continue
        point = _output_point(n, outs)
        for a in acts:
            if a.name not in plan.follow:
                add(a.name)
        if point is not None:
            add(point.name)
        plan.layers.append(Layer(n.name or n.label, op, [a.name for a in acts], point.name if point else None, weight))
    return plan


def activation_params(lo: float, hi: float, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """``(scale float32, zero point)`` of an asymmetric 8-bit range [lo, hi] (0 inside)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    base = 0 if dtype == "u8" else -128
    zp = int(np.clip(np.rint(base - lo / float(scale)), base, base + 255))
    return np.array(scale, np.float32), np.array(zp, np.uint8 if dtype == "u8" else np.int8)


WEIGHT_QMAX = 127  # symmetric int8: [-127, 127]
REDUCED_QMAX = 64  # ONNX Runtime's reduce_range for int8 weights: [-64, 64] (onnxruntime.quantization.quant_utils)


def weight_params(w: np.ndarray, axis: int | None, qmax: int = WEIGHT_QMAX) -> tuple[np.ndarray, np.ndarray]:
    """``(int8 weights, float32 scales)``: symmetric, per ``axis`` (None: per tensor), values in
    [-qmax, qmax] (127, or 64 for ORT's ``reduce_range``)."""
    w = np.asarray(w, np.float32)
    if axis is None:
        amax = np.array(np.abs(w).max(initial=0.0), np.float32)
    else:
        amax = np.abs(np.moveaxis(w, axis, 0)).reshape(w.shape[axis], -1).max(axis=1).astype(np.float32)
    scale = np.where(amax > 0, amax / np.float32(qmax), np.float32(1.0)).astype(np.float32)
    shaped = scale if axis is None else scale.reshape([-1 if k == axis else 1 for k in range(w.ndim)])
    q = np.clip(np.rint(w / shaped), -qmax, qmax).astype(np.int8)
    return q, scale


def _qdq(graph: Graph, v: Value, scale: np.ndarray, zp: np.ndarray, axis: int | None = None) -> tuple[Node, Node]:
    s = graph.add_constant(graph.fresh_name(v.name + "_scale"), scale)
    z = graph.add_constant(graph.fresh_name(v.name + "_zero_point"), zp)
    attrs = {} if axis is None else {"axis": axis}
    q = graph.add_node("QuantizeLinear", [v, s, z], [graph.fresh_name(v.name + "_quantized")], attrs,
                       name=graph.fresh_node_name(v.name + "_QuantizeLinear"))
    dq = graph.add_node("DequantizeLinear", [q.outputs[0], s, z], [graph.fresh_name(v.name + "_dequantized")], attrs,
                        name=graph.fresh_node_name(v.name + "_DequantizeLinear"))

    env = ShapeEnv(int(graph.opset_imports.get("", 17)))
    infer_node(q, env)
    infer_node(dq, env)
    return q, dq


def insert_qdq(graph: Graph, plan: Plan, params: dict[str, tuple[np.ndarray, np.ndarray]],
               per_channel: bool, weight_qmax: int = WEIGHT_QMAX) -> dict[str, str]:
    """Insert the Q/DQ pairs of ``plan`` into ``graph`` in place (``params``: {tensor: (scale, zp)}; weights
    in [-weight_qmax, weight_qmax]: :func:`weight_params`). Returns ``{tensor: its DequantizeLinear output}``."""
    values = {v.name: v for v in graph.values()}
    dequantized: dict[str, str] = {}
    for t in plan.tensors + list(plan.follow):
        v = values.get(t)
        p = params.get(plan.follow.get(t, t))
        if v is None or p is None:
            continue
        users = [(n, i) for n, i in v.uses()]
        q, dq = _qdq(graph, v, *p)
        for n, i in users:
            n.set_input(i, dq.outputs[0])
        dequantized[t] = dq.outputs[0].name
    for layer in plan.layers:
        if layer.weight is None:
            continue
        node = next(n for n in graph.nodes if (n.name or n.label) == layer.node)
        w = node.input(1)
        assert w is not None and w.const is not None
        axis = None
        if per_channel:
            axis = 0 if layer.op == "Conv" or (layer.op == "Gemm" and int(node.attr("transB", 0))) else 1
        wq, ws = weight_params(w.const, axis, weight_qmax)
        qv = graph.add_constant(graph.fresh_name(w.name + "_quantized"), wq)
        sv = graph.add_constant(graph.fresh_name(w.name + "_scale"), ws)
        zv = graph.add_constant(graph.fresh_name(w.name + "_zero_point"), np.zeros(ws.shape, np.int8))
        dq = graph.add_node("DequantizeLinear", [qv, sv, zv], [graph.fresh_name(w.name + "_dequantized")],
                            {} if axis is None else {"axis": axis}, name=graph.fresh_node_name(w.name + "_DequantizeLinear"))
        dq.outputs[0].type = w.type
        node.set_input(1, dq.outputs[0])
    graph.topological_sort()
    return dequantized


def fold_constant_dq(graph: Graph) -> int:
    """DequantizeLinear nodes whose inputs are all constants (weights of layers left in float) become
    their float32 values. Returns how many."""
    n = 0
    for node in list(graph.nodes):
        if node.op_type != "DequantizeLinear" or not all(v is None or v.const is not None for v in node.inputs):
            continue
        x, s, z = node.input(0), node.input(1), node.input(2)
        q = np.asarray(x.const, np.float32)  # type: ignore[union-attr]
        axis = node.attr("axis", 1)
        shape = [1] * q.ndim
        scale, zp = np.asarray(s.const, np.float32), (np.asarray(z.const, np.float32) if z is not None else 0.0)  # type: ignore[union-attr]
        if scale.size > 1:
            shape[axis % q.ndim] = -1
            scale = scale.reshape(shape)
            zp = np.asarray(zp).reshape(shape) if np.size(zp) > 1 else zp
        out = node.outputs[0]
        graph.remove_node(node, force=True)
        set_constant(graph, out, ((q - zp) * scale).astype(np.float32))
        n += 1
    return n
