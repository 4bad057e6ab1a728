"""``fuse-layer-norm``: recognise LayerNormalization written out as its parts and make it one group.

PyTorch's exporter (before opset 17, and ``nn.LayerNorm`` in many exported graphs since) writes
layer normalization as

    mean = ReduceMean(x, axes)            d = Sub(x, mean)
    var  = ReduceMean(Pow(d, 2), axes)    (or Mul(d, d))
    y    = Div(d, Sqrt(Add(var, eps)))    (or Mul(d, Reciprocal(Sqrt(...))))
    y    = Add(Mul(y, gamma), beta)       (each optional; operands in either order)

with ``axes`` a suffix of x's dims (``[-1]``: one row per token). The pass moves each such chain
into one :class:`FusedGroup` (kind ``reduction``, kernel ``fused_layer_norm_<n>``) whose attributes
say what it computes (``pattern = "LayerNormalization"``, ``axis``, ``epsilon``, and the names of
the mean and the normalized value), so the back end lowers it to one row kernel
(``compiler.schedule.rows``: mean and variance in registers, one store per element) instead of five
kernels and four intermediate tensors. The group keeps the original nodes, so its ONNX export (a
function) computes exactly what the model did. Semantics: ONNX LayerNormalization (opset 17),
``Y = (X - E[X]) / sqrt(Var[X] + epsilon) * Scale + B`` over the axes from ``axis`` on.

Left alone, with a missed remark naming the node and the reason, where a chain starts like a layer
norm (``ReduceMean -> Sub`` of the same input) but: an intermediate value has another consumer or is
a graph output; the axes are not a suffix or differ between the two ReduceMeans; keepdims is 0; the
power is not 2; epsilon, gamma or beta is not a constant, or gamma/beta vary along a non-normalized
axis; shapes are not static f32. ``LayerNormalization`` ops themselves need no rewrite (the back
end lowers them to the same row kernel); they get an analysis remark.
"""

from __future__ import annotations

import numpy as np

from ..ir import FusedGroup, Graph, Node, Value
from ..ir.rewrite import group_nodes
from .base import Pass, PassContext, PassResult, Remark, register


class _Miss(Exception):
    """A chain that started like a layer norm and is not one: the reason and the node."""

    def __init__(self, node: Node, why: str) -> None:
        super().__init__(why)
        self.node, self.why = node, why


def _axes(n: Node) -> list[int] | None:
    if n.attr("axes") is not None:
        return [int(a) for a in n.attr("axes")]
    ax = n.input(1)
    if ax is not None and ax.const is not None:
        return [int(a) for a in np.asarray(ax.const).reshape(-1)]
    return None


def _scalar(v: Value | None) -> float | None:
    if v is None or v.const is None or np.asarray(v.const).size != 1:
        return None
    return float(np.asarray(v.const).reshape(-1)[0])


def _only(graph: Graph, v: Value, where: Node) -> Node:
    """The single consumer of ``v`` (it must not be a graph output)."""
    cs = v.consumers()
    if len(cs) != 1 or any(o is v for o in graph.outputs):
        raise _Miss(where, f"%{v.name} has {len(cs)} consumers" + (" and is a graph output"
                                                                  if any(o is v for o in graph.outputs) else ""))
    return cs[0]


def _other(n: Node, v: Value) -> Value | None:
    ins = [x for x in n.inputs if x is not None]
    if len(ins) != 2 or not any(x is v for x in ins):
        return None
    return ins[1] if ins[0] is v else ins[0]


def _affine(graph: Graph, n: Node, y: Value, op: str, axis: int, rank: int) -> tuple[Node, Value] | None:
    """``n`` = op(y, const) with the const varying only along the normalized axes, or None."""
    if n.op_type != op:
        return None
    c = _other(n, y)
    if c is None or c.const is None or c is y:
        return None
    shape = np.asarray(c.const).shape
    lead = len(shape) - (rank - axis)
    if lead > 0 and any(d != 1 for d in shape[:lead]) or len(shape) > rank:
        return None
    return n, n.outputs[0]


