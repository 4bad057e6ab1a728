"""ONNX ``ModelProto`` -> graph IR (:class:`compiler.ir.Graph`).

Semantics follow the ONNX IR spec (onnx/docs/IR.md): initializers and ``Constant`` nodes become
constants; an input that is also an initializer (IR version 3 models list every initializer among
the inputs) is a constant with a default, as ONNX Runtime treats it unless the caller feeds it;
trailing omitted optional inputs (empty names) are trimmed; ``If``/``Loop``/``Scan`` bodies become
:class:`Graph` attributes whose ``parent`` is the enclosing graph. Default-domain opsets 7 to the installed
onnx's latest are accepted. Every problem raises :class:`CompileError` with stage ``import``.
"""

from __future__ import annotations

from collections import ChainMap
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, numpy_helper

from ..errors import CompileError
from ..ir import Graph, IRError, Node, TensorType, UnsupportedDType, Value
from ..ir.types import UNKNOWN_DIM, type_from_proto
from .load import check_strings
from ..ops.registry import REGISTRY

MIN_OPSET, MAX_OPSET = 7, max(21, onnx.defs.onnx_opset_version())  # up to the installed onnx's
DEFAULT_DOMAINS = ("", "ai.onnx")


def default_opset(proto: ModelProto) -> int:
    """The model's default-domain opset; raises CompileError if absent or outside 7..MAX_OPSET."""
    versions = [o.version for o in proto.opset_import if o.domain in DEFAULT_DOMAINS]
    if not versions:
        if proto.ir_version < 3:
            return 1
        raise CompileError("import", "model imports no default-domain (ai.onnx) opset")
    return max(versions)


def check_opset(version: int) -> None:
    if not MIN_OPSET <= version <= MAX_OPSET:
        raise CompileError(
            "import", f"opset {version} of the default domain is not supported (supported: {MIN_OPSET} to {MAX_OPSET})"
        )


def tensor_to_array(t: onnx.TensorProto, what: str) -> np.ndarray:
    try:
        TensorType.of(int(t.data_type), None)
        arr = numpy_helper.to_array(t)
    except UnsupportedDType as exc:
        raise CompileError("import", f"{what}: {exc}") from None
    except Exception as exc:  # malformed tensor payload (wrong byte count, bad type)
        raise CompileError("import", f"{what}: cannot read tensor data ({exc})") from None
    return np.array(arr, copy=True)


