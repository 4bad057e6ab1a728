"""``fuse-siblings``: merge Conv, MatMul or Gemm nodes that read the same input into one wider node.

Sibling nodes (TASO's and TensorRT's horizontal fusion; the Q/K/V projections of an attention
layer, the 1x1 branches of an Inception block) read the same activation ``X`` with different
constant weights. Merged, ``X`` is read once and the GEMM is as wide as all of them together, so
its register tiles are fuller. Rewrites, per input value, each set of compatible siblings:

- ``MatMul(X, B_i)``, ``B_i`` constant ``[K, N_i]``: one ``MatMul(X, concat(B_i, axis=1))``. A bias
  ``Add`` that is a sibling's only consumer, with a constant of shape ``[N_i]`` (or ``[1, ..., N_i]``),
  is absorbed: one ``Add`` of the concatenated biases (zeros for siblings without one);
- ``Gemm(X, B_i, C_i)`` with equal ``alpha``, ``beta`` and ``transA = 0``, ``B_i`` constant, ``C_i``
  absent or constant along N only: one ``Gemm(X, concat(op(B_i)), concat(C_i))`` with ``transB = 0``;
- ``Conv(X, W_i, b_i)`` with ``group = 1`` and equal ``kernel_shape``, ``strides``, ``pads``,
  ``auto_pad`` and ``dilations``, ``W_i`` constant: one ``Conv`` with ``W`` and ``b`` concatenated along
  the output channels (only with option ``conv=true``, see below).

Each sibling's result is then a ``Slice`` of the merged result along the last axis (MatMul, Gemm) or
the channel axis (Conv), in the siblings' order. A ``Slice`` chain read by a MatMul (``Reshape ->
Transpose -> MatMul`` in attention) is that MatMul's operand access after ``fuse-ops`` (read in
place, never copied); a ``Slice`` read by anything else is a copy. That copy is why Conv siblings
are left alone by default (``conv=false``): their consumers (the branches' next Conv) read the
slice through a copy, which costs about as much as the re-reads of ``X`` that the merge saves.

The weights are concatenated at compile time (new constants; the old ones are removed when nothing
else reads them). Semantics are unchanged: each output element is the same sum over the same K
terms in the same order. A remark per merge (applied: the nodes, the widths) and per refusal
(missed: which attribute differs, a weight computed at run time, a grouped Conv). Only the
top-level graph is rewritten.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import Graph, Node, TensorType, Value
from ..ir.rewrite import forward_value
from .base import Option, Pass, PassContext, PassResult, Remark, register

CONV_KEYS = ("kernel_shape", "strides", "pads", "auto_pad", "dilations")


def _const(v: Value | None) -> np.ndarray | None:
    return None if v is None or v.const is None else np.asarray(v.const)


def _shape(v: Value | None) -> tuple[int, ...] | None:
    t = None if v is None else v.type
    return tuple(int(d) for d in t.shape) if t is not None and t.is_static else None  # type: ignore[union-attr]


def _bias_add(graph: Graph, v: Value, n: int) -> tuple[Node, np.ndarray] | None:
    """The Add that is ``v``'s only consumer, with a constant bias along the last axis only."""
    cs = v.consumers()
    if len(cs) != 1 or cs[0].op_type != "Add" or any(o is v for o in graph.outputs):
        return None
    add = cs[0]
    other = add.input(1) if add.input(0) is v else add.input(0)
    b = _const(other)
    if b is None or b.shape[-1:] != (n,) or any(d != 1 for d in b.shape[:-1]) or b.ndim > len(_shape(v) or ()):
        return None
    return add, b.reshape(n).astype(np.float32)


class _Refuse(Exception):
    pass


