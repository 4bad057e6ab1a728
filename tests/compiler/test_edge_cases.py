"""Edge cases that ONNX consumers have got wrong (issue 6), through ``compiler.backend``.

Every expected value comes from ``onnx.reference.ReferenceEvaluator`` or, where stated, from the
ONNX operator spec's own definition (written out in numpy) and is cross-checked with ONNX Runtime.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.backend import PrismBackend

INT64_MAX = np.iinfo(np.int64).max


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "edge", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, arr_or_dtype, shape=None):
    if isinstance(arr_or_dtype, np.ndarray):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arr_or_dtype.dtype),
                                             arr_or_dtype.shape)
    return helper.make_tensor_value_info(name, arr_or_dtype, shape)


def _run(model, feeds):
    return list(PrismBackend.prepare(model).run([feeds[i.name] for i in model.graph.input
                                                 if i.name in feeds]))


def _reference(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)


def test_gather_negative_indices():
    data = np.array([1, 2, 3, 4, 5], np.float32)
    ind = np.array([-1, -3, 0], np.int64)
    m = _model([helper.make_node("Gather", ["data", "ind"], ["y"], axis=0)], [_vi("data", data), _vi("ind", ind)],
               [_vi("y", TensorProto.FLOAT, [3])])
    feeds = {"data": data, "ind": ind}
    (ref,) = _reference(m, feeds)
    np.testing.assert_array_equal(ref, [5, 3, 1])  # the spec's example
    (y,) = _run(m, feeds)
    np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_half_pixel_scale_2_5_uses_the_given_scale(mode):
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    scales = np.array([1, 1, 2.5, 2.5], np.float32)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode,
                            coordinate_transformation_mode="half_pixel")
    m = _model([node], [_vi("x", x)], [_vi("y", TensorProto.FLOAT, None)], inits=[("scales", scales)], opset=19)
    (ref,) = _reference(m, {"x": x})
    assert ref.shape == (1, 1, 7, 7)  # floor(3 * 2.5)
    # the positions use the given scale 2.5, not output/input = 7/3 (what sizes=[1,1,7,7] means)
    by_size = _model([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode,
                                       coordinate_transformation_mode="half_pixel")], [_vi("x", x)],
                     [_vi("y", TensorProto.FLOAT, None)], inits=[("sizes", np.array([1, 1, 7, 7], np.int64))], opset=19)
    (ref_73,) = _reference(by_size, {"x": x})
    assert ref_73.shape == ref.shape and not np.allclose(ref, ref_73)
    (y,) = _run(m, {"x": x})
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_maxpool_ceil_mode_kernel_1_stride_2_on_12x12():
    x = np.random.default_rng(0).standard_normal((1, 1, 12, 12)).astype(np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1, 1], strides=[2, 2], ceil_mode=1)
    m = _model([node], [_vi("x", x)], [_vi("y", TensorProto.FLOAT, None)], opset=19)
    (ref,) = _reference(m, {"x": x})
    # spec: ceil((12 - 1) / 2) + 1 = 7, but the last window would start at 12 (in the padding), so 6
    assert ref.shape == (1, 1, 6, 6)
    np.testing.assert_array_equal(ref, x[:, :, ::2, ::2])
    (y,) = _run(m, {"x": x})
    assert y.shape == ref.shape
    np.testing.assert_array_equal(y, ref)


def test_softmax_opset_11_axis_1_flattens_the_trailing_axes():
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    m = _model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [_vi("x", x)],
               [_vi("y", TensorProto.FLOAT, [2, 3, 4])], opset=11)
    # the opset-11 spec: coerce to 2-D [2, 12] at axis 1, softmax over each row of 12
    flat = x.reshape(2, 12).astype(np.float64)
    want = (np.exp(flat - flat.max(1, keepdims=True)) / np.exp(flat - flat.max(1, keepdims=True)).sum(1,
            keepdims=True)).reshape(2, 3, 4)
    np.testing.assert_allclose(want.reshape(2, 12).sum(1), 1.0, rtol=1e-12)
    m.ir_version = 8  # for ONNX Runtime, which reads IR versions up to its own
    ort_y = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(ort_y, want, rtol=1e-5)
    (y,) = _run(m, {"x": x})
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-7)


def test_slice_ends_int64_max_is_the_whole_axis():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    inits = [("starts", np.array([1], np.int64)), ("ends", np.array([INT64_MAX], np.int64)),
             ("axes", np.array([1], np.int64))]
    m = _model([helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"])], [_vi("x", x)],
               [_vi("y", TensorProto.FLOAT, None)], inits=inits)
    (ref,) = _reference(m, {"x": x})
    np.testing.assert_array_equal(ref, x[:, 1:])
    (y,) = _run(m, {"x": x})
    np.testing.assert_array_equal(y, ref)


def test_conv_transpose_28_to_56_with_output_padding():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 28, 28)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                            output_padding=[1, 1])
    m = _model([node], [_vi("x", x)], [_vi("y", TensorProto.FLOAT, None)], inits=[("w", w)])
    (ref,) = _reference(m, {"x": x})
    assert ref.shape == (1, 2, 56, 56)
    (y,) = _run(m, {"x": x})
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_where_broadcasts_condition_3x1_with_values_2():
    c = np.array([[True], [False], [True]])
    a = np.array([1, 2], np.float32)
    b = np.array([-1, -2], np.float32)
    m = _model([helper.make_node("Where", ["c", "a", "b"], ["y"])], [_vi("c", c), _vi("a", a), _vi("b", b)],
               [_vi("y", TensorProto.FLOAT, None)])
    feeds = {"c": c, "a": a, "b": b}
    (ref,) = _reference(m, feeds)
    np.testing.assert_array_equal(ref, [[1, 2], [-1, -2], [1, 2]])
    (y,) = _run(m, feeds)
    np.testing.assert_array_equal(y, ref)


def test_matmul_then_add_that_broadcasts_to_a_wider_shape():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 3)).astype(np.float32)
    b = rng.standard_normal((3, 1)).astype(np.float32)
    c = rng.standard_normal((1, 4)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["t"]), helper.make_node("Add", ["t", "c"], ["y"])]
    m = _model(nodes, [_vi("a", a), _vi("b", b), _vi("c", c)], [_vi("y", TensorProto.FLOAT, None)])
    feeds = {"a": a, "b": b, "c": c}
    (ref,) = _reference(m, feeds)
    assert ref.shape == (3, 4)
    (y,) = _run(m, feeds)
    assert y.shape == (3, 4)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_matmul_add_with_constant_weights_fused_at_o2():
    """The same shape trap with B and C as initializers, so the O2 pipeline fuses MatMul + Add."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 3)).astype(np.float32)
    inits = [("b", rng.standard_normal((3, 1)).astype(np.float32)), ("c", rng.standard_normal((1, 4)).astype(
        np.float32))]
    nodes = [helper.make_node("MatMul", ["a", "b"], ["t"]), helper.make_node("Add", ["t", "c"], ["y"])]
    m = _model(nodes, [_vi("a", a)], [_vi("y", TensorProto.FLOAT, None)], inits=inits)
    (ref,) = _reference(m, {"a": a})
    (y,) = _run(m, {"a": a})
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


_ = onnx
