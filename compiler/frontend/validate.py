"""Checks of a parsed ONNX model that no later stage makes: what the ONNX spec forbids or Prism cannot
compile, refused at import with a :class:`CompileError` naming the node, op and attribute.

- a graph without outputs (nothing would be computed; ONNX IR spec: a graph has at least one output);
- string tensors anywhere (graph inputs, outputs, values, initializers, constants): Prism compiles
  numeric tensors only;
- a variadic node (``Sum``, ``Max``, ``Min``, ``Mean``, ``Concat``) with more than
  :data:`MAX_NODE_INPUTS` inputs: its lowering nests one expression per input;
- window attributes out of their range (ONNX operator spec: MaxPool/MaxUnpool/AveragePool/LpPool, Conv,
  ConvTranspose, ConvInteger, QLinearConv): every ``kernel_shape``, ``strides`` and ``dilations`` value
  at least 1, ``pads`` (and ConvTranspose's ``output_padding``) at least 0; a negative pad would index
  outside the input (ONNX Runtime refuses it too: "pads must not contain negative values").

``compiler.frontend.load.read_model`` runs :func:`validate_model` on every model it reads; the shape
checks that need shapes (TopK's K against its axis) are the shape inference's (``compiler.ops``).
"""

from __future__ import annotations

from collections.abc import Iterator

from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto

from ..errors import CompileError

#: The most inputs one variadic node may have (a real model's Concat has tens).
MAX_NODE_INPUTS = 256
VARIADIC = frozenset({"Sum", "Max", "Min", "Mean", "Concat"})
#: ops with kernel_shape / strides / dilations / pads (ONNX operator spec): range-checked at import
WINDOWED = frozenset({"MaxPool", "MaxUnpool", "AveragePool", "LpPool", "Conv", "ConvTranspose", "ConvInteger", "QLinearConv"})


def _label(node: NodeProto, index: int) -> str:
    return node.name or f"{node.op_type}_{index}"


def _fail(node: NodeProto, index: int, message: str, attribute: str | None = None) -> CompileError:
    return CompileError("import", f"node {_label(node, index)} ({node.op_type}): {message}",
                        node=_label(node, index), op=node.op_type, attribute=attribute)


def _subgraphs(graph: GraphProto) -> Iterator[GraphProto]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                yield from _subgraphs(attr.g)
            for g in attr.graphs:
                yield from _subgraphs(g)


def _check_strings(graph: GraphProto) -> None:
    values = [("graph input", v) for v in graph.input] + [("graph output", v) for v in graph.output]
    values += [("value", v) for v in graph.value_info]
    for what, v in values:
        if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type == TensorProto.STRING:
            raise CompileError("import", f"{what} {v.name!r} is a string tensor: Prism compiles numeric tensors only")
    for t in graph.initializer:
        if t.data_type == TensorProto.STRING:
            raise CompileError("import", f"initializer {t.name!r} is a string tensor: Prism compiles numeric "
                                         "tensors only")
    for i, node in enumerate(graph.node):
        for attr in node.attribute:
            tensors = ([attr.t] if attr.HasField("t") else []) + list(attr.tensors)
            if attr.type == AttributeProto.STRINGS and node.op_type == "Constant" or \
                    any(t.data_type == TensorProto.STRING for t in tensors):
                raise _fail(node, i, f"attribute {attr.name} is a string tensor: Prism compiles numeric tensors "
                                     "only", attribute=attr.name)


def _check_node(node: NodeProto, index: int) -> None:
    if node.domain in ("", "ai.onnx") and node.op_type in VARIADIC and len(node.input) > MAX_NODE_INPUTS:
        raise _fail(node, index, f"{len(node.input)} inputs, more than the {MAX_NODE_INPUTS} Prism compiles in "
                                 "one node; split it into several")
    if node.domain in ("", "ai.onnx") and node.op_type in WINDOWED:
        for attr in node.attribute:
            low = 0 if attr.name in ("pads", "output_padding") else 1
            if attr.name in ("kernel_shape", "strides", "dilations", "pads", "output_padding") and \
                    any(v < low for v in attr.ints):
                raise _fail(node, index, f"{attr.name} {list(attr.ints)} has a value below {low} (the ONNX spec "
                                         f"requires every {attr.name} value >= {low})", attribute=attr.name)


def validate_model(proto: ModelProto) -> None:
    """Refuse what the module docstring lists. Raises CompileError(stage="import")."""
    if len(proto.graph.output) == 0:
        raise CompileError("import", "the graph has no outputs: nothing to compute (an ONNX graph needs at least "
                                     "one output)")
    for graph in _subgraphs(proto.graph):
        _check_strings(graph)
        for i, node in enumerate(graph.node):
            _check_node(node, i)