def match(graph: Graph, m1: Node) -> dict | None:
    """The layer norm starting at ReduceMean ``m1``, or None when ``m1`` does not start one;
    raises :class:`_Miss` for a chain that starts like one and breaks off."""
    x = m1.input(0)
    if x is None or x.type is None or not x.type.is_static or x.type.short != "f32":
        return None
    dims = [int(d) for d in x.type.shape or ()]  # static (checked above): a shape of ints
    rank = len(dims)
    axes = _axes(m1)
    subs = [c for c in m1.outputs[0].consumers() if c.op_type == "Sub" and c.input(0) is x and c.input(1) is m1.outputs[0]]
    if axes is None or not subs:
        return None
    norm_axes = sorted(a + rank if a < 0 else a for a in axes)
    if norm_axes != list(range(rank - len(norm_axes), rank)) or not norm_axes:
        raise _Miss(m1, f"axes {axes} are not the last {len(axes)} axes of a rank-{rank} input")
    if int(m1.attr("keepdims", 1)) != 1:
        raise _Miss(m1, "keepdims is 0")
    sub = _only(graph, m1.outputs[0], m1)
    d = sub.outputs[0]
    cs = d.consumers()
    sq = next((c for c in cs if c.op_type == "Pow" and c.input(0) is d or c.op_type == "Mul"
               and c.input(0) is d and c.input(1) is d), None)
    div = next((c for c in cs if c.op_type in ("Div", "Mul") and c is not sq and c.input(0) is d), None)
    if len(cs) != 2 or sq is None or div is None or any(o is d for o in graph.outputs):
        raise _Miss(sub, f"%{d.name} is read by {', '.join(c.label for c in cs)}, not by a square and a "
                    "division only")
    if sq.op_type == "Pow" and _scalar(sq.input(1)) != 2.0:
        raise _Miss(sq, "the power is not a constant 2")
    m2 = _only(graph, sq.outputs[0], sq)
    if m2.op_type != "ReduceMean" or _axes(m2) != axes or int(m2.attr("keepdims", 1)) != 1:
        raise _Miss(m2, "the variance is not a ReduceMean over the same axes")
    add = _only(graph, m2.outputs[0], m2)
    eps = _scalar(_other(add, m2.outputs[0])) if add.op_type == "Add" else None
    if eps is None:
        raise _Miss(add, "the variance is not followed by Add of a constant epsilon")
    sqrt = _only(graph, add.outputs[0], add)
    if sqrt.op_type != "Sqrt":
        raise _Miss(sqrt, "no Sqrt after variance + epsilon")
    chain = [m1, sub, sq, m2, add, sqrt]
    if div.op_type == "Div":
        if div.input(1) is not sqrt.outputs[0] or _only(graph, sqrt.outputs[0], sqrt) is not div:
            raise _Miss(div, "the deviation is not divided by the standard deviation")
    else:
        rcp = _only(graph, sqrt.outputs[0], sqrt)
        if rcp.op_type != "Reciprocal" or div.input(1) is not rcp.outputs[0] or _only(graph, rcp.outputs[0], rcp) \
                is not div:
            raise _Miss(div, "the deviation is not multiplied by the reciprocal standard deviation")
        chain.append(rcp)
    chain.append(div)
    y, axis = div.outputs[0], rank - len(norm_axes)
    for op in ("Mul", "Add"):
        cs2 = y.consumers()
        if len(cs2) != 1 or any(o is y for o in graph.outputs):
            break
        hit = _affine(graph, cs2[0], y, op, axis, rank)
        if hit is None:
            break
        chain.append(hit[0])
        y = hit[1]
    return {"nodes": chain, "axis": axis - rank, "epsilon": eps, "mean": m1.name, "normalized": div.name,
            "n": int(np.prod([dims[a] for a in norm_axes]))}


@register
class FuseLayerNorm(Pass):
    """Recognise decomposed LayerNormalization and group it for the row kernel (module docstring)."""

    name = "fuse-layer-norm"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        remarks: list[Remark] = []
        found = []
        taken: set[int] = set()
        for n in list(graph.nodes):
            if n.op_type == "LayerNormalization":
                remarks.append(self.remark("analysis", f"{n.label} is a LayerNormalization op: lowered to one "
                                           "row kernel as it is", [n.label]))
            if n.op_type != "ReduceMean" or id(n) in taken:
                continue
            try:
                hit = match(graph, n)
            except _Miss as miss:
                remarks.append(self.remark("missed", f"not a LayerNormalization: {miss.node.label}: {miss.why}",
                                           [n.label, miss.node.label]))
                continue
            if hit is not None:
                found.append(hit)
                taken.update(id(x) for x in hit["nodes"])
        for i, hit in enumerate(found):
            nodes = hit.pop("nodes")
            labels = [x.label for x in nodes]
            group = group_nodes(graph, nodes, kind="reduction", kernel=self._kernel(graph, i))
            group.attrs.update(pattern="LayerNormalization", **{k: hit[k] for k in ("axis", "epsilon", "mean",
                                                                                   "normalized")})
            remarks.append(self.remark(
                "applied", f"recognised LayerNormalization over axis {hit['axis']} (N = {hit['n']}, epsilon "
                f"{hit['epsilon']:g}) in {' + '.join(labels)}: one row kernel {group.kernel}", labels,
                axis=hit["axis"], epsilon=hit["epsilon"], n=hit["n"]))
        if found:
            graph.topological_sort()
        return PassResult(bool(found), remarks, {"layer_norms": len(found)})

    @staticmethod
    def _kernel(graph: Graph, i: int) -> str:

        taken = {n.kernel for n in graph.nodes if isinstance(n, FusedGroup)}
        k = i
        while f"fused_layer_norm_{k}" in taken:
            k += 1
        return f"fused_layer_norm_{k}"
