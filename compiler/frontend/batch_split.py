"""Is a graph separable along its batch dim? The analysis behind run-time batch sizes (issue 13 item 3).

A model whose ranged dim ``N`` is axis 0 of its inputs can be served for every ``N`` by one set of
kernels compiled for ``N = 1`` and called once per sample (``compiler.runtime.batch``), as long as
no node computes across samples: then sample ``n`` of every value depends only on sample ``n`` of
the inputs, and the whole computation is the per-sample one repeated. This module decides that
from the graph IR after the passes at ``N = 1`` and at ``N = k`` (the range's maximum, >= 2; same
pipeline):

* each value is **per-sample** (its shape at ``k`` is its shape at 1 with axis 0 times ``k``: C-order
  storage then holds the samples one after another, each as large as at ``N = 1``) or **shared**
  (the same shape at both: batch-independent); anything else (``N`` on another axis, ``N + 1``
  rows) makes the graph not separable;
* each node reading or writing a per-sample value must keep samples apart: elementwise and
  broadcast ops; reductions, Softmax, LayerNormalization, Concat, Split, Gather ... over an axis
  other than 0; Transpose keeping axis 0 first; Slice leaving axis 0 whole; MatMul and Gemm whose
  per-sample operand carries the batch in its leading (not its contraction) dim; Conv, pooling and
  per-sample normalizations on input 0 with one output sample per input sample; reshapes (the
  value check above covers their layout). A node that reads per-sample values and writes a shared
  one (a reduction over the batch) is refused, and so is any op not listed here;
* constants read by nodes must be equal at both sizes (a ``Shape`` of the input folded into
  arithmetic would differ), except the shape operands of Reshape, Expand, ConstantOfShape and
  Resize, which only fix an output shape already checked.

Semantics of each op: the ONNX operator spec (axis attributes and their defaults). The result is
the per-sample value names, or the reason (naming the node, op and value) the graph is not
separable, which the driver reports in a remark when it falls back to one compilation per size.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import FusedGroup, Graph, Node, Value
from ..ops.registry import op_kind

_LAYOUT = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Expand", "Dropout", "ConstantOfShape"}
_PER_SAMPLE = {"Conv", "ConvTranspose", "ConvInteger", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool",
               "GlobalMaxPool", "GlobalLpPool", "InstanceNormalization", "LRN", "GroupNormalization",
               "BatchNormalization", "DepthToSpace", "SpaceToDepth", "Resize", "Upsample", "NchwcConv",
               "ReorderInput", "ReorderOutput"}
_AXIS_OPS = {"Softmax": -1, "LogSoftmax": -1, "Hardmax": -1, "LayerNormalization": -1, "Concat": None,
             "Split": 0, "Gather": 0, "TopK": -1, "ArgMax": 0, "ArgMin": 0, "CumSum": None}
_SHAPE_OPERANDS = {("Reshape", 1), ("Expand", 1), ("ConstantOfShape", 0), ("Resize", 2), ("Resize", 3),
                   ("Upsample", 1)}


@dataclass(frozen=True)
class BatchSplit:
    """The analysis' answer: ``per_sample`` value names (axis 0 grows with N), or ``reason`` why not."""

    per_sample: frozenset[str]
    reason: str | None = None


def _values(g: Graph) -> Iterator[Value]:
    yield from g.values()
    for n in g.walk():
        for v in n.inputs:
            if v is not None:
                yield v
        yield from n.outputs
        if isinstance(n, FusedGroup):
            yield from n.body.values()


def _shapes(g: Graph) -> dict[str, tuple[int, ...] | None]:
    out: dict[str, tuple[int, ...] | None] = {}
    for v in _values(g):
        t = v.type
        out[v.name] = tuple(int(d) for d in t.shape or ()) if t is not None and t.is_static else None
    return out


def _consts(g: Graph) -> dict[str, np.ndarray]:
    """Every constant by name, a fused group's body inputs bound to their outer constants included."""
    out = {v.name: v.const for v in _values(g) if v.const is not None}
    for n in g.walk():
        if isinstance(n, FusedGroup):
            for inner, outer in zip(n.body.inputs, n.inputs, strict=False):
                if outer is not None and outer.const is not None:
                    out[inner.name] = outer.const
    return out


