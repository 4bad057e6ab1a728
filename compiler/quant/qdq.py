"""Reading QuantizeLinear / DequantizeLinear nodes of the graph IR: their constant parameters, and
the ``DQ -> op -> Q`` neighbourhoods that ``fold-qdq`` rewrites.

A quantization parameter set (:class:`QParams`) is a scale (float32, per tensor or per axis), a zero
point (int8/uint8/int32, same shape; 0 when omitted, with the output type the Q node's
``output_dtype`` or uint8) and the axis (``None`` per tensor). Semantics: the ONNX QuantizeLinear /
DequantizeLinear specs (opset 13+: ``axis``; opset 21's ``block_size`` is not matched: a blocked node
is refused with a reason).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import numpy_helper

from ..ir import Node, Value

INT8 = ("i8", "u8")


@dataclass
class QParams:
    """``scale`` (float32 array, shape () or (C,)), ``zero_point`` (array of the quantized dtype,
    same shape), ``axis`` (None per tensor), ``dtype`` (short name: ``u8``, ``i8``, ``i32``)."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None
    dtype: str

    @property
    def per_tensor(self) -> bool:
        return self.scale.size == 1

    def same(self, other: QParams) -> bool:
        """Equal scales, zero points and dtype (so DQ -> data movement -> Q is the identity)."""
        return (self.dtype == other.dtype and self.scale.shape == other.scale.shape
                and bool(np.array_equal(self.scale, other.scale))
                and bool(np.array_equal(self.zero_point.astype(np.int64), other.zero_point.astype(np.int64))))


def params(node: Node) -> QParams | str:
    """The constant parameters of a QuantizeLinear or DequantizeLinear ``node``, or the reason they
    cannot be read at compile time (a sentence naming the node)."""
    s, z = node.input(1), node.input(2)
    if s is None or s.const is None:
        return f"{node.label} ({node.op_type}): its scale is not a constant"
    if z is not None and z.const is None:
        return f"{node.label} ({node.op_type}): its zero point is not a constant"
    if int(node.attr("block_size", 0) or 0):
        return f"{node.label} ({node.op_type}): blocked quantization (block_size) is not folded"
    scale = np.asarray(s.const, np.float32)
    if scale.ndim > 1:
        return f"{node.label} ({node.op_type}): scale of rank {scale.ndim}"
    if node.op_type == "DequantizeLinear":
        x = node.input(0)
        dt = x.type.short if x is not None and x.type is not None else "?"
    else:
        out = node.outputs[0].type
        dt = out.short if out is not None else "u8"
    zp = np.zeros(scale.shape, np.int32) if z is None else np.asarray(z.const)
    x0 = node.input(0)
    rank = x0.type.rank if x0 is not None and x0.type is not None else None
    axis = None
    if scale.size > 1:
        axis = int(node.attr("axis", 1))
        if rank is not None and axis < 0:
            axis += rank
    return QParams(scale.reshape(scale.shape), zp.reshape(scale.shape), axis, dt)


def dequantized(v: Value | None) -> tuple[Node, Value, QParams] | str | None:
    """``(dq node, quantized input, params)`` when ``v`` is a DequantizeLinear's output with constant
    parameters; a reason string when it is one whose parameters are not constants; None otherwise."""
    if v is None or v.producer is None or v.producer.op_type != "DequantizeLinear" or v.producer.domain:
        return None
    dq = v.producer
    p = params(dq)
    if isinstance(p, str):
        return p
    src = dq.input(0)
    if src is None or src.type is None or p.dtype not in INT8 + ("i32",):
        return f"{dq.label}: dequantizes {p.dtype}, not int8/uint8/int32"
    return dq, src, p


def quantized_by(v: Value, graph_outputs: set[int]) -> tuple[Node, QParams] | str | None:
    """``(q node, params)`` when ``v``'s only consumer is a QuantizeLinear to int8/uint8 with constant
    parameters and ``v`` is not a graph output; a reason string for a Q whose parameters are not
    constants; None otherwise."""
    users = v.consumers()
    if id(v) in graph_outputs or len(users) != 1:
        return None
    q = users[0]
    if q.op_type != "QuantizeLinear" or q.domain or q.input(0) is not v:
        return None
    p = params(q)
    if isinstance(p, str):
        return p
    if p.dtype not in INT8:
        return f"{q.label}: quantizes to {p.dtype}, not int8/uint8"
    return q, p


def only_consumer(v: Value, graph_outputs: set[int]) -> Node | None:
    """The single consumer of ``v`` (which is not a graph output), else None."""
    users = v.consumers()
    return users[0] if len(users) == 1 and id(v) not in graph_outputs else None


def qrange(dtype: str) -> tuple[int, int]:
    return (0, 255) if dtype == "u8" else (-128, 127)


def output_steps(model: object) -> dict[str, float]:
    """``{graph output: quantization step}`` for the outputs of an ONNX ``model`` (ModelProto) produced
    by a DequantizeLinear with a constant per-tensor scale: the largest difference by which two correct
    integer implementations' dequantized results may differ (one step, from rounding a .5 boundary
    the other way)."""

    g = model.graph  # type: ignore[attr-defined]
    inits = {t.name: t for t in g.initializer}
    consts = {n.output[0]: n for n in g.node if n.op_type == "Constant"}
    producer = {o: n for n in g.node for o in n.output}
    out: dict[str, float] = {}
    for o in g.output:
        n = producer.get(o.name)
        if n is None or n.op_type != "DequantizeLinear" or len(n.input) < 2:
            continue
        s = n.input[1]
        if s in inits:
            arr = numpy_helper.to_array(inits[s])
        elif s in consts and consts[s].attribute:
            arr = numpy_helper.to_array(consts[s].attribute[0].t)
        else:
            continue
        if arr.size == 1:
            out[o.name] = float(arr.reshape(-1)[0])
    return out


QDQ_NOTE = ("compared with ONNX Runtime running the QDQ model as written (graph optimizations off: the ONNX "
            "DequantizeLinear / op / QuantizeLinear semantics); ONNX Runtime's own fused integer kernels round some "
            "values differently (and saturate 16-bit pair sums on x86 without VNNI), so they are timed, not compared; a "
            "rounding tie may still flip one step and propagate, so an output also passes at >= 40 dB SQNR against "
            "the reference")


def has_qdq(model: object) -> bool:
    """True when an ONNX ``model`` (ModelProto) has QuantizeLinear or DequantizeLinear nodes at top level."""
    return any(n.op_type in ("QuantizeLinear", "DequantizeLinear") and n.domain in ("", "ai.onnx")
               for n in model.graph.node)  # type: ignore[attr-defined]
