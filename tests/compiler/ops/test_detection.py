"""NonMaxSuppression's registry entry (compiler.ops.detection): the plain and the bounded form.

Expected shapes come from onnx.reference (constant inputs) and from the ONNX spec's bound
``num_batches * num_classes * min(max_output_boxes_per_class, spatial_dimension)``.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.errors import CompileError
from compiler.frontend import import_model, specialize


def _graph(boxes_shape, scores_shape, *, outputs=("sel",), max_out=None, consts=None, **attrs):
    names = ["boxes", "scores", "max_out", "iou"]
    node = helper.make_node("NonMaxSuppression", names, list(outputs), name="nms", **attrs)
    consts = dict(consts or {})
    vis = [helper.make_tensor_value_info(k, TensorProto.FLOAT, s)
           for k, s in (("boxes", boxes_shape), ("scores", scores_shape)) if k not in consts]
    if max_out is None:
        vis.append(helper.make_tensor_value_info("max_out", TensorProto.INT64, [1]))
    else:
        consts["max_out"] = np.array([max_out], np.int64)
    consts.setdefault("iou", np.array([0.5], np.float32))
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    outs = [helper.make_tensor_value_info(o, TensorProto.INT64, None) for o in outputs]
    m = helper.make_model(helper.make_graph([node], "g", vis, outs, inits), opset_imports=[helper.make_opsetid("", 11)])
    return m, {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in vis}


def _types(m, shapes):
    g = import_model(m)
    specialize(g, shapes)
    return [str(v.type) for v in g.nodes[0].outputs]


def test_bounded_form_is_padded_to_the_spec_bound_with_a_scalar_count():
    assert _types(*_graph([2, 7, 4], [2, 3, 7], outputs=("sel", "n"), max_out=4)) == ["i64[24, 3]", "i64[]"]
    assert _types(*_graph([1, 5, 4], [1, 2, 5], outputs=("sel", "n"), max_out=50)) == ["i64[10, 3]", "i64[]"]
    assert _types(*_graph([1, 5, 4], [1, 2, 5], outputs=("sel", "n"), max_out=-3)) == ["i64[0, 3]", "i64[]"]


def test_plain_form_is_symbolic_unless_every_input_is_constant():
    (t,) = _types(*_graph([1, 5, 4], [1, 1, 5], max_out=2))
    assert t.startswith("i64[") and t.endswith(", 3]") and "sel" in t
    rng = np.random.default_rng(0)
    boxes = np.sort(rng.uniform(0, 4, (1, 5, 4)).astype(np.float32), axis=-1)
    scores = rng.uniform(0, 1, (1, 1, 5)).astype(np.float32)
    m, shapes = _graph([1, 5, 4], [1, 1, 5], max_out=3, consts={"boxes": boxes, "scores": scores})
    ref = ReferenceEvaluator(m).run(None, {})[0]
    assert _types(m, shapes) == [f"i64[{ref.shape[0]}, 3]"]


@pytest.mark.parametrize(("boxes", "scores", "outputs", "max_out", "attrs", "words"), [
    ([1, 5, 3], [1, 1, 5], ("sel",), 2, {}, "last dim must be 4"),
    ([1, 5, 4], [2, 1, 5], ("sel",), 2, {}, "num_batches"),
    ([1, 5, 4], [1, 1, 6], ("sel",), 2, {}, "spatial_dimension"),
    ([1, 5, 4], [1, 1, 5], ("sel",), 2, {"center_point_box": 2}, "center_point_box"),
    ([1, 5, 4], [1, 1, 5], ("sel", "n"), None, {}, "max_output_boxes_per_class"),
])
def test_bad_nodes_are_compile_errors_naming_the_node(boxes, scores, outputs, max_out, attrs, words):
    m, shapes = _graph(boxes, scores, outputs=outputs, max_out=max_out, **attrs)
    if max_out is None:
        shapes["max_out"] = [1]
    with pytest.raises(CompileError) as exc:
        _types(m, shapes)
    assert exc.value.stage == "shape"
    assert "nms" in str(exc.value) and words in str(exc.value)