class _Checker:
    def __init__(self, g1: Graph, g2: Graph, k: int) -> None:
        self.s1, self.s2, self.k = _shapes(g1), _shapes(g2), k
        self.c1, self.c2 = _consts(g1), _consts(g2)
        self.per: set[str] = set()

    def const(self, v: Value | None) -> Any:
        """``v``'s data at N = 1 (False: not a constant; None: no such input)."""
        if v is None:
            return None
        c = self.c1.get(v.name)
        return False if c is None else np.asarray(c)

    def axis(self, node: Node, rank: int, default: Any) -> int | None:
        a = node.attr("axis", default)
        if a is None and node.op_type == "CumSum":
            k = self.const(node.input(1))
            a = None if k is None or k is False else int(k.reshape(-1)[0])
        return None if a is None or rank == 0 else int(a) % rank

    def axes(self, node: Node, rank: int) -> list[int] | None:
        axes = node.attr("axes")
        if axes is None and node.input(1) is not None:
            k = self.const(node.input(1))
            axes = None if k is False or k is None else [int(x) for x in k.reshape(-1)]
        if axes is None or len(axes) == 0:
            return None if not node.attr("noop_with_empty_axes", 0) else []
        return [int(a) % rank for a in axes]

    def classify(self, v: Value) -> str:
        """``per-sample``, ``shared`` or why neither."""
        a, b = self.s1.get(v.name), self.s2.get(v.name)
        if a is None or b is None:
            return f"%{v.name} has no static shape at both sizes"
        if a == b:
            return "shared"
        if len(a) == len(b) >= 1 and b[0] == self.k * a[0] and a[1:] == b[1:]:
            self.per.add(v.name)
            return "per-sample"
        return f"%{v.name} has shape {list(a)} at N=1 and {list(b)} at N={self.k} (the batch is not its leading dim alone)"

    def node(self, n: Node) -> str | None:
        """None when ``n`` keeps samples apart; else the reason."""
        where = f"{n.label} ({n.op_type})"
        ins = [(i, v) for i, v in enumerate(n.inputs) if v is not None]
        cls = {}
        for _, v in [*ins, *((0, o) for o in n.outputs)]:
            cls[v.name] = self.classify(v)
            if cls[v.name] not in ("shared", "per-sample"):
                return f"{where}: {cls[v.name]}"
        for i, v in ins:
            mine = self.c1.get(v.name)
            if mine is not None and (n.op_type, i) not in _SHAPE_OPERANDS and not isinstance(n, FusedGroup):
                other = self.c2.get(v.name)
                if other is None or np.shape(other) != np.shape(mine) or not np.array_equal(other, mine):
                    return f"{where}: constant %{v.name} differs between N=1 and N={self.k} (it depends on the batch size)"
        per_in = [i for i, v in ins if cls[v.name] == "per-sample"]
        per_out = [o for o in n.outputs if cls[o.name] == "per-sample"]
        if not per_in and not per_out or isinstance(n, FusedGroup):
            return None  # batch-independent, or a group: its body's nodes are checked one by one
        if per_in and len(per_out) != len(n.outputs):
            return f"{where}: reads per-sample values and writes %{n.outputs[0].name}, which is not (it mixes samples)"
        return self.op_rule(n, where, per_in)

    def op_rule(self, n: Node, where: str, per_in: list[int]) -> str | None:
        op = n.op_type
        x = n.inputs[per_in[0]] if per_in else n.outputs[0]
        assert x is not None
        rank = len(self.s1[x.name] or ())
        kind = op_kind(n)
        if op in _LAYOUT or kind in ("elementwise", "broadcast") and op not in _PER_SAMPLE:
            return None
        if op in _PER_SAMPLE:
            if per_in != [0] or self.s1[n.outputs[0].name][0] != self.s1[x.name][0]:  # type: ignore[index]
                return f"{where}: its per-sample operand must be input 0, one output sample per input sample"
            return None
        if op in _AXIS_OPS:
            if op == "Gather" and per_in == [1]:  # per-sample indices into shared data (the shapes are checked)
                return None
            axis = self.axis(n, rank, _AXIS_OPS[op])
            return None if axis not in (None, 0) else f"{where}: computes along axis {axis} of %{x.name}, the batch axis"
        if op.startswith("Reduce"):
            axes = self.axes(n, rank)
            return None if axes is not None and 0 not in axes else f"{where}: reduces over the batch axis of %{x.name}"
        if op == "Transpose":
            perm = n.attr("perm") or list(range(rank))[::-1]
            return None if perm[0] == 0 else f"{where}: moves the batch axis (perm {list(perm)})"
        if op == "Slice":
            return self.slice_rule(n, where, rank)
        if op == "Pad" and per_in == [0]:
            return self.pad_rule(n, where, rank)
        if op == "MatMul":
            if per_in == [0] or all(len(self.s1[v.name] or ()) >= 3 for i in per_in if (v := n.inputs[i]) is not None):
                return None
            return f"{where}: its second operand carries the batch in a contraction dim"
        if op == "Gemm":
            if 1 in per_in or (0 in per_in and n.attr("transA", 0)):
                return f"{where}: the batch is in a contraction dim (transA or a per-sample B)"
            return None
        return f"{where}: op {op} is not known to keep samples apart"

    def pad_rule(self, n: Node, where: str, rank: int) -> str | None:
        """Pad (any mode) keeps samples apart when it pads nothing on the batch axis: the ``pads`` input
        (opset 11+) or attribute, over ``axes`` (opset 18+) or every axis, known at compile time."""
        pads = self.const(n.input(1)) if len(n.inputs) > 1 else n.attr("pads")
        axes = self.const(n.input(3)) if len(n.inputs) > 3 else None
        if pads is None or pads is False or axes is False:
            return f"{where}: pads known only at run time"
        p = np.asarray(pads).reshape(-1)
        ax = [int(a) % rank for a in np.asarray(axes).reshape(-1)] if axes is not None else list(range(rank))
        if len(p) != 2 * len(ax) or any(a == 0 and (p[j] or p[j + len(ax)]) for j, a in enumerate(ax)):
            return f"{where}: pads the batch axis"
        return None

    def slice_rule(self, n: Node, where: str, rank: int) -> str | None:
        vals = [self.const(n.input(i)) for i in range(1, 5)]
        vals = [v.reshape(-1) if isinstance(v, np.ndarray) else v for v in vals]
        if any(v is False for v in vals):
            return f"{where}: slice bounds known only at run time"
        starts, ends, axes, steps = vals
        axes = [int(a) % rank for a in axes] if axes is not None else list(range(len(starts)))  # type: ignore[arg-type]
        for j, a in enumerate(axes):
            if a == 0:
                step = int(steps[j]) if steps is not None else 1  # type: ignore[index]
                if int(starts[j]) != 0 or step != 1 or int(ends[j]) < 2 ** 31 - 1:  # type: ignore[index]
                    return f"{where}: slices the batch axis"
        return None


def batch_split(g1: Graph, g2: Graph, k: int = 2) -> BatchSplit:
    """Whether ``g1`` (the graph IR after the passes at N = 1) serves every N when run per sample,
    given ``g2`` (the same model at N = ``k`` >= 2, the range's maximum); see the module docstring.
    Returns the per-sample values, or ``reason`` naming the first node (op, value) that keeps it
    from being separable."""
    if k < 2:
        raise ValueError(f"batch_split compares N=1 with N={k}: needs N >= 2")
    chk = _Checker(g1, g2, k)
    for v in g1.inputs:
        c = chk.classify(v)
        if c not in ("shared", "per-sample"):
            return BatchSplit(frozenset(), f"input {v.name!r}: {c}")
    for n in g1.walk():
        why = chk.node(n)
        if why is not None:
            return BatchSplit(frozenset(), why)
    for v in g1.outputs:
        c = chk.classify(v)
        if c not in ("shared", "per-sample"):
            return BatchSplit(frozenset(), f"graph output %{v.name}: {c}")
        if c == "per-sample" and v.const is not None:
            return BatchSplit(frozenset(), f"graph output %{v.name} is a constant that depends on the batch size")
    return BatchSplit(frozenset(chk.per))
