"""``simplify``: local algebraic rewrites to the canonical forms the later passes expect.

Rewrites (applied to a fixed point, each a rule ``node -> replacement or None``):
- ``Identity(x)`` -> ``x``;
- ``Dropout(x)`` in inference (no ``training_mode`` input, or a constant false one) -> ``x``;
  a used ``mask`` output becomes ``ConstantOfShape(shape(x), true)`` (all elements kept);
- one-input ``Sum``/``Max``/``Min``/``Mean`` -> its input; ``Cast`` to the input's own type -> its
  input;
- ``Transpose`` with the identity ``perm`` -> its input; ``Transpose(Transpose(x, p), q)`` ->
  ``Transpose(x, [p[i] for i in q])`` (and to ``x`` when that is the identity);
- ``Flatten(x)`` with a static output shape -> ``Reshape(x, const shape)``;
- a view op (``Reshape``, ``Flatten``, ``Squeeze``, ``Unsqueeze``) whose input comes from another
  view op -> ``Reshape`` of the first view's input to the static output shape (so chains and
  ``Squeeze``/``Unsqueeze`` pairs collapse), and any view op whose output shape equals its
  input shape (no-op ``Reshape``, a pair that cancels) -> its input.
Graph outputs keep their names (the surviving value is renamed); a rewrite that would have to
rename a graph input or merge two graph outputs is skipped.

Canonical forms later passes rely on, left alone here on purpose:
- ``Gemm`` keeps its ``transB`` and constant ``B``: ``fold-batchnorm`` scales B's output
  channels for either layout and ``fuse-ops`` treats ``Gemm`` as an anchor; ``MatMul + Add`` is
  not turned into ``Gemm`` (fusion gives the same kernel as an anchor with a bias epilogue);
- ``BatchNormalization`` is left for ``fold-batchnorm``;
- ``Sigmoid(x) * x`` (SiLU) and ``x * Sigmoid(1.702 x)`` stay as written: ``fuse-ops`` fuses them
  into the producer's epilogue, and the back end computes them in registers;
- view ops that change the shape stay (as one ``Reshape``); they become injective kernels.
Rules need static shapes where they compare or emit shapes; with symbolic dims they are skipped.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir import Graph, Node, Value
from ..ir.rewrite import forward_value
from .base import Pass, PassContext, PassResult, Remark, register

VIEW_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})


def _static(v: Value | None) -> tuple[int, ...] | None:
    if v is None or v.type is None or not v.type.is_static:
        return None
    return tuple(v.type.shape)  # type: ignore[arg-type]


def _forward(graph: Graph, node: Node, src: Value) -> str | None:
    """Replace the node's first output by ``src`` and remove the node."""
    name, out = src.name, node.outputs[0].name
    if not forward_value(graph, node.outputs[0], src):
        return None
    graph.remove_node(node)
    return f"to %{name}" + (f" (renamed %{out}, a graph output)" if src.name != name else "")


def _identity(graph: Graph, node: Node) -> str | None:
    return _forward(graph, node, node.inputs[0])  # type: ignore[arg-type]


def _dropout(graph: Graph, node: Node) -> str | None:
    training = node.input(2)
    if training is not None and (not training.is_constant or bool(np.asarray(training.const))):
        return None
    x = node.inputs[0]
    assert x is not None
    if len(node.outputs) > 1 and (node.outputs[1].uses() or node.outputs[1] in graph.outputs):
        shape = _static(x)
        if shape is None:
            return None
        dims = graph.add_constant(f"{node.outputs[1].name}_shape", np.array(shape, np.int64))
        mask = graph.add_node("ConstantOfShape", [dims], 1, {"value": np.ones(1, np.bool_)},
                              name=f"{node.label}_mask", before=node)
        mask.outputs[0].type = node.outputs[1].type
        if not forward_value(graph, node.outputs[1], mask.outputs[0]):
            graph.remove_node(mask)
            return None
    return _forward(graph, node, x)


