"""Test helpers for the graph passes: ONNX model <-> IR for small test models, and running them.

``from_onnx`` builds IR from a small ``onnx.helper`` model, with every value's type taken from
``onnx.shape_inference`` (the ONNX spec's inference, independent of the code under test). It is a
test-only bridge; the product importer lives in ``compiler.frontend``. ``to_onnx`` writes a graph
of plain ONNX nodes back so that ``onnx.reference`` / ONNX Runtime can run it.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.ir import FusedGroup, Graph, TensorType
from compiler.passes.fold_constants import _attribute


def _type_of(vi: onnx.ValueInfoProto) -> TensorType:
    t = vi.type.tensor_type
    shape = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim)
    return TensorType.of(t.elem_type, shape)


def from_onnx(model: onnx.ModelProto) -> Graph:
    """IR for a small model: initializers and ``Constant`` nodes become constants."""
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    g = Graph(model.graph.name or "main")
    g.opset_imports = {o.domain: o.version for o in model.opset_import}
    _fill(g, model.graph)
    return g


def _fill(g: Graph, proto: onnx.GraphProto) -> None:
    types = {vi.name: _type_of(vi) for vi in
             list(proto.value_info) + list(proto.output) + list(proto.input)}
    inits = {t.name for t in proto.initializer}
    for vi in proto.input:
        if vi.name not in inits:
            g.add_input(vi.name, types[vi.name])
    for t in proto.initializer:
        g.add_constant(t.name, numpy_helper.to_array(t))
    for n in proto.node:
        if n.op_type == "Constant":
            g.add_constant(n.output[0], numpy_helper.to_array(n.attribute[0].t))
            continue
        ins = [g.lookup(x) if x else None for x in n.input]
        attrs = {}
        for a in n.attribute:
            v = helper.get_attribute_value(a)
            if isinstance(v, onnx.TensorProto):
                v = numpy_helper.to_array(v)
            elif isinstance(v, onnx.GraphProto):
                sub = Graph(v.name, parent=g)
                _fill(sub, v)
                v = sub
            elif isinstance(v, bytes):
                v = v.decode()
            elif isinstance(v, list) and v and isinstance(v[0], bytes):
                v = [x.decode() for x in v]
            attrs[a.name] = v
        node = g.add_node(n.op_type, ins, list(n.output), attrs, name=n.name or None, domain=n.domain)
        for v in node.outputs:
            v.type = types.get(v.name)
    g.outputs = [g.lookup(o.name) for o in proto.output]


def to_onnx(graph: Graph) -> onnx.ModelProto:
    """A model of a graph of plain ONNX nodes (fused groups are inlined back)."""
    nodes = []

    def emit(g: Graph) -> None:
        for n in g.nodes:
            if isinstance(n, FusedGroup):
                emit(n.body)
                continue
            p = helper.make_node(n.op_type, ["" if v is None else v.name for v in n.inputs],
                                 [v.name for v in n.outputs], name=n.name, domain=n.domain)
            p.attribute.extend(_attribute(k, v) for k, v in sorted(n.attrs.items()))
            nodes.append(p)

    emit(graph)
    inits = [numpy_helper.from_array(np.asarray(v.const), v.name) for v in graph.constants.values()]

    def vi(v):
        return helper.make_tensor_value_info(v.name, v.type.elem_type, list(v.type.shape))

    g = helper.make_graph(nodes, graph.name, [vi(v) for v in graph.inputs],
                          [vi(v) for v in graph.outputs], inits)
    opsets = [helper.make_opsetid(d, v) for d, v in sorted(graph.opset_imports.items())]
    return helper.make_model(g, opset_imports=opsets, ir_version=10)


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Run a model with ONNX Runtime (CPU, one thread)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def run_reference(graph: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Run an IR graph with ``onnx.reference`` after writing it back to ONNX."""
    return ReferenceEvaluator(to_onnx(graph)).run(None, feeds)


def model(nodes, inputs, outputs, inits=(), opset=17, name="main") -> onnx.ModelProto:
    """A model from helper nodes; ``inputs``/``outputs`` are (name, elem_type, shape) triples."""
    g = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info(*i) for i in inputs],
        [helper.make_tensor_value_info(*o) for o in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def text(s: str) -> str:
    """Dedent an expected IR text block."""
    import textwrap

    return textwrap.dedent(s).strip("\n")
