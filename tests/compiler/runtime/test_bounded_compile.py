"""Data-dependent output lengths through ``compiler.compile`` (the CLI and explorer path).

A model whose graph output comes from NonMaxSuppression or NonZero compiles in the bounded form
(``compiler.frontend.bounded``: the result padded to its bound plus a count output), the printed IR
shows that form, and the runtime cuts Prism's outputs to the count before comparing them with ONNX
Runtime's (the oracle) on the runner's own seeded inputs.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler
from compiler.frontend.bounded import trim_outputs
from compiler.ir import print_graph
from compiler.runtime.runner import make_inputs


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def nms_model(score_threshold: float = 0.3) -> onnx.ModelProto:
    """boxes [1, 8, 4], scores [1, 2, 8], at most 8 boxes per class: selected_indices bound 1*2*8 = 16."""
    inits = [numpy_helper.from_array(np.array([8], np.int64), "max_out"),
             numpy_helper.from_array(np.array([0.5], np.float32), "iou"),
             numpy_helper.from_array(np.array([score_threshold], np.float32), "thr")]
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "thr"], ["selected"], name="nms")
    return _model([node], [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 8, 4]),
                           helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 2, 8])],
                  [helper.make_tensor_value_info("selected", TensorProto.INT64, None)], inits)


def nonzero_model() -> onnx.ModelProto:
    """NonZero of Relu(x), x [3, 4]: an intermediate value (its shape comes from specialization)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("NonZero", ["r"], ["idx"], name="nz")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                  [helper.make_tensor_value_info("idx", TensorProto.INT64, None)])