def _single_input(graph: Graph, node: Node) -> str | None:
    if len(node.inputs) != 1 or node.inputs[0] is None:
        return None
    return _forward(graph, node, node.inputs[0])


def _cast(graph: Graph, node: Node) -> str | None:
    x = node.inputs[0]
    if x is None or x.type is None or x.type.elem_type != node.attr("to"):
        return None
    return _forward(graph, node, x)


def _transpose(graph: Graph, node: Node) -> str | None:
    x = node.inputs[0]
    assert x is not None
    perm = node.attr("perm")
    if perm is None:
        return None
    perm = list(perm)
    if perm == list(range(len(perm))):
        return _forward(graph, node, x)
    inner = x.producer
    if inner is None or inner.op_type != "Transpose" or inner.attr("perm") is None:
        return None
    first = list(inner.attr("perm"))
    composed = [first[i] for i in perm]
    src = inner.inputs[0]
    assert src is not None
    if composed == list(range(len(composed))):
        return _forward(graph, node, src)
    node.set_input(0, src)
    node.attrs["perm"] = composed
    return f"composed with {inner.label} into perm {composed}"


def _view(graph: Graph, node: Node) -> str | None:
    x = node.inputs[0]
    assert x is not None
    out_shape = _static(node.outputs[0])
    if out_shape is None:
        return None
    if _static(x) == out_shape:
        return _forward(graph, node, x)
    inner = x.producer
    chained = inner is not None and inner.op_type in VIEW_OPS and inner.domain in ("", "ai.onnx")
    if not chained and node.op_type != "Flatten":
        return None
    src = inner.inputs[0] if chained else x  # type: ignore[union-attr]
    assert src is not None
    if _static(src) == out_shape:
        return _forward(graph, node, src)
    if 0 in out_shape:
        return None  # a 0 in a Reshape shape means "copy this dim" unless allowzero (opset 14)
    old = inner.label if chained else ""  # type: ignore[union-attr]
    shape = graph.add_constant(f"{node.outputs[0].name}_shape", np.array(out_shape, np.int64))
    node.op_type = "Reshape"
    node.attrs = {}
    node.set_inputs([src, shape])
    via = f" through {old}" if chained else ""
    return f"to Reshape(%{src.name}){via} with shape {list(out_shape)}"


RULES: dict[str, Callable[[Graph, Node], str | None]] = {
    "Identity": _identity,
    "Dropout": _dropout,
    "Sum": _single_input,
    "Max": _single_input,
    "Min": _single_input,
    "Mean": _single_input,
    "Cast": _cast,
    "Transpose": _transpose,
    "Reshape": _view,
    "Flatten": _view,
    "Squeeze": _view,
    "Unsqueeze": _view,
}


def _simplify(graph: Graph, remarks: list[Remark], make_remark, stats: dict[str, int]) -> bool:
    changed = False
    progress = True
    while progress:
        progress = False
        for node in list(graph.nodes):
            if node.graph is not graph:
                continue  # removed by an earlier rewrite in this sweep
            for sub in node.subgraphs():
                changed |= _simplify(sub, remarks, make_remark, stats)
            rule = RULES.get(node.op_type)
            if rule is None or node.domain not in ("", "ai.onnx") or not node.inputs:
                continue
            label, op = node.label, node.op_type
            what = rule(graph, node)
            if what is None:
                continue
            remarks.append(make_remark("applied", f"simplified {label} ({op}) {what}", [label]))
            stats[op] = stats.get(op, 0) + 1
            progress = changed = True
    return changed


@register
class Simplify(Pass):
    """Local canonicalizations (see module docstring)."""

    name = "simplify"
    options = ()

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        remarks: list[Remark] = []
        stats: dict[str, int] = {}
        changed = _simplify(graph, remarks, self.remark, stats)
        return PassResult(changed, remarks, {"rewrites": sum(stats.values()), "by_op": stats})
