"""Run-time bounds of index operands that are graph inputs (ONNX operator spec: Gather,
GatherElements, GatherND, ScatterElements and ScatterND take indices in ``[-s, s-1]`` for an axis of
size ``s``; outside is an error). The kernels clamp indices to stay in memory, which would turn such
an input into silent garbage; :func:`check_index_inputs` refuses it before the kernels run, naming the
node, the input, the position and the value. Indices computed inside the model are checked in the
kernels (``compiler.runtime.faults``); indices known at compile time are ``compiler.ops.indices``'s.

Cost: one vectorized comparison over each index input before the run, nothing inside the kernels:
1.1 ms per million int64 indices (median of 30, numpy, one core of a shared 2-core machine).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import CompileError

INDEXING = frozenset({"Gather", "GatherElements", "GatherND", "ScatterElements", "Scatter", "ScatterND"})


def _nodes(graph: Any, outer: dict[int, Any]) -> Iterator[tuple[Any, dict[int, Any]]]:
    """Every node of ``graph`` and inside its fused groups, with a map from inner values to outer ones."""
    for node in graph.nodes:
        body = getattr(node, "body", None)
        if body is not None:
            inner = {id(b): outer.get(id(o), o) for b, o in zip(body.inputs, node.inputs, strict=False)}
            yield from _nodes(body, inner)
        else:
            yield node, outer


def _sizes(node: Any) -> tuple[list[int], int] | None:
    """``(sizes, first axis)`` the node's indices address (see ``compiler.ops.indices.check_indices``)."""
    x, idx = node.inputs[0], node.inputs[1]
    if x is None or idx is None or x.type is None or not x.type.is_static or idx.type is None:
        return None
    shape = [int(d) for d in x.type.shape]
    if node.op_type in ("GatherND", "ScatterND"):
        if not idx.type.is_static or not idx.type.shape:
            return None
        b = int(node.attrs.get("batch_dims", 0)) if node.op_type == "GatherND" else 0
        last = int(idx.type.shape[-1])
        return shape[b:b + last], b
    axis = int(node.attrs.get("axis", 0))
    axis = axis + len(shape) if axis < 0 else axis
    return [shape[axis]], axis


def index_checks(graph: Any) -> list[dict[str, Any]]:
    """``[{"input", "node", "op", "sizes", "first_axis"}]``: the indexing nodes of ``graph`` (after the
    passes, fused groups included) whose indices are a graph input."""
    inputs = {id(v): v.name for v in graph.inputs}
    out = []
    for node, outer in _nodes(graph, {}):
        if node.op_type not in INDEXING or len(node.inputs) < 2 or node.inputs[1] is None:
            continue
        idx = outer.get(id(node.inputs[1]), node.inputs[1])
        sizes = _sizes(node)
        if id(idx) in inputs and sizes is not None:
            out.append({"input": inputs[id(idx)], "node": node.label, "op": node.op_type, "sizes": sizes[0],
                        "first_axis": sizes[1]})
    return out


def check_index_inputs(checks: Sequence[dict[str, Any]], inputs: dict[str, np.ndarray]) -> None:
    """Raise CompileError(stage="run", node=...) for the first index input out of its range."""
    for c in checks:
        a = np.asarray(inputs[c["input"]]).astype(np.int64, copy=False)
        sizes = c["sizes"]
        if a.size == 0 or not sizes:
            continue
        bound = np.asarray(sizes, np.int64) if len(sizes) > 1 else np.int64(sizes[0])
        bad = (a < -bound) | (a >= bound)
        if not bad.any():
            continue
        pos = tuple(int(p) for p in np.argwhere(bad)[0])
        k = pos[-1] if len(sizes) > 1 else 0
        size = int(sizes[k])
        raise CompileError("run", f"node {c['node']} ({c['op']}): input {c['input']!r} index{list(pos)} = {int(a[pos])}"
                           f" is out of range for axis {c['first_axis'] + k} of size {size} (ONNX {c['op']}: "
                           f"indices must be in [-{size}, {size - 1}])", node=c["node"], op=c["op"])
