"""Expand ONNX function ops that have no lowering into their defining function bodies.

Many ONNX ops are defined by a function of other ops in the operator schema (``CastLike``,
``LayerNormalization``, ``Attention``, ``Selu``, ``NegativeLogLikelihoodLoss``, ...; context-
dependent ones get a body built for the node's input types). :func:`expand_functions` replaces
every top-level node whose op has no lowering in ``compiler.loops`` (``keep`` says which to
keep) by the body the schema defines for the model's opset (the newest function version not
newer than the model's opset), with the node's attributes (and the schema defaults) bound and
internal names prefixed by the node's. It repeats until no expandable node is left (bodies may
use function ops themselves), at most ``max_rounds`` times. Nodes without a function body, and
nodes of other domains, are left as they are (they fail later with a clear "no lowering" error).
Semantics source: the ONNX operator schemas (``onnx.defs``) and the expansion the ONNX backend
tests use (``onnx.backend.test.case.node.function_expand_helper``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx
from onnx import FunctionProto, ModelProto, NodeProto, TypeProto

from .origin import carry_origin
from .rounds import rewrite_rounds


def _opset(model: ModelProto, domain: str) -> int | None:
    for o in model.opset_import:
        if (o.domain or "") == domain or (domain in ("", "ai.onnx") and o.domain in ("", "ai.onnx")):
            return int(o.version)
    return None


def _types(model: ModelProto) -> dict[str, TypeProto]:
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:
        inferred = model
    g = inferred.graph
    out: dict[str, TypeProto] = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        out[vi.name] = vi.type
    for t in g.initializer:
        out[t.name] = onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims))
    return out


def function_body(node: NodeProto, opset: int, types: dict[str, TypeProto]) -> FunctionProto | None:
    """The schema's function for ``node`` at ``opset`` (None if the op has none)."""
    try:  # Any: onnx's stub of OpSchema (defs.pyi) lacks the function_* members the C++ binding has
        schema: Any = onnx.defs.get_schema(node.op_type, opset, domain=node.domain)
    except Exception:
        return None
    plain = [v for v in schema.function_opset_versions if v <= opset]
    ctx = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    fp = FunctionProto()
    if plain and (not ctx or max(plain) >= max(ctx)):
        fp.ParseFromString(schema.get_function_with_opset_version(max(plain)))
        return fp
    if ctx:
        in_types = [types.get(n, TypeProto()) for n in node.input]
        if any(not t.HasField("tensor_type") for t, n in zip(in_types, node.input, strict=True) if n):
            return None
        full = NodeProto()
        full.CopyFrom(node)
        _add_defaults(full, schema)
        fp.ParseFromString(schema.get_context_dependent_function_with_opset_version(
            max(ctx), full.SerializeToString(), [t.SerializeToString() for t in in_types]))
        return fp
    return None


def _versions(node: NodeProto, opset: int) -> list[int]:
    """The function versions of ``node``'s schema not newer than ``opset``."""
    schema: Any = onnx.defs.get_schema(node.op_type, opset, domain=node.domain)  # OpSchema: untyped C++ binding
    return [v for v in [*schema.function_opset_versions, *schema.context_dependent_function_opset_versions]
            if v <= opset]


def _add_defaults(node: NodeProto, schema: onnx.defs.OpSchema) -> None:
    have = {a.name for a in node.attribute}
    for name, attr in schema.attributes.items():
        if name not in have and attr.default_value and attr.default_value.name:
            node.attribute.extend([attr.default_value])


def expand_functions(model: ModelProto, keep: Callable[[NodeProto], bool], max_rounds: int = 6,
                     decisions: list[dict[str, Any]] | None = None) -> ModelProto:
    """A copy of ``model`` with every top-level node that ``keep`` rejects and whose op has a
    function body replaced by that body (see the module docstring); ``model`` itself when every
    node is kept. ``model`` is not modified. Appends to ``decisions`` per node ``keep`` rejects:
    ``{"node", "op", "expanded": bool, "new_nodes": body nodes, "round", "function_opset"}`` (expanded)
    or ``{"node", "op", "expanded": False, "reason"}`` (no function body for the model's opset)."""
    from onnx.backend.test.case.node import function_expand_helper  # deferred: imports every ONNX node test case

    if all(keep(n) for n in model.graph.node):
        return model

    def step(out: ModelProto, rnd: int) -> list[NodeProto] | None:
        todo = [i for i, n in enumerate(out.graph.node) if not keep(n)]
        if not todo:
            return None
        types = _types(out)
        new_nodes: list[NodeProto] = []
        changed = False
        for i, node in enumerate(out.graph.node):
            opset = _opset(out, node.domain or "")
            fp = function_body(node, opset, types) if i in todo and opset is not None else None
            if fp is None or opset is None:  # (no opset: no body)
                if i in todo and decisions is not None:
                    decisions.append({"node": node.name or node.op_type, "op": node.op_type, "expanded": False,
                                      "reason": f"{node.op_type} has no lowering and no function body at opset "
                                                f"{opset} of domain {node.domain or 'ai.onnx'!r}"})
                new_nodes.append(node)
                continue
            full = NodeProto()
            full.CopyFrom(node)
            schema = onnx.defs.get_schema(node.op_type, opset, domain=node.domain)
            _add_defaults(full, schema)
            prefix = f"{node.name or node.op_type}_x{rnd}_{i}_"
            body = function_expand_helper(full, fp, prefix)
            carry_origin(node, body, "expanded to")  # a node inlined from a control-flow body: errors name it
            new_nodes.extend(body)
            if decisions is not None:
                decisions.append({"node": node.name or node.op_type, "op": node.op_type, "expanded": True,
                                  "new_nodes": len(body), "round": rnd + 1,
                                  "function_opset": max(_versions(node, opset or 0), default=opset)})
            for imp in fp.opset_import:
                if _opset(out, imp.domain or "") is None:
                    out.opset_import.extend([imp])
            changed = True
        return new_nodes if changed else None

    return rewrite_rounds(model, max_rounds, step)
