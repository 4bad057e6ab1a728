"""Type inference over a whole graph: registry entries, known-value propagation, fallback.

For each node in order: the registry's inference function (``compiler.ops.registry``) computes the
output types; an op without an entry falls back to ``onnx.shape_inference`` on a one-node model
(kind ``opaque``). Small integer tensors whose contents are known at compile time (constants,
``Shape`` of a static shape, and any deterministic node over known inputs, evaluated with
``onnx.reference``) are propagated so that data-dependent shape ops (Reshape, Slice, Expand, Tile,
Pad, Resize, Range, ConstantOfShape ...) get static shapes after specialization. The IR is not
rewritten: folding is the job of the ``fold-constants`` pass.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ..errors import CompileError
from ..export import node_proto, tensor_proto, type_proto
from ..ir import Graph, Node, TensorType, Value, implicit_inputs
from ..ir.types import type_from_proto
from . import control
from .registry import REGISTRY, InferContext, registry_key

#: Tensors above this many elements are refused (the runtime indexes with 32-bit offsets).
MAX_ELEMENTS = 2**31 - 1
#: Known values are propagated only for tensors up to this many elements.
MAX_KNOWN_ELEMENTS = 4096
_NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                     "Bernoulli", "If", "Loop", "Scan", "SequenceConstruct"}


class ShapeEnv:
    """Known tensor contents for one inference run (keyed by value identity)."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.known: dict[int, np.ndarray] = {}

    def value(self, v: Value) -> np.ndarray | None:
        if v.const is not None:
            return v.const
        return self.known.get(id(v))


def graph_opset(graph: Graph) -> int:
    g = graph
    while g.parent is not None:
        g = g.parent
    return int(g.opset_imports.get("", g.opset_imports.get("ai.onnx", 17)))


def infer_graph(graph: Graph, env: ShapeEnv | None = None) -> ShapeEnv:
    """Infer the type of every node output in ``graph`` (and its subgraphs), in place.

    Returns the :class:`ShapeEnv` with the known values found. Raises CompileError(stage="shape")
    naming the node for an inconsistent model, a shape above :data:`MAX_ELEMENTS` elements, or an
    op whose output types cannot be inferred.
    """
    env = env or ShapeEnv(graph_opset(graph))
    for node in graph.nodes:
        infer_node(node, env)
    return env


def infer_node(node: Node, env: ShapeEnv) -> list[TensorType]:
    """Infer and set the types of ``node``'s outputs; propagate known values. Returns the types."""
    ctx = InferContext(node, env.opset, env.value)
    default = node.domain in ("", "ai.onnx")
    entry = REGISTRY.get(registry_key(node))
    if node.op_type in control.CONTROL and default:
        types = control.CONTROL[node.op_type](ctx, env, infer_graph)
    elif entry is not None:
        types = entry.infer(ctx)
    else:
        types = fallback_infer(node, env)
    if len(types) < len(node.outputs):
        raise ctx.fail(f"inference gave {len(types)} output types for {len(node.outputs)} outputs")
    for v, t in zip(node.outputs, types, strict=False):
        check_size(node, v, t)
        v.type = t
    _propagate(node, env)
    return types


def check_size(node: Node, v: Value, t: TensorType) -> None:
    if t.shape is None:
        return
    n = 1
    for d in t.shape:
        if isinstance(d, int):
            if d < 0:
                raise CompileError("shape", f"{node.label} ({node.op_type}): output %{v.name} has negative dim {d}",
                                   node=node.name or node.label, op=node.op_type)
            n *= d
    if n > MAX_ELEMENTS:
        raise CompileError(
            "shape", f"{node.label} ({node.op_type}): output %{v.name} {t} has {n} elements, above the limit of "
            f"{MAX_ELEMENTS} per tensor", node=node.name or node.label, op=node.op_type,
        )


def _small(t: TensorType | None) -> bool:
    return t is not None and t.is_static and t.numel <= MAX_KNOWN_ELEMENTS and t.elem_type != onnx.TensorProto.STRING


