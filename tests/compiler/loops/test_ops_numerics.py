"""Per-op numerics of the lowering (default schedule, host target) against onnx.reference.

Each case is one ONNX node run by ``onnx.reference.ReferenceEvaluator`` (the oracle; ONNX Runtime
where onnx.reference departs from the spec) and by Prism's
lowered, scheduled and compiled kernel on the same inputs. Covers padding, strides, dilation,
groups (incl. depthwise), ceil_mode, count_include_pad, auto_pad and broadcasting.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import CompileError
from tests.compiler.backend_helpers import check, onnx_node_case, run_node

R = np.random.default_rng(7)


def f(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


X = {"x": f(1, 4, 11, 13)}

CASES = [
    # elementwise and broadcasting
    ("Relu", X, {}, {}, 17),
    ("Sigmoid", X, {}, {}, 17),
    ("Tanh", {"x": f(3, 40) * 4}, {}, {}, 17),
    ("Erf", {"x": f(3, 40) * 2}, {}, {}, 17),
    ("Exp", X, {}, {}, 17),
    ("LeakyRelu", X, {"alpha": 0.1}, {}, 17),
    ("HardSigmoid", X, {"alpha": 0.3, "beta": 0.4}, {}, 17),
    ("HardSwish", X, {}, {}, 17),
    ("Add", {"a": f(2, 3, 4, 16), "b": f(3, 1, 16)}, {}, {}, 17),
    ("Mul", {"a": f(2, 3, 1, 16), "b": f(1, 3, 5, 1)}, {}, {}, 17),
    ("Sub", {"a": f(4, 16)}, {}, {"b": np.array(0.5, np.float32)}, 17),
    ("Div", {"a": f(4, 16), "b": f(16) + 3.0}, {}, {}, 17),
    ("Sum", {"a": f(2, 8), "b": f(2, 8), "c": f(8)}, {}, {}, 13),
    ("Max", {"a": f(2, 8), "b": f(1, 8)}, {}, {}, 13),
    ("Clip", X, {}, {"lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32)}, 13),
    ("Pow", {"a": np.abs(f(3, 16)) + 0.1}, {}, {"b": np.array(1.5, np.float32)}, 17),
    # injective
    ("Transpose", {"x": f(2, 3, 4, 5)}, {"perm": [0, 2, 3, 1]}, {}, 17),
    ("Reshape", {"x": f(2, 3, 4, 5)}, {}, {"s": np.array([6, 20], np.int64)}, 17),
    ("Flatten", {"x": f(2, 3, 4, 5)}, {"axis": 2}, {}, 17),
    ("Concat", {"a": f(1, 3, 4, 8), "b": f(1, 5, 4, 8), "c": f(1, 1, 4, 8)}, {"axis": 1}, {}, 17),
    ("Concat", {"a": f(2, 3, 8), "b": f(2, 3, 24)}, {"axis": -1}, {}, 17),  # lanes straddle the inputs
    ("Slice", {"x": f(4, 10, 16)}, {}, {"st": np.array([1, 2], np.int64), "en": np.array([9, 16], np.int64),
                                        "ax": np.array([1, 2], np.int64), "sp": np.array([2, 1], np.int64)}, 17),
    ("Pad", {"x": f(1, 2, 5, 16)}, {"mode": "constant"}, {"p": np.array([0, 0, 1, 2, 0, 1, 3, 0], np.int64),
                                                         "v": np.array(1.5, np.float32)}, 17),
    ("Pad", {"x": f(1, 2, 5, 16)}, {"mode": "reflect"}, {"p": np.array([0, 0, 2, 1, 0, 0, 1, 3], np.int64)}, 17),
    ("Gather", {"x": f(5, 16)}, {"axis": 0}, {"i": np.array([[0, 4], [-1, 2]], np.int64)}, 17),
    ("Split", {"x": f(2, 10, 16)}, {"axis": 1}, {"s": np.array([3, 7], np.int64)}, 17),
    # nn
    ("Conv", {"x": f(1, 3, 10, 12)}, {}, {"w": f(5, 3, 3, 3)}, 17),
    ("Conv", {"x": f(2, 3, 10, 12)}, {"pads": [1, 2, 0, 1], "strides": [2, 1]}, {"w": f(4, 3, 3, 3),
                                                                              "b": f(4)}, 17),
    ("Conv", {"x": f(1, 4, 13, 16)}, {"dilations": [2, 2], "pads": [2, 2, 2, 2]}, {"w": f(6, 4, 3, 3)}, 17),
    ("Conv", {"x": f(1, 8, 9, 16)}, {"group": 4, "pads": [1, 1, 1, 1]}, {"w": f(8, 2, 3, 3)}, 17),
    ("Conv", {"x": f(1, 8, 9, 16)}, {"group": 8, "pads": [1, 1, 1, 1], "strides": [2, 2]},
     {"w": f(8, 1, 3, 3)}, 17),
    ("Conv", {"x": f(1, 3, 9, 10)}, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, {"w": f(2, 3, 4, 4)}, 17),
    ("ConvTranspose", {"x": f(1, 4, 5, 6)}, {"strides": [2, 2]}, {"w": f(4, 3, 2, 2), "b": f(3)}, 17),
    ("ConvTranspose", {"x": f(1, 4, 5, 8)}, {"strides": [2, 2]}, {"w": f(4, 3, 3, 3), "b": f(3)}, 17),
    ("ConvTranspose", {"x": f(1, 4, 5, 6)}, {"strides": [2, 3], "pads": [1, 0, 0, 1], "output_padding": [1, 0]},
     {"w": f(4, 2, 3, 3)}, 17),
    ("ConvTranspose", {"x": f(1, 4, 5, 8)}, {"group": 2, "dilations": [2, 1]}, {"w": f(4, 3, 2, 3)}, 17),
    # auto_pad SAME_*: the 2-D cases have an odd total padding on an axis (1, 3) so the begin/end halves differ
    ("ConvTranspose", {"x": f(1, 2, 4, 5)}, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, {"w": f(2, 3, 3, 4)}, 17),
    ("ConvTranspose", {"x": f(1, 2, 4, 5)}, {"auto_pad": "SAME_LOWER", "strides": [2, 1]}, {"w": f(2, 3, 3, 4)}, 17),
    ("ConvTranspose", {"x": f(1, 2, 6)}, {"auto_pad": "SAME_UPPER", "strides": [3], "dilations": [2]},
     {"w": f(2, 2, 3), "b": f(2)}, 17),
    ("MaxPool", {"x": f(1, 3, 11, 16)}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, {}, 17),
    ("MaxPool", {"x": f(1, 3, 12, 13)}, {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, {}, 17),
    ("MaxPool", {"x": f(1, 2, 12, 16)}, {"kernel_shape": [2, 2], "dilations": [2, 2]}, {}, 17),
    ("MaxPool", {"x": f(1, 2, 8, 32)}, {"kernel_shape": [2, 2], "strides": [2, 2]}, {}, 17),  # stride-2 loads
    ("AveragePool", {"x": f(1, 2, 9, 48)}, {"kernel_shape": [3, 3], "strides": [3, 3]}, {}, 17),  # stride 3
    ("AveragePool", {"x": f(1, 3, 11, 16)}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, {}, 17),
    ("AveragePool", {"x": f(1, 3, 11, 16)}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                            "count_include_pad": 1}, {}, 17),
    ("AveragePool", {"x": f(1, 3, 12, 13)}, {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, {}, 17),
    ("GlobalAveragePool", {"x": f(1, 5, 7, 7)}, {}, {}, 17),
    ("GlobalMaxPool", {"x": f(1, 5, 7, 7)}, {}, {}, 17),
    ("ReduceMean", {"x": f(2, 5, 16)}, {"axes": [1], "keepdims": 1}, {}, 13),
    ("ReduceMax", {"x": f(2, 5, 16)}, {"axes": [0, 2], "keepdims": 0}, {}, 13),
    ("Softmax", {"x": f(2, 1000)}, {"axis": 1}, {}, 9),
    ("Softmax", {"x": f(2, 3, 16)}, {"axis": 1}, {}, 9),
    ("Softmax", {"x": f(2, 3, 16)}, {"axis": 1}, {}, 13),
    ("LogSoftmax", {"x": f(3, 16)}, {"axis": -1}, {}, 13),
    ("LRN", {"x": f(1, 7, 5, 16)}, {"size": 5, "alpha": 1e-2, "beta": 0.75, "bias": 1.0}, {}, 13),
    ("MatMul", {"a": f(2, 3, 5, 7), "b": f(3, 7, 16)}, {}, {}, 13),
    ("MatMul", {"a": f(5, 7), "b": f(2, 7, 16)}, {}, {}, 13),
    ("Gemm", {"a": f(3, 20)}, {"transB": 1, "alpha": 0.5, "beta": 2.0}, {"b": f(16, 20), "c": f(16)}, 13),
    ("Gemm", {"a": f(20, 3)}, {"transA": 1}, {"b": f(20, 16)}, 13),
    ("BatchNormalization", {"x": f(1, 4, 5, 16)}, {"epsilon": 1e-3},
     {"s": f(4), "bb": f(4), "m": f(4), "v": np.abs(f(4)) + 0.5}, 15),
    ("Resize", {"x": f(1, 2, 4, 8)}, {"mode": "nearest"},
     {"roi": np.array([], np.float32), "sc": np.array([1, 1, 2, 2], np.float32)}, 13),
]


def _id(case) -> str:  # type: ignore[no-untyped-def]
    return f"{case[0]}-{'-'.join(f'{k}={v}' for k, v in case[2].items())}"[:60]


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_op_matches_onnx_reference(case) -> None:  # type: ignore[no-untyped-def]
    op, inputs, attrs, consts, opset = case
    n_out = 2 if op == "Split" else 1
    # onnx.reference departs from the spec (and from ONNX Runtime) for Softmax before opset 13 (no 2-D
    # coercion) and for LRN, and cannot run grouped ConvTranspose; ONNX Runtime is the oracle there.
    oracle = "ort" if (op in ("Softmax", "LogSoftmax") and opset < 13 or op == "LRN"
                       or op == "ConvTranspose" and attrs.get("group", 1) > 1) else "reference"
    check(op, inputs, attrs, consts=consts, opset=opset, n_out=n_out, rtol=2e-4, atol=2e-5, oracle=oracle)


def test_bad_attribute_is_a_lowering_error() -> None:
    # output_shape larger than the full transposed convolution (4-1)*2+3 = 9: SAME padding would be negative
    ref, node = onnx_node_case("ConvTranspose", {"x": f(1, 2, 4, 8)},
                               {"auto_pad": "SAME_UPPER", "strides": [2, 2], "output_shape": [12, 16]},
                               consts={"w": f(2, 3, 3, 3)}, opset=13)
    with pytest.raises(CompileError) as ei:
        run_node(node, {}, 13)
    err = ei.value
    assert err.stage == "lowering" and err.op == "ConvTranspose" and err.attribute == "auto_pad"
    assert err.node == "ConvTranspose_0"


def test_op_without_lowering_names_node_and_op() -> None:
    from compiler.ir import Graph, TensorType
    from compiler.loops.lower import lower_group

    g = Graph("t")
    x = g.add_input("x", TensorType.of(np.float32, (2, 3)))
    n = g.add_node("Frobnicate", [x], ["y"], name="frob_0", domain="com.example")
    n.outputs[0].type = x.type
    with pytest.raises(CompileError) as ei:
        lower_group(n, "k", 17)
    assert ei.value.stage == "lowering" and ei.value.op == "Frobnicate" and ei.value.node == "frob_0"
    assert "frob_0" in ei.value.message
