"""``fold-batchnorm``: fold an inference ``BatchNormalization`` into the producer's weights.

Inference BN is ``y = (x - mean) * s + beta`` with ``s = scale / sqrt(var + epsilon)`` per channel,
channels on axis 1 (ONNX spec, BatchNormalization). Rewrites, with ``P`` the producer of BN's
input:
- ``Conv`` (``W: [M, C/group, k...]``, optional bias ``b: [M]``): the output channel is axis 1, so
  ``W'[m] = W[m] * s[m]`` and ``b' = (b - mean) * s + beta`` (``b = 0`` when absent);
- ``ConvTranspose`` (``W: [C, M/group, k...]``): output channel ``g * (M/group) + j`` comes
  from ``W[g * C/group : (g+1) * C/group, j]``, which is scaled by ``s`` of that channel; the
  bias as for Conv;
- ``Gemm`` (``Y: [M, N]``): BN's axis 1 is Gemm's column ``n``. Column ``n`` of ``op(B)`` is
  scaled: ``B[:, n]`` for ``transB = 0``, ``B[n, :]`` for ``transB = 1``. The bias becomes
  ``C' = (beta_gemm * C - mean) * s + bn_beta`` (its shape is C's broadcast with ``[N]``) and
  Gemm's ``beta`` becomes 1; ``alpha`` is unchanged since it multiplies the scaled product;
- ``MatMul`` with a constant 2-D ``B: [K, N]`` and a 2-D output ``[M, N]``: only then is BN's
  channel axis 1 the last axis, the one ``B``'s columns produce. ``B'[:, n] = B[:, n] * s[n]``
  and BN becomes ``Add(MatMul, beta - mean * s)`` (MatMul has no bias input). For a rank-3 output
  ``[b, M, N]`` BN's axis 1 is ``M``, which scales rows of ``A``, not anything in ``B``: left alone.
- a ``Mul`` or ``Add`` of a ``Conv``/``ConvTranspose``/``Gemm`` output by a constant that varies
  along axis 1 only (a BN the exporter already decomposed, e.g. paddle2onnx's PP-OCR, or a bias
  ``Add``):
  ``Mul`` is the fold above with ``shift = 0``, ``Add`` with ``s = 1`` (the weights are then not
  copied). The constant must not grow the output (its shape broadcasts into the producer's).
  Option ``affine`` (default true) turns this rule off.
The BN node is removed; where its output is a graph output, the folded value takes its name. The
new weights are new constants (the old ones are left for ``eliminate-dead-code``, since another node
may share them).

Left alone (a missed remark says why): BN in training mode or with a used running-mean/var
output; BN whose scale/B/mean/var are not constants; a producer that is not
Conv/ConvTranspose/Gemm/MatMul, whose output has other consumers or is a graph output (the
unfolded value is still needed), or whose weights are not constants; BNs inside ``If``/``Loop``
bodies (only the top-level graph is rewritten).
"""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, TensorType, Value
from ..ir.rewrite import forward_value
from .base import Option, Pass, PassContext, PassResult, Remark, register


def _const(v: Value | None) -> np.ndarray | None:
    return None if v is None or v.const is None else np.asarray(v.const)


def _bn_params(bn: Node) -> tuple[np.ndarray, np.ndarray, np.ndarray] | str:
    """``(s, shift, mean)`` with ``y = x * s + shift``, or the reason BN cannot be folded."""
    if bn.attr("training_mode", 0):
        return "BatchNormalization is in training mode"
    for extra in bn.outputs[1:]:
        if extra.uses() or (bn.graph is not None and extra in bn.graph.outputs):
            return f"its running statistic %{extra.name} is used"
    params = [_const(bn.input(i)) for i in range(1, 5)]
    if any(p is None for p in params):
        missing = [bn.inputs[i].name for i in range(1, 5) if params[i - 1] is None]  # type: ignore[union-attr]
        return "scale/B/mean/var are not constants (%" + ", %".join(missing) + ")"
    scale, beta, mean, var = (p.astype(np.float64) for p in params)  # type: ignore[union-attr]
    s = scale / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))
    return s, beta - mean * s, mean


def _new_const(graph: Graph, base: str, data: np.ndarray, like: np.dtype) -> Value:
    return graph.add_constant(base, np.ascontiguousarray(data.astype(like)))


def _set_bias(node: Node, bias: Value) -> None:
    """``bias`` as ``node``'s third input (a Conv's B, a Gemm's C), appended when it has none."""
    if len(node.inputs) < 3:
        node.set_inputs([node.inputs[0], node.inputs[1], bias])
    else:
        node.set_input(2, bias)


