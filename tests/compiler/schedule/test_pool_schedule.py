"""The direct MaxPool/AveragePool schedule (compiler.schedule.pool) against ONNX Runtime: 3x3 stride 2
with and without padding, 2x2 stride 2, 3x3 stride 1 pad 1 (Inception's), ceil_mode, asymmetric pads,
auto_pad, dilations, count_include_pad both ways, odd sizes, batch 2; NaN inputs
against onnx.reference (the semantics the generic lowering follows) and against ONNX Runtime where the
two agree (a NaN-free window, a window of NaNs only, strides 1)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from compiler.driver import compile_program
from compiler.runtime.execute import run_program
from tests.compiler.schedule.model_check import check_model, model, ort_run, tensor

CASES = [
    ("MaxPool", (1, 16, 29, 29), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ("MaxPool", (1, 16, 28, 28), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", (2, 8, 20, 20), {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 1, 1]}),
    ("MaxPool", (1, 8, 17, 17), {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ("MaxPool", (1, 8, 16, 19), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", (1, 4, 15, 15), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [0, 1, 1, 0]}),
    ("MaxPool", (1, 4, 18, 18), {"kernel_shape": [3, 3], "dilations": [2, 2], "strides": [2, 2]}),
    ("MaxPool", (1, 4, 13, 13), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ("MaxPool", (1, 4, 9, 40), {"kernel_shape": [3, 3]}),  # stride 1, no padding: X read in place
    ("AveragePool", (1, 8, 17, 17), {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ("AveragePool", (1, 8, 17, 17), {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1],
                                     "count_include_pad": 1}),
    ("AveragePool", (1, 8, 16, 19), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                                     "count_include_pad": 1, "pads": [1, 1, 0, 0]}),
    ("AveragePool", (2, 6, 14, 14), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("AveragePool", (1, 4, 12, 12), {"kernel_shape": [5, 5], "strides": [3, 3], "pads": [2, 2, 2, 2]}),
]


@pytest.mark.parametrize("op,xs,attrs", CASES)
def test_pool_matches_onnxruntime(op, xs, attrs) -> None:  # type: ignore[no-untyped-def]
    m = model([helper.make_node(op, ["x"], ["y"], **attrs)], [tensor("x", xs)], ["y"])
    c = check_model(m, rtol=1e-6, atol=1e-7)
    assert "direct schedule" in c.schedules() and "contiguous loads" in c.schedules()


def _run(m, x):  # type: ignore[no-untyped-def]
    comp = compile_program(m, None)
    assert comp.program is not None
    assert "direct schedule" in "\n".join("\n".join(k.func.attrs.get("schedule", [])) for k in comp.kernels)
    return run_program(comp.program, [x])[0]


NAN_CASES = [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 0, 0]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
]


@pytest.mark.parametrize("op,attrs", NAN_CASES)
def test_nan_inputs_follow_onnx_reference(op, attrs) -> None:  # type: ignore[no-untyped-def]
    """Scattered NaNs, a 2x2 block of NaNs, a NaN in the first row and column (windows that start with
    it) and -inf: outputs equal onnx.reference's (NaN where it has NaN)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 3, 16, 18)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    x[0, 1, 4:6, 6:8] = np.nan  # (onnx.reference cannot take a window of NaNs only with strides 1: empty max)
    x[0, 2, 0, :] = np.nan
    x[0, 2, :, 0] = np.nan
    x[0, 0, 10, 10] = -np.inf
    m = model([helper.make_node(op, ["x"], ["y"], **attrs)], [tensor("x", x.shape)], ["y"])
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = _run(m, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)  # sums in another order


def test_nan_windows_agree_with_onnxruntime_where_the_two_oracles_agree() -> None:
    """MaxPool 3x3 stride 1: a window of NaNs only gives -inf in onnx.reference; where ONNX Runtime
    gives the same (NaN-free windows at least), Prism matches it too."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 2, 12, 12)).astype(np.float32)
    x[0, 0, 3, 3] = np.nan
    m = model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3])], [tensor("x", x.shape)], ["y"])
    got, ort = _run(m, x), ort_run(m, {"x": x})[0]
    agree = (np.isnan(ort) == np.isnan(ReferenceEvaluator(m).run(None, {"x": x})[0])) & ~np.isnan(ort)
    assert agree.sum() >= ort.size - 9
    np.testing.assert_array_equal(got[agree], ort[agree])


def test_windows_that_do_not_overlap_keep_the_default_schedule() -> None:
    """2x2 stride 2 without padding reads each input once in the default schedule: no copy first."""
    m = model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
              [tensor("x", (1, 8, 20, 20))], ["y"])
    assert "direct schedule" not in check_model(m).schedules()


INT_CASES = [
    ("u8", (1, 16, 28, 28), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # ResNet's stem pool
    ("i8", (1, 8, 17, 17), {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ("u8", (2, 4, 16, 19), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("i8", (1, 4, 15, 15), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [0, 1, 1, 0]}),
]


@pytest.mark.parametrize("dt,xs,attrs", INT_CASES)
def test_integer_max_pool_takes_the_direct_schedule_and_matches_onnxruntime(dt, xs, attrs) -> None:  # type: ignore[no-untyped-def]
    """uint8/int8 MaxPool (a quantized model's pool after fold-qdq): padded with the type's lowest value
    (0 / -128), every byte value in the input; equal to ONNX Runtime's integer MaxPool."""
    elem = {"u8": TensorProto.UINT8, "i8": TensorProto.INT8}[dt]
    g = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y"], **attrs)], "t",
                          [helper.make_tensor_value_info("x", elem, list(xs))],
                          [helper.make_tensor_value_info("y", elem, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    lo = 0 if dt == "u8" else -128
    x = np.random.default_rng(3).integers(lo, lo + 256, xs).astype(np.uint8 if dt == "u8" else np.int8)
    got = _run(m, x)
    np.testing.assert_array_equal(got, ort_run(m, {"x": x})[0])