class _Importer:
    def __init__(self, proto: ModelProto) -> None:
        self.proto = proto
        self.opsets = {("" if o.domain == "ai.onnx" else o.domain): int(o.version) for o in proto.opset_import}
        self.opset = default_opset(proto)
        self.scopes: dict[int, ChainMap[str, Value]] = {}

    def _define(self, g: Graph, name: str, value: Value, what: str, node: NodeProto | None = None) -> Value:
        """Bind ``name`` in ``g``'s lexical scope. ONNX values are SSA across nested scopes (a body
        may not redefine an outer name), but sibling bodies may reuse a name: the IR's shared name
        table then gives the second one a fresh name, while lookups here stay lexical."""
        scope = self.scopes[id(g)]
        if name in scope:
            where = "in this graph" if name in scope.maps[0] else "in an enclosing graph (no shadowing in ONNX)"
            raise CompileError("import", f"{what} {name!r} is defined twice: already defined {where}",
                               node=(node.name or None) if node is not None else None,
                               op=node.op_type if node is not None else None)
        g.define(value)
        scope.maps[0][name] = value
        return value

    def graph(self, gp: GraphProto, parent: Graph | None) -> Graph:
        check_strings(gp)
        g = Graph(gp.name or "main", parent=parent)
        self.scopes[id(g)] = self.scopes[id(parent)].new_child() if parent is not None else ChainMap({})
        if parent is None:
            g.opset_imports = dict(self.opsets)
        inits = {t.name for t in gp.initializer}
        for t in gp.initializer:
            self._constant(g, t.name, tensor_to_array(t, f"initializer {t.name!r}"))
        for vi in gp.input:
            if vi.name in inits:
                continue  # IR v3: an initializer listed among the inputs is a constant with a default
            ty = type_from_proto(vi.type, f"input {vi.name!r}")
            g.inputs.append(self._define(g, vi.name, Value(vi.name, ty), "graph input"))
        hints = {vi.name: vi for vi in list(gp.value_info) + list(gp.output)}
        # create every node's outputs first so that a node may be listed before its producer's
        # consumers; the order (and cycles) are checked by the topological sort below
        pending: list[tuple[NodeProto, list[Value]]] = []
        for i, np_ in enumerate(gp.node):
            if np_.op_type == "Constant" and np_.domain in DEFAULT_DOMAINS:
                self._constant_node(g, np_, i)
                continue
            outs = []
            for name in np_.output:
                if not name:
                    name = g.fresh_name(f"{np_.name or np_.op_type}_unused")
                outs.append(self._define(g, name, Value(name), f"output of node {np_.name or i}", np_))
            pending.append((np_, outs))
        for i, (np_, outs) in enumerate(pending):
            self._node(g, np_, outs, i)
        for vo in gp.output:
            v = self.scopes[id(g)].get(vo.name)
            if v is None:
                raise CompileError("import", f"graph output {vo.name!r} is not produced by any node")
            g.outputs.append(v)
        try:
            g.topological_sort()
        except IRError as exc:
            raise CompileError("import", f"the graph has a cycle: {exc}") from None
        g.metadata["value_info"] = {k: v.type for k, v in hints.items()}
        return g

    def _constant(self, g: Graph, name: str, data: np.ndarray) -> Value:
        v = Value(name, TensorType.of(data.dtype, data.shape), data)
        self._define(g, name, v, "constant")
        g.constants[v.name] = v
        return v

    def _constant_node(self, g: Graph, n: NodeProto, i: int) -> None:
        label = n.name or f"Constant #{i}"
        if len(n.attribute) != 1 or len(n.output) != 1:
            raise CompileError("import", f"Constant node {label} needs exactly one value attribute and one output",
                               node=n.name or None, op="Constant")
        a = n.attribute[0]
        data: np.ndarray
        if a.name == "value":
            data = tensor_to_array(a.t, f"Constant {label}")
        elif a.name == "value_float":
            data = np.array(a.f, dtype=np.float32)
        elif a.name == "value_floats":
            data = np.array(list(a.floats), dtype=np.float32)
        elif a.name == "value_int":
            data = np.array(a.i, dtype=np.int64)
        elif a.name == "value_ints":
            data = np.array(list(a.ints), dtype=np.int64)
        elif a.name == "value_string":
            data = np.array(a.s.decode("utf-8", "replace"), dtype=object)
        elif a.name == "value_strings":
            data = np.array([s.decode("utf-8", "replace") for s in a.strings], dtype=object)
        elif a.name == "sparse_value":
            sp = a.sparse_tensor
            dense = np.zeros(tuple(sp.dims), dtype=tensor_to_array(sp.values, label).dtype)
            vals = tensor_to_array(sp.values, label)
            idx = tensor_to_array(sp.indices, label)
            if idx.ndim == 1:
                dense.reshape(-1)[idx] = vals
            else:
                dense[tuple(idx.T)] = vals
            data = dense
        else:
            raise CompileError("import", f"Constant node {label} has unknown attribute {a.name!r}",
                               node=n.name or None, op="Constant", attribute=a.name)
        self._constant(g, n.output[0], data)

    def _attr(self, g: Graph, a: AttributeProto, label: str) -> Any:
        if a.type == AttributeProto.GRAPH:
            return self.graph(a.g, g)
        if a.type == AttributeProto.GRAPHS:
            return [self.graph(x, g) for x in a.graphs]
        if a.type == AttributeProto.TENSOR:
            return tensor_to_array(a.t, f"{label} attribute {a.name!r}")
        if a.type == AttributeProto.TENSORS:
            return [tensor_to_array(t, f"{label} attribute {a.name!r}") for t in a.tensors]
        if a.type == AttributeProto.STRING:
            return a.s.decode("utf-8", "replace")
        if a.type == AttributeProto.STRINGS:
            return [s.decode("utf-8", "replace") for s in a.strings]
        if a.type == AttributeProto.FLOATS:
            return [float(x) for x in a.floats]
        if a.type == AttributeProto.INTS:
            return [int(x) for x in a.ints]
        if a.type == AttributeProto.FLOAT:
            return float(a.f)
        if a.type == AttributeProto.INT:
            return int(a.i)
        raise CompileError("import", f"{label}: attribute {a.name!r} of type "
                           f"{AttributeProto.AttributeType.Name(a.type)} is not supported", attribute=a.name)

    def _check_op(self, n: NodeProto, label: str) -> None:
        domain = "" if n.domain == "ai.onnx" else n.domain
        version = self.opsets.get(domain)
        op = f"{domain}.{n.op_type}" if domain else n.op_type
        if version is None:
            raise CompileError("import", f"node {label} uses op {op} of domain {domain!r}, which the model does not import",
                               node=n.name or None, op=n.op_type)
        if domain and op in _contrib_ops():  # com.microsoft ops Prism lowers (compiler.ops.qlinear)
            return
        if not onnx.defs.has(n.op_type, domain):
            raise CompileError("import", f"unknown op {op} at node {label}", node=n.name or None, op=n.op_type)
        try:
            onnx.defs.get_schema(n.op_type, version, domain)
        except onnx.defs.SchemaError:
            raise CompileError("import", f"op {op} (node {label}) does not exist at opset {version}",
                               node=n.name or None, op=n.op_type) from None

    def _node(self, g: Graph, n: NodeProto, outs: list[Value], i: int) -> None:
        label = n.name or f"#{i} ({n.op_type})"
        self._check_op(n, label)
        inputs: list[Value | None] = []
        for name in n.input:
            if not name:
                inputs.append(None)
                continue
            v = self.scopes[id(g)].get(name)
            if v is None:
                raise CompileError("import", f"node {label} ({n.op_type}) reads {name!r}, which is not defined",
                                   node=n.name or None, op=n.op_type)
            inputs.append(v)
        while inputs and inputs[-1] is None:
            inputs.pop()
        attrs = {a.name: self._attr(g, a, label) for a in n.attribute}
        domain = "" if n.domain == "ai.onnx" else n.domain
        node = Node(n.op_type, inputs, outs, attrs, name=n.name, domain=domain)
        node.graph = g
        if n.name:
            node.name = g.claim_node_name(n.name)
        g.nodes.append(node)


def import_model(proto: ModelProto) -> Graph:
    """Import a model (its external data already inline, see :func:`compiler.frontend.read_model`).

    Returns the top graph, unspecialized: input dims may be symbolic, inner values untyped.
    ``graph.metadata`` holds ``ir_version``, ``producer``, ``model_name``, ``opset``.
    Raises CompileError(stage="import") for an unsupported opset, an unknown op, an undefined
    value, a duplicate name, a cycle, or an unsupported element type.
    """
    imp = _Importer(proto)
    check_opset(imp.opset)
    try:
        g = imp.graph(proto.graph, None)
    except IRError as exc:
        raise CompileError("import", str(exc)) from None
    g.metadata.update(
        ir_version=int(proto.ir_version), producer=proto.producer_name, opset=imp.opset,
        model_name=proto.graph.name or "model",
    )
    return g


def _contrib_ops() -> set[str]:
    """``domain.op`` keys of registered ops outside the ONNX domains (ONNX Runtime's contrib ops that the
    op registry infers and the lowering compiles: ``compiler.ops.qlinear``)."""
    return {k for k in REGISTRY if "." in k and not k.startswith(("ai.onnx", "prism."))}
