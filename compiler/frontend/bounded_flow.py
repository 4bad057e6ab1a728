"""Bounded (data-dependent length) results read by further ops: padding carried through the graph.

``compiler.frontend.bounded`` turns a NonZero, Compress, Unique or NonMaxSuppression into its result
padded to an upper bound plus an int64 count of valid entries along one axis. When that result is
only a graph output, the runtime trims it. Here it feeds further nodes, and each node that reads a
padded value is kept exact on the valid prefix, as XLA's dynamic padder does for bounded dynamic
shapes (each padded dimension carries its run-time size):

* Ops that compute each position along the padded axis from the same position of their inputs
  (elementwise ops with broadcasting, ``Cast``, ``Transpose``, ``Unsqueeze``/``Squeeze``, ``Gather``
  on another axis or with padded indices, ``GatherND`` with padded index rows, ``MatMul`` on a row or
  batch axis, ``Slice``/``Concat``/``TopK``/``Softmax`` along other axes, reductions over other axes)
  give a padded result with the same count, the axis renumbered.
* Reductions over the padded axis (``ReduceSum``/``Mean``/``Max``/``Min``/``Prod``/``SumSquare``/
  ``L1``/``L2``/``LogSumExp``, ``ArgMax``/``ArgMin``) and ``Softmax``/``LogSoftmax`` along it read
  the padding replaced by the reduction's identity (0, 1, -inf, +inf; ``ReduceMean`` divides by the
  count): their results are exact. ``Shape`` and ``Size`` give the run-time length.
* A NonZero of a padded value, and a Compress whose condition is padded, read it with the padding
  masked to 0 / False (which selects nothing) and take their own bounded form: exact, with their
  own count (nested bounded ops).
* Any other op reading a padded value is a CompileError naming the node, the op and the bounded
  node the value comes from; nothing is computed on padding silently.

Graph outputs that are still padded are trimmed by the runtime (``compiler.frontend.bounded.
trim_outputs``: one int64 count output per bounded node appended after the graph outputs).
Semantics: the ONNX operator spec of each op; padding values never reach a valid position.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, helper

from ..errors import CompileError
from .bounded import BOUNDED_OPS, _B, rewrite_bounded

#: ``value name -> (static shape, numpy dtype)`` of a model's values, its caller's shape inference
Infer = Callable[[ModelProto], dict[str, tuple[list[int], np.dtype]]]
Pad = tuple[str, int]  # (count value name, padded axis)

ELEMENTWISE = {
    "Identity", "Cast", "CastLike", "Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal",
    "Floor", "Ceil", "Round", "Sign", "Not", "Erf", "Sin", "Cos", "LeakyRelu", "Elu", "Selu", "HardSigmoid",
    "HardSwish", "Softplus", "Clip", "IsNaN", "IsInf", "Gelu", "Mish", "Add", "Sub", "Mul", "Div", "Pow", "Mod",
    "Max", "Min", "Sum", "Mean", "And", "Or", "Xor", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
    "Where", "PRelu", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot",
}
REDUCE_FILL = {"ReduceSum": 0.0, "ReduceMean": 0.0, "ReduceSumSquare": 0.0, "ReduceL1": 0.0, "ReduceL2": 0.0,
               "ReduceProd": 1.0, "ReduceMax": -np.inf, "ReduceMin": np.inf, "ReduceLogSumExp": -np.inf,
               "ArgMax": -np.inf, "ArgMin": np.inf, "Softmax": -np.inf, "LogSoftmax": -np.inf}


def _attr(n: NodeProto, name: str, default: Any = None) -> Any:
    for a in n.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


class _Flow:
    """The rewrite state: ``pads`` (padded value -> (count, axis)), ``types`` (static shapes and
    dtypes of the padded model), the constants known at compile time and the node builder."""

    def __init__(self, model: ModelProto, types: dict[str, tuple[list[int], np.dtype]], pads: dict[str, Pad],
                 origin: dict[str, str], opset: int) -> None:
        self.types, self.pads, self.origin, self.opset = types, pads, origin, opset
        self.consts = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
        for n in model.graph.node:
            if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
                self.consts[n.output[0]] = onnx.numpy_helper.to_array(n.attribute[0].t)
        self.b = _B("padded", opset)

    def rank(self, v: str) -> int:
        return len(self.types[v][0])

    def ints(self, n: NodeProto, attr: str, pos: int) -> list[int] | None:
        """An axes-like list: the attribute (older opsets) or the constant input at ``pos``."""
        val = _attr(n, attr)
        if val is None and len(n.input) > pos and n.input[pos]:
            if n.input[pos] not in self.consts:
                raise self.error(n, f"its {attr} input is not a constant")
            val = self.consts[n.input[pos]].reshape(-1).tolist()
        return None if val is None else [int(x) for x in val]

    def error(self, n: NodeProto, why: str) -> CompileError:
        v = next(i for i in n.input if i in self.pads)
        src = self.origin[self.pads[v][0]]
        label = n.name or n.output[0]
        return CompileError("shape", f"{n.op_type} {label!r} reads {v!r}, whose length along axis {self.pads[v][1]} "
                            f"depends on the data ({src}); Prism cannot compute it on the padded (bounded) form: "
                            f"{why}", node=label, op=n.op_type)

    def masked(self, v: str, fill: float) -> str:
        """``v`` with its padded positions replaced by ``fill`` (in ``v``'s dtype; ±inf -> the dtype's
        extreme for an integer)."""
        count, axis = self.pads[v]
        shape, dtype = self.types[v]
        bound = shape[axis]
        where = [1] * len(shape)
        where[axis] = bound
        valid = self.b.op("Less", [self.b.const(np.arange(bound, dtype=np.int64).reshape(where)), count])
        value: float | int | bool = fill
        if dtype.kind in "iu" and np.isinf(fill):
            value = int(np.iinfo(dtype).max if fill > 0 else np.iinfo(dtype).min)
        elif dtype.kind == "b":
            value = bool(fill)
        return self.b.op("Where", [valid, v, self.b.const(np.array(value, dtype))])


def _elementwise(f: _Flow, n: NodeProto) -> Pad | None:
    ins = [i for i in n.input[: 1 if n.op_type == "CastLike" else None] if i]
    out_rank = max(f.rank(i) for i in ins)
    placed = {(f.pads[i][0], f.pads[i][1] + out_rank - f.rank(i)) for i in ins if i in f.pads}
    if len(placed) != 1:
        raise f.error(n, "two operands padded differently (lengths from different nodes)")
    count, axis = placed.pop()
    for i in ins:
        if i not in f.pads:
            k = axis - (out_rank - f.rank(i))
            if k >= 0 and f.types[i][0][k] != 1:
                raise f.error(n, f"operand {i!r} spans the padded axis with {f.types[i][0][k]} elements")
    return count, axis


def _reduce(f: _Flow, n: NodeProto, v: str) -> tuple[list[NodeProto] | None, Pad | None]:
    """A reduction (or ArgMax/ArgMin/Softmax): over the padded axis it reads the masked value."""
    count, axis = f.pads[v]
    r = f.rank(v)
    arg = n.op_type in ("ArgMax", "ArgMin", "Softmax", "LogSoftmax")
    if arg:
        axes = [int(_attr(n, "axis", -1 if n.op_type.endswith("Softmax") else 0)) % r]
        if n.op_type.endswith("Softmax") and f.opset < 13 and axis >= axes[0]:
            raise f.error(n, "before opset 13 it flattens the padded axis into its rows")
    else:
        axes = f.ints(n, "axes", 1) or ([] if _attr(n, "noop_with_empty_axes", 0) else list(range(r)))
        axes = [a % r for a in axes]
    keep = bool(_attr(n, "keepdims", 1)) or n.op_type.endswith("Softmax")
    if axis not in axes:
        return None, (count, axis if keep else axis - sum(a < axis for a in axes))
    m = f.masked(v, REDUCE_FILL[n.op_type])
    node = NodeProto()
    node.CopyFrom(n)
    node.input[0] = m
    if n.op_type != "ReduceMean":
        return [node], ((count, axis) if n.op_type.endswith("Softmax") else None)
    node.op_type, node.output[0] = "ReduceSum", f.b.name("masked_sum")
    if f.opset >= 13 and _attr(n, "axes") is not None:  # ReduceSum takes its axes as an input from opset 13
        kept = [a for a in node.attribute if a.name != "axes"]
        del node.attribute[:]
        node.attribute.extend(kept)
        del node.input[1:]
        node.input.append(f.b.const(np.array(axes, np.int64)))
    others = int(np.prod([f.types[v][0][a] for a in axes if a != axis]))
    dtype = f.types[v][1]
    # no valid entry: the spec leaves the mean undefined; 0 / 1 = 0 as ONNX Runtime gives (onnx.reference: NaN)
    n_valid = f.b.op("Max", [f.b.op("Mul", [count, f.b.const(np.array(others, np.int64))]),
                             f.b.const(np.array(1, np.int64))])
    total = f.b.op("Cast", [n_valid], to=helper.np_dtype_to_tensor_dtype(dtype))
    return [node, helper.make_node("Div", [node.output[0], total], [n.output[0]])], None


def _layout(f: _Flow, n: NodeProto, v: str) -> Pad:
    """Transpose, Unsqueeze, Squeeze: the padded axis renumbered."""
    count, axis = f.pads[v]
    r = f.rank(v)
    if n.op_type == "Transpose":
        perm = [int(p) for p in _attr(n, "perm", list(range(r))[::-1])]
        return count, perm.index(axis)
    axes = f.ints(n, "axes", 1)
    if n.op_type == "Unsqueeze":
        out_r = r + len(axes or [])
        added = sorted(a % out_r for a in axes or [])
        kept = [k for k in range(out_r) if k not in added]
        return count, kept[axis]
    axes = [a % r for a in axes] if axes is not None else [k for k, d in enumerate(f.types[v][0]) if d == 1]
    if axis in axes:
        raise f.error(n, "it squeezes the padded axis")
    return count, axis - sum(a < axis for a in axes)


def _gather(f: _Flow, n: NodeProto) -> Pad | None:
    data, idx = n.input[0], n.input[1]
    if n.op_type == "GatherND":
        if data in f.pads or int(_attr(n, "batch_dims", 0)) or f.pads[idx][1] >= f.rank(idx) - 1:
            raise f.error(n, "only padded index rows (batch_dims 0) are supported")
        return f.pads[idx]
    g = int(_attr(n, "axis", 0)) % f.rank(data)
    if idx in f.pads:
        if data in f.pads:
            raise f.error(n, "both the data and the indices are padded")
        return f.pads[idx][0], g + f.pads[idx][1]
    count, axis = f.pads[data]
    if axis == g:
        return None  # the indices pick valid rows (ONNX Runtime would reject an index past the length)
    return count, axis if axis < g else axis - 1 + f.rank(idx)


def _matmul(f: _Flow, n: NodeProto) -> Pad:
    a, b = n.input[0], n.input[1]
    if a in f.pads and b in f.pads:
        raise f.error(n, "both operands are padded")
    v = a if a in f.pads else b
    count, axis = f.pads[v]
    r = f.rank(v)
    out_r = max(f.rank(a), f.rank(b), 2)
    if r == 1 or (v == a and axis == r - 1) or (v == b and axis == r - 2):
        raise f.error(n, "the padded axis is the contraction axis")
    return count, axis + out_r - r


def _along_other(f: _Flow, n: NodeProto, v: str) -> Pad:
    """Slice, Concat, TopK, Split on axes other than the padded one."""
    count, axis = f.pads[v]
    r = f.rank(v)
    if n.op_type == "Slice":
        axes = f.ints(n, "axes", 3) or list(range(len(f.ints(n, "starts", 1) or [])))
    else:
        axes = [int(_attr(n, "axis", -1 if n.op_type == "TopK" else 0))]
    if axis in [x % r for x in axes]:
        raise f.error(n, f"it works along the padded axis {axis}")
    if n.op_type == "Concat" and any(f.pads.get(i) != (count, axis) for i in n.input if i):
        raise f.error(n, "its operands are not all padded alike")
    return count, axis


def _shape(f: _Flow, n: NodeProto, v: str) -> list[NodeProto]:
    """Shape/Size of a padded value: its run-time dims (the count on the padded axis)."""
    count, axis = f.pads[v]
    dims = f.types[v][0]
    one = f.b.const(np.array([1], np.int64))
    if n.op_type == "Size":
        other = int(np.prod([d for k, d in enumerate(dims) if k != axis]))
        f.b.op("Mul", [count, f.b.const(np.array(other, np.int64))], n.output[0])
    else:
        r = len(dims)
        start, end = int(_attr(n, "start", 0)), _attr(n, "end", None)
        start = max(0, min(r, start + r if start < 0 else start))
        end = r if end is None else max(0, min(r, int(end) + r if int(end) < 0 else int(end)))
        parts = [f.b.op("Reshape", [count, one]) if k == axis else f.b.const(np.array([dims[k]], np.int64))
                 for k in range(start, end)]
        f.b.op("Concat", parts or [f.b.const(np.zeros(0, np.int64))], n.output[0], axis=0)
    return []


def _nested(f: _Flow, n: NodeProto) -> list[NodeProto]:
    """A bounded op reading a padded value: a NonZero of one, or a Compress whose condition is one. The
    padding is masked to 0 / False, which selects nothing, and the op takes its own bounded form over
    the padded (static) shape: its indices and selections are those of the valid prefix, exact, with
    a count of its own. Other nestings (a padded Compress input, Unique, NonMaxSuppression) are a
    CompileError naming the node."""
    op, ins = n.op_type, list(n.input)
    if op == "NonZero" and ins[0] in f.pads:
        masked = [f.masked(ins[0], 0.0)]
    elif op == "Compress" and ins[0] not in f.pads and len(ins) > 1 and ins[1] in f.pads:
        masked = [ins[0], f.masked(ins[1], 0.0)]
    else:
        raise f.error(n, f"a {op} of a padded value is supported only as NonZero of it or Compress with a padded "
                      "condition (the padding could be selected otherwise)")
    node = NodeProto()
    node.CopyFrom(n)
    del node.input[:]
    node.input.extend(masked)
    shapes = {m: f.types[i][0] for m, i in zip(masked, ins, strict=False)}
    dtypes = {m: f.types[i][1] for m, i in zip(masked, ins, strict=False)}
    b = _B(f"{n.name or op}_bounded", f.opset)
    count = f"{n.output[0]}__count"
    for j, axis in rewrite_bounded(b, node, shapes, dtypes, count):
        f.pads[n.output[j]] = (count, axis)
    f.origin[count] = f"{op} {n.name or n.output[0]!r}"
    f.b.inits.extend(b.inits)
    shape, dtype = f.types[ins[0]]  # the padded result's static shape, for the nodes reading it
    if op == "NonZero":
        f.types[n.output[0]] = ([len(shape), int(np.prod(shape))], np.dtype(np.int64))
    else:
        f.types[n.output[0]] = ([int(np.prod(shape))] if _attr(n, "axis") is None else list(shape), dtype)
    return b.nodes


def _step(f: _Flow, n: NodeProto) -> list[NodeProto]:
    """The nodes replacing ``n`` (which reads a padded value); records its padded outputs."""
    v = next(i for i in n.input if i in f.pads)
    op = n.op_type
    out: Pad | None
    nodes = [n]
    if n.domain not in ("", "ai.onnx"):
        raise f.error(n, "an op of another domain")
    if op in ELEMENTWISE:
        out = _elementwise(f, n)
    elif op in REDUCE_FILL:
        replaced, out = _reduce(f, n, v)
        nodes = replaced or nodes
    elif op in ("Transpose", "Unsqueeze", "Squeeze"):
        out = _layout(f, n, v)
    elif op in ("Gather", "GatherND"):
        out = _gather(f, n)
    elif op == "MatMul":
        out = _matmul(f, n)
    elif op in ("Slice", "Concat", "TopK", "Split"):
        out = _along_other(f, n, v)
    elif op in ("Shape", "Size"):
        return _shape(f, n, v)
    elif op in BOUNDED_OPS:
        return _nested(f, n)
    else:
        raise f.error(n, f"{op} is not among the ops that keep padding apart (see compiler.frontend.bounded_flow)")
    if out is not None:
        for o in n.output[: 2 if op == "TopK" else None]:
            if o:
                f.pads[o] = out
    return nodes


def bound_flow(model: ModelProto, shapes: dict[str, list[int]], dtypes: dict[str, np.dtype], infer: Infer
               ) -> tuple[ModelProto, list[tuple[int, str, int]]]:
    """``model`` with every NonZero, Compress, Unique and NonMaxSuppression in bounded form and its
    padded results carried through the nodes that read them (see the module docstring).

    ``shapes``/``dtypes`` are the static shapes and dtypes of ``model``'s values (the bounded nodes'
    inputs must be among them; a bounded node whose result has a static shape there, its input known
    at compile time, is left as it is for constant folding); ``infer`` gives those of a model (called on the padded model).
    Returns ``(model, trims)`` as :func:`compiler.frontend.bounded.bound_outputs` (trims for every
    graph output still padded). Raises CompileError(stage="shape") naming a node that reads a padded
    value in a way Prism cannot keep exact.
    """
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    out = ModelProto()
    out.CopyFrom(model)
    nodes: list[NodeProto] = []
    pads: dict[str, Pad] = {}
    origin: dict[str, str] = {}
    for n in out.graph.node:
        fits = n.op_type in BOUNDED_OPS and n.domain in ("", "ai.onnx") and n.output[0] not in shapes and \
            all(i in shapes for i in n.input[:2] if i)  # a data-dependent length, from statically shaped inputs
        if not fits or (opset < 11 and n.op_type != "NonMaxSuppression") or (n.op_type == "NonMaxSuppression"
                                                                              and len(n.output) != 1):
            nodes.append(n)
            continue
        b = _B(f"{n.name or n.op_type}_bounded", opset)
        count = f"{n.output[0]}__count"
        for j, axis in rewrite_bounded(b, n, shapes, dtypes, count):
            pads[n.output[j]] = (count, axis)
        origin[count] = f"{n.op_type} {n.name or n.output[0]!r}"
        nodes.extend(b.nodes)
        out.graph.initializer.extend(b.inits)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    f = _Flow(out, infer(out), pads, origin, opset)
    rewritten: list[NodeProto] = []
    for n in out.graph.node:
        if any(i in f.pads for i in n.input):
            rewritten.extend(f.b.nodes)
            f.b.nodes = []
            step = _step(f, n)
            rewritten.extend(f.b.nodes + step)
            f.b.nodes = []
        else:
            rewritten.append(n)
    del out.graph.node[:]
    out.graph.node.extend(rewritten)
    out.graph.initializer.extend(f.b.inits)
    trims: list[tuple[int, str, int]] = []
    counts: list[str] = []
    for k, o in enumerate(list(out.graph.output)):
        if o.name in f.pads:
            count, axis = f.pads[o.name]
            o.type.tensor_type.ClearField("shape")
            trims.append((k, count, axis))
            counts += [count] if count not in counts else []
    out.graph.output.extend(helper.make_tensor_value_info(c, onnx.TensorProto.INT64, []) for c in counts)
    return out, trims
