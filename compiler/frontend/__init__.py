"""The front end: ONNX model -> graph IR, and shape specialization.

``load(model, input_shapes)`` is the one entry point: read (bytes, path or ``ModelProto``), import,
specialize. ``inspect_model`` describes a model without compiling it.
"""

from __future__ import annotations

from typing import Any

from onnx import ModelProto, TensorProto

from ..errors import CompileError
from ..ir import Graph
from .importer import check_opset, default_opset, import_model, type_from_proto
from .input_values import value_inputs
from .load import ModelSource, read_model
from .specialize import (
    InputShapes,
    bind_input_shapes,
    parse_input_shape,
    specialize,
    unbound_inputs,
)

__all__ = [
    "InputShapes", "ModelSource", "bind_input_shapes", "import_model", "inspect_model", "load",
    "parse_input_shape", "read_model", "specialize", "unbound_inputs",
]


def load(model: ModelSource, input_shapes: InputShapes | None = None) -> tuple[Graph, ModelProto]:
    """Read, import and specialize a model. Returns the typed graph and the (inline-data) proto.

    Raises CompileError with stage ``import`` or ``shape``.
    """
    proto, _ = read_model(model)
    graph = import_model(proto)
    specialize(graph, input_shapes)
    return graph, proto


def _dtype_name(elem: int) -> str:
    try:
        names: dict[int, str] = {TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64",
                                 TensorProto.FLOAT16: "float16", TensorProto.BOOL: "bool", TensorProto.STRING: "string"}
        return names.get(elem) or TensorProto.DataType.Name(elem).lower()  # type: ignore[arg-type]
    except ValueError:
        return f"type{elem}"


def describe_io(proto: ModelProto) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The model's runtime inputs and outputs as ``[{"name", "dtype", "shape"}]`` (dims int, str or None)."""
    inits = {t.name for t in proto.graph.initializer}

    def one(vi: Any) -> dict[str, Any]:
        tt = vi.type.tensor_type
        shape: list[int | str | None] | None = None
        if tt.HasField("shape"):
            shape = [int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
        return {"name": vi.name, "dtype": _dtype_name(int(tt.elem_type)), "shape": shape}

    ins = [one(vi) for vi in proto.graph.input if vi.name not in inits]
    outs = [one(vi) for vi in proto.graph.output]
    return ins, outs


def inspect_model(model: ModelSource) -> dict[str, Any]:
    """Describe a model without compiling it.

    Returns ``{"name", "opset": int, "ir_version": int, "producer": str, "inputs": [{"name",
    "dtype": "float32"|..., "shape": [int|str|None]}], "outputs": [...], "node_count": int,
    "value_inputs": [{"name", "dtype", "shape", "uses": [str]}]}``: ``value_inputs`` are the small
    integer inputs whose value reaches an If condition, a trip count or a shape slot, which a
    request may bind with ``input_values`` (``compiler.frontend.input_values.value_inputs``).
    Raises CompileError(stage="import") for bytes that are not a readable ONNX model or an opset
    outside 7 to the installed onnx's latest opset.
    """
    proto, _ = read_model(model)
    opset = default_opset(proto)
    check_opset(opset)
    ins, outs = describe_io(proto)
    return {
        "name": proto.graph.name or "model",
        "opset": opset,
        "ir_version": int(proto.ir_version),
        "producer": " ".join(x for x in (proto.producer_name, proto.producer_version) if x),
        "inputs": ins,
        "outputs": outs,
        "node_count": len(proto.graph.node),
        "value_inputs": value_inputs(proto),
    }


_ = (type_from_proto, CompileError)
