"""Shape specialization: binding input dims, and the errors a caller can cause."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import CompileError
from compiler.frontend import load, parse_input_shape
from compiler.ops import MAX_ELEMENTS


def _dyn_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape: a data-dependent shape chain (as in YOLOv8)
    idx0 = numpy_helper.from_array(np.array(0, np.int64), "idx0")
    minus1 = numpy_helper.from_array(np.array([-1], np.int64), "minus1")
    ax0 = numpy_helper.from_array(np.array([0], np.int64), "ax0")
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "idx0"], ["n0"], axis=0),
        helper.make_node("Unsqueeze", ["n0", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape2"], axis=0),
        helper.make_node("Reshape", ["x", "shape2"], ["y"]),
    ]
    g = helper.make_graph(nodes, "dyn", [x], [y], initializer=[idx0, minus1, ax0])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_binding_makes_data_dependent_shapes_static() -> None:
    m = _dyn_model()
    graph, _ = load(m, {"x": [2, 3, 5, 7]})
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": np.zeros((2, 3, 5, 7), np.float32)})[0].shape
    assert graph.outputs[0].type.shape == want == (2, 105)


@pytest.mark.parametrize("shapes,words", [
    ({"x": [2, 3, 5]}, "rank 4"),
    ({"x": [2, 4, 5, 7]}, "dim 1 is 3"),
    ({"x": [2, 3, -1, 7]}, ">= 0"),
    ({"x": [2, 3, 5, 7], "z": [1]}, "'z'"),
    ({"x": [2**16, 3, 2**16, 2**4]}, str(MAX_ELEMENTS)),
])
def test_binding_errors(shapes, words) -> None:
    with pytest.raises(CompileError) as info:
        load(_dyn_model(), shapes)
    assert info.value.stage == "shape" and words in info.value.message


def test_reshape_of_wrong_size_names_node() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    shape = numpy_helper.from_array(np.array([4, 2], np.int64), "shape")
    g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"], name="bad_reshape")], "r", [x], [y],
                          initializer=[shape])
    with pytest.raises(CompileError) as info:
        load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert info.value.node == "bad_reshape" and info.value.op == "Reshape" and "6 elements" in info.value.message


@pytest.mark.parametrize("text,expected", [("images=1,3,320,320", ("images", [1, 3, 320, 320])),
                                           ("sr=", ("sr", [])), ("a=b=2", ("a=b", [2]))])
def test_parse_input_shape(text, expected) -> None:
    assert parse_input_shape(text) == expected


@pytest.mark.parametrize("text", ["images", "images=1,2.5", "images=1,-3x", "=1,2"])
def test_parse_input_shape_errors(text) -> None:
    with pytest.raises(CompileError) as info:
        parse_input_shape(text)
    assert info.value.stage == "request"