def _fold_conv(graph: Graph, conv: Node, s: np.ndarray, shift: np.ndarray) -> str | None:
    w = _const(conv.input(1))
    if w is None:
        return "its weight is not a constant"
    group = int(conv.attr("group", 1))
    m = w.shape[0] if conv.op_type == "Conv" else w.shape[1] * group
    b = _const(conv.input(2)) if conv.input(2) is not None else np.zeros(m, w.dtype)
    if b is None:
        return "its bias is not a constant"
    if s.shape[0] != m:
        return f"BN has {s.shape[0]} channels, {conv.op_type} has {m} output channels"
    b2 = _new_const(graph, f"{conv.label}_bias_bn", b * s + shift, w.dtype)
    if not np.all(s == 1):
        if conv.op_type == "Conv":  # W: [M, C/group, k...], output channel on axis 0
            w_new = w * s.reshape((-1,) + (1,) * (w.ndim - 1))
        else:  # ConvTranspose W: [C, M/group, k...]; output channel g*(M/group) + j
            c, mg = w.shape[0], w.shape[1]
            blocks = w.reshape((group, c // group, mg) + w.shape[2:])
            w_new = (blocks * s.reshape((group, 1, mg) + (1,) * (w.ndim - 2))).reshape(w.shape)
        w2 = _new_const(graph, f"{conv.inputs[1].name}_bn", w_new, w.dtype)  # type: ignore[union-attr]
        conv.set_input(1, w2)
    _set_bias(conv, b2)
    return None


def _fold_gemm(graph: Graph, gemm: Node, s: np.ndarray, shift: np.ndarray) -> str | None:
    b = _const(gemm.input(1))
    if b is None or b.ndim != 2:
        return "its B is not a constant 2-D matrix"
    trans_b = bool(gemm.attr("transB", 0))
    n = b.shape[0] if trans_b else b.shape[1]
    if s.shape[0] != n:
        return f"BN has {s.shape[0]} channels, Gemm has {n} columns"
    c = _const(gemm.input(2)) if gemm.input(2) is not None else np.zeros((), b.dtype)
    if c is None:
        return "its C is not a constant"
    c_new = (float(gemm.attr("beta", 1.0)) * c.astype(np.float64)) * s + shift
    c2 = _new_const(graph, f"{gemm.label}_bias_bn", c_new, b.dtype)
    if not np.all(s == 1):
        b_new = b * (s[:, None] if trans_b else s[None, :])
        b2 = _new_const(graph, f"{gemm.inputs[1].name}_bn", b_new, b.dtype)  # type: ignore[union-attr]
        gemm.set_input(1, b2)
    _set_bias(gemm, c2)
    gemm.attrs["beta"] = 1.0
    return None


def _fold_matmul(graph: Graph, mm: Node, bn: Node, s: np.ndarray, shift: np.ndarray) -> str | Value:
    """Fold into MatMul; returns the new bias Add's output, or the reason it cannot."""
    b = _const(mm.input(1))
    out = mm.outputs[0]
    if b is None or b.ndim != 2:
        return "its B is not a constant 2-D matrix"
    if out.type is None or out.type.rank != 2:
        return (f"its output {out.type} is not 2-D: BN normalizes axis 1, which is not the axis "
                f"B's columns produce")
    if s.shape[0] != b.shape[1]:
        return f"BN has {s.shape[0]} channels, MatMul has {b.shape[1]} columns"
    b2 = _new_const(graph, f"{mm.inputs[1].name}_bn", b * s[None, :], b.dtype)  # type: ignore[union-attr]
    bias = _new_const(graph, f"{mm.label}_bias_bn", shift, b.dtype)
    mm.set_input(1, b2)
    add = graph.add_node("Add", [out, bias], 1, name=f"{bn.label}_bias", after=mm)
    add.outputs[0].type = TensorType(out.type.elem_type, out.type.shape)
    return add.outputs[0]


FOLDERS = {"Conv": _fold_conv, "ConvTranspose": _fold_conv, "Gemm": _fold_gemm}


def per_channel(c: np.ndarray, out_rank: int, channels: int) -> np.ndarray | None:
    """``c`` as a ``[channels]`` vector when, broadcast against an output of rank ``out_rank``, it
    varies along axis 1 only (and does not grow the output); else None."""
    if c.ndim > out_rank or c.dtype.kind != "f":
        return None
    full = (1,) * (out_rank - c.ndim) + c.shape
    if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, channels):
        return None
    return np.broadcast_to(c.reshape(-1).astype(np.float64), (channels,))


def _affine_operands(graph: Graph, node: Node) -> tuple[Node, np.ndarray] | None:
    """For ``Mul``/``Add`` of a Conv/Gemm output by a per-channel constant: (producer, vector)."""
    if node.op_type not in ("Mul", "Add") or node.domain not in ("", "ai.onnx"):
        return None
    a, b = node.input(0), node.input(1)
    if a is None or b is None or len(node.inputs) != 2:
        return None
    x, c = (a, b) if b.is_constant else (b, a)
    p = x.producer
    if not (c.is_constant and p is not None and p.graph is graph and p.op_type in FOLDERS
            and p.domain in ("", "ai.onnx")) or x.type is None or x.type.shape is None:
        return None
    if node.outputs[0].type is None or node.outputs[0].type.shape != x.type.shape:
        return None
    channels = x.type.shape[1]
    if not isinstance(channels, int) or len(x.consumers()) != 1 or x in graph.outputs:
        return None
    vec = per_channel(np.asarray(c.const), len(x.type.shape), channels)
    return None if vec is None else (p, vec)


@register
class FoldBatchNorm(Pass):
    """Fold inference BatchNormalization into Conv/Gemm/MatMul weights (see module docstring)."""

    name = "fold-batchnorm"
    options = (
        Option("affine", bool, True,
               "also fold a per-channel constant Mul/Add that follows a Conv/Gemm (a "
               "BatchNormalization the exporter already decomposed)"),
    )

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        remarks: list[Remark] = []
        stats = {"folded": 0, "not_folded": 0, "affine_folded": 0}
        for bn in list(graph.nodes):
            if bn.graph is not graph:
                continue
            if self.opts["affine"] and self._try_affine(graph, bn, remarks):
                stats["affine_folded"] += 1
                continue
            if bn.op_type != "BatchNormalization" or bn.domain not in ("", "ai.onnx"):
                continue
            reason, producer = self._try(graph, bn)
            if reason is None:
                assert producer is not None
                stats["folded"] += 1
                remarks.append(self.remark(
                    "applied", f"folded {bn.label} into {producer.label} ({producer.op_type}) "
                    f"weights and bias", [bn.label, producer.label]))
            else:
                stats["not_folded"] += 1
                nodes = [bn.label] + ([producer.label] if producer is not None else [])
                remarks.append(self.remark("missed", f"not folded: {bn.label}: {reason}", nodes))
        return PassResult(stats["folded"] + stats["affine_folded"] > 0, remarks, stats)

    def _try_affine(self, graph: Graph, node: Node, remarks: list[Remark]) -> bool:
        found = _affine_operands(graph, node)
        if found is None:
            return False
        p, vec = found
        if node.op_type == "Mul":
            s, shift, what = vec, np.zeros_like(vec), "per-channel scale"
        else:
            s, shift, what = np.ones_like(vec), vec, "per-channel shift"
        if FOLDERS[p.op_type](graph, p, s, shift) is not None:
            return False
        x = p.outputs[0]
        y = node.outputs[0]
        node.drop_inputs()
        forward_value(graph, y, x)
        graph.remove_node(node)
        remarks.append(self.remark(
            "applied", f"folded {node.label} ({node.op_type}, {what}) into {p.label} "
            f"({p.op_type}) weights and bias", [node.label, p.label]))
        return True

    def _try(self, graph: Graph, bn: Node) -> tuple[str | None, Node | None]:
        x = bn.inputs[0]
        p = x.producer if x is not None else None
        if p is None or p.graph is not graph:
            return "its input is not computed by a Conv/ConvTranspose/Gemm/MatMul", None
        if p.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul") or p.domain not in ("", "ai.onnx"):
            return (f"its input comes from {p.label} ({p.op_type}), "
                    "not Conv/ConvTranspose/Gemm/MatMul", p)
        users = x.consumers()  # type: ignore[union-attr]
        if len(users) > 1 or x in graph.outputs:
            names = ", ".join(u.label for u in users) + (", graph output" if x in graph.outputs else "")
            return f"%{x.name} has {len(users) + (x in graph.outputs)} consumers ({names})", p  # type: ignore[union-attr]
        params = _bn_params(bn)
        if isinstance(params, str):
            return params, p
        s, shift, _ = params
        if p.op_type == "MatMul":
            folded = _fold_matmul(graph, p, bn, s, shift)
            reason, new_out = (folded, None) if isinstance(folded, str) else (None, folded)
        else:
            reason = FOLDERS[p.op_type](graph, p, s, shift)
            new_out = p.outputs[0]
        if reason is not None:
            return f"{p.label} ({p.op_type}): {reason}", p
        y = bn.outputs[0]
        bn.set_input(0, None)  # drop the use so the producer output can take BN's name
        assert new_out is not None
        if not forward_value(graph, y, new_out):
            raise AssertionError("unreachable: BN output renaming")  # producer out is not an interface
        graph.remove_node(bn)
        return None, p
