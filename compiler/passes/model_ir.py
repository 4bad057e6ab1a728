"""The ONNX model as the model passes (level ``onnx``) see it: its printed form, stats and verifier.

:func:`print_model` is the snapshot the pass manager takes after a model pass: ONNX's own text
syntax (``onnx.printer``), with the data of initializers and ``Constant`` values of more than
:data:`MAX_SHOWN` elements left out (``{...}``), so a snapshot of ResNet-50 is its structure, not its
100 MB of weights; the initializers are listed one a line, so a pass that adds one shows one new line. :func:`model_stats` counts nodes and initializers; :func:`verify_model` checks
what the importer relies on (each top-level input defined, each name defined once).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TensorProto

from ..ir import IRError

#: tensors of at most this many elements are printed with their values
MAX_SHOWN = 16


def _tensor_text(t: TensorProto) -> str:
    """``float[2,16,3] W = {...}`` (data left out) or ``int64[2] shape = {1,8}`` (at most
    :data:`MAX_SHOWN` elements), as ``onnx.printer`` writes an initializer."""
    elem = onnx.helper.tensor_dtype_to_string(t.data_type).removeprefix("TensorProto.").lower()
    dims = "[" + ",".join(str(d) for d in t.dims) + "]" if len(t.dims) else ""
    if int(np.prod(t.dims, dtype=np.int64)) > MAX_SHOWN:
        return f"{elem}{dims} {t.name} = {{...}}"
    try:
        values = onnx.numpy_helper.to_array(t).reshape(-1).tolist()
    except Exception:  # a type numpy cannot hold: name and shape only
        return f"{elem}{dims} {t.name} = {{...}}"
    text = ",".join(str(int(v)) if isinstance(v, bool) else str(v) for v in values)
    return f"{elem}{dims} {t.name} = {{{text}}}"


def _node_without_data(n: NodeProto) -> NodeProto:
    """``n`` itself, or for a ``Constant`` of more than :data:`MAX_SHOWN` elements a copy whose value
    has no data (printed as ``{...}``)."""
    big = [a for a in n.attribute if a.type == onnx.AttributeProto.TENSOR and
           int(np.prod(a.t.dims, dtype=np.int64)) > MAX_SHOWN]
    if n.op_type != "Constant" or not big:
        return n
    out = NodeProto()
    out.CopyFrom(n)
    for a in out.attribute:
        if a.type == onnx.AttributeProto.TENSOR and int(np.prod(a.t.dims, dtype=np.int64)) > MAX_SHOWN:
            a.t.CopyFrom(TensorProto(name=a.t.name, dims=list(a.t.dims), data_type=a.t.data_type))
    return out


def print_model(model: ModelProto) -> str:
    """The model's text form (``onnx.printer.to_text``), one initializer a line after the graph's
    signature, with the data of tensors of more than :data:`MAX_SHOWN` elements left out (``{...}``).
    Deterministic: the same model prints the same text."""
    g = model.graph
    shown = ModelProto(ir_version=model.ir_version, opset_import=model.opset_import, functions=model.functions)
    if model.domain:
        shown.domain = model.domain
    sg = shown.graph
    sg.name = g.name
    sg.input.extend(g.input)
    sg.output.extend(g.output)
    nodes = [_node_without_data(n) for n in g.node]
    big_consts = {n.output[0] for n, m in zip(g.node, nodes, strict=True) if m is not n and n.output}
    sg.node.extend(nodes)
    lines = onnx.printer.to_text(shown).splitlines()
    if big_consts:
        for k, line in enumerate(lines):
            head = line.strip().split(" = Constant <", 1)
            if len(head) == 2 and head[0] in big_consts:
                lines[k] = line.replace("{}>", "{...}>", 1)
    if g.initializer:
        at = next(k for k, line in enumerate(lines) if " => " in line and not line.startswith(" "))
        inits = [_tensor_text(t) for t in g.initializer]
        block = ["   <" + inits[0] + ("," if len(inits) > 1 else ">")]
        block += ["    " + x + ("," if k < len(inits) - 2 else ">") for k, x in enumerate(inits[1:])]
        sig = lines[at].rstrip()
        lines[at:at + 1] = [sig.removesuffix("{").rstrip(), *block, "{"] if sig.endswith("{") else [sig, *block]
    return "\n".join(lines)


def op_counts(model: ModelProto) -> Counter[str]:
    """Top-level nodes per op type."""
    return Counter(n.op_type for n in model.graph.node)


def model_stats(model: ModelProto) -> dict[str, int]:
    """``nodes`` (top level), ``initializers``, ``constant_bytes`` (initializer data), ``inputs``,
    ``outputs``, ``functions`` (model-local functions)."""
    g = model.graph
    nbytes = 0
    for t in g.initializer:
        if t.HasField("raw_data"):
            nbytes += len(t.raw_data)
        else:
            nbytes += int(np.prod(t.dims, dtype=np.int64)) * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize \
                if t.data_type not in (TensorProto.STRING, TensorProto.UNDEFINED) else 0
    return {"nodes": len(g.node), "initializers": len(g.initializer), "constant_bytes": int(nbytes),
            "inputs": len(g.input), "outputs": len(g.output), "functions": len(model.functions)}


def verify_model(model: ModelProto) -> None:
    """Raise :class:`compiler.ir.IRError` naming the node and value when a top-level node reads a
    value that no graph input, initializer or node defines, a name is defined twice, or a graph
    output is not defined. The order of the nodes is the importer's to check (it sorts them
    topologically and names a cycle); subgraph bodies may read outer values and are not checked
    here (the importer checks them)."""
    defined = {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer}
    for n in model.graph.node:
        for o in n.output:
            if o and o in defined:
                raise IRError(f"value %{o} is defined twice (again by node {n.name or n.op_type} ({n.op_type}))")
            defined.add(o)
    defined.add("")
    for n in model.graph.node:
        for x in n.input:
            if x not in defined:
                raise IRError(f"node {n.name or n.op_type} ({n.op_type}) reads %{x}, which nothing defines")
    missing = [o.name for o in model.graph.output if o.name not in defined]
    if missing:
        raise IRError(f"graph output %{missing[0]} is not defined by any node, input or initializer")
