"""Data-dependent output lengths as bounded (padded) outputs plus a count, trimmed by the runtime.

NonZero, Compress, Unique and NonMaxSuppression produce as many elements as the data selects; a
static-shape compiler cannot size that buffer at compile time. As XLA does with bounded dynamic
shapes, :func:`bound_outputs` rewrites such a node whose results are graph outputs (and feed nothing
else) into ops that compute the result padded to its upper bound and the number of valid entries;
the caller slices the output to that count. The selection is data-parallel: the ``k``-th selected
element is the one whose inclusive prefix count of the mask is ``k + 1`` (``CumSum``), gathered
with ``Where`` + ``ReduceSum`` over a one-hot ``[bound, n]`` match (exact: one term per output
element). NonZero: the padded ``[rank, numel]`` coordinates (row-major order); Compress: the padded
input along ``axis`` (flattened without ``axis``; a shorter condition selects nothing beyond its
length); Unique (ONNX spec, opset 11): the elements, or with ``axis`` the slices along it, are rows
compared whole; a row is kept where no earlier one equals it, ranked lexicographically
(``sorted=1``, as ``numpy.unique``) or by first occurrence; Y, indices and counts are padded,
inverse_indices is exact. NonMaxSuppression (greedy, sequential) stays one node given a second
output, the count: its ``selected_indices`` is padded to
``num_batches * num_classes * min(max_output_boxes_per_class, spatial_dimension)`` rows, computed
by the kernel of ``compiler.loops.ops_nms``. Models of opset 11 and later (CumSum).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, helper, numpy_helper

BOUNDED_OPS = ("NonZero", "Compress", "Unique", "NonMaxSuppression")  # what bound_outputs may rewrite


class _B:
    def __init__(self, prefix: str, opset: int) -> None:
        self.prefix, self.opset, self.n = prefix, opset, 0
        self.nodes: list[NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def name(self, base: str) -> str:
        self.n += 1
        return f"{self.prefix}_{base}_{self.n}"

    def const(self, arr: Any) -> str:
        nm = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(arr), nm))
        return nm

    def op(self, op_type: str, inputs: list[str], out: str | None = None, **attrs: Any) -> str:
        out = out or self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def unsqueeze(self, x: str, axes: list[int]) -> str:
        if self.opset < 13:
            return self.op("Unsqueeze", [x], axes=axes)
        return self.op("Unsqueeze", [x, self.const(np.array(axes, np.int64))])

    def reduce_sum(self, x: str, axes: list[int], out: str | None = None) -> str:
        if self.opset < 13:
            return self.op("ReduceSum", [x], out, axes=axes, keepdims=0)
        return self.op("ReduceSum", [x, self.const(np.array(axes, np.int64))], out, keepdims=0)

    def select_matrix(self, mask: str, n: int) -> str:
        """``hit[j, i]``: element ``i`` is selected and is the ``j``-th selected one. ``[n, n]`` bool."""
        m64 = self.op("Cast", [mask], to=onnx.TensorProto.INT64)
        rank = self.op("Sub", [self.op("CumSum", [m64, self.const(np.array(0, np.int64))]),
                               self.const(np.array(1, np.int64))])
        same = self.op("Equal", [self.unsqueeze(rank, [0]), self.const(np.arange(n, dtype=np.int64).reshape(n, 1))])
        return self.op("And", [same, self.unsqueeze(mask, [0])])


def _nonzero(b: _B, node: NodeProto, shape: list[int], count: str) -> None:
    n = int(np.prod(shape))
    flat = b.op("Reshape", [node.input[0], b.const(np.array([n], np.int64))])
    mask = b.op("Cast", [flat], to=onnx.TensorProto.BOOL)
    hit = b.select_matrix(mask, n)  # [n(j), n(f)]
    coords = np.indices(shape).reshape(len(shape), n).astype(np.int64)  # [rank, n(f)]
    picked = b.op("Where", [b.unsqueeze(hit, [0]), b.const(coords.reshape(len(shape), 1, n)),
                            b.const(np.array(0, np.int64))])
    b.reduce_sum(picked, [2], node.output[0])
    b.reduce_sum(b.op("Cast", [mask], to=onnx.TensorProto.INT64), [0], count)


def _compress(b: _B, node: NodeProto, shape: list[int], cond_len: int, dtype: np.dtype, count: str
              ) -> int:
    axis = None
    for a in node.attribute:
        if a.name == "axis":
            axis = int(a.i)
    x = node.input[0]
    if axis is None:
        x = b.op("Reshape", [x, b.const(np.array([int(np.prod(shape))], np.int64))])
        shape, axis = [int(np.prod(shape))], 0
    r = len(shape)
    axis %= r
    n = shape[axis]
    mask = b.op("Cast", [node.input[1]], to=onnx.TensorProto.BOOL)
    if cond_len < n:
        mask = b.op("Concat", [mask, b.const(np.zeros(n - cond_len, bool))], axis=0)
    elif cond_len > n:
        mask = b.op("Slice", [mask, b.const(np.array([0], np.int64)), b.const(np.array([n], np.int64)),
                              b.const(np.array([0], np.int64))])
    hit = b.select_matrix(mask, n)  # [n(j), n(i)]
    perm = [k for k in range(r) if k != axis] + [axis]
    xt = b.unsqueeze(b.op("Transpose", [x], perm=perm), [r - 1])  # [..., 1, n(i)]
    picked = b.op("Where", [hit, xt, b.const(np.zeros((), dtype))])  # [..., n(j), n(i)]
    summed = b.reduce_sum(picked, [r])  # [..., n(j)]
    inv = [perm.index(k) for k in range(r)]
    b.op("Transpose", [summed], node.output[0], perm=inv)
    b.reduce_sum(b.op("Cast", [mask], to=onnx.TensorProto.INT64), [0], count)
    return axis


def _unique(b: _B, node: NodeProto, shape: list[int], count: str) -> list[tuple[int, int]]:
    """Unique: padded Y, indices, counts and the exact inverse_indices; returns ``[(output, axis to trim)]``.

    The ``n`` elements (no ``axis``) or the ``n`` slices along ``axis`` are rows of an ``[n, m]``
    matrix (``m = 1`` without ``axis``); two rows are equal when all ``m`` entries are, and row ``j``
    orders before row ``i`` (``sorted=1``) when they are equal before the first position where they
    differ and ``x[j] < x[i]`` there (lexicographic, as ``numpy.unique(axis=...)``). A row is kept
    where no earlier row equals it; Y gathers the kept rows at their first occurrence."""
    attrs = {a.name: int(a.i) for a in node.attribute if a.name in ("axis", "sorted")}
    axis = attrs.get("axis")
    r = len(shape)
    if axis is not None:
        axis %= r
        n = shape[axis]
        perm = [axis] + [k for k in range(r) if k != axis]
        rows = b.op("Reshape", [b.op("Transpose", [node.input[0]], perm=perm), b.const(np.array([n, -1], np.int64))])
    else:
        n = int(np.prod(shape))
        rows = b.op("Reshape", [node.input[0], b.const(np.array([n, 1], np.int64))])
    xi, xj = b.unsqueeze(rows, [1]), b.unsqueeze(rows, [0])  # [i, 1, m], [1, j, m]
    ne = b.op("Cast", [b.op("Not", [b.op("Equal", [xi, xj])])], to=onnx.TensorProto.INT64)  # [i, j, m]
    zero = b.const(np.array(0, np.int64))
    eq = b.op("Equal", [b.reduce_sum(ne, [2]), zero])  # [i, j]: row i == row j
    before = b.const(np.tril(np.ones((n, n), bool), -1))  # j < i
    dup = b.reduce_sum(b.op("Cast", [b.op("And", [eq, before])], to=onnx.TensorProto.INT64), [1])
    first = b.op("Equal", [dup, zero])  # [i]
    first64 = b.op("Cast", [first], to=onnx.TensorProto.INT64)
    if attrs.get("sorted", 1):
        same_before = b.op("Equal", [b.op("CumSum", [ne, b.const(np.array(2, np.int64))], exclusive=1), zero])
        lt = b.op("And", [b.op("Less", [xj, xi]), same_before])  # [i, j, m]: row j < row i, decided at m
        less = b.op("Greater", [b.reduce_sum(b.op("Cast", [lt], to=onnx.TensorProto.INT64), [2]), zero])  # [i, j]
        rank = b.reduce_sum(b.op("Cast", [b.op("And", [less, b.unsqueeze(first, [0])])],
                                 to=onnx.TensorProto.INT64), [1])
    else:
        rank = b.op("Sub", [b.op("CumSum", [first64, b.const(np.array(0, np.int64))]), b.const(np.array(1, np.int64))])
    same = b.op("Equal", [b.unsqueeze(rank, [0]), b.const(np.arange(n, dtype=np.int64).reshape(n, 1))])
    hit = b.op("And", [same, b.unsqueeze(first, [0])])  # [k, i]: row i is the k-th unique one
    outs = list(node.output) + [""] * 4
    idx = b.reduce_sum(b.op("Where", [hit, b.const(np.arange(n, dtype=np.int64).reshape(1, n)), zero]), [1],
                       outs[1] or None)  # padded with 0 (a valid row, trimmed away)
    if outs[0]:
        if axis is None:
            b.op("Gather", [b.op("Reshape", [node.input[0], b.const(np.array([n], np.int64))]), idx], outs[0], axis=0)
        else:
            b.op("Gather", [node.input[0], idx], outs[0], axis=axis)
    if outs[2]:
        owner = b.op("And", [eq, b.unsqueeze(first, [0])])  # [j, i]: row j == row i, i a first occurrence
        b.reduce_sum(b.op("Where", [owner, b.unsqueeze(rank, [0]), zero]), [1], outs[2])
    if outs[3]:
        per = b.reduce_sum(b.op("Cast", [eq], to=onnx.TensorProto.INT64), [1])
        b.reduce_sum(b.op("Where", [hit, b.unsqueeze(per, [0]), zero]), [1], outs[3])
    b.reduce_sum(first64, [0], count)
    return [(k, axis if k == 0 and axis is not None else 0) for k in (0, 1, 3) if outs[k]]


def rewrite_bounded(b: _B, n: NodeProto, shapes: dict[str, list[int]], dtypes: dict[str, np.dtype],
                    count: str) -> list[tuple[int, int]]:
    """Append to ``b`` the bounded form of ``n`` (one of :data:`BOUNDED_OPS`, its inputs statically
    shaped in ``shapes``): its outputs padded to their bound, and the int64 scalar ``count`` of valid
    entries. Returns ``[(output position, axis along which that output is valid up to count)]``."""
    if n.op_type == "NonZero":
        _nonzero(b, n, shapes[n.input[0]], count)
        return [(0, 1)]
    if n.op_type == "Compress":
        axis = _compress(b, n, shapes[n.input[0]], shapes[n.input[1]][0], dtypes.get(n.input[0], np.dtype(np.float32)),
                         count)
        return [(0, axis)]
    if n.op_type == "Unique":
        return _unique(b, n, shapes[n.input[0]], count)
    bounded = NodeProto()  # NonMaxSuppression: the same node, given its count output (compiler.ops.detection)
    bounded.CopyFrom(n)
    bounded.output.append(count)
    b.nodes.append(bounded)
    return [(0, 0)]


def bound_outputs(model: ModelProto, shapes: dict[str, list[int]], dtypes: dict[str, np.dtype]
                  ) -> tuple[ModelProto, list[tuple[int, str, int]]]:
    """Rewrite NonZero, Compress, Unique and NonMaxSuppression nodes whose outputs are graph outputs
    only (see the module docstring). Returns the new model (with one extra int64 scalar output per
    rewritten node) and ``[(graph output index, count output name, axis to trim)]``; the model itself
    when none applies. A NonMaxSuppression whose boxes and scores are both initializers is left to
    constant folding."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    outs = [o.name for o in model.graph.output]
    used = {i for n in model.graph.node for i in n.input}
    inits = {t.name for t in model.graph.initializer}

    def fits(n: NodeProto) -> bool:
        if n.domain not in ("", "ai.onnx") or not all(o in outs and o not in used for o in n.output if o):
            return False
        if n.op_type == "NonMaxSuppression":
            return len(n.output) == 1 and not (n.input[0] in inits and n.input[1] in inits)
        return (opset >= 11 and n.op_type in ("NonZero", "Compress", "Unique") and n.input[0] in shapes
                and (n.op_type != "Compress" or n.input[1] in shapes))

    todo = [n for n in model.graph.node if fits(n)]
    if not todo:
        return model, []
    out = ModelProto()
    out.CopyFrom(model)
    trims = []
    nodes: list[NodeProto] = []
    for n in out.graph.node:
        if not any(n.output[0] == t.output[0] for t in todo):
            nodes.append(n)
            continue
        b = _B(f"{n.name or n.op_type}_bounded", opset)
        count = f"{n.output[0]}__count"
        trimmed = rewrite_bounded(b, n, shapes, dtypes, count)
        nodes.extend(b.nodes)
        out.graph.initializer.extend(b.inits)
        out.graph.output.append(helper.make_tensor_value_info(count, onnx.TensorProto.INT64, []))
        for j, axis in trimmed:
            for k, o in enumerate(out.graph.output):
                if o.name == n.output[j]:
                    o.type.tensor_type.ClearField("shape")
                    trims.append((k, count, axis))
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out, trims


def trim_outputs(outs: list[Any], trims: list[tuple[int, str, int]], n_out: int) -> list[Any]:
    """Apply the trims of :func:`bound_outputs` to the outputs of a bounded model run.

    ``outs`` are its outputs in graph-output order: the ``n_out`` outputs of the model before the
    rewrite, then the int64 scalar counts, one per rewritten node in the order ``trims`` first names
    them. Returns the ``n_out`` outputs, each trimmed output cut to its first ``count`` entries along
    its axis (``numpy.take``); unchanged when ``trims`` is empty. Raises ValueError when ``outs`` does
    not hold ``n_out`` outputs plus one count per name in ``trims``.
    """
    outs = list(outs)
    names = list(dict.fromkeys(name for _k, name, _a in trims))  # appended in this order
    if len(outs) != n_out + len(names):
        raise ValueError(f"{len(outs)} outputs for {n_out} outputs and {len(names)} counts")
    counts = dict(zip(names, outs[n_out:], strict=True))
    for k, name, axis in trims:
        outs[k] = np.take(np.asarray(outs[k]), np.arange(int(np.asarray(counts[name]))), axis=axis)
    return outs[:n_out]