def _operand(node: Node) -> dict[str, Any]:
    """What merging needs of a candidate sibling: its kind key, weight, bias and width; raises
    :class:`_Refuse` with the reason it cannot be merged."""
    wv = node.input(1)
    w = _const(wv)
    if w is None:
        raise _Refuse(f"its weight %{wv.name if wv is not None else '?'} is computed at run time")
    if w.dtype != np.float32 or _shape(node.outputs[0]) is None:
        raise _Refuse("it is not a static float32 node")
    if node.op_type == "MatMul":
        if w.ndim != 2:
            raise _Refuse(f"its B has rank {w.ndim}, not 2")
        return {"key": ("MatMul", w.shape[0]), "w": w, "bias": None, "n": w.shape[1]}
    if node.op_type == "Gemm":
        if int(node.attr("transA", 0)):
            raise _Refuse("transA = 1")
        bm = w.T if int(node.attr("transB", 0)) else w
        c = _const(node.input(2))
        if node.input(2) is not None and c is None:
            raise _Refuse("its C is computed at run time")
        if c is not None and (c.size not in (1, bm.shape[1]) or c.ndim == 2 and c.shape[0] != 1):
            raise _Refuse(f"its C {list(c.shape)} varies along M")
        bias = None if c is None else np.broadcast_to(c.reshape(-1), (bm.shape[1],)).astype(np.float32)
        key = ("Gemm", bm.shape[0], float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0)))
        return {"key": key, "w": bm, "bias": bias, "n": bm.shape[1]}
    if int(node.attr("group", 1)) != 1:
        raise _Refuse(f"group = {node.attr('group')}")
    b = _const(node.input(2))
    if node.input(2) is not None and b is None:
        raise _Refuse("its bias is computed at run time")
    attrs = tuple((k, repr(node.attr(k))) for k in CONV_KEYS)
    return {"key": ("Conv", w.shape[1:], attrs), "w": w, "bias": b, "n": w.shape[0]}


def _why_apart(a: dict[str, Any], b: dict[str, Any]) -> str:
    ka, kb = a["key"], b["key"]
    if ka[0] != kb[0]:
        return f"{ka[0]} and {kb[0]} are different ops"
    if ka[0] == "Conv":
        if ka[1] != kb[1]:
            return f"weight shapes per output channel differ: {list(ka[1])} vs {list(kb[1])}"
        diff = [f"{x[0]} {x[1]} vs {y[1]}" for x, y in zip(ka[2], kb[2], strict=True) if x != y]
        return "attributes differ: " + "; ".join(diff)
    return f"{'alpha/beta or K' if ka[0] == 'Gemm' else 'K'} differ: {ka[1:]} vs {kb[1:]}"