def _propagate(node: Node, env: ShapeEnv) -> None:
    if node.domain not in ("", "ai.onnx") or node.op_type in _NONDETERMINISTIC:
        return
    if node.op_type == "Shape":
        t = node.inputs[0].type if node.inputs and node.inputs[0] is not None else None
        if t is not None and t.is_static:
            shp = np.array(t.shape, dtype=np.int64)
            start, end = node.attr("start", 0), node.attr("end", None)
            env.known[id(node.outputs[0])] = shp[start:end]
        return
    if node.op_type == "Size":
        t = node.inputs[0].type if node.inputs and node.inputs[0] is not None else None
        if t is not None and t.is_static:
            env.known[id(node.outputs[0])] = np.array(t.numel, dtype=np.int64)
        return
    if not all(_small(v.type) for v in node.outputs):
        return
    vals = []
    for v in node.inputs:
        val = None if v is None else env.value(v)
        if v is not None and (val is None or val.size > MAX_KNOWN_ELEMENTS or val.dtype == object):
            return
        vals.append(val)
    outs = evaluate_node(node, vals, env.opset)
    if outs is None:
        return
    for v, o in zip(node.outputs, outs, strict=False):
        o = np.asarray(o)
        if v.type is not None and tuple(o.shape) == v.type.shape:
            env.known[id(v)] = o.astype(v.type.dtype, copy=False)


def evaluate_node(node: Node, inputs: list[np.ndarray | None], opset: int) -> list[np.ndarray] | None:
    """Evaluate one node with ``onnx.reference`` on the given inputs; None if it cannot."""
    from onnx.reference import ReferenceEvaluator  # deferred: imports every reference op (~0.3 s)

    names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
    p = node_proto(node)
    del p.input[:]
    p.input.extend(names)
    del p.output[:]
    p.output.extend(f"out{i}" for i in range(len(node.outputs)))
    feeds = {n: x for n, x in zip(names, inputs, strict=True) if n}
    g = helper.make_graph([p], "eval", [helper.make_tensor_value_info(n, 0, None) for n in feeds],
                          [helper.make_tensor_value_info(f"out{i}", 0, None) for i in range(len(node.outputs))])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
            ref = ReferenceEvaluator(model)
            return [np.asarray(o) for o in ref.run(None, feeds)]
    except Exception:
        return None


def fallback_infer(node: Node, env: ShapeEnv) -> list[TensorType]:
    """Output types of an op without a registry entry, from ``onnx.shape_inference``.

    Raises CompileError(stage="shape") naming the node and op when ONNX cannot infer them.
    """
    try:
        p = _fallback_node(node)
    except Exception as exc:
        raise CompileError("shape", f"{node.label} ({node.op_type}): cannot express for inference ({exc})",
                           node=node.name or node.label, op=node.op_type) from None
    inputs, inits, seen = [], [], set()
    for v in [x for x in node.inputs if x is not None] + implicit_inputs(node):
        if v.name in seen:
            continue
        seen.add(v.name)
        val = env.value(v)
        if val is not None and val.size <= MAX_KNOWN_ELEMENTS:
            inits.append(tensor_proto(v.name, val))
        vi = onnx.ValueInfoProto(name=v.name)
        vi.type.CopyFrom(type_proto(v.type))
        inputs.append(vi)
    outs = [helper.make_value_info(v.name, onnx.TypeProto()) for v in node.outputs]
    g = helper.make_graph([p], "infer", inputs, outs, initializer=inits)
    graph = node.graph
    while graph is not None and graph.parent is not None:
        graph = graph.parent
    opsets: dict[str, Any] = dict(graph.opset_imports) if graph is not None else {"": env.opset}
    model = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    model.ir_version = 10
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as exc:
        msg = str(exc).splitlines()[-1] if str(exc) else type(exc).__name__
        raise CompileError("shape", f"{node.label} ({node.op_type}): {msg}", node=node.name or node.label,
                           op=node.op_type) from None
    by_name = {vi.name: vi for vi in list(inferred.graph.output) + list(inferred.graph.value_info)}
    types: list[TensorType] = []
    for v in node.outputs:
        found = by_name.get(v.name)
        t = type_from_proto(found.type, f"output {v.name!r}") if found is not None else None
        if t is None or t.elem_type == 0:
            raise CompileError("shape", f"{node.label} ({node.op_type}): the output type of %{v.name} cannot be "
                               "inferred", node=node.name or node.label, op=node.op_type)
        types.append(t)
    return types


def _fallback_node(node: Node) -> onnx.NodeProto:
    return node_proto(node)
