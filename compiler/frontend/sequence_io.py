"""Sequence and optional graph inputs and outputs at the backend boundary.

The ONNX backend interface passes a sequence as a Python list of arrays and an optional as None
(absent), an array or a list (``onnx/backend/test/runner``). Prism compiles tensors only, so the
boundary flattens them: :func:`flatten_inputs` gives each element of a sequence input its own
tensor input ``<name>__in<i>`` (a present optional tensor ``<name>__in``) and rebuilds the value
at the top of the graph (``SequenceConstruct``/``SequenceEmpty``, ``Optional``), which
``compiler.frontend.sequences`` then resolves at compile time; a program is compiled per length
and presence. The outputs come back through the layout that
:func:`compiler.frontend.sequences.resolve_sequences` records (:func:`output_layout`), and
:func:`rebuild_outputs` turns the element outputs back into lists, None or arrays.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, helper

from ..errors import CompileError
from .sequence_ops import _elem_type
from .sequences import LAYOUT_KEY


def _tensor_input(name: str, value: Any, elem: int, what: str) -> tuple[onnx.ValueInfoProto, np.ndarray]:
    if value is None or isinstance(value, list | tuple):
        raise CompileError("request", f"{what} takes a tensor, got {type(value).__name__}")
    arr = np.asarray(value)
    if elem:
        arr = arr.astype(helper.tensor_dtype_to_np_dtype(elem), copy=False)
    else:
        elem = helper.np_dtype_to_tensor_dtype(arr.dtype)
    return helper.make_tensor_value_info(name, elem, list(arr.shape)), arr


def _sequence(name: str, value: Any, tp: onnx.TypeProto, out: str, inputs: list[onnx.ValueInfoProto],
              flat: dict[str, np.ndarray], nodes: list[onnx.NodeProto]) -> None:
    if not isinstance(value, list | tuple):
        raise CompileError("request", f"input {name!r} is a sequence: pass a list of arrays, "
                           f"got {type(value).__name__}")
    elem = _elem_type(tp)
    items = []
    for i, a in enumerate(value):
        vi, arr = _tensor_input(f"{name}__in{i}", a, elem, f"element {i} of sequence input {name!r}")
        inputs.append(vi)
        flat[vi.name] = arr
        items.append(vi.name)
    if items:
        nodes.append(helper.make_node("SequenceConstruct", items, [out]))
    else:
        nodes.append(helper.make_node("SequenceEmpty", [], [out], dtype=elem or onnx.TensorProto.FLOAT))


def flatten_inputs(model: ModelProto, named: dict[str, Any]) -> tuple[ModelProto, dict[str, np.ndarray]]:
    """``model`` with its sequence/optional inputs replaced by element tensor inputs, and the arrays
    of all its tensor inputs by name (``named``: input name -> array, list of arrays, or None).

    Element dtypes follow the declared element type (the array's own where undeclared); shapes are
    the arrays'. Raises CompileError(stage="request") for a value of the wrong kind (a list for a
    tensor input, an array for a sequence, None for a non-optional input)."""
    inits = {t.name for t in model.graph.initializer}
    inputs: list[onnx.ValueInfoProto] = []
    flat: dict[str, np.ndarray] = {}
    nodes: list[onnx.NodeProto] = []
    for vi in model.graph.input:
        if vi.name in inits:
            inputs.append(vi)
            continue
        value, kind = named[vi.name], vi.type.WhichOneof("value")
        if kind == "sequence_type":
            _sequence(vi.name, value, vi.type, vi.name, inputs, flat, nodes)
        elif kind == "optional_type":
            inner = vi.type.optional_type.elem_type
            if value is None:
                nodes.append(helper.make_node("Optional", [], [vi.name], type=inner))
            elif inner.WhichOneof("value") == "sequence_type":
                _sequence(vi.name, value, inner, f"{vi.name}__seq", inputs, flat, nodes)
                nodes.append(helper.make_node("Optional", [f"{vi.name}__seq"], [vi.name]))
            else:
                tvi, arr = _tensor_input(f"{vi.name}__in", value, _elem_type(inner), f"optional input {vi.name!r}")
                inputs.append(tvi)
                flat[tvi.name] = arr
                nodes.append(helper.make_node("Optional", [tvi.name], [vi.name]))
        else:
            if value is None or isinstance(value, list | tuple):
                raise CompileError("request", f"input {vi.name!r} is a tensor: got {type(value).__name__}")
            inputs.append(vi)
            flat[vi.name] = np.asarray(value)
    out = ModelProto()
    out.CopyFrom(model)
    del out.graph.input[:]
    out.graph.input.extend(inputs)
    rest = list(out.graph.node)
    del out.graph.node[:]
    out.graph.node.extend(nodes + rest)
    return out, flat


def output_layout(model: ModelProto) -> dict[str, Any]:
    """The layout :func:`compiler.frontend.sequences.resolve_sequences` recorded in ``model``
    (``{output name: {"kind": "sequence" | "tensor" | "absent", "names": [element outputs]}}``)."""
    for p in model.metadata_props:
        if p.key == LAYOUT_KEY:
            return dict(json.loads(p.value))
    return {}


def rebuild_outputs(names: list[str], flat_names: list[str], outs: list[Any], layout: dict[str, Any]) -> list[Any]:
    """The outputs ``names`` (the model's graph outputs, in order) from the compiled program's
    outputs ``outs`` named ``flat_names``: a sequence as a list of arrays, an absent optional as
    None, every other output as it is."""
    by_name = dict(zip(flat_names, outs, strict=True))
    result: list[Any] = []
    for name in names:
        lay = layout.get(name)
        if lay is None:
            result.append(by_name[name])
        elif lay["kind"] == "absent":
            result.append(None)
        elif lay["kind"] == "tensor":
            result.append(by_name[lay["names"][0]])
        else:
            result.append([by_name[n] for n in lay["names"]])
    return result