@register
class FuseSiblings(Pass):
    name = "fuse-siblings"
    options = (
        Option("conv", bool, False, "also merge Conv siblings (their slices are copies: see the pass doc)"),
        Option("min-siblings", int, 2, "merge sets of at least this many siblings", minimum=2),
    )
    before = ("fuse-ops",)

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        remarks: list[Remark] = []
        changed = False
        for x in list(graph.values()):
            if x.const is not None or x.graph is not graph:
                continue
            sets = self._sets(graph, x, remarks)
            for sibs in sets:
                self._merge(graph, x, sibs, remarks)
                changed = True
        return PassResult(changed, remarks)

    def _sets(self, graph: Graph, x: Value, remarks: list[Remark]) -> list[list[tuple[Node, dict[str, Any]]]]:
        """The compatible sets of siblings reading ``x`` as input 0 (refusals become remarks)."""
        cands = [n for n in dict.fromkeys(x.consumers()) if n.op_type in ("MatMul", "Gemm", "Conv")
                 and n.input(0) is x and n.graph is graph]
        if len(cands) < 2:
            return []
        ok: list[tuple[Node, dict[str, Any]]] = []
        for n in cands:
            try:
                ok.append((n, _operand(n)))
            except _Refuse as e:
                remarks.append(self.remark("missed", f"{n.label} ({n.op_type}) not merged with its siblings "
                                           f"reading %{x.name}: {e}", [n.label], input=x.name))
        by_key: dict[Any, list[tuple[Node, dict[str, Any]]]] = {}
        for n, info in ok:
            by_key.setdefault(info["key"], []).append((n, info))
        groups = sorted(by_key.values(), key=len, reverse=True)
        out = []
        for g in groups:
            if g[0][1]["key"][0] == "Conv" and not self.opts["conv"] and len(g) >= 2:
                remarks.append(self.remark(
                    "missed", f"Conv siblings {', '.join(n.label for n, _ in g)} reading %{x.name} not merged: "
                    "option conv=false (each branch would read its slice through a copy)",
                    [n.label for n, _ in g], input=x.name))
            elif len(g) >= max(2, self.opts["min-siblings"]):
                out.append(g)
        if len(groups) > 1:
            first = groups[0][0]
            for g in groups[1:]:
                n, info = g[0]
                remarks.append(self.remark("missed", f"{n.label} not merged with {first[0].label} (both read "
                                           f"%{x.name}): {_why_apart(first[1], info)}",
                                           [first[0].label, n.label], input=x.name))
        return out

    def _merge(self, graph: Graph, x: Value, sibs: list[tuple[Node, dict[str, Any]]], remarks: list[Remark]) -> None:
        first = min((n for n, _ in sibs), key=graph.nodes.index)
        kind = sibs[0][1]["key"][0]
        widths = [int(info["n"]) for _, info in sibs]
        label = "+".join(n.label for n, _ in sibs)
        adds: list[tuple[Node, np.ndarray] | None] = [None] * len(sibs)
        if kind == "MatMul":
            adds = [_bias_add(graph, n.outputs[0], info["n"]) for n, info in sibs]
        biases = [info["bias"] if info["bias"] is not None else a[1] if a is not None else None
                  for (_, info), a in zip(sibs, adds, strict=True)]
        axis = 1 if kind == "Conv" else -1
        w = np.concatenate([info["w"] for _, info in sibs], axis=0 if kind == "Conv" else 1)
        wv = graph.add_constant(f"{first.label}.merged_w", w)
        bias = None
        if any(b is not None for b in biases):
            bias = np.concatenate([b if b is not None else np.zeros(n, np.float32)
                                   for b, n in zip(biases, widths, strict=True)]).astype(np.float32)
        out_shape: list[int | str] = list(_shape(sibs[0][0].outputs[0]) or ())
        out_shape[axis] = sum(widths)
        out_t = TensorType.of("float32", out_shape)
        if kind == "MatMul":
            merged = graph.add_node("MatMul", [x, wv], 1, name=f"{first.label}.merged", before=first)
            if bias is not None:
                bv = graph.add_constant(f"{first.label}.merged_bias", bias)
                merged.outputs[0].type = out_t
                merged = graph.add_node("Add", [merged.outputs[0], bv], 1, name=f"{first.label}.merged_bias",
                                        before=first)
        else:
            bc = None if bias is None else graph.add_constant(f"{first.label}.merged_bias", bias)
            attrs = {k: v for k, v in first.attrs.items() if k != "transB"}
            if kind == "Gemm":
                attrs["transB"] = 0
            merged = graph.add_node(kind, [x, wv] + ([bc] if bc is not None else []), 1, attrs,
                                    name=f"{first.label}.merged", before=first)
        y = merged.outputs[0]
        y.type = out_t
        self._slices(graph, y, sibs, adds, widths, axis, first)
        remarks.append(self.remark(
            "applied", f"merged {len(sibs)} {kind} siblings reading %{x.name} into one of width {sum(widths)} "
            f"({' + '.join(map(str, widths))}): {label}" + (f"; {sum(a is not None for a in adds)} bias Add(s) "
                                                             "absorbed" if any(adds) else ""),
            [n.label for n, _ in sibs], input=x.name, widths=widths, op=kind))

    def _slices(self, graph: Graph, y: Value, sibs: list[tuple[Node, dict[str, Any]]],
                adds: list[tuple[Node, np.ndarray] | None], widths: list[int], axis: int, first: Node) -> None:
        rank = len(_shape(y) or ())
        old_opset = int(graph.opset_imports.get("", graph.opset_imports.get("ai.onnx", 13))) < 10
        ax = None if old_opset else graph.add_constant(f"{first.label}.slice_axis", np.array([axis % rank], np.int64))
        offs = [int(o) for o in np.cumsum([0, *widths])]
        slices = []
        for (n, _), a, lo, hi in zip(sibs, adds, offs[:-1], offs[1:], strict=True):
            if old_opset:  # Slice-1: starts, ends and axes are attributes
                sl = graph.add_node("Slice", [y], 1, {"starts": [lo], "ends": [hi], "axes": [axis % rank]},
                                    name=f"{n.label}.slice", before=first)
            else:
                starts = graph.add_constant(f"{n.label}.slice_start", np.array([lo], np.int64))
                ends = graph.add_constant(f"{n.label}.slice_end", np.array([hi], np.int64))
                sl = graph.add_node("Slice", [y, starts, ends, ax], 1, name=f"{n.label}.slice", before=first)
            sl.outputs[0].type = (a[0] if a is not None else n).outputs[0].type
            slices.append(sl)
        for (n, _), a, sl in zip(sibs, adds, slices, strict=True):
            old = a[0].outputs[0] if a is not None else n.outputs[0]
            weights = [v for v in n.inputs[1:] if v is not None] + ([c for c in a[0].inputs if c is not None
                                                                     and c.const is not None] if a else [])
            if not forward_value(graph, old, sl.outputs[0]):
                old.replace_all_uses_with(sl.outputs[0])
            if a is not None:
                graph.remove_node(a[0], force=True)
            graph.remove_node(n, force=True)
            for c in weights:
                if c.const is not None and not c.uses() and c.name in graph.constants:
                    graph.remove_constant(c)


__all__ = ["FuseSiblings"]
