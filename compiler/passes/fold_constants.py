"""``fold-constants``: evaluate at compile time every node whose result is known.

Rewrites:
- a node whose inputs are all constants (omitted optional inputs allowed), and a node with no
  inputs (``Constant``), is evaluated with ``onnx.reference.ReferenceEvaluator`` on a one-node
  model (``prism.NarrowCast`` by its reference ``OpRun`` in ``compiler.ops.narrow``) and its
  outputs become constants;
- ``Shape`` of a value whose shape is static (the value itself need not be constant) becomes the
  constant shape (``start``/``end`` as in the ONNX spec, opset 15), and ``Size`` of a static shape
  its element count. ``ConstantOfShape`` is covered by the first rule once its shape is constant,
  so chains such as ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape`` fold completely.

Each folded output keeps its value name (so graph outputs keep theirs) and becomes a constant of
the graph the node lived in; the node is removed. Nodes are visited in topological order, so a
chain of foldable nodes folds in one run. ``If``/``Loop`` bodies are folded too.

Left alone, and why:
- random ops (``RandomNormal``, ``RandomUniform``, their ``Like`` forms, ``Multinomial``,
  ``Bernoulli``): each run must draw new numbers;
- nodes with subgraph attributes (``If``, ``Loop``, ``Scan``) and fused groups;
- a node whose outputs together would take more than ``max-bytes``: the size is computed from the
  inferred output types *before* evaluating, so a huge constant is never materialized (a missed
  remark gives the bytes and the limit). A node whose output shape is not static is refused the
  same way, since its size cannot be bounded beforehand.
The default limit, 512 MiB, is above the largest weight of the model set (VGG-19's first fully
connected layer, 25088x4096 f32 = 392 MiB, which the ``light_*`` models build with
``ConstantOfShape``) and far below the ONNX protobuf limit of 2 GiB and a worker's memory: folding
never creates a constant bigger than the weights a real model ships, while an ``Expand`` or
``ConstantOfShape`` to gigabytes stays a runtime op.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from ..ir import FusedGroup, Graph, Node, elem_type_of
from ..ir.rewrite import set_constant
from .base import Option, Pass, PassContext, PassResult, Remark, register

RANDOM_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
     "Bernoulli"}
)
DEFAULT_OPSET = 21


def _attribute(key: str, value: Any) -> onnx.AttributeProto:
    """An ONNX attribute from the IR's plain Python / numpy form."""
    if isinstance(value, np.ndarray):
        return helper.make_attribute(key, numpy_helper.from_array(value))
    if isinstance(value, list | tuple) and not value:
        return helper.make_attribute(key, [], attr_type=onnx.AttributeProto.INTS)
    if isinstance(value, list | tuple) and isinstance(value[0], np.ndarray):
        return helper.make_attribute(key, [numpy_helper.from_array(v) for v in value])
    return helper.make_attribute(key, value)


def evaluate_node(node: Node, opset_imports: dict[str, int]) -> list[np.ndarray]:
    """Run one node on its constant inputs with ``onnx.reference`` (the ONNX spec's evaluator).

    Returns one array per output. Raises whatever the evaluator raises for an invalid node.
    """
    in_names = ["" if v is None else f"in{i}" for i, v in enumerate(node.inputs)]
    out_names = [f"out{i}" for i in range(len(node.outputs))]
    proto = helper.make_node(node.op_type, in_names, out_names, domain=node.domain or "")
    proto.attribute.extend(_attribute(k, v) for k, v in sorted(node.attrs.items()))
    feeds: dict[str, np.ndarray] = {}
    graph_inputs = []
    for name, v in zip(in_names, node.inputs, strict=True):
        if v is None:
            continue
        data = np.asarray(v.const)
        feeds[name] = data
        elem = elem_type_of(data.dtype)
        graph_inputs.append(helper.make_tensor_value_info(name, elem, data.shape))
    graph_outputs = [helper.make_empty_tensor_value_info(n) for n in out_names]
    g = helper.make_graph([proto], "fold", graph_inputs, graph_outputs)
    opsets = dict(opset_imports) or {"": DEFAULT_OPSET}
    opsets.setdefault("", DEFAULT_OPSET)
    model = helper.make_model(
        g, opset_imports=[helper.make_opsetid(d, ver) for d, ver in sorted(opsets.items())]
    )
    from ..ops.narrow import NarrowCast  # prism.NarrowCast (compiler.frontend.narrow_types)

    results = ReferenceEvaluator(model, new_ops=[NarrowCast]).run(None, feeds)
    return [np.asarray(r) for r in results]


