"""float16 models computed in float32: float16 storage at the graph's boundary, float32 inside.

The code generator has no half-precision arithmetic, so :func:`promote_float16` rewrites a model
whose tensors are float16 to float32 everywhere: graph inputs, outputs and value infos (also in
subgraphs), initializers, ``Constant``/``ConstantOfShape`` values and every ``to``/``dtype``
attribute that names FLOAT16. The caller casts float16 inputs to float32 and the float32 results
back to float16 (round to nearest even), the outputs it reports. A single op computed this way
gives what numpy's float16 arithmetic gives (it computes in float32 and rounds once); a chain of
ops is more precise than per-op float16 rounding (like mixed-precision execution on CPUs).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, TensorProto, numpy_helper

F16, F32 = TensorProto.FLOAT16, TensorProto.FLOAT


def uses_float16(model: ModelProto) -> bool:
    """True when a graph input, output or initializer of ``model`` is float16 (top level)."""
    g = model.graph
    return any(vi.type.tensor_type.elem_type == F16 for vi in list(g.input) + list(g.output)) or \
        any(t.data_type == F16 for t in g.initializer)


def _type(t: onnx.TypeProto) -> None:
    kind = t.WhichOneof("value")
    if kind == "tensor_type" and t.tensor_type.elem_type == F16:
        t.tensor_type.elem_type = F32
    elif kind == "sequence_type":
        _type(t.sequence_type.elem_type)
    elif kind == "optional_type":
        _type(t.optional_type.elem_type)


def _tensor(t: TensorProto) -> None:
    if t.data_type == F16:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))


def _graph(g: GraphProto) -> None:
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        _type(vi.type)
    for t in g.initializer:
        _tensor(t)
    for n in g.node:
        for a in n.attribute:
            if a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i == F16:
                a.i = F32
            elif a.type == onnx.AttributeProto.TENSOR:
                _tensor(a.t)
            elif a.type == onnx.AttributeProto.GRAPH:
                _graph(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sg in a.graphs:
                    _graph(sg)


def promote_float16(model: ModelProto) -> ModelProto:
    """A copy of ``model`` with every float16 tensor type and value made float32 (see the module
    docstring); ``model`` is not modified."""
    out = ModelProto()
    out.CopyFrom(model)
    _graph(out.graph)
    return out
