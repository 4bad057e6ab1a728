"""NonMaxSuppression: the sequential kernel (compiler.loops.ops_nms) and its bounded form.

Expected values come from ``onnx.reference.ReferenceEvaluator`` on the same model, never from Prism.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from compiler.backend import PrismBackend, bind_values
from compiler.frontend import import_model, specialize
from compiler.frontend.bounded import bound_outputs
from compiler.loops.lower import lower_group
from compiler.loops.printer import print_func


def _model(nb: int, nc: int, n: int, *, center: int = 0, opset: int = 11, score_threshold: bool = True):
    names = ["boxes", "scores", "max_out", "iou", "st" if score_threshold else ""]
    node = helper.make_node("NonMaxSuppression", [x for x in names if x], ["sel"], name="nms", center_point_box=center)
    vis = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [nb, n, 4]),
           helper.make_tensor_value_info("scores", TensorProto.FLOAT, [nb, nc, n]),
           helper.make_tensor_value_info("max_out", TensorProto.INT64, [1]),
           helper.make_tensor_value_info("iou", TensorProto.FLOAT, [1])]
    if score_threshold:
        vis.append(helper.make_tensor_value_info("st", TensorProto.FLOAT, [1]))
    graph = helper.make_graph([node], "nms", vis, [helper.make_tensor_value_info("sel", TensorProto.INT64, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _boxes(rng: np.random.Generator, nb: int, n: int, center: int) -> np.ndarray:
    xy = rng.uniform(0, 10, (nb, n, 2)).astype(np.float32)
    wh = rng.uniform(0.5, 4, (nb, n, 2)).astype(np.float32)
    if center:
        return np.concatenate([xy, wh], -1)
    corners = np.concatenate([xy, xy + wh], -1)[..., [1, 0, 3, 2]]  # [y1, x1, y2, x2]
    flip = rng.integers(0, 2, (nb, n, 1)).astype(bool)  # corners in either order
    return np.where(flip, corners[..., [2, 3, 0, 1]], corners)


@pytest.mark.parametrize(("nb", "nc", "n", "max_out", "center", "opset", "st"), [
    (2, 3, 20, 5, 0, 11, 0.3),   # per-class limit reached
    (1, 2, 40, 100, 1, 10, None),  # limit above the box count; opset 10; no score threshold
    (1, 1, 5, 0, 0, 11, 0.0),    # nothing may be selected: an empty result
    (3, 2, 7, 1, 0, 11, 0.1),
    (1, 1, 1, 3, 0, 11, 0.0),
])
def test_nms_matches_reference(nb, nc, n, max_out, center, opset, st):
    m = _model(nb, nc, n, center=center, opset=opset, score_threshold=st is not None)
    rep = PrismBackend.prepare(m, isolate=False)
    ev = ReferenceEvaluator(m)
    rng = np.random.default_rng(nb * 100 + n)
    for k in range(4):
        feeds = {"boxes": _boxes(rng, nb, n, center),
                 "scores": (rng.integers(0, 8, (nb, nc, n)) / 8).astype(np.float32),  # ties: lower index first
                 "max_out": np.array([max_out], np.int64),
                 "iou": np.array([0.1 + 0.2 * k], np.float32)}
        if st is not None:
            feeds["st"] = np.array([st], np.float32)
        ref = ev.run(None, feeds)[0]
        (got,) = rep.run([feeds[x] for x in rep.input_names])
        assert got.dtype == np.int64 and got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)
    # the thresholds are runtime inputs: one program for every iou_threshold
    assert len(rep.programs) == 1


def test_nms_identical_and_degenerate_boxes():
    boxes = np.array([[[0, 0, 1, 1]] * 4 + [[2, 2, 2, 3], [5, 5, 6, 6]]], np.float32)  # a zero-area box
    scores = np.array([[[0.9, 0.9, 0.8, 0.95, 0.7, 0.6]]], np.float32)
    m = _model(1, 1, 6)
    feeds = {"boxes": boxes, "scores": scores, "max_out": np.array([10], np.int64),
             "iou": np.array([0.5], np.float32), "st": np.array([0.0], np.float32)}
    (got,) = PrismBackend.prepare(m, isolate=False).run([feeds[x] for x in ("boxes", "scores", "max_out", "iou", "st")])
    np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, feeds)[0])


def test_nms_kernel_is_serial_loop_ir_with_a_padded_output_and_a_count():
    m = bind_values(_model(2, 3, 5), {"max_out": np.array([2], np.int64)})
    shapes = {"boxes": [2, 5, 4], "scores": [2, 3, 5], "iou": [1], "st": [1]}
    m, trims = bound_outputs(m, dict(shapes, max_out=[1]), {})
    assert trims == [(0, "sel__count", 0)]
    g = import_model(m)
    specialize(g, shapes)
    node = next(x for x in g.nodes if x.op_type == "NonMaxSuppression")
    assert [str(v.type) for v in node.outputs] == ["i64[12, 3]", "i64[]"]  # 2 * 3 * min(2, 5) rows
    lk = lower_group(node, "nms", 11)
    text = print_func(lk.func)
    assert "vectorized" not in text and "parallel" not in text
    assert "if " in text
    assert [a.kind for a in lk.args].count("scratch") == 2  # the visiting order and the boxes kept


def test_nms_feeding_other_ops_matches_onnxruntime():
    """The bounded selection feeds a Gather inside the graph (compiler/frontend/bounded_flow.py)."""
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou"], ["sel"], name="nms0"),
             helper.make_node("Gather", ["sel", "k"], ["y"], axis=1)]
    vis = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4, 4]),
           helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 4])]
    inits = [helper.make_tensor("max_out", TensorProto.INT64, [1], [2]),
             helper.make_tensor("iou", TensorProto.FLOAT, [1], [0.5]), helper.make_tensor("k", TensorProto.INT64, [], [2])]
    graph = helper.make_graph(nodes, "n", vis, [helper.make_tensor_value_info("y", TensorProto.INT64, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    rng = np.random.default_rng(0)
    feeds = [_boxes(rng, 1, 4, 0), rng.uniform(0, 1, (1, 1, 4)).astype(np.float32)]
    (got,) = PrismBackend.prepare(m, isolate=False).run(feeds)
    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"boxes": feeds[0], "scores": feeds[1]})
    np.testing.assert_array_equal(got, want)
