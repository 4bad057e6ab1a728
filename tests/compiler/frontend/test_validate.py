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


@pytest.mark.parametrize("op,attr,value", [("Conv", "pads", [-1, 0, 0, 0]), ("Conv", "strides", [0, 1]),
                                           ("Conv", "dilations", [1, 0]), ("ConvTranspose", "pads", [0, -2, 0, 0]),
                                           ("ConvTranspose", "output_padding", [-1, 0])])
def test_conv_attributes_out_of_range(op, attr, value):
    """A negative Conv pad compiled and corrupted the heap at run time; ONNX Runtime refuses it too."""
    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    err = _error(_model([helper.make_node(op, ["x", "w"], ["y"], name="conv", **{attr: value})],
                        [_vi("x", TensorProto.FLOAT, [1, 1, 6, 6])], [_vi("y", TensorProto.FLOAT, None)], [w]))
    low = 0 if attr in ("pads", "output_padding") else 1
    assert (err["stage"], err["node"], err["op"], err["attribute"]) == ("import", "conv", op, attr)
    assert f"{attr} {value} has a value below {low}" in err["message"]


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_a_kernel_shape_that_disagrees_with_the_weight(op):
    """kernel_shape [5, 5] with a 3x3 weight compiled and computed a 5x5 window (ORT: 'kernel_shape is not
    compatible with W shape')."""
    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    err = _error(_model([helper.make_node(op, ["x", "w"], ["y"], name="conv", kernel_shape=[5, 5])],
                        [_vi("x", TensorProto.FLOAT, [1, 1, 8, 8])], [_vi("y", TensorProto.FLOAT, None)], [w]))
    assert (err["node"], err["op"], err["attribute"]) == ("conv", op, "kernel_shape"), err
    assert "kernel_shape [5, 5] does not match the weight's spatial dims [3, 3]" in err["message"]


def test_a_graph_without_outputs():
    err = _error(_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", TensorProto.FLOAT, [4])], []))
    assert err == {"stage": "import", "message": "the graph has no outputs: nothing to compute (an ONNX graph needs "
                                                 "at least one output)"}


def _f(name, shape):
    return numpy_helper.from_array(np.ones(shape, np.float32), name)


_X4 = [_vi("x", TensorProto.FLOAT, [1, 4, 2, 2])]
_X23 = [_vi("x", TensorProto.FLOAT, [2, 3])]
_Y = [_vi("y", TensorProto.FLOAT, None)]
# (case, node, inputs, initializers, expected message tail, attribute); ONNX Runtime 1.x refuses every one
_REFUSED_AT_SHAPES = [
    ("space_to_depth_block_not_dividing_h", helper.make_node("SpaceToDepth", ["x"], ["y"], name="n", blocksize=3),
     _X4, [], "height 2 is not divisible by blocksize 3", "blocksize"),
    ("pad_reflect_longer_than_dim", helper.make_node("Pad", ["x", "p"], ["y"], name="n", mode="reflect"), _X23,
     [numpy_helper.from_array(np.array([0, 5, 0, 0], np.int64), "p")],
     "pads [0, 5, 0, 0] reflect 5 values of dim 1 of size 3 (mode reflect needs every pad < the dim's size)", "pads"),
    ("conv_transpose_group_not_dividing", helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="n", group=3),
     _X4, [_f("w", (4, 1, 3, 3))], "group 3 does not divide the 4 input channels", "group"),
    ("instance_norm_scale_length", helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="n"),
     _X4, [_f("s", (3,)), _f("b", (4,))], "scale has shape [3]; it needs X's 4 channels", None),
    ("layer_norm_scale_length", helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="n"), _X23,
     [_f("s", (4,))], "Scale has shape [4], which does not broadcast to the normalized dims [3]", None),
    ("lrn_size_negative", helper.make_node("LRN", ["x"], ["y"], name="n", size=-2), _X4, [],
     "size -2 is below 1 (LRN needs size >= 1)", "size"),
    ("lrn_rank_2", helper.make_node("LRN", ["x"], ["y"], name="n", size=3), _X23, [],
     "input has rank 2; LRN needs [N, C, D1, ...] (rank >= 3)", None),
    ("eye_like_rank_4", helper.make_node("EyeLike", ["x"], ["y"], name="n"), _X4, [],
     "input has rank 4; EyeLike needs a 2-D input", None),
    ("one_hot_depth_0", helper.make_node("OneHot", ["i", "d", "v"], ["y"], name="n"),
     [_vi("i", TensorProto.INT64, [3])], [numpy_helper.from_array(np.array([0], np.int64), "d"), _f("v", (2,))],
     "depth 0 is below 1 (OneHot needs depth >= 1)", None),
    ("one_hot_three_values", helper.make_node("OneHot", ["i", "d", "v"], ["y"], name="n"),
     [_vi("i", TensorProto.INT64, [3])], [numpy_helper.from_array(np.array([4], np.int64), "d"), _f("v", (3,))],
     "values has shape [3]; OneHot needs [off_value, on_value] (shape [2])", None),
    ("slice_repeated_axes", helper.make_node("Slice", ["x", "s", "e", "a"], ["y"], name="n"), _X23,
     [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("s", [0, 0]), ("e", [2, 2]), ("a", [1, 1]))],
     "axes [1, 1] name an axis more than once (the ONNX spec forbids repeated axes)", "axes"),
    ("reverse_sequence_same_axes", helper.make_node("ReverseSequence", ["x", "l"], ["y"], name="n", batch_axis=1,
                                                    time_axis=1), _X23,
     [numpy_helper.from_array(np.array([1, 1, 1], np.int64), "l")],
     "batch_axis 1 and time_axis 1 must be 0 and 1 (one each)", "time_axis"),
    ("gather_float_indices", helper.make_node("Gather", ["x", "i"], ["y"], name="n"), _X23, [_f("i", (1,))],
     "indices are f32; ONNX Gather needs int32 or int64 indices", None),
    ("depth_to_space_unknown_mode", helper.make_node("DepthToSpace", ["x"], ["y"], name="n", blocksize=2, mode="XYZ"),
     _X4, [], "mode 'XYZ' is neither 'DCR' nor 'CRD'", "mode"),
]


