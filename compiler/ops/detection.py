"""Detection ops: NonMaxSuppression (ONNX operator spec, opset 10/11).

NonMaxSuppression's ``selected_indices`` has one row per selected box, a number only the data
decides. A plain node (one output) gets the symbolic shape ``[<name>_num_selected, 3]``, which no
kernel can size (its exact shape when every input is a known constant: ``onnx.reference``). Prism's bounded form of the node (made by ``compiler.frontend.bounded`` when the
output is a graph output) has a second output, the number of selected boxes (``int64`` scalar), and
its ``selected_indices`` is padded to the upper bound
``num_batches * num_classes * min(max_output_boxes_per_class, spatial_dimension)`` rows; the
rows past the count are zero. The bound needs ``max_output_boxes_per_class`` at compile time (a
constant, or a graph input bound by value: ``compiler.backend.SHAPE_INPUTS``); an absent one is 0
(no box is selected), a negative one counts as 0.
"""

from __future__ import annotations

from onnx import TensorProto

from ..ir import TensorType
from .infer import evaluate_node
from .registry import InferContext, op

I64 = TensorProto.INT64


@op("NonMaxSuppression", kind="opaque")
def infer_non_max_suppression(ctx: InferContext) -> list[TensorType]:
    """boxes ``[num_batches, spatial_dimension, 4]``, scores ``[num_batches, num_classes,
    spatial_dimension]`` (float) -> selected_indices ``[num_selected, 3]`` int64 (and, in the bounded
    form, the count ``[]`` int64). Raises CompileError (stage ``shape``) for mismatched shapes, a
    ``center_point_box`` other than 0/1, or, in the bounded form, an unknown
    ``max_output_boxes_per_class`` or static dims."""
    boxes, scores = ctx.shape(0), ctx.shape(1)
    if len(boxes) != 3 or len(scores) != 3:
        raise ctx.fail(f"boxes {list(boxes)} and scores {list(scores)} must both have rank 3")
    if isinstance(boxes[2], int) and boxes[2] != 4:
        raise ctx.fail(f"boxes {list(boxes)}: the last dim must be 4")
    for a, b, what in ((boxes[0], scores[0], "num_batches"), (boxes[1], scores[2], "spatial_dimension")):
        if isinstance(a, int) and isinstance(b, int) and a != b:
            raise ctx.fail(f"boxes {list(boxes)} and scores {list(scores)} disagree on {what}")
    if int(ctx.attr("center_point_box", 0)) not in (0, 1):
        raise ctx.fail(f"center_point_box must be 0 or 1, not {ctx.attr('center_point_box')}",
                       attribute="center_point_box")
    if len(ctx.node.outputs) == 1:
        known = [ctx.value(i) if ctx.has(i) else None for i in range(ctx.n_inputs)]
        if all(k is not None for i, k in enumerate(known) if ctx.has(i)):  # constant inputs: evaluate
            res = evaluate_node(ctx.node, known, ctx.opset)
            if res is not None:
                return [TensorType(I64, tuple(int(d) for d in res[0].shape))]
        return [TensorType(I64, (f"{ctx.node.outputs[0].name}_num_selected", 3))]
    if not ctx.has(2):
        most = 0
    else:
        vals = ctx.ints(2)
        if vals is None or len(vals) != 1:
            raise ctx.fail("max_output_boxes_per_class must be a compile-time scalar to bound the output "
                           "(a constant, or a graph input bound by value)")
        most = max(vals[0], 0)
    dims = (boxes[0], scores[1], boxes[1])
    if not all(isinstance(d, int) for d in dims):
        raise ctx.fail(f"boxes {list(boxes)} and scores {list(scores)} must have static shapes")
    nb, nc, n = (int(d) for d in dims)
    return [TensorType(I64, (nb * nc * min(most, n), 3)), TensorType(I64, ())]
