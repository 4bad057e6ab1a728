"""Graph IR -> ONNX: any stage of the IR back to a model that ``onnx.checker`` accepts and ONNX
Runtime runs.

Constants become initializers; ``If``/``Loop``/``Scan`` bodies become graph attributes; a
:class:`FusedGroup` becomes a call of a model-local function (``FunctionProto``, ONNX IR version 10,
"Functions" in onnx/docs/IR.md) in the ``prism`` domain whose body is the group's nodes. Symbolic
dims are written as ``dim_param``. Semantics: ONNX IR spec (onnx/docs/IR.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, helper, numpy_helper

from .ir import FusedGroup, Graph, Node, TensorType, Value

PRISM_DOMAIN = "prism"
EXPORT_IR_VERSION = 10


def type_proto(t: TensorType | None) -> onnx.TypeProto:
    tp = onnx.TypeProto()
    if t is None:
        return tp
    tt = tp.tensor_type
    tt.elem_type = t.elem_type
    if t.shape is not None:
        tt.shape.SetInParent()
        for d in t.shape:
            dim = tt.shape.dim.add()
            if isinstance(d, int):
                dim.dim_value = d
            elif d != "?":
                dim.dim_param = d
    return tp


def value_info(v: Value) -> onnx.ValueInfoProto:
    vi = onnx.ValueInfoProto()
    vi.name = v.name
    if v.type is not None:
        vi.type.CopyFrom(type_proto(v.type))
    return vi


def tensor_proto(name: str, data: np.ndarray) -> onnx.TensorProto:
    arr = np.asarray(data)
    if arr.dtype == object:
        arr = np.array([s.encode() if isinstance(s, str) else s for s in arr.reshape(-1)], dtype=object).reshape(arr.shape)
    return numpy_helper.from_array(arr, name)


def attribute_proto(name: str, value: Any, functions: _Functions | None) -> onnx.AttributeProto:
    if isinstance(value, Graph):
        return helper.make_attribute(name, graph_proto(value, functions))
    if isinstance(value, np.ndarray):
        return helper.make_attribute(name, tensor_proto("", value))
    if isinstance(value, list) and value and all(isinstance(v, Graph) for v in value):
        return helper.make_attribute(name, [graph_proto(v, functions) for v in value])
    if isinstance(value, list) and value and all(isinstance(v, np.ndarray) for v in value):
        return helper.make_attribute(name, [tensor_proto("", v) for v in value])
    if isinstance(value, list) and not value:
        # helper cannot infer an empty list's type; ints is the common case (e.g. perm=[])
        return helper.make_attribute(name, [], attr_type=AttributeProto.INTS)
    return helper.make_attribute(name, value)


def node_proto(node: Node, functions: _Functions | None = None) -> onnx.NodeProto:
    ins = ["" if v is None else v.name for v in node.inputs]
    outs = [v.name for v in node.outputs]
    if isinstance(node, FusedGroup):
        fname = functions.add(node) if functions is not None else node.kernel
        return helper.make_node(fname, ins, outs, name=node.name or None, domain=PRISM_DOMAIN,
                                doc_string=f"prism fused group, kind {node.kind}")
    attrs = [attribute_proto(k, node.attrs[k], functions) for k in sorted(node.attrs)]
    p = helper.make_node(node.op_type, ins, outs, name=node.name or None, domain=node.domain or None)
    p.attribute.extend(attrs)
    return p


class _Functions:
    """Collects one FunctionProto per distinct fused-group body."""

    def __init__(self, opsets: dict[str, int]) -> None:
        self.opsets = opsets
        self.protos: dict[str, onnx.FunctionProto] = {}

    def add(self, group: FusedGroup) -> str:
        body = group.body
        nodes = [node_proto(n, self) for n in body.nodes]
        # constants of the body become Constant nodes of the function
        consts = [helper.make_node("Constant", [], [v.name], value=tensor_proto("", v.const))  # type: ignore[arg-type]
                  for v in body.constants.values()]
        fp = helper.make_function(
            PRISM_DOMAIN, group.kernel, [v.name for v in body.inputs], [v.name for v in body.outputs],
            consts + nodes, [helper.make_opsetid(d, v) for d, v in sorted(self.opsets.items())],
        )
        name, i = group.kernel, 1
        while name in self.protos and self.protos[name].SerializeToString() != _renamed(fp, name).SerializeToString():
            name = f"{group.kernel}_{i}"
            i += 1
        self.protos[name] = _renamed(fp, name)
        return name


def _renamed(fp: onnx.FunctionProto, name: str) -> onnx.FunctionProto:
    out = onnx.FunctionProto()
    out.CopyFrom(fp)
    out.name = name
    return out


def graph_proto(graph: Graph, functions: _Functions | None = None) -> onnx.GraphProto:
    """A GraphProto of ``graph`` (subgraphs included; fused groups as function calls)."""
    nodes = [node_proto(n, functions) for n in graph.nodes]
    inits = [tensor_proto(v.name, v.const) for v in graph.constants.values()]  # type: ignore[arg-type]
    io = {id(v) for v in graph.inputs} | {id(v) for v in graph.outputs}
    vinfo = [value_info(v) for n in graph.nodes for v in n.outputs if id(v) not in io and v.type is not None]
    return helper.make_graph(nodes, graph.name, [value_info(v) for v in graph.inputs],
                             [value_info(v) for v in graph.outputs], initializer=inits, value_info=vinfo)


def export_model(graph: Graph, *, ir_version: int = EXPORT_IR_VERSION) -> onnx.ModelProto:
    """Export a top-level graph as an ONNX model.

    Returns a ``ModelProto`` with ``ir_version`` 10, the graph's opset imports plus
    ``prism`` version 1 when it has fused groups or imports ``prism`` (``prism.NarrowCast``). Raises ``onnx.checker.ValidationError`` only
    through :func:`check_export`, never here.
    """
    opsets = {d: v for d, v in graph.opset_imports.items() if d != PRISM_DOMAIN} or {"": 17}
    prism_ops = PRISM_DOMAIN in graph.opset_imports  # prism.NarrowCast (compiler.frontend.narrow_types)
    functions = _Functions(dict(opsets, **{PRISM_DOMAIN: 1}) if prism_ops else opsets)
    gp = graph_proto(graph, functions)
    all_opsets = dict(opsets)
    if functions.protos or prism_ops:
        all_opsets[PRISM_DOMAIN] = 1
    model = helper.make_model(
        gp, opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(all_opsets.items())],
        producer_name="prism", functions=list(functions.protos.values()),
    )
    model.ir_version = ir_version
    return model


def check_export(graph: Graph) -> onnx.ModelProto:
    """Export and run ``onnx.checker.check_model`` on the result (raises its ValidationError)."""
    model = export_model(graph)
    onnx.checker.check_model(model)
    return model