def test_max_unpool_kernel_0_is_refused_at_import():
    i = numpy_helper.from_array(np.zeros((1, 4, 2, 2), np.int64), "i")
    err = _error(_model([helper.make_node("MaxUnpool", ["x", "i"], ["y"], name="n", kernel_shape=[0, 0])], _X4, _Y,
                        [i]))
    assert err == {"stage": "import", "node": "n", "op": "MaxUnpool", "attribute": "kernel_shape",
                   "message": "node n (MaxUnpool): kernel_shape [0, 0] has a value below 1 (the ONNX spec requires "
                              "every kernel_shape value >= 1)"}


@pytest.mark.parametrize("case, node, inputs, inits, message, attribute", _REFUSED_AT_SHAPES,
                         ids=[c[0] for c in _REFUSED_AT_SHAPES])
def test_spec_violations_found_by_shape_inference_are_refused(case, node, inputs, inits, message, attribute):
    """Each compiled before and ran past the input or computed garbage; ONNX Runtime refuses every one."""
    r = compiler.compile(_model([node], inputs, _Y, inits), pipeline="O1", backend=False)
    assert not r.ok, case
    expected = {"stage": "shape", "node": "n", "op": node.op_type, "message": f"n ({node.op_type}): {message}"}
    if attribute:
        expected["attribute"] = attribute
    assert r.error == expected


@pytest.mark.parametrize("mode", ["constant", "reflect"])
def test_negative_pads_crop_like_onnx_runtime(mode):
    """Negative Pad pads crop (ONNX spec); the numbers are ONNX Runtime's (verify)."""
    p = numpy_helper.from_array(np.array([0, -1, 0, 0], np.int64), "p")
    r = compiler.compile(_model([helper.make_node("Pad", ["x", "p"], ["y"], name="n", mode=mode)], _X23, _Y, [p]),
                         pipeline="O2", verify=True, benchmark=False)
    assert r.ok, r.error
    assert r.to_dict()["verification"]["passed"] is True
