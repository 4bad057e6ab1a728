"""The driver's ``onnx-passes`` stage: ONNX-level rewrites on the ``ModelProto`` before the graph IR.

Models below opset 7 are upgraded (:func:`upgrade_opset`), the request's input shapes are written
into the graph inputs (:func:`with_input_shapes`), then, repeated while anything changes (bodies may
hold more): statically resolvable If/Loop/Scan are inlined or unrolled
(``compiler.frontend.control_flow``), sequence and optional values resolved into tensors
(``compiler.frontend.sequences``), LSTM/GRU/RNN unrolled (``compiler.frontend.unroll_rnn``) and
function ops without a lowering expanded (``compiler.frontend.expand``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import onnx
from onnx import ModelProto, numpy_helper

from ..errors import CompileError
from ..frontend.control_flow import resolve_control_flow
from ..frontend.expand import expand_functions
from ..frontend.sequence_io import output_layout
from ..frontend.sequences import resolve_sequences
from ..frontend.unroll_rnn import unroll_rnns
from ..loops.lower import LOWERINGS
from .state import Compilation

NO_EXPAND = {"Constant", "If", "Loop", "Scan", "Range"}  # folded, or run as control flow


def has_lowering(node: Any) -> bool:
    """True when ``node`` (a NodeProto) is compiled as it is: it has a lowering, is a control-flow or
    folded op, or is of another domain; else its function body (if any) replaces it."""
    return node.domain not in ("", "ai.onnx") or node.op_type in LOWERINGS or node.op_type in NO_EXPAND


def upgrade_opset(proto: ModelProto, minimum: int = 7) -> ModelProto:
    """A model of a default-domain opset below ``minimum`` converted with ONNX's version converter
    (``onnx.version_converter``: e.g. opset 6's ``broadcast``/``axis`` attributes become numpy-style
    broadcasting); other models as they are. Raises CompileError(stage="import") when it fails."""
    version = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), minimum)
    if version >= minimum:
        return proto
    try:
        out = onnx.version_converter.convert_version(proto, minimum)
    except Exception as e:
        raise CompileError("import", f"opset {version} could not be converted to {minimum}: {e}") from None
    return _legacy_prelu(out)


def _legacy_prelu(proto: ModelProto) -> ModelProto:
    """PRelu before opset 7 applied a 1-D slope of C elements along axis 1 (as Caffe and PyTorch
    export it); from opset 7 the slope broadcasts numpy-style. The converter keeps the slope as it
    is, so a constant slope of C > 1 elements is reshaped to ``[C, 1, ..., 1]`` here."""
    try:
        shapes = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in
                  list(onnx.shape_inference.infer_shapes(proto).graph.value_info) + list(proto.graph.input)}
    except Exception:
        return proto
    inits = {t.name: t for t in proto.graph.initializer}
    for n in proto.graph.node:
        if n.op_type != "PRelu" or len(n.input) < 2 or n.input[1] not in inits:
            continue
        slope = numpy_helper.to_array(inits[n.input[1]])
        rank = shapes.get(n.input[0], 0)
        if slope.ndim == 1 and slope.size > 1 and rank > 2:
            t = numpy_helper.from_array(slope.reshape((slope.size,) + (1,) * (rank - 2)), n.input[1])
            inits[n.input[1]].CopyFrom(t)
    return proto


def with_input_shapes(proto: ModelProto, input_shapes: Mapping[str, Sequence[int]] | None) -> ModelProto:
    """A copy of ``proto`` whose graph inputs named in ``input_shapes`` declare those static shapes."""
    if not input_shapes:
        return proto
    declared = {vi.name: [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
                for vi in proto.graph.input if vi.type.HasField("tensor_type")}
    if all(declared.get(n) == [int(d) for d in shape] for n, shape in input_shapes.items()):
        return proto  # already static and equal: no copy

    out = onnx.ModelProto()
    out.CopyFrom(proto)
    for vi in out.graph.input:
        if vi.name in input_shapes and vi.type.HasField("tensor_type"):
            shape = vi.type.tensor_type.shape
            del shape.dim[:]
            for d in input_shapes[vi.name]:
                shape.dim.add().dim_value = int(d)
    return out


def prepare_model(proto: ModelProto, input_shapes: Mapping[str, Sequence[int]] | None) -> ModelProto:
    """The ONNX-level preparation before import (see the module docstring; a new ModelProto, ``proto``
    is not modified). A model without any of these comes back equivalent. Raises
    CompileError(stage="import") naming the node that cannot be prepared."""
    proto = upgrade_opset(proto)
    proto = with_input_shapes(proto, input_shapes)
    for _ in range(8):  # each step returns its input object when it has nothing to do
        before = proto
        try:
            proto = unroll_rnns(resolve_control_flow(resolve_sequences(proto)))
        except ValueError as e:
            raise CompileError("import", str(e)) from None
        proto = expand_functions(proto, keep=has_lowering)
        if proto is before:
            break
    return resolve_sequences(proto, final=True)


def run_onnx_passes(comp: Compilation) -> None:
    """Stage ``onnx-passes``: ``comp.reference`` (the model prepared, which ONNX Runtime runs: narrow
    types and all), ``comp.proto`` (the legalized model prepared, or the reference), its graph
    outputs (``comp.flat_outputs``) and sequence-output layout (``comp.sequence_layout``)."""
    assert comp.proto is not None
    shapes = comp.request.input_shapes
    comp.reference = prepare_model(comp.proto, shapes)
    comp.proto = prepare_model(comp.legal, shapes) if comp.legal is not None else comp.reference
    comp.flat_outputs = [o.name for o in comp.proto.graph.output]
    comp.sequence_layout = output_layout(comp.proto)
