"""Models the ONNX spec forbids, or Prism cannot compile, are refused at import or shape inference
with an error naming the node, op and attribute (issue 17 item 6), never an internal error or a
"success"; the limits are the ONNX spec's (operator docs for MaxPool/AveragePool/TopK)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler
from compiler.frontend.validate import MAX_NODE_INPUTS


def _model(nodes, inputs, outputs, inits=(), opset=17) -> bytes:
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _error(model: bytes) -> dict:
    r = compiler.compile(model, pipeline="O1", backend=False)
    assert not r.ok, "expected a refusal"
    return r.error


def test_topk_with_k_larger_than_its_axis():
    k = numpy_helper.from_array(np.array([9], np.int64), "k")
    err = _error(_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk")],
                        [_vi("x", TensorProto.FLOAT, [2, 5])],
                        [_vi("v", TensorProto.FLOAT, None), _vi("i", TensorProto.INT64, None)], [k]))
    assert err == {"stage": "shape", "node": "topk", "op": "TopK",
                   "message": "topk (TopK): K = 9 is larger than axis 1 of size 5 (TopK needs 0 <= K <= the axis size)"}


def test_topk_with_k_equal_to_its_axis_is_fine():
    k = numpy_helper.from_array(np.array([5], np.int64), "k")
    r = compiler.compile(_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk")],
                                [_vi("x", TensorProto.FLOAT, [2, 5])],
                                [_vi("v", TensorProto.FLOAT, None), _vi("i", TensorProto.INT64, None)], [k]),
                         pipeline="O1", backend=False)
    assert r.ok, r.error


@pytest.mark.parametrize("where", ["input", "initializer", "constant"])
def test_string_tensors_are_refused_naming_the_tensor(where):
    x = _vi("x", TensorProto.FLOAT, [2])
    if where == "input":
        model = _model([helper.make_node("Identity", ["s"], ["y"], name="id")], [_vi("s", TensorProto.STRING, [2])],
                       [_vi("y", TensorProto.STRING, [2])])
        expected = "graph input 's' is a string tensor: Prism compiles numeric tensors only"
    elif where == "initializer":
        s = helper.make_tensor("names", TensorProto.STRING, [1], [b"a"])
        model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [x], [_vi("y", TensorProto.FLOAT, [2])], [s])
        expected = "initializer 'names' is a string tensor: Prism compiles numeric tensors only"
    else:
        c = helper.make_node("Constant", [], ["c"], name="label", value=helper.make_tensor("v", TensorProto.STRING,
                                                                                          [1], [b"a"]))
        model = _model([c, helper.make_node("Relu", ["x"], ["y"], name="r")], [x], [_vi("y", TensorProto.FLOAT, [2])])
        expected = "node label (Constant): attribute value is a string tensor: Prism compiles numeric tensors only"
    err = _error(model)
    assert err["stage"] == "import" and err["message"] == expected


def test_a_variadic_node_with_too_many_inputs():
    n = 5000
    err = _error(_model([helper.make_node("Sum", ["x"] * n, ["y"], name="sum")], [_vi("x", TensorProto.FLOAT, [4])],
                        [_vi("y", TensorProto.FLOAT, [4])]))
    assert err == {"stage": "import", "node": "sum", "op": "Sum",
                   "message": f"node sum (Sum): {n} inputs, more than the {MAX_NODE_INPUTS} Prism compiles in one "
                              "node; split it into several"}


def test_a_sum_at_the_input_limit_compiles_and_matches_onnx_runtime():
    r = compiler.compile(_model([helper.make_node("Sum", ["x"] * MAX_NODE_INPUTS, ["y"], name="sum")],
                                [_vi("x", TensorProto.FLOAT, [4])], [_vi("y", TensorProto.FLOAT, [4])]),
                         pipeline="O1", benchmark=False)
    assert r.ok, r.error
    assert r.of_type("model.verified")[0]["passed"] is True


@pytest.mark.parametrize("op,attr,value", [("MaxPool", "kernel_shape", [0, 0]), ("AveragePool", "kernel_shape", [0, 2]),
                                           ("MaxPool", "strides", [1, 0]), ("AveragePool", "pads", [0, 0, -1, 0]),
                                           ("MaxPool", "dilations", [0, 1])])
def test_pooling_attributes_out_of_range(op, attr, value):
    attrs = {"kernel_shape": [2, 2], attr: value}
    err = _error(_model([helper.make_node(op, ["x"], ["y"], name="pool", **attrs)],
                        [_vi("x", TensorProto.FLOAT, [1, 1, 4, 4])], [_vi("y", TensorProto.FLOAT, None)]))
    low = 0 if attr == "pads" else 1
    assert err == {"stage": "import", "node": "pool", "op": op, "attribute": attr,
                   "message": f"node pool ({op}): {attr} {value} has a value below {low} (the ONNX spec requires "
                              f"every {attr} value >= {low})"}


def test_a_graph_without_outputs():
    err = _error(_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", TensorProto.FLOAT, [4])], []))
    assert err == {"stage": "import", "message": "the graph has no outputs: nothing to compute (an ONNX graph needs "
                                                 "at least one output)"}