def ort_outputs(model: onnx.ModelProto, graph) -> list[np.ndarray]:
    """ONNX Runtime's outputs on the inputs the runner feeds both (``make_inputs``, seed 0)."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, make_inputs(graph))


def test_nms_output_compiles_bounded_and_verifies_against_onnxruntime() -> None:
    model = nms_model()
    res = compiler.compile(model, benchmark=False)
    assert res.ok, res.error
    ir = print_graph(res.graph)
    assert "NonMaxSuppression(" in ir and ": i64[16, 3]" in ir  # padded to its bound
    assert "return %selected, %selected__count" in ir
    want = ort_outputs(model, res.graph)[0]
    assert 0 < want.shape[0] < 16  # the count is a real cut of the padded result
    report = res.to_dict()["verification"]
    assert report["passed"] is True and list(report["outputs"]) == ["selected"]
    assert report["outputs"]["selected"]["max_abs_error"] == 0.0


def test_nonzero_output_compiles_bounded_and_verifies_against_onnxruntime() -> None:
    model = nonzero_model()
    res = compiler.compile(model, benchmark=False)
    assert res.ok, res.error
    ir = print_graph(res.graph)
    assert "%idx = " in ir and ": i64[2, 12]" in ir and "%idx__count" in ir and "CumSum(" in ir
    want = ort_outputs(model, res.graph)[0]
    assert 0 < want.shape[1] < 12
    verified = res.of_type("model.verified")[-1]
    assert verified["passed"] is True and list(verified["outputs"]) == ["idx"]


def test_pass_timeline_shows_the_bounded_form() -> None:
    res = compiler.compile(nonzero_model(), backend=False)
    assert res.ok, res.error
    passes = res.of_type("pass.finished")
    bound = next(e for e in passes if e["name"] == "bound-outputs")
    assert bound["changed"] and bound["remarks"][0]["message"].startswith("bounded NonZero 'nz': result padded to its upper bound")
    assert "[nz] idx = NonZero (r)" in passes[bound["index"] - 1]["ir"]  # the ONNX text before the rewrite ...
    assert "idx__count" in bound["ir"] and "= NonZero (" not in bound["ir"]  # ... and after it
    for event in passes[bound["index"] + 1:]:  # every graph-IR snapshot of the timeline
        assert "return %idx, %idx__count" in event["ir"] and "NonZero(" not in event["ir"]


def test_check_passes_compares_trimmed_outputs() -> None:
    for model in (nms_model(), nonzero_model()):
        res = compiler.compile(model, check_passes=True, verify=False, benchmark=False)
        assert res.ok, res.error
        assert res.checks and all(c["passed"] for c in res.checks)


def test_bounded_op_feeding_other_ops_compiles_and_verifies() -> None:
    """Issue 13 item 5: the padding is carried through the reader (compiler.frontend.bounded_flow)."""
    nodes = [helper.make_node("NonZero", ["x"], ["idx"], name="nz"), helper.make_node("Transpose", ["idx"], ["t"], name="tr")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                   [helper.make_tensor_value_info("t", TensorProto.INT64, None)])
    res = compiler.compile(model, benchmark=False)
    assert res.ok, res.error
    assert next(e for e in res.events if e["type"] == "model.verified")["passed"] is True


def test_nms_read_by_another_node_compiles_and_verifies() -> None:
    model = nms_model()
    model.graph.node.append(helper.make_node("Gather", ["selected", "k"], ["y"], name="g", axis=1))
    model.graph.initializer.append(numpy_helper.from_array(np.array(2, np.int64), "k"))
    model.graph.output[0].name = "y"
    res = compiler.compile(model, benchmark=False)
    assert res.ok, res.error
    assert next(e for e in res.events if e["type"] == "model.verified")["passed"] is True


def test_trim_outputs_cuts_each_output_to_its_count_along_its_axis() -> None:
    padded = np.array([[0, 2, 5, 0], [1, 3, 6, 0]])  # NonZero [rank, bound]: 3 valid columns
    rows = np.array([[1, 2, 3], [4, 5, 6], [0, 0, 0]])  # [bound, 3]: 2 valid rows
    other = np.arange(3.0)
    out = trim_outputs([other, padded, rows, np.int64(3), np.int64(2)], [(1, "a", 1), (2, "b", 0)], 3)
    assert len(out) == 3 and out[0] is other
    np.testing.assert_array_equal(out[1], [[0, 2, 5], [1, 3, 6]])
    np.testing.assert_array_equal(out[2], [[1, 2, 3], [4, 5, 6]])
    assert trim_outputs([other], [], 1) == [other]
    with pytest.raises(ValueError):
        trim_outputs([other, padded], [(1, "a", 1)], 2)  # the count is missing


def unique_model() -> onnx.ModelProto:
    """Unique along axis 0 (all four outputs) of Ceil(Relu(x)), x [6, 2]: rows repeat."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Ceil", ["r"], ["c"]),
             helper.make_node("Unique", ["c"], ["y", "i", "inv", "cnt"], axis=0, name="uq")]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT if n == "y" else TensorProto.INT64, None)
            for n in ("y", "i", "inv", "cnt")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 2])], outs)


def compress_model() -> onnx.ModelProto:
    """Compress x [5, 3] along axis 0 where the row's max is above 0.5."""
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], axes=[1], keepdims=0),
             helper.make_node("Greater", ["m", "half"], ["keep"]),
             helper.make_node("Compress", ["x", "keep"], ["y"], axis=0, name="cp")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 3])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                  [numpy_helper.from_array(np.array(0.5, np.float32), "half")])


@pytest.mark.parametrize("make,bound", [(unique_model, 6), (compress_model, 5)])
def test_unique_and_compress_outputs_verify_against_onnxruntime(make, bound) -> None:
    model = make()
    res = compiler.compile(model, benchmark=False, check_passes=True)
    assert res.ok, res.error
    assert 0 < ort_outputs(model, res.graph)[0].shape[0] < bound  # a real cut
    report = res.to_dict()["verification"]
    assert report["passed"] is True and list(report["outputs"]) == [o.name for o in model.graph.output]
    assert all(c["passed"] for c in res.checks)
