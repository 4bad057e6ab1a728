"""The driver's ``onnx-passes`` stage: the pipeline's model passes on the ``ModelProto`` before the
graph IR exists.

Models below opset 7 are upgraded (:func:`upgrade_opset`) and the request's input shapes are written
into the graph inputs (:func:`with_input_shapes`); then the pass manager (``compiler.passes.manager``,
the same instruments as the graph passes: events, ONNX-text snapshots, verifier, timing) runs the
pipeline's level-``onnx`` passes (by default ``compiler.passes.pipeline.ONNX_PASSES``: resolve
sequences, inline control flow, unroll RNNs and expand function ops to a fixed point, then
legalize narrow types and bound data-dependent outputs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx
from onnx import ModelProto, numpy_helper

from ..errors import CompileError
from ..frontend.sequence_io import output_layout
from ..passes import Artifacts, PassContext
from ..passes.check import ModelChecker
from ..passes.instruments import CheckPassesInstrument, VerifierInstrument, default_instruments
from ..passes.manager import PassManager
from ..passes.pipeline import ONNX_PASSES, PassGroup, Pipeline, parse_pipeline
from .state import Compilation


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


def _split(pipeline: Pipeline) -> tuple[Pipeline, Pipeline]:
    """The model passes before the first that changes the model's interface (graph input/output
    types or count: ``changes_interface``), and the rest."""
    items = pipeline.level("onnx").passes
    specs = [list(i.passes) if isinstance(i, PassGroup) else [i] for i in items]
    k = next((j for j, ss in enumerate(specs) if any(getattr(s.cls, "changes_interface", False) for s in ss)),
             len(items))
    return Pipeline(items[:k]), Pipeline(items[k:])


def prepare_model(proto: ModelProto, input_shapes: Mapping[str, Sequence[int]] | None,
                  pipeline: str = ONNX_PASSES) -> ModelProto:
    """``proto`` upgraded, its input shapes bound and the model passes of ``pipeline`` run that keep
    its interface (control flow, sequences, RNNs, function ops: the model ONNX Runtime runs as the
    reference), with no events. A new ModelProto; ``proto`` is not modified. Raises
    CompileError(stage="import") naming the node that cannot be prepared."""
    proto = with_input_shapes(upgrade_opset(proto), input_shapes)
    keep, _ = _split(parse_pipeline(pipeline))
    pm = PassManager(PassContext(input_shapes=input_shapes), [VerifierInstrument()])
    return pm.run_model(proto, keep)


def run_onnx_passes(comp: Compilation) -> None:
    """Stage ``onnx-passes``: the pipeline's model passes under ``comp.passes`` (the compilation's
    pass manager, created here with the default instruments). Sets ``comp.reference`` (the model
    after the passes that keep its interface, which ONNX Runtime runs: narrow types and all),
    ``comp.proto`` (after all of them: legalized, outputs bounded), ``comp.unbounded`` (before
    bound-outputs), ``comp.trims``, its graph outputs before bounding (``comp.flat_outputs``) and
    sequence-output layout (``comp.sequence_layout``). With ``check_passes`` each model pass is
    checked in ONNX Runtime (``compiler.passes.check.ModelChecker``). An If/Loop/Scan left (decided at run time) is
    the ``control-flow`` stage's (``compiler.driver.control``)."""
    assert comp.proto is not None and comp.pipeline is not None
    req = comp.request
    ctx = PassContext(target=req.target, input_shapes=req.input_shapes,
                      artifacts=Artifacts(calibration_data=req.calibration_data))
    comp.ctx = ctx
    comp.passes = PassManager(ctx, default_instruments(comp.events))
    keep, change = _split(comp.pipeline)
    model = with_input_shapes(upgrade_opset(comp.proto), req.input_shapes)
    if req.check_passes:  # each model pass that keeps the interface checked against the model before them
        comp.passes.instruments.insert(0, CheckPassesInstrument(None, ModelChecker(model, comp.checks).after_pass))
    comp.reference = comp.passes.run_model(model, keep)
    comp.proto = comp.passes.run_model(comp.reference, change)
    comp.unbounded = ctx.artifacts.unbounded or comp.proto
    comp.trims = list(ctx.artifacts.trims)
    comp.flat_outputs = [o.name for o in comp.unbounded.graph.output]
    comp.sequence_layout = output_layout(comp.unbounded)
