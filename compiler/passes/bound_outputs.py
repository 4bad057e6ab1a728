"""bound-outputs: data-dependent output lengths (NonZero, Compress, Unique, NonMaxSuppression) as
results padded to their upper bound plus a count, on the ONNX model (level ``onnx``).

A static-shape compiler cannot size a buffer whose length the data selects. As XLA does with bounded
dynamic shapes, such a node is rewritten into ops that compute its result padded to the upper bound
and an int64 count of valid entries (``compiler.frontend.bounded``). When its results are graph
outputs only, the count is appended after the graph outputs and the runtime cuts each output to it
(``trim_outputs``); when further nodes read them, the padding is carried through those nodes, each
kept exact on the valid prefix (``compiler.frontend.bounded_flow``: row-wise ops renumber the padded
axis, reductions over it read their identity), and the graph outputs still padded are cut alike. The
shapes come from the model imported and specialized with the request's input shapes. Left alone: a
node whose result has a static shape (its input known at compile time: constant folding computes it).
A node reading a padded value in a way that cannot be kept exact fails with a shape error naming it.
The pass changes the model's outputs: ``ctx.artifacts.trims`` lists them, ``ctx.artifacts.unbounded``
keeps the model before (what ``--check-passes`` compares with).
"""

from __future__ import annotations

from onnx import ModelProto, NodeProto

from ..frontend import import_model, specialize
from ..frontend.bounded import BOUNDED_OPS, bound_outputs
from ..frontend.bounded_flow import bound_flow
from ..frontend.value_types import static_types, value_types
from .base import ModelPass, ModelPassResult, PassContext, Remark, register


@register
class BoundOutputs(ModelPass):
    """Bound the data-dependent results (see module docstring)."""

    name = "bound-outputs"
    changes_interface = True

    def run(self, model: ModelProto, ctx: PassContext) -> ModelPassResult:
        outs = {o.name for o in model.graph.output}
        bounded = [n for n in model.graph.node if n.op_type in BOUNDED_OPS and n.domain in ("", "ai.onnx")]
        read = {i for n in model.graph.node for i in n.input}
        if not any(o in outs or o in read for n in bounded for o in n.output):
            return ModelPassResult(False, model=model)
        graph = import_model(model)
        specialize(graph, ctx.input_shapes)
        shapes, dtypes = static_types(graph)
        flow = any(o in read and o not in shapes for n in bounded for o in n.output)
        out, trims = bound_flow(model, shapes, dtypes, value_types) if flow else bound_outputs(model, shapes, dtypes)
        remarks = [self._remark(n, shapes, trims, [o.name for o in out.graph.output], flow) for n in bounded]
        if out is model or not trims and not flow:
            return ModelPassResult(False, [r for r in remarks if r.kind == "missed"], model=model)
        ctx.artifacts.trims = trims
        ctx.artifacts.unbounded = model
        return ModelPassResult(True, remarks, {"bounded_outputs": len(trims)}, model=out)

    def _remark(self, n: NodeProto, shapes: dict[str, list[int]], trims: list[tuple[int, str, int]],
                outs: list[str], flow: bool) -> Remark:
        label = n.name or n.op_type
        if n.output[0] in shapes:
            return self.remark("missed", f"{n.op_type} '{label}' not bounded: its result has the static shape "
                               f"{shapes[n.output[0]]} (its input is known at compile time: constant folding computes "
                               "it)", [label], op=n.op_type)
        mine = [(k, c, a) for k, c, a in trims if c == f"{n.output[0]}__count"]
        cut = ", ".join("%" + outs[k] for k, _c, _a in mine)
        where = ("its padded result carried through the nodes that read it" if flow else "") + \
            (("; " if flow else "") + f"output(s) {cut} cut to the count by the runtime" if mine else "")
        return self.remark(
            "applied", f"bounded {n.op_type} '{label}': result padded to its upper bound (input %{n.input[0]} of "
            f"shape {shapes.get(n.input[0])}) plus the int64 count %{n.output[0]}__count; {where}", [label],
            op=n.op_type, outputs=[outs[k] for k, _c, _a in mine], axes=[a for _k, _c, a in mine],
            input_shape=shapes.get(n.input[0]), carried=flow)