def _static_shape_fold(node: Node) -> np.ndarray | None:
    """The folded value of ``Shape``/``Size`` of a statically shaped input, else None."""
    x = node.input(0)
    if x is None or x.type is None or not x.type.is_static:
        return None
    shape = [int(d) for d in x.type.shape]  # type: ignore[union-attr]
    if node.op_type == "Shape":
        rank = len(shape)
        start = node.attr("start", 0)
        end = node.attr("end", rank)
        start = min(max(start + rank if start < 0 else start, 0), rank)
        end = min(max(end + rank if end < 0 else end, 0), rank)
        return np.array(shape[start:end], dtype=np.int64)
    if node.op_type == "Size":
        return np.array(int(np.prod(np.array(shape, dtype=np.int64))), dtype=np.int64)
    return None


def _size_from_inputs(node: Node) -> int | None:
    """Bytes of a ``ConstantOfShape`` result computed from its constant shape, else None."""
    if node.op_type != "ConstantOfShape" or node.input(0) is None:
        return None
    dims = np.asarray(node.input(0).const).reshape(-1)  # type: ignore[union-attr]
    if np.any(dims < 0):
        return None
    value = node.attr("value")
    itemsize = np.asarray(value).dtype.itemsize if value is not None else 4
    return int(np.prod([int(d) for d in dims], dtype=object)) * itemsize


@register
class FoldConstants(Pass):
    """Evaluate nodes with known inputs at compile time (see module docstring)."""

    name = "fold-constants"
    options = (
        Option("max-bytes", int, 512 * 1024 * 1024,
               "largest total size in bytes of a node's folded outputs; larger ones are left", minimum=0),
    )

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        remarks: list[Remark] = []
        stats = {"folded": 0, "refused": 0, "folded_bytes": 0}
        changed = self._fold_graph(graph, graph.opset_imports or {"": DEFAULT_OPSET}, remarks, stats)
        return PassResult(changed, remarks, stats)

    def _fold_graph(self, graph: Graph, opsets: dict[str, int], remarks: list[Remark],
                    stats: dict[str, int]) -> bool:
        changed = False
        limit = int(self.opts["max-bytes"])
        for node in list(graph.nodes):
            for sub in node.subgraphs():
                changed |= self._fold_graph(sub, opsets, remarks, stats)
            if isinstance(node, FusedGroup) or node.subgraphs() or node.op_type in RANDOM_OPS:
                continue
            shape_value = None
            if node.op_type in ("Shape", "Size") and node.domain in ("", "ai.onnx"):
                shape_value = _static_shape_fold(node)
            all_const = all(v is None or v.is_constant for v in node.inputs)
            if shape_value is None and not all_const:
                continue
            if shape_value is None:
                types = [v.type for v in node.outputs]
                size = _size_from_inputs(node)
                if size is None and any(t is None or not t.is_static for t in types):
                    shown = ", ".join(str(t) for t in types)
                    remarks.append(self.remark(
                        "missed", f"not folded: {node.label} output size is unknown ({shown})",
                        [node.label], limit=limit))
                    stats["refused"] += 1
                    continue
                if size is None:
                    size = sum(t.nbytes for t in types if t is not None)
                if size > limit:
                    remarks.append(self.remark(
                        "missed",
                        f"not folded: {node.label} ({node.op_type}) would materialize "
                        f"{size} bytes > max-bytes {limit}",
                        [node.label], bytes=size, limit=limit))
                    stats["refused"] += 1
                    continue
                try:
                    results = evaluate_node(node, opsets)
                except Exception as exc:  # the evaluator's own error: leave the node to run later
                    remarks.append(self.remark(
                        "missed", f"not folded: {node.label} ({node.op_type}): "
                        f"onnx.reference failed: {str(exc).splitlines()[0][:200]}",
                        [node.label]))
                    stats["refused"] += 1
                    continue
            else:
                results = [shape_value]
            outputs = list(node.outputs)
            datas = []
            for v, r in zip(outputs, results, strict=True):
                if v.type is not None and v.type.shape is not None:
                    r = np.asarray(r, dtype=v.type.dtype)
                    if v.type.is_static and tuple(r.shape) != tuple(v.type.shape):
                        raise ValueError(
                            f"fold-constants: {node.label} evaluated to shape {r.shape}, "
                            f"but its inferred type is {v.type}")
                datas.append(r)
            graph.remove_node(node, force=True)
            for v, data in zip(outputs, datas, strict=True):
                set_constant(graph, v, data)
            nbytes = int(sum(d.nbytes for d in datas))
            stats["folded"] += 1
            stats["folded_bytes"] += nbytes
            what = ", ".join(f"%{v.name}: {v.type}" for v in outputs)
            remarks.append(self.remark(
                "applied", f"folded {node.label} ({node.op_type}) into constant {what} "
                f"({nbytes} bytes)", [node.label], bytes=nbytes))
            changed = True
        return changed
